"""The pure rules: which paths are skipped, how a raw path becomes an identity, how it is shown."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbtui.printable import printable
from kbtui.sources.paths import normalise_source_path
from kbtui.sources.rules import SkipReason, path_skip_reason


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("docs/guide.md", None),
        ("README", None),
        ("notes.txt", None),
        ("whiteboard/photo.JPG", None),  # images are read by OCR
        ("runbook-screenshot.png", None),
        (".github/CONTRIBUTING.md", None),
        ("sub/.git/config.md", SkipReason.VCS_METADATA),
        (".git", SkipReason.VCS_METADATA),
        (".env", SkipReason.SENSITIVE),
        (".env.production", SkipReason.SENSITIVE),
        (".envrc", SkipReason.SENSITIVE),
        ("deploy/staging.env", SkipReason.SENSITIVE),
        ("id_rsa", SkipReason.SENSITIVE),
        ("keys/id_ed25519", SkipReason.SENSITIVE),
        ("keys/id_ecdsa.pub", SkipReason.SENSITIVE),
        ("tls/server.pem", SkipReason.SENSITIVE),
        ("tls/SERVER.KEY", SkipReason.SENSITIVE),
        ("tls/client.p12", SkipReason.SENSITIVE),
        ("home/.ssh/notes.md", SkipReason.SENSITIVE),
        (".netrc", SkipReason.SENSITIVE),
        ("infra/terraform.tfstate", SkipReason.SENSITIVE),
        ("node_modules/left-pad/README.md", SkipReason.GENERATED),
        ("web/node_modules/x/readme.txt", SkipReason.GENERATED),
        ("pkg/__pycache__/x.txt", SkipReason.GENERATED),
        (".venv/lib/README.md", SkipReason.GENERATED),
        ("venv/README.md", SkipReason.GENERATED),
        ("build/index.md", SkipReason.GENERATED),
        ("dist/notes.txt", SkipReason.GENERATED),
        ("target/doc.md", SkipReason.GENERATED),
        ("kbtui.egg-info/PKG-INFO", SkipReason.GENERATED),
        ("logo.gif", SkipReason.UNSUPPORTED_FORMAT),
        ("demo.mp4", SkipReason.UNSUPPORTED_FORMAT),
        (".gitignore", SkipReason.UNSUPPORTED_FORMAT),
        (".bashrc", SkipReason.UNSUPPORTED_FORMAT),
    ],
)
def test_path_rules(path, reason):
    assert path_skip_reason(path) == reason


def test_a_file_merely_named_like_a_generated_directory_is_kept():
    assert path_skip_reason("docs/build.md") is None
    assert path_skip_reason("node_modules.md") is None


@pytest.mark.parametrize(
    "raw", [b"", b"/etc/passwd", b"../up.md", b"a/../../up.md", b"a//b.md", b"./a.md", b"a/./b.md", b"a\x00b.md"]
)
def test_paths_that_could_escape_the_tree_have_no_identity(raw):
    assert normalise_source_path(raw) is None


def test_identity_is_nfc_and_invalid_utf8_is_escaped():
    assert normalise_source_path("cafe\u0301.md".encode()) == "caf\u00e9.md"
    assert normalise_source_path(b"caf\xe9.md") == "caf\\xe9.md"
    assert normalise_source_path(b"docs/a.md") == "docs/a.md"


def test_printable_path_escapes_what_could_fool_a_terminal():
    assert printable("a\nb\tc\rd.md") == "a\\nb\\tc\\rd.md"
    assert printable("evil\u202egnp.md") == "evil\\u202egnp.md"
    assert printable("zero\u200bwidth\u2066.md") == "zero\\u200bwidth\\u2066.md"
    assert printable("esc\x1b[31mred.md") == "esc\\x1b[31mred.md"
    assert printable("東京/notes 📝.md") == "東京/notes 📝.md"


_raw_paths = st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=4).map(b"/".join)


@settings(max_examples=300, deadline=None)
@given(_raw_paths)
def test_any_identity_stays_relative_and_prints_inert(raw):
    identity = normalise_source_path(raw)
    if identity is None:
        return
    parts = identity.split("/")
    assert not identity.startswith("/") and ".." not in parts and "." not in parts
    assert identity == unicodedata.normalize("NFC", identity)
    identity.encode("utf-8")  # storable as SQLite TEXT: no lone surrogates
    shown = printable(identity)
    assert not any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Cs"} for c in shown)
