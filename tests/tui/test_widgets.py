"""The pure pieces of the UI: snippets, path completion, cells, throughput, header."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from actors.events import AdmissionChanged
from kbtui.rates import rate_text
from kbtui.tui.ascii import ascii_text, wants_ascii
from kbtui.tui.widgets.cells import human_size, short_time, status_cell
from kbtui.tui.widgets.ingest_header import IngestView, Throughput, header_text, spark_text
from kbtui.tui.widgets.path_input import complete_path
from kbtui.tui.widgets.snippet import HIGHLIGHT_STYLE, highlighted_snippet, query_terms


def highlighted_words(text) -> list[str]:
    return [text.plain[s.start:s.end] for s in text.spans if s.style == HIGHLIGHT_STYLE]


def test_the_snippet_starts_near_the_first_match_and_marks_every_query_word():
    text = "Intro words. " * 20 + "Rotate the TLS certificate when tls expiry is near."
    snippet = highlighted_snippet(text, "tls Certificate", 60)
    assert snippet.plain.startswith("…") and len(snippet.plain) <= 60
    assert highlighted_words(snippet) == ["TLS", "certificate", "tls"]


def test_query_syntax_is_only_words_to_highlight():
    assert query_terms('"x (a OR NEAR(b c) col:foo') == ["near", "col", "foo"]  # "or" and "a": stop words
    assert highlighted_snippet("nothing to see", "(", 40).plain == "nothing to see"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.text(max_size=40), st.integers(min_value=5, max_value=120))
def test_a_snippet_never_exceeds_its_width(text, query, width):
    assert len(highlighted_snippet(text, query, width).plain) <= width


def test_paths_complete_like_a_shell(tmp_path):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "readme.md").write_text("x")
    (tmp_path / ".hidden").write_text("x")
    base = str(tmp_path) + "/"
    assert complete_path(base + "ru") == base + "runbooks/"
    assert complete_path(base + "rea") == base + "readme.md"
    assert complete_path(base + "readme.md") is None
    assert complete_path(base + "zz") is None
    assert complete_path(base + ".h") == base + ".hidden"
    assert complete_path(base) in (base + "readme.md", base + "runbooks/")  # never a hidden entry
    assert complete_path(str(tmp_path / "missing" / "x")) is None


def test_status_cells_show_stage_progress_and_failure_reasons():
    assert status_cell("Embedding", 0.6, None).plain == "Embedding ▰▰▰▱▱"
    assert status_cell("Extracting", 0.1, None).plain == "Extracting ▰▱▱▱▱"
    assert status_cell("Failed", 1.0, "extract_timeout").plain == "Failed extract_timeout"
    assert status_cell("Indexed", 1.0, None).plain == "Indexed"
    assert [human_size(n) for n in (812, 3_500, 1_300_000)] == ["812 B", "3.4 KiB", "1.2 MiB"]


def test_times_are_short_today_and_dated_before(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        now = 1_773_480_600.0  # 2026-03-14 09:30 UTC
        assert short_time(now - 3600, now) == "08:30"
        assert short_time(now - 3 * 86400, now) == "03-11"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_throughput_is_a_rate_over_the_window():
    rate = Throughput(window_s=10)
    assert rate.per_second() == 0.0
    for second in range(21):
        rate.record(float(second), second * 3)
    assert rate.per_second() == 3.0


def test_the_header_fits_80_columns_and_says_who_indexes():
    queue = AdmissionChanged(queue_depth=120, queue_capacity=256, in_flight=8, accepted=1000, rejected=12, paused_for_s=0)
    view = IngestView("node", "DEFAULT", queue, documents_per_s=0.25, chunks_per_s=3.1, eta_s=160, waiting=40)
    at_80 = header_text(view, width=80 - 8 - 1 - 2).plain  # beside the sparkline and its margins
    assert at_80 == "● node DEFAULT │ queue 120/256 run 8 │ 0.25 doc/s 3.1 ch/s │ ETA 2:40"
    wide = header_text(dataclasses.replace(view, mode="client"), width=120 - 11).plain
    assert "○ client" in wide and "in flight 8" in wide and "1000 accepted, 12 rejected" in wide
    assert wide.endswith("│ ETA 2:40")
    assert "added documents wait as Pending" in header_text(IngestView("viewer", "DEFAULT", None), width=69).plain


def test_a_narrow_header_keeps_its_rates_and_eta_and_cuts_the_collection_name_last():
    queue = AdmissionChanged(queue_depth=120, queue_capacity=256, in_flight=8, accepted=1000, rejected=12, paused_for_s=0)
    view = IngestView("node", "OPERATIONS-RUNBOOKS", queue, documents_per_s=0.25, chunks_per_s=3.1, eta_s=None,
                      waiting=40)
    at_60 = header_text(view, width=60 - 2).plain  # the sparkline gives way below 70 columns
    assert len(at_60) <= 58
    assert "0.25 doc/s" in at_60 and at_60.endswith("│ ETA estimating…") and "120/256 run 8" in at_60
    tiny = header_text(view, width=52).plain
    assert len(tiny) <= 52 and "0.25 doc/s" in tiny and "ETA estimating…" in tiny and "OP…" in tiny


def test_at_the_start_of_a_batch_the_rate_is_over_the_time_elapsed_and_the_eta_waits():
    rate = Throughput(window_s=30)
    for second in range(30):  # idle before the batch: nothing finishes
        rate.record(float(second), 0)
    rate.start(30.0, 0)  # the batch starts
    rate.record(31.0, 1)
    assert rate.eta(60) is None  # one document in one second says little: "estimating…"
    rate.record(35.0, 5)
    assert rate.per_second() == 1.0  # 5 documents in the 5 s since the start, not 5 in 30 s
    assert rate.eta(60) == 60.0
    idle_diluted = Throughput(window_s=30)
    for second in range(30):
        idle_diluted.record(float(second), 0)
    idle_diluted.record(35.0, 5)
    assert idle_diluted.per_second() < 0.2  # what the header said before: an ETA six times too long


def test_a_slow_pace_does_not_read_as_zero_and_the_sparkline_keeps_its_scale():
    rate = Throughput()
    for second in range(0, 31, 5):  # one document every five seconds
        rate.record(float(second), second // 5)
    assert rate_text(rate.per_second()) == "0.20/s"
    steady = spark_text([76.0] * 8, 256.0)
    assert steady == "▂" * 8  # a steady queue of 76 of 256 reads as such, not as empty or full
    assert spark_text([0.0, 1.0, 256.0], 256.0) == " ▁█"


def test_ascii_is_wanted_under_a_c_locale_or_the_linux_console_and_keeps_every_cell():
    assert wants_ascii({"LANG": "C"}, utf8_mode=False)
    assert wants_ascii({"LANG": "C.UTF-8"}, utf8_mode=True)  # Python started under C: it coerced LC_CTYPE itself
    assert wants_ascii({"LANG": "en_US.UTF-8", "TERM": "linux"}, utf8_mode=False)
    assert wants_ascii({"LC_ALL": "POSIX", "LANG": "en_US.UTF-8"}, utf8_mode=False)
    assert not wants_ascii({"LANG": "en_US.UTF-8", "TERM": "xterm-256color"}, utf8_mode=False)
    assert not wants_ascii({"LC_CTYPE": "de_DE.utf8", "TERM": "tmux-256color"}, utf8_mode=False)
    drawn = "╭─ Keys ─╮│● node │ Embedding ▰▰▱▱▱ · café 東京 …"
    flat = ascii_text(drawn)
    assert flat.isascii() and cell_len(flat) == cell_len(drawn)
    assert flat == "+- Keys -+|* node | Embedding ##--- . cafe ???? ~"
