"""The live progress renderer: plain lines off a terminal, a live panel on one."""

from __future__ import annotations

import dataclasses
import io
import threading

from rich.console import Console

from hoodline.pipeline.api import RoundReport
from hoodline.pipeline.progress import (
    MAX_LAG_ROWS,
    NARROW_WIDTH,
    RoundProgress,
    format_round_line,
    make_progress_callback,
)


def _report(i: int, *, committed: bool = True, lag: dict[str, int] | None = None,
            errors: int = 0, retries: int = 0, compaction: str | None = None) -> RoundReport:
    return RoundReport(
        round_id=i, instant=f"2026112106{i:02d}00000" if committed else None,
        committed=committed, records_read=1000 * i, records_written=900 * i,
        records_deleted=50 * i, error_records=errors, files_written=4,
        read_seconds=0.5, write_seconds=1.25, commit_seconds=0.042, services_seconds=0.2,
        duration_seconds=2.0,
        records_per_second=500.0 * i,
        lag=lag if lag is not None else {"events-0": 7, "events-1": 0},
        retries=retries, compaction=compaction,
    )


def test_plain_mode_prints_one_line_per_round_with_every_metric() -> None:
    out = io.StringIO()
    on_round, finish = make_progress_callback(Console(file=out, width=300))
    on_round(_report(1, errors=3))
    on_round(_report(2, committed=False, lag={}))
    finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("round 1: committed 20261121060100000; read=1000 written=900 ")
    for part in ("deleted=50", "errors=3", "files=4", "rate=500/s", "read_s=0.50",
                 "write_s=1.25", "commit_s=0.042", "services_s=0.20",
                 "lag=7 (events-0=7, events-1=0)"):
        assert part in lines[0]
    assert lines[1].startswith("round 2: no commit; read=2000") and "lag=0" in lines[1]


def test_a_round_line_of_many_partitions_names_the_ones_furthest_behind() -> None:
    """In name order, the one partition of 64 that lagged was among the "+52 more" (Kafka
    review)."""
    lag = {f"t-{p}": 0 for p in range(64)}
    lag["t-9"] = 7005
    lag["t-40"] = 3
    line = format_round_line(_report(1, lag=lag))
    assert "lag=7008 (t-9=7005, t-40=3, t-0=0" in line
    assert f"+{64 - MAX_LAG_ROWS} more, lag 0)" in line


def test_live_mode_renders_totals_rounds_and_lag_per_partition() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None)
    progress = RoundProgress(console, title="demo", live=True)
    lag = {f"events-{p}": p * 10 for p in range(MAX_LAG_ROWS + 3)}
    progress.on_round(_report(1, lag=lag, errors=2))
    progress.on_round(_report(2, lag=lag, retries=1, compaction="20261121060200999"))
    progress.set_status("producing wave 2 of 4")
    progress.finish()
    progress.finish()  # idempotent
    text = out.getvalue()
    assert "rounds 2  commits 2  read 3,000  written 2,700  deleted 150" in text
    assert "errors 2" in text and "files 8" in text and "retries 1" in text
    assert "producing wave 2 of 4" in text
    assert "20261121060200000 +compaction" in text  # the round the writer compacted after
    assert "20261121060100000 +compaction" not in text
    total = sum(lag.values())
    assert f"lag after the latest round: {total:,} records" in text
    assert "events-14" in text  # the largest lag is listed first ...
    assert "+3 more" in text  # ... and the smallest ones are summed
    assert progress.totals.rounds == 2 and progress.totals.error_records == 2
    assert "write s" in text and "services s" in text and "retries" in text


def test_live_mode_fits_a_compacting_round_in_the_narrowest_wide_table() -> None:
    """At NARROW_WIDTH columns a round with a compaction and a few thousand records shows
    every cell whole (rounds of millions of records may still be cut)."""
    out = io.StringIO()
    console = Console(file=out, width=NARROW_WIDTH, force_terminal=True, color_system=None)
    progress = RoundProgress(console, live=True)
    progress.on_round(_report(7, retries=2, compaction="20261121060200999"))
    progress.finish()
    text = out.getvalue()
    assert "20261121060700000 +compaction" in text and "services s" in text
    assert "…" not in text  # nothing truncated


def test_live_mode_fits_an_80_column_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    progress = RoundProgress(console, live=True)
    progress.on_round(_report(7, retries=2))
    progress.finish()
    text = out.getvalue()
    assert "06:07:00.000" in text and "commit s" in text and "write s" not in text
    assert "…" not in text  # nothing truncated
    assert "retries 2" in text  # still in the totals line


def test_plain_mode_summarises_idle_rounds_instead_of_a_line_each() -> None:
    out = io.StringIO()
    now = [0.0]
    progress = RoundProgress(Console(file=out, width=300), live=False, clock=lambda: now[0])
    idle = RoundReport(
        round_id=5, instant=None, committed=False, records_read=0, records_written=0,
        records_deleted=0, error_records=0, files_written=0, read_seconds=0.0,
        write_seconds=0.0, commit_seconds=0.0, duration_seconds=0.001,
        records_per_second=0.0, lag={"events-0": 0}, retries=0,
    )
    progress.on_round(_report(4))
    for _ in range(300):  # 60 s of idle rounds at 0.2 s
        progress.on_round(idle)
        now[0] += 0.2
    progress.on_round(idle)  # 60 s after the first idle round
    # bursts of records: a line each, but no idle line after each (an idle line was printed
    # less than 60 s ago); their idle stretches are summarised as one again after 60 s
    for round_id in (6, 7, 8):
        progress.on_round(_report(round_id))
        progress.on_round(idle)
        now[0] += 1.0
    now[0] += 60.0
    progress.on_round(idle)
    lines = out.getvalue().splitlines()
    assert len(lines) == 7, lines
    assert lines[0].startswith("round 4: committed")
    # idle rounds carry no number (theirs is the next committing round's)
    assert lines[1] == "idle: no new records; lag=0 (idle rounds are summarised every 60 s)"
    assert lines[2] == "idle for 60 s: 301 rounds without new records; lag=0"
    assert [line.split(":")[0] for line in lines[3:6]] == ["round 6", "round 7", "round 8"]
    assert lines[6] == "idle for 61 s: 2 rounds without new records; lag=0"
    assert not any(line.startswith("round 5") for line in lines)
    assert progress.totals.rounds == 309  # every round still counted
    # a run that stops once drained (--once) has no idle stretch to summarise
    once_out = io.StringIO()
    once = RoundProgress(Console(file=once_out, width=300), live=False, once=True)
    once.on_round(idle)
    assert once_out.getvalue().splitlines() == ["idle: no new records; lag=0"]
    # the file source has no lag in records: its idle lines say how many files wait (they
    # said lag=0, as its round lines did before; config review)
    files_out = io.StringIO()
    files = RoundProgress(Console(file=files_out, width=300), live=False, once=True)
    files.on_round(dataclasses.replace(idle, lag={}, files_waiting=0))
    assert files_out.getvalue().splitlines() == ["idle: no new records; waiting=0 files"]


def test_concurrent_rounds_and_status_updates_are_all_counted() -> None:
    out = io.StringIO()
    progress = RoundProgress(Console(file=out, width=200), live=False)
    threads = [threading.Thread(target=lambda i=i: progress.on_round(_report(i)))
               for i in range(1, 21)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert progress.totals.rounds == 20
    assert progress.totals.records_read == sum(1000 * i for i in range(1, 21))
    assert len(out.getvalue().splitlines()) == 20
    assert format_round_line(_report(3)) in out.getvalue()


def test_an_idle_stretch_is_one_row_of_the_panel_and_its_round_one_row() -> None:
    """Idle rounds each added a 'no commit' row carrying the next round's number: a few idle
    seconds pushed every committed round out of the panel, and the round that then committed
    showed twice (as 'no commit' and with its instant)."""

    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system=None)
    progress = RoundProgress(console, title="t", live=False)
    idle = dataclasses.replace(_report(3, committed=False, lag={}), records_read=0,
                               records_written=0, records_deleted=0)
    progress.on_round(_report(1))
    progress.on_round(_report(2))
    for _ in range(8):
        progress.on_round(idle)
    rows = [(r.round_id, r.committed) for r in progress._recent]
    assert rows == [(1, True), (2, True), (3, False)]
    progress.on_round(_report(3))  # round 3 commits: it replaces its idle row
    assert [(r.round_id, r.committed) for r in progress._recent] == [(1, True), (2, True),
                                                                     (3, True)]
    assert progress.totals.rounds == 11
