"""`kbtui mcp` answers a real MCP client session over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from kbtui.tools.fencing import Fence
from kbtui.tools.schemas import TOOL_NAMES, TOOL_SCHEMAS

CANARY = "mcpcanary5523"


async def _session_calls(home: Path, calls: list[tuple[str, dict]]):
    env = {"KBTUI_HOME": str(home), "KBTUI_EMBEDDING_PROVIDER": "hash", "KBTUI_LOG_LEVEL": "DEBUG"}
    if "KBTUI_DATABASE_URL" in os.environ:  # the PostgreSQL pass: the server opens the same database
        env["KBTUI_DATABASE_URL"] = os.environ["KBTUI_DATABASE_URL"]
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbtui", "mcp"],
        env=env,
        cwd=str(Path(__file__).parents[2]),
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return listed, results


def test_tools_list_and_tools_call_over_stdio(home, node, add_document):
    document_id = add_document(f"{CANARY}-name.md", f"# Certificates\n\nRotate the {CANARY} TLS certificate every 90 days.")
    secret_id = add_document("hr.md", "# Payroll\n\nThe zebracorn budget is confidential.", collection="hr")
    node.close()  # the server process opens the store itself

    listed, (found, read, crossed, unknown) = asyncio.run(_session_calls(home, [
        ("search_knowledge_base", {"query": f"{CANARY} certificate"}),
        ("read_document", {"document_id": document_id, "collection": "default", "max_chars": 40}),
        ("read_document", {"document_id": secret_id, "collection": "DEFAULT"}),
        ("drop_tables", {}),
    ]))

    assert sorted(tool.name for tool in listed.tools) == sorted(TOOL_NAMES)
    for tool in listed.tools:
        assert tool.input_schema == TOOL_SCHEMAS[tool.name]["inputSchema"]
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False

    assert not found.is_error
    payload = found.structured_content
    assert json.loads(found.content[0].text) == payload
    assert payload["contentTrust"] == "untrusted-document"
    fence = Fence(payload["fence"]["nonce"])
    hit = payload["hits"][0]
    assert hit["documentId"] == document_id
    assert f"Rotate the {CANARY} TLS certificate" in fence.unwrap("text", hit["text"])
    assert fence.unwrap("title", hit["title"]) == "Certificates"
    assert f"{CANARY}-name" not in found.content[0].text  # never the stored file name

    document = read.structured_content
    assert document["fence"]["nonce"] != payload["fence"]["nonce"]
    text = Fence(document["fence"]["nonce"]).unwrap("text", document["text"])
    assert len(text) == 40 and document["truncated"] is True

    assert crossed.is_error and crossed.structured_content["error"] == "not_found"
    assert "zebracorn" not in crossed.content[0].text
    assert unknown.is_error and unknown.structured_content["error"] == "unknown_tool"

    log_text = (home / "logs" / "kbtui.log").read_text()
    assert "mcp server started" in log_text and "tool call answered" in log_text
    assert CANARY not in log_text
