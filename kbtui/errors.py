"""Errors an operator sees: one clear, content-free line and a non-zero exit.

The store's errors (``store.errors``) are a family of their own, because the
store imports nothing from the application; the ones the application raises or
catches by name are re-exported here, one class per concept.
:data:`OPERATOR_ERRORS` catches both families.
"""

from __future__ import annotations

from store.errors import (
    BackupProblem,
    BlobCorrupt,
    CatalogProblem,
    DataDirectoryProblem,
    KeyProblem,
    NoKnowledgeBase,
    NotFound,
    PipelineHeldElsewhere,
    StoreError,
)

__all__ = [
    "OPERATOR_ERRORS",
    "BackupProblem",
    "BlobCorrupt",
    "CatalogProblem",
    "DataDirectoryProblem",
    "InvalidCollection",
    "KbtuiError",
    "KeyProblem",
    "NoKnowledgeBase",
    "NotFound",
    "PipelineHeldElsewhere",
    "StoreError",
]


class KbtuiError(Exception):
    """An expected failure with a message fit for the operator.

    The message must never contain document text, chunk text, file names of
    stored documents or query text: it may be printed and logged.
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidCollection(KbtuiError):
    pass


# Every expected failure, the application's and the store's: each has a
# content-free ``message`` and an ``exit_code``.
OPERATOR_ERRORS = (KbtuiError, StoreError)
