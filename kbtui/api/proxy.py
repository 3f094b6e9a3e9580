"""The use cases wherever they run: through the running node when one answers,
in-process when none does.

A :class:`NodeProxy` offers the methods of :class:`kbtui.node.Node` that the
CLI and ``kbtui mcp`` call. Each call goes to the node first (connecting to
a missing socket costs microseconds); when no node answers, or the node
stops before answering, the same call runs on an in-process node, opened the
first time it is needed. So a command never forks into two code paths, its
output is the same either way, and a node that stops mid-command (or starts
mid-way through ``kbtui mcp``) changes nothing but where the work runs.

Calls are safe to repeat in-process after a node vanished mid-call: adding
the same bytes is the same document, re-queuing a queued document queues it
once, deleting a deleted document is a no-op.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kbtui.api.client import NodeClient, unix_endpoint
from kbtui.api.transport import NodeUnavailable

if TYPE_CHECKING:
    from kbtui.config import Config
    from kbtui.node import Node

log = logging.getLogger(__name__)

# The use cases a running node serves; anything else runs in-process.
ROUTED = (
    "add_source", "index_and_follow", "remove", "purge", "reindex",
    "resolve", "find_document", "documents", "document", "detail", "document_text", "neighbours", "display_names",
    "statuses", "collections", "collection_exists", "status", "nodes", "search",
    "sources", "resolve_source", "sync_source", "remove_source",
    "register_repository", "repositories", "resolve_repository", "unregister_repository", "import_repository",
)


class NodeProxy:
    """The node's use cases for one command (or one ``kbtui mcp`` session)."""

    def __init__(self, config: Config, open_local: Callable[[], Node], *, client: NodeClient | None = None) -> None:
        self.config = config
        self.client = client or NodeClient(unix_endpoint(config.home), config)
        self._open_local = open_local
        self._local: Node | None = None
        self._lock = threading.Lock()
        self.served_by_node = 0  # calls the running node answered (for tests and -v)

    def local(self) -> Node:
        """The in-process node, opened on first use."""
        with self._lock:
            if self._local is None:
                self._local = self._open_local()
            return self._local

    def close(self) -> None:
        if self._local is not None:
            self._local.close()

    def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        # ``method`` is positional-only: the use cases take keyword arguments such as ``name``.
        try:
            result = getattr(self.client, method)(*args, **kwargs)
        except NodeUnavailable as why:
            log.debug("no node answered %s (%s); working in-process", method, why)
        else:
            self.served_by_node += 1
            return result
        return getattr(self.local(), method)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Everything a running node does not serve (the pipeline, ...) is in-process.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.local(), name)


def _routed(name: str) -> Callable[..., Any]:
    def method(self: NodeProxy, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``Node.{name}``: through the running node when one answers, else in-process."
    return method


for _name in ROUTED:
    setattr(NodeProxy, _name, _routed(_name))
