"""config.toml is checked when it is loaded: type and range per key, one line naming
the key and what it accepts, exit 2 (issue 16, findings 6 and 7)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from kbtui.config import Config
from kbtui.settings import InvalidSetting
from tests.conftest import write
from tests.faults.processes import kbtui, one_line

# (config.toml, the one line the operator reads)
REFUSED = [
    # an actor died on the first comparison with a string
    ('max_in_flight = "abc"', 'max_in_flight must be an integer from 1 to 1024 (got a string)'),
    # add waited forever: nothing was ever admitted
    ("max_in_flight = 0", "max_in_flight must be an integer from 1 to 1024 (got 0)"),
    ("admission_queue_capacity = 0", "admission_queue_capacity must be an integer from 1 to 1_000_000 (got 0)"),
    # the chunker spun at 100 % CPU and grew to 764 MB in 20 s
    ("[chunking]\nmax_chunk_chars = 0", "chunking.max_chunk_chars must be an integer from 16 to 1_000_000 (got 0)"),
    ("[chunking]\nmin_chunk_tokens = 1", "chunking.min_chunk_tokens must be an integer from 8 to 100_000 (got 1)"),
    ('[extraction]\ntimeout_seconds = "30"', "extraction.timeout_seconds must be a number from 0.01 to 86400 (got a string)"),
    ("[extraction]\nworker_processes = 0", "extraction.worker_processes must be an integer from 1 to 256 (got 0)"),
    ("drain_sweep_interval_s = 0", "drain_sweep_interval_s must be a number from 0.01 to 3600 (got 0)"),
    ("embedding_timeout_s = nan", "embedding_timeout_s must be a number from 0.001 to 86400 (got nan)"),
    ("max_document_bytes = 1.5", "max_document_bytes must be an integer from 1 to 1_099_511_627_776 (got 1.5)"),
    ("search_limit = true", "search_limit must be an integer from 1 to 1000 (got true/false)"),
    # a string is truthy: "false" must never switch cloud access on
    ('allow_cloud_model_access = "false"', "allow_cloud_model_access must be true or false (got a string)"),
    ('search_fusion = "best"', 'search_fusion must be one of "rrf", "score_aware", "convex" (got another value)'),
    ('embedding_provider = "gpu"', 'embedding_provider must be one of "local", "ollama", "hash" (got another value)'),
    ("chunking = 5", "chunking must be a table ([chunking])"),
]


@pytest.mark.parametrize(("toml", "message"), REFUSED, ids=[toml.split("=")[0].strip() for toml, _ in REFUSED])
def test_a_bad_value_is_refused_at_load_with_the_key_and_its_range(run_cli, home, monkeypatch, toml, message):
    monkeypatch.delenv("KBTUI_EMBEDDING_PROVIDER")  # so config.toml's provider is the one read
    write(home / "config.toml", toml + "\n")
    result = run_cli("ls")
    assert result.code == 2
    assert result.err == f"kbtui: config.toml: {message}\n"


@pytest.mark.timeout(60)
def test_add_with_nothing_admitted_refuses_instead_of_hanging(run_cli, home, tmp_path):
    write(home / "config.toml", "max_in_flight = 0\n")
    result = run_cli("add", str(write(tmp_path / "a.md", "# A\n\ntext")))
    assert result.code == 2 and "max_in_flight" in result.err


def test_an_environment_override_is_checked_too(run_cli, monkeypatch):
    monkeypatch.setenv("KBTUI_EMBEDDING_PROVIDER", "gpu")
    result = run_cli("ls")
    assert result.code == 2 and "embedding_provider must be one of" in result.err


def test_whole_numbers_are_accepted_for_seconds_and_read_as_numbers(home):
    write(home / "config.toml", "embedding_timeout_s = 30\n[extraction]\ntimeout_seconds = 5\n")
    config = Config.load(home)
    assert config.embedding_timeout_s == 30.0 and isinstance(config.embedding_timeout_s, float)
    assert config.extraction.timeout_seconds == 5.0


def test_settings_made_in_code_are_checked_the_same_way(home):
    with pytest.raises(InvalidSetting, match="max_in_flight"):
        dataclasses.replace(Config.load(home), max_in_flight=0)
    assert dataclasses.replace(Config.load(home), max_in_flight=1).max_in_flight == 1


def limited_memory() -> None:
    """The child's address space capped, so a config read that grows without
    bound fails there instead of taking the machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def place_fifo(path):
    os.mkfifo(path)


def place_dev_zero(path):
    path.symlink_to("/dev/zero")


def place_directory(path):
    path.mkdir()


def place_proc_file(path):
    path.symlink_to("/proc/self/status")


def place_large_file(path):
    path.write_text("# a comment line of the config file\n" * 40_000)  # 1.4 MB of valid TOML


def place_deep_array(path):
    path.write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")


def place_deep_tables(path):
    path.write_text("[" + ".".join(["x"] * 40) + "]\n")


@pytest.mark.parametrize(
    ("place", "message"),
    [
        (place_fifo, "config.toml cannot be read: it is not a regular file"),
        (place_dev_zero, "config.toml cannot be read: it is not a regular file"),
        (place_directory, "config.toml cannot be read: it is not a regular file"),
        (place_proc_file, "config.toml cannot be read: it is a kernel pseudo-file (as in /proc) that does not report "
                          "its size"),
        (place_large_file, "config.toml is larger than 1024 KiB"),
        (place_deep_array, "config.toml nests tables or arrays more than 8 deep"),
        (place_deep_tables, "config.toml nests tables or arrays more than 8 deep"),
    ],
    ids=["fifo", "dev-zero", "directory", "proc-file", "over-1-MiB", "deep-array", "deep-tables"],
)
@pytest.mark.parametrize("command", ["ls", "doctor"])
def test_a_config_file_that_is_not_a_small_regular_toml_file_is_one_line_at_once(home, place, message, command):
    """Read like a document: a FIFO must not hang any command (doctor
    included), /dev/zero must not grow memory, nesting must not crash the parser."""
    home.mkdir()
    place(home / "config.toml")
    result = kbtui(home, command, timeout=30, preexec_fn=limited_memory)
    assert result.returncode == 2
    assert one_line(result.stderr) == f"kbtui: {message}"
