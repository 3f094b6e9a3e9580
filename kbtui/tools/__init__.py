"""Agent tools over the knowledge base.

- :mod:`kbtui.tools.fencing`: nonce fences around untrusted document values.
- :mod:`kbtui.tools.schemas`: the JSON schemas of the three tools.
- :mod:`kbtui.tools.knowledge`: ``KnowledgeTools``, the handlers (over the node's scoped reads).
- :mod:`kbtui.tools.locality`: the gate that offers the tools only to node-local models.
- :mod:`kbtui.tools.ask`: the question-answering loop against an Ollama chat model.
- :mod:`kbtui.tools.mcp_server`: ``kbtui mcp``, the tools over MCP on stdio.
"""
