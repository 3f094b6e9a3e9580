"""The node's local API: HTTP/1.1 with JSON bodies on an owner-only Unix socket.

A face like the CLI and the terminal UI: its routes call the use cases of
:class:`kbtui.node.Node` and serialize their read models (:mod:`kbtui.api.shapes`,
the one place JSON shapes are written and read back). The node that runs the
pipeline (``kbtui serve``, or the TUI when it runs the node) serves it
(:mod:`kbtui.api.server`); the CLI, a TUI in client mode and ``kbtui mcp``
reach it through :mod:`kbtui.api.client`, and work in-process when no node
answers (:mod:`kbtui.api.proxy`).

This package's own modules import only what their side needs: a client never
loads the server library, and ``kbtui search`` through a node stays fast.
"""

from __future__ import annotations

SOCKET_NAME = "api.sock"
TOKEN_NAME = "api.token"
API_PREFIX = "/v1"
