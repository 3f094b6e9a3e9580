"""The Ask screen inside a tiny app, driven by Textual's pilot."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

from textual.app import App
from textual.widgets import Button, DataTable, Input, Static

from kbtui.tools.ask import answer_question, search_instead
from kbtui.tui.screens.ask import AskScreen
from tests.tools.scripted_ollama import search_then_cite

BACKUPS = "# Backups\n\nNightly pg_basebackup runs at 02:00 with WAL archiving."


class AskHost(App[None]):
    def __init__(self, screen: AskScreen) -> None:
        super().__init__()
        self.ask_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.ask_screen)


def make_screen(node, config) -> AskScreen:
    return AskScreen(
        lambda question: answer_question(question, collection_id="DEFAULT", knowledge=node, config=config),
        lambda question: search_instead(node, question, "DEFAULT"),
        collection_id="DEFAULT",
        model_label=config.chat_model,
    )


async def ask_in_app(screen: AskScreen, question: str, *, then_press: str | None = None) -> dict:
    app = AskHost(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen.query_one("#ask-question", Input).value = question
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        if then_press == "click":
            await pilot.click("#ask-search-instead")
        elif then_press:
            await pilot.press(then_press)
            await app.workers.wait_for_complete()
            await pilot.pause()
        table = screen.query_one("#ask-results", DataTable)
        return {
            "status": str(screen.query_one("#ask-status", Static).content),
            "answer": str(screen.query_one("#ask-answer", Static).content),
            "rows": [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)],
            "title": table.border_title,
            "search_button": screen.query_one("#ask-search-instead", Button).display
            and screen.query_one("#ask-actions").display,
        }


def test_the_answer_appears_with_its_cited_sources(node, ollama_server, add_document):
    document_id = add_document("backups.md", BACKUPS)
    ollama_server.script = search_then_cite("basebackup")
    node.config = dataclasses.replace(node.config, chat_host=ollama_server.url, chat_model="stub-model")

    shown = asyncio.run(ask_in_app(AskScreen.for_node(node, "DEFAULT"), "When do backups run?"))

    assert shown["answer"] == "Nightly pg_basebackup runs at 02:00 with WAL archiving. [S1]"
    assert shown["title"] == "Sources"
    assert shown["rows"] == [["S1", "Backups", "Backups", "", document_id[:12]]]
    assert not shown["search_button"]


def test_without_a_chat_model_the_screen_says_so_and_searches_instead(node, add_document):
    add_document("backups.md", BACKUPS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        config = dataclasses.replace(node.config, chat_host=f"http://127.0.0.1:{probe.getsockname()[1]}")

    before = asyncio.run(ask_in_app(make_screen(node, config), "basebackup"))
    assert "No chat model is reachable" in before["status"]
    assert before["search_button"] and before["answer"] == "" and before["rows"] == []

    for how in ("click", "ctrl+g"):
        after = asyncio.run(ask_in_app(make_screen(node, config), "basebackup", then_press=how))
        assert after["title"] == "Search results", how
        assert after["rows"][0][1] == "Backups" and "pg_basebackup" in after["rows"][0][3]
