"""Scheduled re-indexing of stale documents, and coalesced pre-warming."""

from __future__ import annotations

from actors.events import ScanForStale
from actors.prewarm_manager import FAILED_WARM_COOLDOWN_S, PrewarmManager, request_warm
from kbtui.chunking import CHUNKER_VERSION, ChunkSettings, chunker_version
from kbtui.embedding.reuse import VectorCache
from store import catalog
from store.models import Chunk, Document, StatusHistory
from tests.actors.conftest import ControlledEmbedder, add_documents, all_indexed, wait_until


def indexed_count(document_id: str) -> int:
    return StatusHistory.select().where(
        (StatusHistory.document == document_id) & (StatusHistory.status == "Indexed")
    ).count()


def test_documents_built_by_an_older_chunker_are_reindexed(make_node, tmp_path):
    node = make_node()
    ids = add_documents(node, tmp_path, 4)
    with node.pipeline() as runtime:
        wait_until(all_indexed(ids))
        stale, current = ids[:2], ids[2:]
        Document.update(chunker_version=CHUNKER_VERSION - 1).where(Document.id.in_(stale)).execute()
        runtime.request_stale_scan()
        wait_until(lambda: all(indexed_count(i) == 2 for i in stale))
    assert all(indexed_count(i) == 1 for i in current)
    assert {d.chunker_version for d in Document.select()} == {CHUNKER_VERSION}


def test_changing_the_chunk_size_in_the_config_file_reindexes_with_the_new_chunking(make_node, home, tmp_path):
    def configure(max_chunk_chars: int) -> None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(f"[chunking]\nmax_chunk_chars = {max_chunk_chars}\noverlap_chars = 50\n")

    source = tmp_path / "guide.md"
    long_section = " ".join(f"sentence{i} about rotating keys." for i in range(200))
    # The short section is one identical chunk under both sizes: its vector
    # must not be reused across settings either.
    source.write_text(f"# Short\n\nrotate keys yearly\n\n# Long\n\n{long_section}\n")
    configure(1000)
    first = make_node()
    document_id = catalog.add_document(first.store, "DEFAULT", source, display_name="guide.md", fmt="markdown").document_id
    assert first.index([document_id]) == {document_id: "Indexed"}
    before = Chunk.select().where(Chunk.document == document_id).count()
    first.close()

    configure(300)  # and restart, as an operator would
    node = make_node()
    embedder = ControlledEmbedder()
    node.embedder = embedder
    with node.pipeline() as runtime:
        assert runtime.reindexer.ask(ScanForStale()) == 1  # the stale scan queues it
        wait_until(lambda: indexed_count(document_id) == 2)
    chunks = list(Chunk.select().where(Chunk.document == document_id))
    assert len(chunks) > before and max(len(c.content) for c in chunks) <= 300
    assert sum(embedder.calls) == len(chunks)  # nothing reused from the other chunk size
    expected = chunker_version(ChunkSettings(max_chunk_chars=300, overlap_chars=50))
    assert Document.get_by_id(document_id).chunker_version == expected
    with node.pipeline() as runtime:
        assert runtime.reindexer.ask(ScanForStale()) == 0  # current now


def test_the_chunker_version_follows_every_setting_and_is_the_constant_under_the_defaults():
    assert chunker_version(ChunkSettings()) == CHUNKER_VERSION
    versions = {
        chunker_version(ChunkSettings(max_chunk_chars=900)),
        chunker_version(ChunkSettings(overlap_chars=100)),
        chunker_version(ChunkSettings(max_chunk_tokens=200)),
        chunker_version(ChunkSettings(min_chunk_tokens=32)),
        chunker_version(ChunkSettings(window_reserve_tokens=8)),
    }
    assert len(versions) == 5 and CHUNKER_VERSION not in versions
    assert chunker_version(ChunkSettings(overlap_chars=100)) == chunker_version(ChunkSettings(overlap_chars=100))


def test_an_identity_change_counts_only_when_the_provider_resolved_confidently(make_node, tmp_path):
    node = make_node()
    embedder = ControlledEmbedder()
    node.embedder = embedder
    ids = add_documents(node, tmp_path, 2)
    with node.pipeline() as runtime:
        wait_until(all_indexed(ids))
        Document.update(vector_identity="ollama:other-model@abc:native:768").execute()

        embedder.confident = False  # e.g. the server is down: name fallback only
        assert runtime.reindexer.ask(ScanForStale()) == 0

        embedder.confident = True
        assert runtime.reindexer.ask(ScanForStale()) == 2
        wait_until(lambda: all(indexed_count(i) == 2 for i in ids))
    assert {d.vector_identity for d in Document.select()} == {node.embedder.identity.canonical()}


def test_a_stale_document_keeps_serving_while_it_is_rebuilt(make_node, tmp_path):
    node = make_node()
    embedder = ControlledEmbedder()
    node.embedder = embedder
    ids = add_documents(node, tmp_path, 1)
    with node.pipeline() as runtime:
        wait_until(all_indexed(ids))
        embedder.gate.clear()
        node.reuse.cache = VectorCache()  # nothing to reuse: the rebuild must embed (and wait)
        Document.update(parser_version=0).execute()
        runtime.request_stale_scan()
        wait_until(lambda: Document.get_by_id(ids[0]).status == "Embedding")
        assert [h.document_id for h in node.search("unique0", "DEFAULT").hits] == [ids[0]]
        embedder.gate.set()
        wait_until(all_indexed(ids))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_prewarm_coalesces_and_cools_down_only_after_failure(make_node):
    clock = FakeClock()
    outcomes = ["fail", "ok", "ok"]
    calls: list[str] = []

    def warm() -> None:
        calls.append(outcomes[len(calls)])
        if calls[-1] == "fail":
            raise ConnectionError("not running")

    manager = PrewarmManager.start({"reranker": warm}, clock=clock)
    try:
        request_warm(manager, "reranker", clock=clock)
        request_warm(manager, "reranker", clock=clock)  # made before the first finished: coalesced
        manager.ask("barrier")
        assert calls == ["fail"]

        clock.now += 1
        request_warm(manager, "reranker", clock=clock)  # inside the cooldown: ignored
        manager.ask("barrier")
        assert calls == ["fail"]

        clock.now += FAILED_WARM_COOLDOWN_S
        request_warm(manager, "reranker", clock=clock)
        manager.ask("barrier")
        assert calls == ["fail", "ok"]

        clock.now += 0.5
        request_warm(manager, "reranker", clock=clock)  # no cooldown after a success
        manager.ask("barrier")
        assert calls == ["fail", "ok", "ok"]
    finally:
        manager.stop()


def test_a_search_that_finds_the_reranker_cold_asks_the_running_node_to_warm_it(make_node, tmp_path):
    from kbtui.retrieval.search import RERANKER_TARGET

    node = make_node()
    warmed = []
    with node.pipeline() as runtime:
        runtime.warmers[RERANKER_TARGET] = lambda: warmed.append("reranker")
        runtime.prewarm.ask("barrier")
        node.searcher.request_warm(RERANKER_TARGET)
        wait_until(lambda: warmed == ["reranker"])
    node.searcher.request_warm(RERANKER_TARGET)  # no pipeline running: nothing happens
    assert warmed == ["reranker"]
