"""Live progress of a running pipeline, one update per round (rich).

``hoodline run`` and ``hoodline demo`` hand :meth:`RoundProgress.on_round` to the pipeline as its
``on_round`` callback::

    on_round, finish = make_progress_callback(console)
    try:
        run_pipeline(config, on_round=on_round)
    finally:
        finish()

On a terminal it keeps a live panel up to date: totals, the latest rounds (records read / written
/ deleted, error records, files written, records per second, read / write / commit seconds,
retries) and the lag per topic-partition after the latest round. When the console is not a
terminal (logs, CI, pipes) it prints one plain line per round instead.

Rounds are reported from the pipeline's driver thread; the renderer only reads the report's
attributes (any object with the :class:`RoundLike` attributes works) and never blocks the round
for more than rendering it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

__all__ = ["ProgressTotals", "RoundLike", "RoundProgress", "format_round_line",
           "make_progress_callback"]

#: Most topic-partitions listed in the lag table (the rest are summed in one line).
MAX_LAG_ROWS = 12


class RoundLike(Protocol):
    """What the renderer reads from a round report (:class:`hoodline.pipeline.api.RoundReport`)."""

    @property
    def round_id(self) -> int: ...
    @property
    def instant(self) -> str | None: ...
    @property
    def committed(self) -> bool: ...
    @property
    def records_read(self) -> int: ...
    @property
    def records_written(self) -> int: ...
    @property
    def records_deleted(self) -> int: ...
    @property
    def error_records(self) -> int: ...
    @property
    def files_written(self) -> int: ...
    @property
    def read_seconds(self) -> float: ...
    @property
    def write_seconds(self) -> float: ...
    @property
    def commit_seconds(self) -> float: ...
    @property
    def services_seconds(self) -> float: ...
    @property
    def duration_seconds(self) -> float: ...
    @property
    def records_per_second(self) -> float: ...
    @property
    def lag(self) -> Mapping[str, int]: ...
    @property
    def files_waiting(self) -> int | None: ...
    @property
    def retries(self) -> int: ...
    @property
    def compaction(self) -> str | None: ...


@dataclass
class ProgressTotals:
    """Sums over the rounds seen so far."""

    rounds: int = 0
    commits: int = 0
    records_read: int = 0
    records_written: int = 0
    records_deleted: int = 0
    error_records: int = 0
    files_written: int = 0
    retries: int = 0

    def add(self, r: RoundLike) -> None:
        self.rounds += 1
        self.commits += int(r.committed)
        self.records_read += r.records_read
        self.records_written += r.records_written
        self.records_deleted += r.records_deleted
        self.error_records += r.error_records
        self.files_written += r.files_written
        self.retries += r.retries


def _total_lag(lag: Mapping[str, int]) -> int:
    return sum(max(0, v) for v in lag.values())


def format_round_line(r: RoundLike) -> str:
    """One plain line for a round (non-terminal output)."""
    what = f"committed {r.instant}" if r.committed and r.instant else "no commit"
    lag = _total_lag(r.lag)
    items = sorted(r.lag.items())
    if len(items) > MAX_LAG_ROWS:  # the partitions furthest behind (by name, the lagging one
        # of 64 was hidden behind idle ones: Kafka review)
        items.sort(key=lambda kv: -max(0, kv[1]))
    parts = ", ".join(f"{tp}={v}" for tp, v in items[:MAX_LAG_ROWS])
    rest = items[MAX_LAG_ROWS:]
    more = f", +{len(rest)} more, lag {_total_lag(dict(rest))}" if rest else ""
    retry = f" retries={r.retries}" if r.retries else ""
    compacted = f"; compaction committed: {r.compaction}" if r.compaction else ""
    return (
        f"round {r.round_id}: {what}; read={r.records_read} written={r.records_written} "
        f"deleted={r.records_deleted} errors={r.error_records} files={r.files_written} "
        f"rate={r.records_per_second:.0f}/s read_s={r.read_seconds:.2f} "
        f"write_s={r.write_seconds:.2f} commit_s={r.commit_seconds:.3f} "
        # the table's services after the commit (an inline compaction, cleaning, archival):
        # without it a compacting round's total had tens of seconds in no phase (review)
        f"services_s={r.services_seconds:.2f} "
        f"total_s={r.duration_seconds:.2f} " + _behind(r, lag)
        + (f" ({parts}{more})" if parts else "") + retry + compacted
    )


def _behind(r: RoundLike, lag: int) -> str:
    """``lag=N`` (records behind, Kafka), or ``waiting=N files`` for the file source, whose
    lag in records is unknown."""
    if r.files_waiting is not None and not r.lag:
        return f"waiting={r.files_waiting} files"
    return f"lag={lag}"


#: plain output: after the first round that found nothing to read, idle rounds (every 0.2 s by
#: default) are summarised in one line at most this often instead of one line each
IDLE_LINE_INTERVAL_S = 60.0


def _idle(r: RoundLike) -> bool:
    """Nothing happened in the round: no commit, nothing read, no retry."""
    return not r.committed and r.records_read == 0 and r.error_records == 0 and not r.retries


class RoundProgress:
    """Collects round reports and shows them live (terminal) or line by line (otherwise).

    Line by line, every round that read, committed or retried gets its line; of a stretch of
    idle rounds only the first does, then one summary line per ``IDLE_LINE_INTERVAL_S``.

    ``live`` forces the mode (default: live only when ``console.is_terminal``). ``history`` is
    how many recent rounds the live table shows. :meth:`set_status` adds a free text line (the
    demo says what its producer is doing there).
    """

    def __init__(
        self,
        console: Console,
        *,
        title: str = "hoodline pipeline",
        live: bool | None = None,
        history: int = 8,
        clock: Callable[[], float] = time.monotonic,
        once: bool = False,
    ) -> None:
        self.console = console
        #: the run stops once the source is drained (``--once``): no idle stretch to summarise
        self.once = once
        self.title = title
        self.totals = ProgressTotals()
        self._recent: deque[RoundLike] = deque(maxlen=max(1, history))
        self._last: RoundLike | None = None
        self._status = ""
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._live_mode = console.is_terminal if live is None else live
        self._live: Live | None = None
        self._finished = False
        self._idle_since: float | None = None
        self._idle_rounds = 0
        #: when an idle line was last printed (None: never)
        self._idle_shown: float | None = None

    # -- callbacks --------------------------------------------------------------------------
    def on_round(self, report: RoundLike) -> None:
        """The pipeline's ``on_round`` callback."""
        with self._lock:
            self.totals.add(report)
            if self._recent and _idle(self._recent[-1]) and (
                    _idle(report) or self._recent[-1].round_id == report.round_id):
                # an idle stretch is one row (it filled the table and pushed the committed rounds
                # out), and a round that then commits replaces its idle row (it showed twice)
                self._recent[-1] = report
            else:
                self._recent.append(report)
            self._last = report
        if self._live_mode:
            self._refresh()
            return
        line = self._plain_line(report)
        if line is not None:
            self.console.print(line, highlight=False, soft_wrap=True, markup=False)

    def _plain_line(self, report: RoundLike) -> str | None:
        """The line to print for ``report`` off a terminal, or None for a quiet idle round."""
        with self._lock:
            if not _idle(report):
                self._idle_since = None
                return format_round_line(report)
            now = self._clock()
            if self._idle_since is None:
                self._idle_since, self._idle_rounds = now, 1
                if (not self.once and self._idle_shown is not None
                        and now - self._idle_shown < IDLE_LINE_INTERVAL_S):
                    # an idle line was printed lately: a source that sends bursts does not get
                    # one after each (they were ~40 % of a day's lines)
                    return None
                explain = not self.once and self._idle_shown is None
                self._idle_shown = now
                # no round number: an idle round commits nothing, and the number it carries is
                # the one the next committing round prints
                line = f"idle: no new records; {_behind(report, _total_lag(report.lag))}"
                if not explain:
                    return line
                return f"{line} (idle rounds are summarised every {IDLE_LINE_INTERVAL_S:.0f} s)"
            self._idle_rounds += 1
            if self._idle_shown is not None and now - self._idle_shown < IDLE_LINE_INTERVAL_S:
                return None
            self._idle_shown = now
            return (f"idle for {now - self._idle_since:.0f} s: {self._idle_rounds} rounds "
                    f"without new records; {_behind(report, _total_lag(report.lag))}")

    def set_status(self, text: str) -> None:
        """Show ``text`` under the title (live mode) or print it as a line (plain mode)."""
        with self._lock:
            self._status = text
        if self._live_mode:
            self._refresh()
        elif text:
            self.console.print(text, highlight=False, soft_wrap=True, markup=False)

    def finish(self) -> None:
        """Stop the live display, leaving its last state on screen. Idempotent."""
        if self._finished:
            return
        self._finished = True
        if self._live is not None:
            self._live.update(self.render(), refresh=True)
            self._live.stop()
            self._live = None

    # -- rendering --------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._finished:
            return
        if self._live is None:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4,
                              transient=False)
            self._live.start()
        else:
            self._live.update(self.render())

    def render(self) -> RenderableType:
        """The current panel: header, recent rounds, lag of the latest round."""
        with self._lock:
            totals = ProgressTotals(**vars(self.totals))
            recent = list(self._recent)
            last = self._last
            status = self._status
        elapsed = max(1e-9, self._clock() - self._started)
        header = Text.assemble(
            (self.title, "bold"),
            f"  {elapsed:.0f}s  rounds {totals.rounds}  commits {totals.commits}  "
            f"read {totals.records_read:,}  written {totals.records_written:,}  "
            f"deleted {totals.records_deleted:,}  ",
            (f"errors {totals.error_records:,}", "yellow" if totals.error_records else ""),
            f"  files {totals.files_written:,}  avg {totals.records_read / elapsed:,.0f} rec/s",
            (f"  retries {totals.retries}", "red") if totals.retries else "",
        )
        parts: list[RenderableType] = [header]
        if status:
            parts.append(Text(status, style="cyan"))
        parts.append(_rounds_table(recent, self.console.width))
        if last is not None and last.lag:
            parts.append(Text(f"lag after the latest round: {_total_lag(last.lag):,} records",
                              style="bold"))
            parts.append(_lag_table(last.lag))
        if last is not None and last.files_waiting is not None:
            parts.append(Text(f"files waiting after the latest round: {last.files_waiting:,}",
                              style="bold"))
        return Group(*parts)


#: Below this console width the rounds table drops the read/write/services seconds and
#: retries columns and shows instants as their time of day (the wide table needs 131 columns
#: for a round with a compaction; at 110 it cut cells short).
NARROW_WIDTH = 132


def _short_instant(instant: str) -> str:
    """``20261121061520123`` -> ``06:15:20.123``."""
    if len(instant) == 17 and instant.isdigit():
        return f"{instant[8:10]}:{instant[10:12]}:{instant[12:14]}.{instant[14:]}"
    return instant


def _rounds_table(recent: list[RoundLike], width: int) -> Table:
    narrow = width < NARROW_WIDTH
    table = Table(box=None, pad_edge=False, header_style="bold")
    names = ["round", "instant", "read", "written", "deleted", "errors", "files", "rec/s"]
    names += ["commit s"] if narrow else ["read s", "write s", "commit s", "services s",
                                          "retries"]
    for name in names:
        table.add_column(name, justify="left" if name == "instant" else "right", no_wrap=True)
    for r in recent:
        if r.committed and r.instant:
            instant = Text(_short_instant(r.instant) if narrow else r.instant)
        else:
            instant = Text("no commit", style="dim")
        if r.compaction:  # a compaction (of some file groups) committed after the round
            instant.append(" +compaction", style="dim")
        cells: list[str | Text] = [
            str(r.round_id), instant,
            f"{r.records_read:,}", f"{r.records_written:,}", f"{r.records_deleted:,}",
            f"[yellow]{r.error_records:,}[/yellow]" if r.error_records else "0",
            str(r.files_written), f"{r.records_per_second:,.0f}",
        ]
        if narrow:
            cells.append(f"{r.commit_seconds:.3f}")
        else:
            cells += [f"{r.read_seconds:.2f}", f"{r.write_seconds:.2f}",
                      f"{r.commit_seconds:.3f}", f"{r.services_seconds:.2f}",
                      f"[red]{r.retries}[/red]" if r.retries else "0"]
        table.add_row(*cells)
    return table


def _lag_table(lag: Mapping[str, int]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("topic-partition", no_wrap=True)
    table.add_column("records behind", justify="right")
    ordered = sorted(lag.items(), key=lambda kv: (-kv[1], kv[0]))
    for tp, behind in ordered[:MAX_LAG_ROWS]:
        table.add_row(Text(tp), f"{behind:,}")
    rest = ordered[MAX_LAG_ROWS:]
    if rest:
        table.add_row(f"+{len(rest)} more", f"{sum(v for _, v in rest):,}")
    return table


def make_progress_callback(
    console: Console, *, title: str = "hoodline pipeline", live: bool | None = None,
    once: bool = False,
) -> tuple[Callable[[RoundLike], None], Callable[[], None]]:
    """``(on_round, finish)`` for :func:`hoodline.pipeline.api.run_pipeline`; call ``finish``
    when the run ends (also on errors) to stop the live display. ``once``: the run stops when
    the source is drained."""
    progress = RoundProgress(console, title=title, live=live, once=once)
    return progress.on_round, progress.finish
