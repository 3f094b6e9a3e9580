"""A hostile corpus through the real node: each file fails alone with a reason
code or is indexed cleanly; the good documents around them always index."""

from __future__ import annotations

import json

from store.db import database, open_database
from store.fts import integrity_check
from store.models import Chunk
from tests.extract.documents import (
    declare_uncompressed_size,
    docx_document,
    docx_with_external_entity,
    flate_bomb_pdf,
    pdf_with_declared_length,
    pdf_with_pages,
    rewrite_docx,
    slow_pdf,
)

SECRET = "zqx-local-file-canary"


def small_docx() -> bytes:
    return docx_document(lambda d: d.add_paragraph("Body text."))


def build_corpus(folder, secret_uri: str) -> dict[str, tuple[str, str | None]]:
    """Write every hostile file (and good neighbours); return the expected (status, reason)."""
    good_pdf = pdf_with_pages([([(1, "Runbook")], ["Restart the collector nightly."])])
    files: dict[str, tuple[bytes, tuple[str, str | None]]] = {
        "01-good.md": (b"# Good\n\nthe first good document\n", ("Indexed", None)),
        "02-flate-bomb.pdf": (flate_bomb_pdf(200 << 20), ("Failed", "extract_too_large")),
        "03-declared-length.pdf": (pdf_with_declared_length(10**12), ("Failed", "extract_too_large")),
        "04-parses-forever.pdf": (slow_pdf(), ("Failed", "extract_timeout")),
        "05-encrypted.pdf": (
            pdf_with_pages([([], ["secret"])], owner_password="o", user_password="u"), ("Failed", "extract_encrypted"),
        ),
        "06-truncated.pdf": (good_pdf[: len(good_pdf) // 3], ("Failed", "extract_corrupt")),
        "07-empty.pdf": (b"", ("skipped", "empty")),
        "08-xxe.docx": (docx_with_external_entity(secret_uri), ("Failed", "extract_unsafe")),
        "09-zip-ratio.docx": (
            rewrite_docx(small_docx(), add={"word/media/pad.bin": b"\0" * (8 << 20)}), ("Failed", "extract_too_large"),
        ),
        "10-zip-entries.docx": (
            rewrite_docx(small_docx(), add={f"customXml/i{i}.bin": b"" for i in range(10_001)}),
            ("Failed", "extract_too_large"),
        ),
        "11-multi-gb-xml.docx": (
            declare_uncompressed_size(small_docx(), "word/document.xml", 3_500_000_000), ("Failed", "extract_too_large"),
        ),
        "12-nested.html": (
            b"<html><body>" + b"<div>" * 100_000 + b"x" + b"</div>" * 100_000 + b"</body></html>",
            ("Failed", "extract_too_large"),
        ),
        "13-colspan.html": (
            b"<table><tr><td colspan=9007199254740991>wide cell</td></tr></table><p>after the table</p>",
            ("Indexed", None),
        ),
        # A scan judges NUL bytes as git does (binary); extraction strips stray ones
        # from text that arrives unscanned (tests/extract/test_text_formats.py).
        "14-nul-bytes.txt": (b"before\x00the nul\x00\x00 nulfollower survives\n", ("skipped", "binary_content")),
        "15-invalid-utf8.txt": (b"valid start \xff\xfe\xc3 broken mojibakeword end\n", ("Indexed", None)),
        "16-\u202eright-to-left.md": (b"# RTL\n\nrtlbodyword\n", ("Indexed", None)),
        "17-zero\u200bwidth.md": (b"# ZW\n\nzerowidthbodyword\n", ("Indexed", None)),
        "18-one-long-line.txt": (b" ".join(b"w%d" % (i % 5000) for i in range(1_500_000)) + b" longlineend", ("Indexed", None)),
        "19-only-nuls.txt": (b"\x00" * 64, ("skipped", "binary_content")),
        "20-whitespace.md": (b" \n\t\n   \n", ("Failed", "no_text")),
        "21-good.pdf": (good_pdf, ("Indexed", None)),
        "22-good.md": (b"# Last\n\nthe last good document\n", ("Indexed", None)),
    }
    for name, (data, _) in files.items():
        (folder / name).write_bytes(data)
    return {name: expected for name, (_, expected) in files.items()}


def test_a_hostile_corpus_fails_file_by_file_and_loses_nothing(run_cli, home, tmp_path):
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[extraction]\ntimeout_seconds = 3\ntimeout_seconds_per_mib = 0\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    expected = build_corpus(corpus, secret.as_uri())

    added = run_cli("add", str(corpus), "--json")
    assert added.code == 1, added.err  # some failed, as they should
    outcome = {d["display_name"]: (d["status"], d["failure_reason"]) for d in json.loads(added.out)}
    # A scan skips what is not worth a document (empty, not text), each with its reason.
    scan = json.loads(run_cli("sync", "--dry-run", "--list", "--json").out)[0]
    outcome |= {f["path"]: (f["outcome"], f["reason"]) for f in scan["files"] if f["outcome"] == "skipped"}
    assert outcome == expected

    def finds(word: str) -> bool:
        return any(word in h["text"] for h in json.loads(run_cli("search", word, "--json").out)["hits"])

    for word in ("mojibakeword", "rtlbodyword", "zerowidthbodyword", "longlineend", "collector"):
        assert finds(word), word
    # (LIKE cannot look for NUL: SQLite cuts the pattern there. instr can.)
    assert database.execute_sql("SELECT count(*) FROM chunk WHERE instr(content, char(0)) > 0").fetchone()[0] == 0
    assert not Chunk.select().where(Chunk.content.contains(SECRET)).exists()
    # The searches opened the catalog read-only; FTS5's check is an INSERT command.
    open_database(home / "kb.sqlite3")
    assert database.execute_sql("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert integrity_check()
