"""The API's stable errors: ``{"error": code, "message": ...}`` with an HTTP status.

The node turns an operator error into its code; a client turns the code back
into an error of the same kind, message and exit code, so the CLI prints the
same line either way. Messages are the use cases' own, content-free by
contract (no document text, file names or queries).
"""

from __future__ import annotations

# code -> HTTP status, for errors a route answers with.
STATUS_OF = {
    "bad_request": 400,
    "invalid_json": 400,
    "invalid_arguments": 400,
    "invalid_collection": 400,
    "bad_http": 400,
    "unauthorized": 401,
    "not_found": 404,
    "no_route": 404,
    "method_not_allowed": 405,
    "wrong_node": 421,
    "body_too_large": 413,
    "unsupported_media_type": 415,
    "headers_too_large": 431,
    "sync_failed": 422,
    "another_node": 409,
    "internal": 500,
    "storage": 500,
    "data_directory": 500,
    "busy": 503,
    "overloaded": 503,
    "stopping": 503,
}


class ApiError(Exception):
    """An error answer: its code, a content-free message, and extra fields
    (e.g. the import report of a failed import, ``retry_after_s``)."""

    def __init__(self, code: str, message: str, extra: dict | None = None) -> None:
        super().__init__(code)
        self.code, self.message, self.extra = code, message, extra

    @property
    def status(self) -> int:
        return STATUS_OF.get(self.code, 500)

    def body(self) -> dict:
        return {"error": self.code, "message": self.message, **(self.extra or {})}


def api_error_for(exc: BaseException) -> ApiError:
    """The answer for an operator error a use case raised (anything else is ``internal``)."""
    from kbtui.errors import InvalidCollection, KbtuiError, NotFound, StoreError
    from kbtui.sources.sync import SourceOfAnotherNode, SyncFailed

    if isinstance(exc, SourceOfAnotherNode):
        return ApiError("another_node", exc.message)
    if isinstance(exc, NotFound):
        return ApiError("not_found", exc.message)
    if isinstance(exc, InvalidCollection):
        return ApiError("invalid_collection", exc.message)
    if isinstance(exc, SyncFailed):
        from kbtui.api.shapes import sync_json

        return ApiError("sync_failed", exc.message, {"report": sync_json(exc.report)})
    if isinstance(exc, KbtuiError):
        return ApiError("bad_request" if exc.exit_code == 2 else "data_directory", exc.message)
    if isinstance(exc, StoreError):
        return ApiError("data_directory" if exc.exit_code == 3 else "storage", exc.message)
    return ApiError("internal", f"the node failed ({type(exc).__name__}); see its log")


def raise_for(code: str, message: str, body: dict) -> None:
    """Raise, in a client, the operator error a node answered with."""
    from kbtui.errors import DataDirectoryProblem, InvalidCollection, KbtuiError, NotFound, StoreError

    if code == "not_found":
        raise NotFound(message)
    if code == "invalid_collection":
        raise InvalidCollection(message)
    if code == "another_node":
        from kbtui.sources.sync import SourceOfAnotherNode

        raise SourceOfAnotherNode(message)
    if code == "sync_failed":
        from kbtui.api.shapes import sync_report
        from kbtui.sources.sync import SyncFailed

        raise SyncFailed(message, sync_report(body["report"]))
    if code == "data_directory":
        raise DataDirectoryProblem(message)
    if code == "storage":
        raise StoreError(message)
    raise KbtuiError(message if code == "bad_request" else f"the node answered {code}: {message}")
