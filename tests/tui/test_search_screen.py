"""The Search screen: results as you type, explain, degradation, hostile queries."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from kbtui.embedding import EmbeddingUnavailable
from kbtui.retrieval.search import SearchService
from kbtui.tui.screens.search import SearchScreen
from kbtui.tui.widgets.hit_list import FUSION_WORDS
from tests.tui.conftest import fast_options, make_app, type_text, wait_until


def status_of(screen: SearchScreen) -> str:
    return str(screen.query_one("#search-status", Static).content)


def prompts(screen: SearchScreen) -> list[str]:
    results = screen.query_one("#search-results")
    return [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]


async def open_search(app, pilot) -> SearchScreen:
    await wait_until(lambda: app.mode == "viewer")
    await pilot.press("slash")
    await wait_until(lambda: isinstance(app.screen, SearchScreen))
    return app.screen


def test_results_follow_the_typing_and_only_the_latest_answer_shows(indexed_node, utc):
    searched: list[str] = []
    original = indexed_node.search

    def counting_search(query, collection_id, **options):
        searched.append(query)
        return original(query, collection_id, **options)

    indexed_node.search = counting_search
    app = make_app(indexed_node, fast_options(run_node=False, search_debounce_s=0.3))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_search(app, pilot)
            box = screen.query_one("#search-input")
            # Keystrokes faster than the debounce (all queued at once): one search, for the whole text.
            for end in range(1, len("ssh keys") + 1):
                box.value = "ssh keys"[:end]
            await wait_until(lambda: screen.answered_query == "ssh keys" and prompts(screen))
            await asyncio.sleep(0.4)
            assert searched == ["ssh keys"]
            first = prompts(screen)[0]
            assert "SSH hardening" in first and "ssh-hardening.md" in first

            await pilot.press("end", "backspace", "backspace", "backspace", "backspace")
            await type_text(pilot, "postgres")
            await wait_until(lambda: screen.answered_query == "ssh postgres" and any("PostgreSQL" in p for p in prompts(screen)))

            await pilot.press("ctrl+u")
            await wait_until(lambda: not prompts(screen) and status_of(screen) == "Type to search.")

    asyncio.run(run())


def test_explain_shows_each_arms_rank(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_search(app, pilot)
            await type_text(pilot, "restore")
            await wait_until(lambda: prompts(screen))
            assert not any("why:" in p for p in prompts(screen))
            await pilot.press("ctrl+r")
            await wait_until(lambda: all("why:" in p for p in prompts(screen)))
            top = screen.response.hits[0]
            assert f"words #{top.lexical_rank}" in prompts(screen)[0]
            assert f"by {FUSION_WORDS[screen.response.explain.fusion]}" in prompts(screen)[0]
            assert "explain on" in str(screen.query_one("#search-heading", Static).content)

    asyncio.run(run())


class DownEmbedder:
    """The real hash embedder whose query side is unavailable (a stopped model server)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.identity = inner.identity
        self.context_window = inner.context_window

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        raise EmbeddingUnavailable("embedder_unavailable", "connection refused")


def test_a_down_embedder_is_said_plainly_and_words_still_match(indexed_node, utc):
    indexed_node.searcher = SearchService(indexed_node.config, DownEmbedder(indexed_node.embedder), indexed_node.store)
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_search(app, pilot)
            await type_text(pilot, "certificate")
            await wait_until(lambda: prompts(screen))
            assert status_of(screen).startswith("Degraded: the embedding model is unavailable")
            assert screen.query_one("#search-status").has_class("-degraded")
            assert "TLS certificate rotation" in prompts(screen)[0]

    asyncio.run(run())


def test_query_syntax_is_searched_as_text_not_an_error(indexed_node, utc):
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_search(app, pilot)
            for hostile in ['"x', "(a OR", "NEAR(a b", "col:foo", "-a"]:
                screen.query_one("#search-input").value = hostile
                await wait_until(lambda hostile=hostile: screen.answered_query == hostile and status_of(screen) != "Searching…")
                assert "failed" not in status_of(screen).lower()
            assert not app._notifications  # no error was raised to the operator

    asyncio.run(run())


def test_results_are_documents_and_ctrl_o_searches_every_collection(indexed_node, utc, tmp_path):
    from tests.retrieval.conftest import add_and_index

    add_and_index(indexed_node, tmp_path, "pager.md", "# Pager\n\nThe flangewidget pager rota.", collection="OPS")
    app = make_app(indexed_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await open_search(app, pilot)
            await type_text(pilot, "restore")
            await wait_until(lambda: screen.answered_query == "restore" and prompts(screen))
            documents = [h.document_id for h in screen.response.hits]
            assert len(documents) == len(set(documents))  # one hit per document
            assert any("more" in p for p in prompts(screen))  # "+N more (in this document)"

            await pilot.press("ctrl+u")
            await type_text(pilot, "flangewidget")
            await wait_until(lambda: screen.answered_query == "flangewidget" and status_of(screen) != "Searching…")
            # Only in OPS: nothing in DEFAULT holds the word (the hash test model has no floor: "related").
            assert status_of(screen).startswith("No exact matches, showing related passages.")
            await pilot.press("ctrl+o")
            await wait_until(lambda: "all collections" in status_of(screen) and prompts(screen)
                             and screen.response.hits[0].collection_id == "OPS")
            assert prompts(screen)[0].split("\n")[1].strip().startswith("OPS ·")
            assert "all collections" in str(screen.query_one("#search-heading", Static).content)
            await pilot.press("ctrl+o")
            await wait_until(lambda: "in DEFAULT" in status_of(screen))

    asyncio.run(run())
