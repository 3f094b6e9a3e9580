"""The data directory's modes: ours are owner-only, theirs are left alone, and
one that others can write is refused."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from kbtui.logs import configure_logging
from tests.conftest import write
from tests.faults.processes import kbtui, one_line


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_data_directory_we_create_is_0700_and_everything_in_it_owner_only(home, tmp_path):
    write(tmp_path / "docs" / "a.md", "# A\n\nalpha\n")
    old_umask = os.umask(0o022)  # the common default: files 0644 unless kbtui says otherwise
    try:
        added = kbtui(home, "add", str(tmp_path / "docs"))
        serve_status = kbtui(home, "status")
    finally:
        os.umask(old_umask)
    assert added.returncode == 0 and serve_status.returncode == 0, added.stderr + serve_status.stderr
    assert mode(home) == 0o700
    created = list(home.rglob("*"))
    names = {p.relative_to(home).as_posix() for p in created}
    assert {"kb.sqlite3", "node.key", "node.fingerprint", "node.lock", "logs/kbtui.log", "blobs"} <= names
    for path in created:
        expected = 0o700 if path.is_dir() else 0o600
        assert mode(path) == expected, f"{path.relative_to(home)} is {mode(path):04o}"


def test_the_mode_of_a_data_directory_we_did_not_create_is_left_alone(home, tmp_path):
    home.mkdir(mode=0o750)
    home.chmod(0o750)  # shared with a backup group, on purpose
    write(tmp_path / "docs" / "a.md", "# A\n\nalpha\n")
    assert kbtui(home, "add", str(tmp_path / "docs")).returncode == 0
    assert mode(home) == 0o750


def test_a_data_directory_others_can_write_is_refused(home, tmp_path):
    write(tmp_path / "docs" / "a.md", "# A\n\nalpha\n")
    for shared_mode in (0o1777, 0o775, 0o757):
        home.mkdir(exist_ok=True)
        home.chmod(shared_mode)
        for args in (("add", str(tmp_path / "docs")), ("status",), ("search", "alpha")):
            result = kbtui(home, *args)
            assert result.returncode == 3, (oct(shared_mode), args, result.stderr)
            assert "writable by other users" in one_line(result.stderr)
        assert list(home.iterdir()) == []  # nothing created in it
        assert mode(home) == shared_mode  # and its mode untouched


def test_log_files_stay_owner_only_across_rotation(home):
    home.mkdir(mode=0o700)
    old_umask = os.umask(0o022)
    try:
        configure_logging(home, to_stderr_level=None)
        handler = next(h for h in logging.getLogger().handlers if getattr(h, "_kbtui", False))
        handler.maxBytes = 2_000
        for i in range(200):
            logging.getLogger("kbtui.test").info("a line long enough to rotate the file soon, number %d", i)
    finally:
        os.umask(old_umask)
        for h in [h for h in logging.getLogger().handlers if getattr(h, "_kbtui", False)]:
            logging.getLogger().removeHandler(h)
            h.close()
    logs = sorted((home / "logs").iterdir())
    assert [p.name for p in logs] == ["kbtui.log", "kbtui.log.1", "kbtui.log.2", "kbtui.log.3"]
    assert {p.name: mode(p) for p in logs} == {p.name: 0o600 for p in logs}
