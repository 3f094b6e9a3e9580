"""A scan that cannot see is not a deletion.

An unmounted file system, a folder made anew, a folder emptied while it held
documents and a subfolder that cannot be read all leave every document and
its encrypted source in place: flagged unreachable with a reason, still
searchable, back to normal when the files come back, and removed only by
``kbtui sync --prune``. A file that is really gone is still removed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import write
from tests.faults.processes import kbtui, kbtui_env
from tests.sources.conftest import GitTree
from tests.sources.test_watching import wait_for

AS_ROOT = os.geteuid() == 0

RUNBOOKS = {
    "restart.md": "# Restart\n\nrestart the zephyrgate service with care\n",
    "backup.md": "# Backup\n\nnightly quasarlift backups run at two\n",
    "deep/rotate.md": "# Rotate\n\nrotate the orbitwheel certificates yearly\n",
}


def fill(folder: Path, files: dict[str, str] = RUNBOOKS) -> None:
    for relative, text in files.items():
        write(folder / relative, text)


def documents(home: Path) -> dict[str, str]:
    listed = json.loads(kbtui(home, "ls", "--json").stdout)
    return {d["source_path"]: d["document_id"] for d in listed}


def blobs(home: Path) -> set[str]:
    return {p.name for p in (home / "blobs").rglob("*") if p.is_file()}


def the_source(home: Path) -> dict:
    (source,) = json.loads(kbtui(home, "sources", "--json").stdout)
    return source


def searchable(home: Path, word: str) -> bool:
    result = kbtui(home, "search", word, "--json")
    return result.returncode == 0 and any(word in hit["text"] for hit in json.loads(result.stdout)["hits"])


def unprivileged(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``kbtui ARGS`` in a child that permission bits apply to: as root, without
    the capabilities that read any directory whatever its mode."""
    prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"] if AS_ROOT else []
    return subprocess.run(
        [*prefix, sys.executable, "-m", "kbtui", *args], env=kbtui_env(home), capture_output=True, text=True,
        timeout=120,
    )


class Disk:
    """A folder that can be unmounted and mounted again: a real tmpfs as root;
    otherwise the same seen from outside - the folder replaced by an empty
    directory (another inode), and put back."""

    def __init__(self, mount_point: Path) -> None:
        self.mount_point = mount_point
        self.real = AS_ROOT and shutil.which("mount") is not None
        self._aside = mount_point.with_name(mount_point.name + ".unmounted")
        mount_point.mkdir(parents=True)
        self.mount()

    def mount(self) -> None:
        if self.real:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(self.mount_point)],
                           check=True)
        elif self._aside.exists():
            self.mount_point.rmdir()
            self._aside.rename(self.mount_point)

    def unmount(self) -> None:
        if self.real:
            subprocess.run(["umount", str(self.mount_point)], check=True)
        else:
            self.mount_point.rename(self._aside)
            self.mount_point.mkdir()

    def mounted(self) -> bool:
        return os.path.ismount(self.mount_point) if self.real else not self._aside.exists()


@contextmanager
def disk(path: Path) -> Iterator[Disk]:
    made = Disk(path)
    try:
        yield made
    finally:
        if made.real and made.mounted():
            subprocess.run(["umount", str(path)], check=False)


# ---------------------------------------------------------------- an unmounted folder


@pytest.mark.timeout(180)
def test_an_unmounted_watched_folder_keeps_every_document_and_its_source(home, tmp_path):
    from tests.sources.test_watching import Serving

    with disk(tmp_path / "share") as share:
        fill(share.mount_point)
        assert kbtui(home, "add", str(share.mount_point)).returncode == 0
        before, stored = documents(home), blobs(home)
        assert len(before) == 3 and len(stored) == 3
        serving = Serving(home)
        try:
            wait_for(lambda: the_source(home)["watch"] in ("events", "polling"), what="the node to watch the folder")
            scanned = the_source(home)["last_scan_at"]

            share.unmount()
            # The running node notices (its watcher, or an operator's sync through it) and removes nothing.
            if not _wait_quietly(lambda: the_source(home)["last_scan_at"] != scanned):
                kbtui(home, "sync")
            source = the_source(home)

            assert source["unreachable"]["reason"] in ("root_replaced", "root_empty")
            assert source["unreachable"]["documents"] == {source["unreachable"]["reason"]: 3}
            assert documents(home) == before and blobs(home) == stored
            assert searchable(home, "zephyrgate")
            synced = kbtui(home, "sync")
            assert synced.returncode == 1 and "3 document(s) kept" in synced.stdout
            assert "--prune" in synced.stdout
            assert documents(home) == before and blobs(home) == stored

            share.mount()
            if share.real:  # a tmpfs comes back empty: the operator copies the files back
                fill(share.mount_point)
            synced = kbtui(home, "sync")

            assert synced.returncode == 0, synced.stdout + synced.stderr
            assert the_source(home)["unreachable"] is None
            assert documents(home) == before and blobs(home) == stored
        finally:
            serving.stop()


def _wait_quietly(condition, deadline_s: float = 15.0) -> bool:
    try:
        wait_for(condition, deadline_s=deadline_s, what="")
    except AssertionError:
        return False
    return True


def test_a_folder_made_anew_is_unreachable_until_its_files_come_back(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder)
    assert kbtui(home, "add", str(folder)).returncode == 0
    before, stored = documents(home), blobs(home)
    folder.rename(tmp_path / "notes.old")
    folder.mkdir()
    write(folder / "restart.md", RUNBOOKS["restart.md"])

    synced = kbtui(home, "sync", "--json")

    assert synced.returncode == 1
    (report,) = json.loads(synced.stdout)
    assert report["status"] == "unreachable" and report["unreachable"]["count"] == 2
    assert report["removed"]["count"] == 0
    assert documents(home) == before and blobs(home) == stored
    assert the_source(home)["unreachable"]["reason"] == "root_replaced"

    shutil.rmtree(folder)
    (tmp_path / "notes.old").rename(folder)
    assert kbtui(home, "sync").returncode == 0
    assert the_source(home)["unreachable"] is None and documents(home) == before


def test_a_folder_emptied_while_it_held_documents_is_pruned_only_on_purpose(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder)
    assert kbtui(home, "add", str(folder)).returncode == 0
    before = documents(home)
    for entry in folder.iterdir():  # the folder stays (same inode), with nothing in it
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    kept = kbtui(home, "sync")
    assert kept.returncode == 1 and documents(home) == before
    assert the_source(home)["unreachable"]["reason"] == "root_empty"

    pruned = kbtui(home, "sync", "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "3 removed" in pruned.stdout
    assert documents(home) == {} and blobs(home) == set()
    assert the_source(home)["unreachable"] is None


@pytest.mark.skipif(not AS_ROOT, reason="mounting a file system inside the tree needs root")
def test_an_unmounted_subfolder_keeps_its_documents(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder, {"top.md": "# Top\n\nthe top page\n"})
    with disk(folder / "mounted") as inner:
        fill(inner.mount_point, {"inner.md": "# Inner\n\nthe nebulawick page\n"})
        assert kbtui(home, "add", str(folder)).returncode == 0
        before = documents(home)
        inner.unmount()

        synced = kbtui(home, "sync")

        assert synced.returncode == 1
        assert "mounted/inner.md: kept, cannot be seen" in synced.stderr
        assert documents(home) == before and searchable(home, "nebulawick")
        assert the_source(home)["unreachable"] == {
            "reason": None, "since": the_source(home)["unreachable"]["since"], "documents": {"other_device": 1},
        }


# ---------------------------------------------------------------- unreadable subtrees


@pytest.mark.parametrize("kind", ["folder", "git"])
def test_an_unreadable_subfolder_keeps_its_documents_until_it_can_be_read(home, tmp_path, kind):
    root = tmp_path / "tree"
    if kind == "git":
        tree = GitTree(root)
        fill(root)
        tree.git("add", "restart.md")  # deep/ and backup.md stay untracked: git lists them from the disk
        tree.git("commit", "-q", "-m", "one tracked file")
    else:
        fill(root)
    assert unprivileged(home, "add", str(root)).returncode == 0
    before, stored = documents(home), blobs(home)
    (root / "deep").chmod(0o000)
    try:
        synced = unprivileged(home, "sync")

        assert synced.returncode == 1
        assert "deep/rotate.md: kept, cannot be seen: a folder on its way cannot be read" in synced.stderr
        assert documents(home) == before and blobs(home) == stored
        assert the_source(home)["unreachable"]["documents"] == {"folder_unreadable": 1}
        assert searchable(home, "orbitwheel")
    finally:
        (root / "deep").chmod(0o755)
    synced = unprivileged(home, "sync")
    assert synced.returncode == 0, synced.stderr
    assert the_source(home)["unreachable"] is None and documents(home) == before


def test_an_unreadable_file_keeps_its_document(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder)
    assert unprivileged(home, "add", str(folder)).returncode == 0
    before = documents(home)
    (folder / "backup.md").chmod(0o000)
    write(folder / "restart.md", "# Restart\n\nrestart the zephyrgate service twice\n")  # looks changed: read again
    (folder / "backup.md").touch()

    synced = unprivileged(home, "sync")

    assert synced.returncode == 1
    assert "backup.md: not added, it cannot be read" in synced.stderr
    assert documents(home) == before
    assert the_source(home)["unreachable"]["documents"] == {"unreadable": 1}


# ---------------------------------------------------------------- what is really gone still goes


def test_a_deleted_subfolder_and_file_are_still_removed(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder)
    assert kbtui(home, "add", str(folder)).returncode == 0
    shutil.rmtree(folder / "deep")
    (folder / "backup.md").unlink()

    synced = kbtui(home, "sync")

    assert synced.returncode == 0, synced.stderr
    assert "2 removed" in synced.stdout
    assert set(documents(home)) == {"restart.md"}
    assert the_source(home)["unreachable"] is None


def test_a_dry_run_says_what_it_could_not_see_and_writes_nothing(home, tmp_path):
    folder = tmp_path / "notes"
    fill(folder)
    assert kbtui(home, "add", str(folder)).returncode == 0
    shutil.rmtree(folder)
    folder.mkdir()

    preview = kbtui(home, "sync", "--dry-run", "--json", "--list")

    (report,) = json.loads(preview.stdout)
    assert report["status"] == "unreachable" and report["unreachable"]["count"] == 3
    assert {f["outcome"] for f in report["files"]} == {"unreachable"}
    assert the_source(home)["unreachable"] is None  # nothing written
