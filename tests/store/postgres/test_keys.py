"""The node key's fingerprint lives in the PostgreSQL database: every node must hold the same key."""

from __future__ import annotations

import os

import psycopg
import pytest

from store.errors import KeyProblem
from store.keys import key_fingerprint
from store.postgres.keys import check_node_key, stored_fingerprint


def test_the_first_node_records_its_key_and_later_ones_must_match(conn: psycopg.Connection) -> None:
    key = os.urandom(32)
    assert stored_fingerprint(conn) is None
    check_node_key(conn, key, server="db:5432/kb")
    assert stored_fingerprint(conn) == key_fingerprint(key)
    check_node_key(conn, key, server="db:5432/kb")  # the same key again: accepted

    with pytest.raises(KeyProblem) as raised:
        check_node_key(conn, os.urandom(32), server="db:5432/kb")
    assert "does not match the data in the PostgreSQL database db:5432/kb" in raised.value.message
    assert "copy node.key" in raised.value.message
    assert raised.value.exit_code == 3
    assert stored_fingerprint(conn) == key_fingerprint(key)
