"""A client rebuilds exactly the values the node's use cases returned, and the
shapes the API writes are the CLI's documented ``--json`` shapes (one function
for both: documents, hits, how a search ran, sources, repositories), the match
signal apart: the CLI rounds its similarity."""

from __future__ import annotations

import json
import subprocess

from kbtui.api import shapes
from kbtui.cli.search import match_json as cli_match_json
from kbtui.collections import DEFAULT_COLLECTION
from tests.conftest import write


def _through_json(value: dict) -> dict:
    return json.loads(json.dumps(value))


def test_every_read_model_survives_the_wire(node, tmp_path):
    repo = tmp_path / "repo"
    write(repo / "guide.md", "# Guide\n\n## Steps\n\nthe wombat procedure, step one\n\n## Checks\n\nthe wombat check")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    registered = node.register_repository(repo, "guides")
    report = node.import_repository(registered.id, DEFAULT_COLLECTION)
    node.index(report.pending_document_ids)
    document_id = report.pending_document_ids[0]

    row = node.document(document_id)
    assert shapes.document_row(_through_json(shapes.document_json(row))) == row

    detail = node.detail(document_id)
    assert shapes.document_detail(_through_json(shapes.detail_json(detail))) == detail

    response = node.search("wombat check", DEFAULT_COLLECTION, expand_neighbors=True)
    assert response.hits and response.explain is not None
    rebuilt = shapes.search_response(_through_json(shapes.search_json(response, explain=True)))
    assert rebuilt == response
    assert rebuilt.match is not None and rebuilt.match.verdict == "exact"
    assert cli_match_json(response.match).keys() == shapes.match_signal_json(response.match).keys()

    text = node.document_text(document_id, DEFAULT_COLLECTION, 1000)
    assert shapes.document_text(_through_json(shapes.text_json(text))) == text
    records = node.neighbours(response.hits[0].chunk_id, DEFAULT_COLLECTION, 1)
    assert [shapes.chunk_record(_through_json(shapes.chunk_json(r))) for r in records] == records

    repositories = node.repositories()
    assert [shapes.source_row(_through_json(shapes.repository_json(r))) for r in repositories] == repositories
    assert shapes.sync_report(_through_json(shapes.import_json(report))) == report
    assert shapes.document_match(_through_json(shapes.match_json(node.find_document("guide.md")))).matched_by == "name"

    reindexed = node.reindex([document_id])
    assert shapes.reindex_report(_through_json(shapes.reindex_json(reindexed))) == reindexed
    status = node.status()
    assert shapes.node_status(_through_json(shapes.status_json(status))) == status
