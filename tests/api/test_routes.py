"""Every route of the node's API, against a real ``kbtui serve``, through an
independent HTTP client (httpx on the Unix socket)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys

import pytest

from tests.api.serving import kbtui, kbtui_env, start_node, wait_for
from tests.conftest import write


@pytest.fixture
def served(home):
    node = start_node(home)
    yield node
    node.stop()
    assert "Traceback" not in node.process.stderr.read()


def _indexed(served, ids):
    def done():
        found = served.http.post("/documents/lookup", json={"document_ids": ids}).json()["documents"]
        return all(d["status"] == "Indexed" for d in found) and len(found) == len(ids)

    wait_for(done, what="documents indexed")


def test_the_socket_is_owner_only_and_goes_with_the_node(home):
    node = start_node(home)
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert stat.S_ISSOCK(os.lstat(node.socket).st_mode)
    assert stat.S_IMODE(os.lstat(node.socket).st_mode) == 0o600
    assert node.stop() == 0
    assert not node.socket.exists()


def test_every_document_route(served, tmp_path):
    paths = [
        write(tmp_path / "docs" / f"{name}.md", f"# {name.title()}\n\nthe {name} pangolin runbook\n")
        for name in ("alpha", "beta")
    ]
    write(tmp_path / "docs" / "envcanary-secret.md", "# Gamma\n\nthe gamma pangolin runbook")

    added = served.http.post("/documents", json={"paths": [str(p) for p in paths], "collection": "ops"})
    named = served.http.post("/documents", json={"paths": [str(tmp_path / "docs" / "envcanary-secret.md")],
                                                 "collection": "named"})
    assert named.json()["documents"][0]["display_name"] == "envcanary-secret.md"  # the owner's own view
    assert added.status_code == 201
    body = added.json()
    assert [d["index"] for d in body["documents"]] == [0, 1]
    assert {d["created"] for d in body["documents"]} == {True}
    assert {d["collection"] for d in body["documents"]} == {"OPS"}
    # Each path became a single-file source of OPS, scanned: one added file each.
    assert [(src["source"]["kind"], src["source"]["collection"], src["report"]["added"]["count"])
            for src in body["sources"]] == [("file", "OPS", 1), ("file", "OPS", 1)]
    ids = [d["document_id"] for d in body["documents"]]
    _indexed(served, ids + [named.json()["documents"][0]["document_id"]])

    listed = served.http.get("/documents", params={"collection": "OPS", "status": "Indexed"}).json()["documents"]
    assert [d["document_id"] for d in listed] == ids
    assert {d["display_name"] for d in listed} == {"alpha.md", "beta.md"}
    assert served.http.get("/collections").json() == {"collections": ["NAMED", "OPS"]}

    resolved = served.http.get("/resolve", params={"document": ids[0][:8]}).json()
    assert resolved == {"document_id": ids[0], "matched_by": "id prefix"}
    by_name = served.http.get("/resolve", params={"document": "alpha.md", "collection": "OPS"}).json()
    assert by_name == {"document_id": ids[0], "matched_by": "name"}

    detail = served.http.get(f"/documents/{ids[0]}").json()
    assert detail["status"] == "Indexed" and detail["history"][-1]["status"] == "Indexed"
    assert detail["sections"][0]["heading_path"] == "Alpha"
    assert detail["chunks"][0]["preview"].startswith("the alpha pangolin")

    text = served.http.get(f"/documents/{ids[0]}/text", params={"collection": "OPS", "max_chars": 500}).json()
    assert "the alpha pangolin runbook" in text["text"] and text["truncated"] is False

    # Query text and file names never reach the node's log (the `home` fixture checks its log file).
    canary = served.http.post("/search", json={"query": "pangolin zqxcanary7731", "collection": "OPS"})
    assert canary.status_code == 200
    refused = served.http.post("/search", json={"query": "zqxcanary7731", "limit": "zqxcanary7731"})
    assert refused.status_code == 400 and "canary" not in refused.text
    hits = served.http.post("/search", json={"query": "pangolin", "collection": "OPS", "limit": 5}).json()
    assert {h["document_id"] for h in hits["hits"]} == set(ids)
    assert set(hits) == {"hits", "degraded", "elapsed_ms", "match", "hidden_below_floor"} and hits["match"]["verdict"] == "exact"
    nothing = served.http.post("/search", json={"query": "qqxzzv", "collection": "OPS"}).json()
    assert nothing["match"]["lexical"] is False
    everywhere = served.http.post("/search", json={"query": "pangolin", "collection": "*", "per_document": True}).json()
    assert {h["collection"] for h in everywhere["hits"]} == {"OPS", "NAMED"}
    explained = served.http.post("/search", json={"query": "alpha", "collection": "OPS", "explain": True}).json()
    assert explained["explain"]["lexical_plan"]["ranked"] == ["alpha"]

    chunk_id = hits["hits"][0]["chunk_id"]
    neighbours = served.http.get(f"/chunks/{chunk_id}/neighbours", params={"collection": "OPS", "window": 1}).json()
    assert [c["chunk_id"] for c in neighbours["chunks"]] == [chunk_id]
    assert served.http.get(f"/chunks/{chunk_id}/neighbours", params={"collection": "OTHER"}).json() == {"chunks": []}

    unknown = "0123456789abcdef0123456789abcdef"
    reindexed = served.http.post("/reindex", json={"document_ids": [ids[1], unknown]}).json()
    assert reindexed == {"queued": [ids[1]], "damaged": [], "not_found": [unknown]}
    _indexed(served, ids)

    assert served.http.delete(f"/documents/{ids[1]}").json() == {"document_id": ids[1], "removed": True}
    assert served.http.delete(f"/documents/{ids[1]}").status_code == 404
    assert served.http.get(f"/documents/{ids[1]}").status_code == 404

    status = served.http.get("/status").json()
    assert status["node_running"] is True and status["documents"] == {"Indexed": 2}
    assert status["queue"]["pid"] == served.process.pid


def test_an_add_of_what_is_already_there_answers_the_existing_document(served, tmp_path):
    path = write(tmp_path / "a.md", "# A\n\nsame bytes")
    first = served.http.post("/documents", json={"paths": [str(path)]})
    again = served.http.post("/documents", json={"paths": [str(path)]})  # queued or in flight by now
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["documents"][0]["document_id"] == first.json()["documents"][0]["document_id"]
    assert again.json()["documents"][0]["created"] is False
    _indexed(served, [first.json()["documents"][0]["document_id"]])
    assert served.http.get("/status").json()["documents"] == {"Indexed": 1}


def test_source_routes(served, tmp_path):
    folder = tmp_path / "runbooks"
    write(folder / "disk.md", "# Disk\n\nthe aardvark cleanup")
    write(folder / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n")
    added = served.http.post("/documents", json={"paths": [str(folder)], "collection": "ops"}).json()
    (source,) = added["sources"]
    assert source["source"]["kind"] == "folder" and source["source"]["name"] == "runbooks"
    assert source["report"]["added"]["count"] == 1 and source["report"]["skipped"]["sensitive"]["count"] == 1
    source_id = source["source"]["source_id"]
    _indexed(served, source["report"]["pending_document_ids"])

    assert [s["source_id"] for s in served.http.get("/sources", params={"collection": "OPS"}).json()["sources"]] == [
        source_id
    ]
    assert served.http.get("/sources/runbooks").json()["documents"] == {"Indexed": 1}
    write(folder / "disk.md", "# Disk\n\nthe okapi cleanup")  # edited: updated in place
    synced = served.http.post(f"/sources/{source_id}/sync", json={}).json()
    assert synced["updated"]["count"] == 1 and synced["pending_document_ids"] == source["report"]["pending_document_ids"]
    _indexed(served, synced["pending_document_ids"])
    assert served.http.post("/search", json={"query": "okapi", "collection": "OPS"}).json()["hits"]

    gone = served.http.delete(f"/sources/{source_id}").json()
    assert gone == {"source_id": source_id, "purged": 1}
    assert served.http.get("/sources/runbooks").json()["error"] == "not_found"
    assert served.http.get("/status").json()["documents"] == {}


def test_repository_routes(served, tmp_path):
    repo = tmp_path / "repo"
    write(repo / "guide.md", "# Guide\n\nthe wombat procedure")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    registered = served.http.post("/repositories", json={"path": str(repo), "name": "guides"})
    assert registered.status_code == 201
    repository_id = registered.json()["repository_id"]
    assert served.http.get("/repositories").json()["repositories"][0]["name"] == "guides"
    assert served.http.get("/repositories/guides").json()["repository_id"] == repository_id

    report = served.http.post(f"/repositories/{repository_id}/import", json={"collection": "DOCS"}).json()
    assert report["status"] == "completed" and report["added"]["count"] == 1
    assert report["files"][0]["path"] == "guide.md"
    _indexed(served, report["pending_document_ids"])
    assert served.http.post("/search", json={"query": "wombat", "collection": "DOCS"}).json()["hits"]

    gone = served.http.delete(f"/repositories/{repository_id}", params={"purge": "true"}).json()
    assert gone == {"repository_id": repository_id, "purged": 1}
    assert served.http.get("/repositories/guides").json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("GET", "/nowhere", {}, 404, "no_route"),
        ("PUT", "/documents", {}, 405, "method_not_allowed"),
        ("POST", "/search", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
        ("POST", "/search", {"json": {"query": "x", "limit": 0}}, 400, "invalid_arguments"),
        ("POST", "/search", {"json": {"query": "x", "limit": "5"}}, 400, "invalid_arguments"),
        ("POST", "/search", {"json": {"query": "x", "sneaky": True}}, 400, "invalid_arguments"),
        ("POST", "/search", {"json": ["a list"]}, 400, "invalid_json"),
        ("POST", "/search", {"json": {"query": "x", "collection": "bad collection!"}}, 400, "invalid_collection"),
        ("POST", "/search", {"content": b"query=x"}, 415, "unsupported_media_type"),
        ("POST", "/documents", {"json": {"paths": ["relative.md"]}}, 400, "invalid_arguments"),
        ("POST", "/documents", {"json": {"paths": ["/no/such/file.md"]}}, 404, "not_found"),
        ("POST", "/documents", {"json": {"paths": []}}, 400, "invalid_arguments"),
        ("GET", "/documents/0123456789abcdef0123456789abcdef", {}, 404, "not_found"),
        ("GET", "/documents", {"params": {"status": "Sleeping"}}, 400, "invalid_arguments"),
        ("GET", "/resolve", {"params": {"document": "zz"}}, 404, "not_found"),
        ("GET", "/documents/abc/text", {}, 400, "invalid_arguments"),
        ("GET", "/chunks/abc/neighbours", {"params": {"collection": "X", "window": "-1"}}, 400, "invalid_arguments"),
        ("DELETE", "/repositories/nothing", {}, 404, "not_found"),
        ("POST", "/search", {"content": b"x" * (5 << 20), "headers": {"content-type": "application/json"}}, 413,
         "body_too_large"),
    ],
)
def test_bad_input_gets_a_stable_json_error(served, method, path, kwargs, status, code):
    answer = served.http.request(method, path, **kwargs)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["error"] == code and isinstance(body["message"], str) and body["message"]
    assert "Traceback" not in answer.text


def _raw(served, request: bytes) -> bytes:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(served.socket))
    # It may answer and close before it read everything.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(request)
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass  # closed with our unread bytes pending: the kernel resets instead
    sock.close()
    return answer


def test_headers_over_16_kib_are_refused(served):
    answer = _raw(served, b"GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b'"error":"headers_too_large"' in answer
    # Headers that keep coming in pieces are cut off by the HTTP parser itself
    # (the answer may be lost to the reset of a connection closed mid-upload).
    answer = _raw(served, b"GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 400_000 + b"\r\n\r\n")
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 ") and b'"error":"bad_http"' in answer
    assert served.http.get("/status").status_code == 200


def test_malformed_http_gets_a_json_400(served):
    for request in (b"NOT HTTP AT ALL\r\n\r\n", b"GET /v1/status HTTP/1.1\r\n\r\n"):
        answer = _raw(served, request)
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert answer.endswith(b'{"error":"bad_http","message":"a malformed HTTP request, or headers over 16 KiB"}')
    assert served.http.get("/status").status_code == 200  # and the node carries on


def test_a_full_admission_queue_answers_503_with_retry_after(home, tmp_path):
    node = start_node(home, config="admission_queue_capacity = 1\nmax_in_flight = 1\n")
    try:
        paths = [str(write(tmp_path / "many" / f"d{i}.md", f"# D{i}\n\nbody {i}")) for i in range(30)]
        answer = node.http.post("/documents", json={"paths": paths})
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "5"
        body = answer.json()
        assert body["error"] == "busy" and body["retry_after_s"] == 5.0
        # Busy is not lost: every document is stored, and the drain sweep indexes them all.
        ids = [d["document_id"] for d in body["documents"]]
        assert len(ids) == 30
        _indexed(node, ids)
    finally:
        node.stop()


def test_a_data_directory_path_too_long_for_a_socket_address_still_serves(tmp_path):
    """AF_UNIX addresses hold 108 bytes: a longer socket path is bound and reached through the directory."""
    home = tmp_path / ("deep" * 30) / "kbhome"
    process = subprocess.Popen([sys.executable, "-m", "kbtui", "serve"], env=kbtui_env(home),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (home / "api.sock").exists(), what="the socket")
        status = kbtui(home, "status", "--json")
        assert status.returncode == 0 and '"node_running": true' in status.stdout
        assert " kbtui.api.app: api: GET get_status" in (home / "logs" / "kbtui.log").read_text()
    finally:
        process.terminate()
        process.wait(timeout=60)
