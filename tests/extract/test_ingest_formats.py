"""Through the real ingest: every format indexes, hostile files fail alone with their code."""

from __future__ import annotations

import json

import pytest

from kbtui.config import Config
from kbtui.errors import KbtuiError
from store.models import Chunk
from tests.extract.documents import docx_document, docx_with_external_entity, pdf_with_pages, slow_pdf

CANARY = "zqx-entity-target-canary"


def _configure(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_extraction_limits_come_from_the_config_file(home):
    _configure(home, "[extraction]\ntimeout_seconds = 2.5\nmax_zip_entries = 50\n")
    limits = Config.load(home).extraction
    assert (limits.timeout_seconds, limits.max_zip_entries) == (2.5, 50)
    assert limits.deadline_seconds(3 * 1024 * 1024) == 2.5 + 3 * limits.timeout_seconds_per_mib
    assert limits.max_zip_ratio == 100  # the rest keep their defaults


@pytest.mark.parametrize("table", ["[extraction]\nno_such_limit = 1\n", "[extraction]\ntimeout_seconds = -1\n"])
def test_a_bad_extraction_setting_is_refused_clearly(home, table):
    _configure(home, table)
    with pytest.raises(KbtuiError):
        Config.load(home)


def test_every_format_indexes_and_hostile_files_fail_alone(run_cli, home, tmp_path):
    _configure(home, "[extraction]\ntimeout_seconds = 2\ntimeout_seconds_per_mib = 0\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(CANARY)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-guide.md").write_text("# Guide\n\n## Install\n\nRun the installer twice.\n")
    (docs / "b-slow.pdf").write_bytes(slow_pdf())
    (docs / "c-entity.docx").write_bytes(docx_with_external_entity(secret.as_uri()))
    (docs / "d-manual.pdf").write_bytes(
        pdf_with_pages([([(1, "Manual")], ["Front matter."]), ([(2, "Rotation")], ["Rotate keys yearly."])])
    )
    (docs / "e-letter.docx").write_bytes(
        docx_document(lambda d: (d.add_heading("Letter", 1), d.add_paragraph("Dear operator, thanks.")))
    )
    (docs / "f-page.html").write_text("<nav>menu</nav><h1>Page</h1><p>Served from the cache.</p>")
    (docs / "g-notes.rst").write_text("Notes\n=====\n\nKeep them short.\n")
    (docs / "h-tool.py").write_text("import os\n\n\ndef rotate_keys():\n    return os.urandom(32)\n")

    added = run_cli("add", str(docs), "--json")
    assert added.code == 1  # some documents failed
    outcome = {d["display_name"]: (d["status"], d["failure_reason"]) for d in json.loads(added.out)}
    assert outcome == {
        "a-guide.md": ("Indexed", None),
        "b-slow.pdf": ("Failed", "extract_timeout"),
        "c-entity.docx": ("Failed", "extract_unsafe"),
        "d-manual.pdf": ("Indexed", None),
        "e-letter.docx": ("Indexed", None),
        "f-page.html": ("Indexed", None),
        "g-notes.rst": ("Indexed", None),
        "h-tool.py": ("Indexed", None),
    }

    assert not Chunk.select().where(Chunk.content.contains(CANARY)).exists()
    hits = json.loads(run_cli("search", "rotate keys yearly", "--json").out)["hits"]
    manual = next(h for h in hits if "Rotate keys yearly" in h["text"])
    assert manual["heading_path"] == "Manual > Rotation" and manual["page"] == 2
    code = Chunk.get(Chunk.symbol == "rotate_keys")
    assert (code.kind, code.language) == ("code", "python")
