"""A client talks only to its own node.

Two knowledge bases, each in its own data directory, one node running for
the first. Whatever is put at the second directory's ``api.sock`` - a link
to the first node's socket, or a hard link to it (a real socket, of this
user) - a command on the second directory never acts on the first base: the
socket file is refused, or the first node refuses a request for another base
before doing anything, and its answers are not believed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kbtui.api.client import tcp_endpoint, unix_endpoint
from kbtui.api.identity import NotOurNode, read_identity
from kbtui.api.transport import request
from tests.conftest import write
from tests.faults.processes import kbtui, one_line
from tests.sources.test_watching import Serving, wait_for


@pytest.fixture
def two_bases(tmp_path: Path):
    """Base A (served by a running node) and base B (no node), each holding one document."""
    homes = {}
    for name, word in (("a", "alphaquartz"), ("b", "betaquartz")):
        home = tmp_path / f"home-{name}"
        write(tmp_path / f"docs-{name}" / "note.md", f"# Note\n\nthe {word} note\n")
        assert kbtui(home, "add", str(tmp_path / f"docs-{name}")).returncode == 0
        homes[name] = home
    serving = Serving(homes["a"])
    wait_for(lambda: (homes["a"] / "api.sock").exists() and _served(homes["a"]), what="node A to answer")
    yield homes["a"], homes["b"]
    serving.stop()


def _served(home: Path) -> bool:
    return json.loads(kbtui(home, "status", "--json").stdout)["node_running"]


def _ids(home: Path) -> list[str]:
    return [d["document_id"] for d in json.loads(kbtui(home, "ls", "--json").stdout)]


def test_a_linked_socket_is_refused_and_the_other_base_is_untouched(two_bases):
    home_a, home_b = two_bases
    (a_document,) = _ids(home_a)
    os.symlink(home_a / "api.sock", home_b / "api.sock")

    removed = kbtui(home_b, "rm", a_document)

    assert removed.returncode == 3
    assert "api.sock in the data directory is a link" in one_line(removed.stderr)
    assert _ids(home_a) == [a_document]


def test_a_hard_linked_socket_is_refused_by_the_node_before_it_acts(two_bases):
    home_a, home_b = two_bases
    (a_document,) = _ids(home_a)
    os.link(home_a / "api.sock", home_b / "api.sock")  # a real socket of this user, in B's directory

    removed = kbtui(home_b, "rm", a_document)
    searched = kbtui(home_b, "search", "alphaquartz", "--json")

    assert removed.returncode == 3
    assert "serves another knowledge base" in one_line(removed.stderr)
    assert _ids(home_a) == [a_document]
    assert searched.returncode == 3 and searched.stdout == ""


def test_the_node_refuses_a_request_for_another_base_and_proves_its_own(two_bases):
    home_a, home_b = two_bases
    mine, theirs = unix_endpoint(home_a), unix_endpoint(home_b)

    assert request(mine, "GET", "/status", timeout=10).status == 200
    foreign = type(theirs)(theirs.identity, unix_path=home_a / "api.sock")  # B's identity at A's socket
    with pytest.raises(NotOurNode):
        request(foreign, "GET", "/status", timeout=10)
    assert read_identity(home_a) != read_identity(home_b)


def test_a_token_file_that_is_a_link_is_not_read(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "node.key").write_bytes(os.urandom(32))
    elsewhere = tmp_path / "planted-token"
    elsewhere.write_text("attacker-token\n")
    os.symlink(elsewhere, home / "api.token")

    assert tcp_endpoint(home, "127.0.0.1", 8765).token is None
    os.unlink(home / "api.token")
    (home / "api.token").write_text("the-real-token\n")
    assert tcp_endpoint(home, "127.0.0.1", 8765).token == "the-real-token"
