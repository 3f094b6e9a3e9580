"""The embedding model swapped for one of another width (HOSTILE-CASES 24):
no comparison across widths or identities, ever; the corpus re-embeds."""

from __future__ import annotations

from kbtui.embedding.hashing import HashEmbedder
from store.models import Document, Vector
from tests.actors.conftest import add_documents, all_indexed, wait_until


def test_a_model_of_another_width_never_compares_and_re_embeds_the_corpus(make_node, tmp_path):
    node = make_node()
    ids = add_documents(node, tmp_path, 6)
    assert set(node.index(ids).values()) == {"Indexed"}
    old_identity = node.embedder.identity.canonical()

    narrower = HashEmbedder(dim=128)
    node.embedder = narrower
    node.searcher.embedder = narrower

    # Before re-embedding: the vector arm compares nothing (no 128-wide vectors
    # exist), the lexical arm still answers, and search says nothing broke.
    response = node.search("unique3", "DEFAULT")
    assert response.hits and response.hits[0].document_id == ids[3]
    assert all(hit.vector_rank is None for hit in response.hits)
    assert "search_failed" not in response.degraded and "vector_failed" not in response.degraded

    with node.pipeline() as runtime:
        runtime.request_stale_scan()
        wait_until(lambda: {d.vector_identity for d in Document.select()} == {narrower.identity.canonical()})
        wait_until(all_indexed(ids))
    assert {v.dim for v in Vector.select()} == {128}
    assert not Vector.select().where(Vector.identity == old_identity).exists()
    hits = node.search("unique3", "DEFAULT").hits
    assert hits[0].document_id == ids[3] and hits[0].vector_rank is not None
