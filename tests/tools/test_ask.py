"""Ask end to end: a loopback server speaking Ollama's chat API calls the real tools."""

from __future__ import annotations

import dataclasses
import json
import logging
import socket

import pytest

from kbtui.tools import ask as ask_module
from kbtui.tools.ask import (
    ANSWERED,
    CHAT_MODEL_ERROR,
    CHAT_MODEL_NOT_FOUND,
    CHAT_MODEL_UNREACHABLE,
    answer_question,
)
from kbtui.tools.fencing import Fence
from kbtui.tools.locality import CLOUD_REFUSED
from kbtui.tools.schemas import TOOL_NAMES
from tests.tools.scripted_ollama import search_then_cite, text_reply, tool_call_reply

BACKUPS = "# Backups\n\nNightly pg_basebackup runs at 02:00 with WAL archiving. Restores are tested monthly."


@pytest.fixture
def config(node, ollama_server):
    return dataclasses.replace(node.config, chat_host=ollama_server.url, chat_model="stub-model")


def ask(question, node, config, **kwargs):
    return answer_question(question, collection_id="DEFAULT", knowledge=node, config=config, **kwargs)


def test_a_question_is_answered_through_a_tool_call_and_cites_the_hit(node, config, ollama_server, add_document):
    document_id = add_document("backups.md", BACKUPS)
    ollama_server.script = search_then_cite("basebackup")

    outcome = ask("When do backups run?", node, config)

    assert outcome.status == ANSWERED and outcome.tool_calls == 1
    assert outcome.answer == "Nightly pg_basebackup runs at 02:00 with WAL archiving. [S1]"
    assert [(s.ref, s.title, s.document_id) for s in outcome.cited] == [("S1", "Backups", document_id)]
    first, second = ollama_server.requests
    assert first["model"] == "stub-model" and first["stream"] is False
    assert sorted(t["function"]["name"] for t in first["tools"]) == sorted(TOOL_NAMES)
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "When do backups run?"
    assistant, tool = second["messages"][2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "search_knowledge_base"
    assert tool["role"] == "tool" and tool["tool_name"] == "search_knowledge_base"
    payload = json.loads(tool["content"])
    assert payload["contentTrust"] == "untrusted-document" and payload["hits"][0]["ref"] == "S1"


def test_follow_up_reads_get_their_own_refs(node, config, ollama_server, add_document):
    add_document("backups.md", BACKUPS)

    def script(request):
        tools = [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]
        if not tools:
            return 200, tool_call_reply("search_knowledge_base", {"query": "restores"})
        if len(tools) == 1:
            hit = tools[0]["hits"][0]
            return 200, tool_call_reply("read_document", {"document_id": hit["documentId"], "collection": hit["collectionId"]})
        document = tools[1]
        text = Fence(document["fence"]["nonce"]).unwrap("text", document["text"])
        return 200, text_reply(f"Monthly [{document['ref']}], per {len(text)} chars; see also [S1, S9].")

    ollama_server.script = script
    outcome = ask("How often are restores tested?", node, config)
    assert outcome.answered and outcome.tool_calls == 2
    assert [s.ref for s in outcome.cited] == ["S2", "S1"]  # S9 was never handed out
    assert outcome.cited[0].chunk_id is None  # the whole document


def test_a_model_that_never_stops_calling_tools_is_made_to_answer(node, config, ollama_server, add_document):
    add_document("backups.md", BACKUPS)
    ollama_server.script = lambda request: (
        (200, tool_call_reply("search_knowledge_base", {"query": "backups"})) if request.get("tools")
        else (200, text_reply("Enough searching."))
    )
    outcome = ask("Backups?", node, config)
    assert outcome.answered and outcome.answer == "Enough searching."
    assert outcome.tool_calls == ask_module.MAX_TOOL_ROUNDS
    assert "tools" not in ollama_server.requests[-1] or not ollama_server.requests[-1]["tools"]


def test_the_conversation_stays_in_its_collection(node, config, ollama_server, add_document):
    add_document("hr.md", "# Payroll\n\nThe zebracorn budget is confidential.", collection="hr")
    ollama_server.script = search_then_cite("zebracorn", collection="hr")
    outcome = ask("What is the zebracorn budget?", node, config)
    tool_payload = json.loads(ollama_server.requests[1]["messages"][-1]["content"])
    assert tool_payload["error"] == "collection_out_of_scope"
    assert "zebracorn budget is" not in json.dumps(ollama_server.requests)
    assert outcome.cited == ()


def test_no_reachable_chat_model_says_so_and_offers_search(node, config):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    outcome = ask("Anything?", node, dataclasses.replace(config, chat_host=f"http://127.0.0.1:{closed_port}"))
    assert outcome.status == CHAT_MODEL_UNREACHABLE
    assert outcome.offers_search and "No chat model is reachable" in outcome.notice


def test_a_model_that_is_not_installed_is_reported(node, config, ollama_server):
    ollama_server.script = lambda _request: (404, {"error": "model 'stub-model' not found"})
    outcome = ask("Anything?", node, config)
    assert outcome.status == CHAT_MODEL_NOT_FOUND and outcome.offers_search


def test_an_empty_reply_is_not_an_answer(node, config, ollama_server):
    ollama_server.script = lambda _request: (200, text_reply("   "))
    outcome = ask("Anything?", node, config)
    assert outcome.status == CHAT_MODEL_ERROR and outcome.offers_search


def test_a_cloud_model_is_never_contacted_without_the_opt_in(node, config, ollama_server, add_document):
    add_document("backups.md", BACKUPS)
    ollama_server.script = search_then_cite("basebackup")
    refused = ask("When do backups run?", node, config, model="gpt-oss:120b-cloud")
    assert refused.status == CLOUD_REFUSED and refused.offers_search
    assert "gpt-oss:120b-cloud" in refused.notice
    assert ollama_server.requests == []

    opted_in = dataclasses.replace(config, allow_cloud_model_access=True)
    allowed = ask("When do backups run?", node, opted_in, model="gpt-oss:120b-cloud")
    assert allowed.answered and ollama_server.requests[0]["model"] == "gpt-oss:120b-cloud"
    assert ollama_server.requests[0]["tools"]


def test_questions_answers_and_documents_stay_out_of_the_logs(node, config, ollama_server, add_document, caplog):
    canary = "qzcanary4411"
    add_document(f"{canary}.md", f"# {canary} heading\n\nThe {canary} rotates weekly.")
    ollama_server.script = search_then_cite(canary)
    caplog.set_level(logging.DEBUG)
    for name in list(logging.root.manager.loggerDict):
        caplog.set_level(logging.DEBUG, logger=name)
    outcome = ask(f"How often does the {canary} rotate?", node, config)
    assert outcome.answered and canary in outcome.answer
    assert caplog.records  # something was logged
    assert canary not in caplog.text
    assert all(canary not in str(record.args) for record in caplog.records)


# ---------------------------------------------------------------- the CLI


def write_chat_config(home, url, model="stub-model"):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'chat_host = "{url}"\nchat_model = "{model}"\n')


def test_kbtui_ask_prints_the_answer_and_its_sources(run_cli, home, ollama_server, add_document):
    add_document("backups.md", BACKUPS)
    write_chat_config(home, ollama_server.url)
    ollama_server.script = search_then_cite("basebackup")
    result = run_cli("ask", "When do backups run?")
    assert result.code == 0, result.err
    answer, sources = result.out.split("Sources")
    assert "Nightly pg_basebackup runs at 02:00" in answer
    assert "[S1] Backups" in sources

    as_json = json.loads(run_cli("ask", "When do backups run?", "--json").out)
    assert as_json["status"] == "answered" and as_json["cited"][0]["title"] == "Backups"


def test_kbtui_ask_without_a_chat_model_shows_search_results_instead(run_cli, home, add_document):
    add_document("backups.md", BACKUPS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        write_chat_config(home, f"http://127.0.0.1:{probe.getsockname()[1]}")
    result = run_cli("ask", "basebackup")
    assert result.code == 1
    assert "No chat model is reachable" in result.err
    assert "Search results instead" in result.out and "Backups" in result.out


def test_kbtui_ask_refuses_a_cloud_model_by_name(run_cli, home, ollama_server, add_document):
    add_document("backups.md", BACKUPS)
    write_chat_config(home, ollama_server.url)
    result = run_cli("ask", "basebackup", "--model", "gpt-oss:120b-cloud", "--json")
    assert result.code == 1
    outcome = json.loads(result.out)
    assert outcome["status"] == "cloud_model_refused" and outcome["search"]["hits"]
    assert ollama_server.requests == []
