"""Command-line interface: ``hoodline run|demo|table ...``.

Every command prints errors of the :class:`~hoodline.errors.HoodlineError` hierarchy, and
errors the operating system raised (a path, a permission, a full disk), as one clear line (exit
code 1) instead of a traceback; ``--debug`` shows the traceback. Log records of
hoodline (and of the Kafka client, routed through Python logging) go to stderr as
``time LEVEL logger: message`` lines at ``--log-level`` (default warning), printed literally and
kept apart from the live progress display.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from hoodline import __version__
from hoodline.errors import ConfigError, HoodlineError, SparkRuntimeError
from hoodline.log_format import plain_handler

if TYPE_CHECKING:
    from hoodline.pipeline.checkpoint import PipelineCheckpoint
    from hoodline.pipeline.config import PipelineConfig
    from hoodline.pipeline.metrics import PipelineMetrics
    from hoodline.pipeline.report import RoundReport, RunSummary
    from hoodline.table.fs_view import FileSystemView
    from hoodline.table.properties import TableConfig
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import WriteClient

app = typer.Typer(
    name="hoodline",
    help="Exactly-once streaming ingestion from Kafka and files into Apache Hudi tables.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
table_app = typer.Typer(help="Inspect and repair a Hudi table.", no_args_is_help=True,
                        rich_markup_mode=None)
app.add_typer(table_app, name="table")

# Piped output (tests, `| less`, CI logs) gets a wide fixed width instead of rich's 80 columns
# for tables, and lines are never wrapped (a log line split in two breaks whoever parses it).
console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=not sys.stdout.isatty())
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160,
                      soft_wrap=not sys.stderr.isatty())

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
_DEBUG = {"on": os.environ.get("HOODLINE_DEBUG", "") not in ("", "0")}


def _friendly_errors(fn: F) -> F:
    """Turn hoodline errors into one red line and exit code 1 (a closed output pipe into a
    quiet exit)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            # the reader of our output went away (`hoodline table files T | head`): end
            # quietly, as a tool killed by SIGPIPE does (128 + 13), with nothing more written
            # to that pipe, also not at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(141) from None
        except (HoodlineError, OSError) as exc:
            if _DEBUG["on"]:
                raise
            # the message is not markup: '[schema]' or a value from the data must print as is
            text = str(exc)
            if isinstance(exc, OSError) and not isinstance(exc, HoodlineError):
                # the operating system refused something (a path, a port, the disk is full)
                text += " (run with --debug for the traceback)"
            message = Text.assemble(("error:", "bold red"), " ", text)
            err_console.print(message, highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


class LogLevel(StrEnum):
    """``--log-level`` (written in any case)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def configure_logging(level: LogLevel) -> None:
    """hoodline's log records to stderr: on a terminal through the console the progress
    display uses; otherwise (logs, CI) as plain lines, one per record, never wrapped."""
    from rich.logging import RichHandler

    handler: logging.Handler
    if err_console.is_terminal:
        handler = RichHandler(console=err_console, show_path=False, markup=False,
                              rich_tracebacks=False, log_time_format="%H:%M:%S")
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = plain_handler()
    root = logging.getLogger("hoodline")
    root.handlers[:] = [handler]
    root.setLevel(level.value.upper())
    root.propagate = False
    logging.getLogger("py4j").setLevel(logging.ERROR)  # py4j's own chatter is never useful


def _print_version(given: bool) -> None:
    if given:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    _version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the hoodline version and exit.")] = False,
    log_level: Annotated[
        LogLevel,
        typer.Option("--log-level", case_sensitive=False,
                     help="Least severe log records shown on stderr (info: rounds rolled back, "
                          "partitions discovered, retries; debug: everything)."),
    ] = LogLevel.WARNING,
) -> None:
    if debug:
        _DEBUG["on"] = True
    configure_logging(LogLevel.DEBUG if debug and log_level is LogLevel.WARNING else log_level)


@app.command()
def version() -> None:
    """Print the hoodline version."""
    typer.echo(__version__)


def _count(n: int, noun: str) -> str:
    """``1 reader``, ``2 readers``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run_banner(cfg: PipelineConfig, once: bool) -> str:
    """The first line ``hoodline run`` prints: what it connects to what."""
    return (
        f"hoodline: {cfg.source.type} -> {cfg.table.path} ({cfg.table.operation.config_text}, "
        f"{_count(cfg.runtime.reader_parallelism, 'reader')}, {cfg.runtime.master})"
        f"{' --once' if once else ''}"
    )


@app.command()
@_friendly_errors
def run(
    config: Annotated[Path, typer.Argument(help="Pipeline configuration (TOML).",
                                           metavar="CONFIG")],
    once: Annotated[
        bool, typer.Option("--once", help="Drain what the source holds now, then stop.")
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", min=0, max=65535,
                     help="Serve Prometheus metrics on this port (/metrics) while running; "
                     "names in the README's 'Metrics' section."),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics server listens on.")
    ] = "0.0.0.0",
) -> None:
    """Run a pipeline: Kafka or files -> Hudi table, one commit per round, exactly once.

    Continuous unless --once. Ctrl-C or SIGTERM (docker stop, Kubernetes, systemd) stops
    cleanly after the current round (a second one aborts; the next start rolls back the
    unfinished round)."""
    import signal
    import threading

    from hoodline.pipeline.api import Pipeline
    from hoodline.pipeline.config import load_config
    from hoodline.pipeline.driver import check_start
    from hoodline.pipeline.outage import wait_out_outage
    from hoodline.pipeline.plugins import load_plugin
    from hoodline.pipeline.progress import make_progress_callback
    from hoodline.pipeline.target import open_target_table
    from hoodline.storage.paths import retry_timeout_s

    cfg = load_config(config)
    _check_metrics_port(metrics_port, metrics_host)
    stop = threading.Event()

    def _interrupt(signum: int, frame: object) -> None:
        if stop.is_set():
            _abort_now(128 + signum)
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        err_console.print(f"stopping after the current round ({name}; again to abort)")
        stop.set()

    err_console.print(run_banner(cfg, once), highlight=False, markup=False)
    # every setting, secrets masked (--log-level info): what the run was given
    logging.getLogger("hoodline.cli").info("configuration: %s", ", ".join(
        f"{k} = {v!r}" for k, v in cfg.describe().items()))
    def patiently(action: Callable[[], T]) -> T:
        """An object store that does not answer is waited out as a running pipeline waits."""
        def sleep(seconds: float) -> bool:
            time.sleep(seconds)
            return False

        done = wait_out_outage(action, what="starting", patience_s=retry_timeout_s(
            cfg.table.storage_options), backoff_s=cfg.runtime.backoff_s,
            clock=time.monotonic, wait=sleep)
        assert done is not None  # sleep never asks to stop
        return done

    # the source and the table before Spark: a missing source directory, a path that cannot
    # hold the table or a table that does not match the pipeline file fails in a moment instead
    # of after Spark's start (the source first: a run that cannot read creates no table)
    def preflight() -> bool:
        load_plugin(cfg).preflight()
        return True

    patiently(preflight)
    _check_spark_start(cfg.runtime.master)
    table = patiently(lambda: open_target_table(cfg))

    def java_writers() -> bool:  # a start refused from another writer's positions: now too
        check_start(cfg, table)
        return True

    patiently(java_writers)
    _announce_class_cache(cfg.runtime.jvm_class_cache)
    metrics = _start_metrics(cfg, table.config.name, metrics_port, metrics_host)
    if metrics is not None:
        metrics.start_from(table)  # a restart reports the table's last commit at once
    previous: Any = None
    previous_term: Any = None
    try:
        with Pipeline(cfg) as pipeline:
            pipeline.engine  # noqa: B018 - start Spark first: it installs its own SIGINT handler
            # ours until Spark has stopped too: a second Ctrl-C while it shuts down aborts
            previous = signal.signal(signal.SIGINT, _interrupt)
            previous_term = signal.signal(signal.SIGTERM, _interrupt)
            progress, finish = make_progress_callback(console, once=once)

            def on_round(report: RoundReport) -> None:
                if metrics is not None:
                    metrics.observe_round(report)
                progress(report)

            try:
                summary = pipeline.run(
                    once=once, on_round=on_round, stop=stop,
                    on_failure=None if metrics is None else metrics.observe_failure,
                )
            finally:
                finish()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        if metrics is not None:
            metrics.close()
    console.print(summary_line(summary, cfg.errors.table_path), highlight=False, markup=False)


def summary_line(summary: RunSummary, error_table: str) -> str:
    """The last line of ``hoodline run``; where the error records are when there are some."""
    last = (f"last instant {summary.last_instant}" if summary.last_instant
            else "nothing new to commit")
    errors = _count(summary.error_records, "error record")
    if summary.error_records:
        errors += f" (in the error table {error_table})"
    # rounds that found nothing to read are rounds too (a drain polls until it is sure):
    # "30 rounds, 1 commit" read as 30 attempts at something (walkthrough review)
    idle = summary.rounds - summary.commits
    rounds = (f"{_count(summary.rounds, 'round')} ({summary.commits} committed"
              f"{f', {idle} with nothing new' if idle > 0 else ''})")
    return (
        f"{summary.stopped_because}: {rounds}, {_count(summary.records_read, 'record')} read, "
        f"{summary.records_written} written, {errors}, {last}"
    )


def _abort_now(code: int) -> NoReturn:
    """A second Ctrl-C (or SIGTERM): end the process at once with ``code`` (128 + the signal,
    as a shell reports it), as a crash would, without a wall of
    tracebacks from the threads, the JVM and the Python workers it interrupts. The unfinished
    round is left as a crash leaves it; the next start rolls it back (exactly once holds)."""
    try:
        err_console.print("aborting now: the unfinished round is rolled back when the "
                          "pipeline starts again")
        if "pyspark" in sys.modules:
            from hoodline.spark.session import kill_gateway_jvm

            kill_gateway_jvm()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:  # whatever failed above (a reentrant write in a signal handler), exit now
        os._exit(code)


def _check_metrics_port(port: int | None, host: str) -> None:
    """Refuse a ``--metrics-port`` something listens on before anything else happens (the
    table was created first, then the run refused; metrics review)."""
    if not port:
        return
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise _metrics_port_refused(port, host, exc) from None


def _metrics_port_refused(port: int, host: str, exc: OSError) -> typer.BadParameter:
    return typer.BadParameter(
        f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; pick another "
        "--metrics-port", param_hint="--metrics-port")


def _start_metrics(
    cfg: PipelineConfig, table_name: str, port: int | None, host: str
) -> PipelineMetrics | None:
    """The metrics server of ``--metrics-port`` (None without it), its series labelled with the
    table's stored name; says where it listens."""
    if port is None:
        return None
    from hoodline.pipeline.metrics import PipelineMetrics

    metrics = PipelineMetrics(table_name, str(cfg.source.type))
    try:
        bound = metrics.serve(port, host)
    except OSError as exc:  # taken since the start's check
        raise _metrics_port_refused(port, host, exc) from None
    err_console.print(f"metrics: http://{host}:{bound}/metrics", highlight=False, markup=False)
    return metrics


def _announce_class_cache(enabled: bool) -> None:
    """Say so before the one-time build of the JVM class cache (a silent 30 s pause would look
    like a hang)."""
    if not enabled:
        return
    from hoodline.spark.class_cache import archive_path

    path = archive_path()
    if path is not None and not path.is_file():
        err_console.print(
            f"preparing the JVM class cache once for this installation (about 30 s; later "
            f"starts are faster): {path}", highlight=False, markup=False)


#: events the stream demo produces unless ``--records`` says otherwise
DEMO_RECORDS = 20_000


@app.command()
@_friendly_errors
def demo(
    path: Annotated[
        Path | None,
        typer.Option(help="Where to create the demo output (default: a fresh temporary folder, "
                     "removed at the end unless --keep)."),
    ] = None,
    records: Annotated[
        int, typer.Option(help="Valid events to produce (in 4 waves; plus 8 malformed); the "
                          "stream demo only.", min=40)
    ] = DEMO_RECORDS,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the temporary output folder (table, error "
                           "table, pipeline.toml; the table demo: its table).")
    ] = False,
    table_only: Annotated[
        bool, typer.Option("--table-only", help="Run the table-layer demo instead (no broker, "
                           "no Spark): insert, upsert, delete through the write client.")
    ] = False,
) -> None:
    """Run the end-to-end demo and verify the result with hudi-rs.

    Starts the bundled Kafka-compatible broker and local Spark, produces JSON events (inserts,
    updates, deletes, tombstones, a few malformed records) in waves while the pipeline runs with
    live progress, then checks the table and the error table against what was produced. Exit
    code 0 only if everything matches."""
    if table_only:
        from hoodline.demo.table_demo import run_table_demo

        if records != DEMO_RECORDS:
            raise typer.BadParameter(
                "the table demo writes fixed batches (20,000 inserts, 5,000 upserts, 1,000 "
                "deletes); --records is for the stream demo", param_hint="--records")
        code = run_table_demo(str(path) if path is not None else None, console, keep=keep)
        raise typer.Exit(code)
    from hoodline.demo.stream_demo import run_stream_demo

    _announce_class_cache(True)
    result = run_stream_demo(str(path) if path is not None else None, console,
                             records=records, keep=keep)
    raise typer.Exit(0 if result.ok else 1)


# --- table inspection --------------------------------------------------------------------------


def _key_generator_text(cfg: TableConfig) -> str:
    from hoodline.table.keygen.timestamp import PREFIX as TIMESTAMP_PREFIX
    from hoodline.table.keygen.timestamp import timestamp_settings

    text = f"{cfg.key_generator_class.rsplit('.', 1)[-1]}"
    settings = timestamp_settings(cfg.extra)
    if settings:
        text += " (" + ", ".join(f"{k.removeprefix(TIMESTAMP_PREFIX)}={v}"
                                 for k, v in sorted(settings.items())) + ")"
    return text


def _fmt_ts(ts: str) -> str:
    try:
        return datetime.strptime(ts, "%Y%m%d%H%M%S%f").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except ValueError:
        return ts


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _add_row(table: RichTable, *cells: str) -> None:
    """A row of literal text: table names, partition paths and file names are data, not markup."""
    table.add_row(*(Text(c) for c in cells))


TablePath = Annotated[str, typer.Argument(
    help="Base path of the Hudi table: a local path or an object store URL (s3://bucket/t, "
    "gs://..., abfs://...; credentials from the provider's standard environment).",
    metavar="PATH",
)]


@table_app.command("show")
@_friendly_errors
def table_show(path: TablePath) -> None:
    """Show the table's configuration and a summary of its current state."""
    from hoodline.config.arrow_types import format_type
    from hoodline.pipeline.driver import read_checkpoint
    from hoodline.storage.ops import list_names
    from hoodline.table.archive import ARCHIVE_FOLDER
    from hoodline.table.archive_merge import archive_version
    from hoodline.table.metadata_table import METADATA_FOLDER
    from hoodline.table.properties import IndexType
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import table_data_schema

    table = HudiTable.open(path)
    cfg = table.config
    view = table.fs_view()
    slices = view.latest_file_slices()
    _warn_damage(table, view)
    last = table.timeline.last_completed_commit()
    grid = RichTable(show_header=False, box=None)
    grid.add_column(style="bold")
    grid.add_column()
    _add_row(grid, "path", str(table.base_path))
    _add_row(grid, "name", cfg.name)
    _add_row(grid, "type", cfg.table_type)
    _add_row(grid, "record key", ", ".join(cfg.record_key_fields))
    _add_row(grid, "partition fields", (cfg.custom_partition_spec if cfg.partition_kinds else
                                        ", ".join(cfg.partition_fields)) or "(none)")
    _add_row(grid, "key generator", _key_generator_text(cfg))
    _add_row(grid, "precombine field", cfg.precombine_field or "(none)")
    _add_row(grid, "index", f"{cfg.index_type}" + (
        f" ({cfg.bucket_count} buckets)" if cfg.index_type is IndexType.BUCKET else ""))
    schema = table_data_schema(table)
    _add_row(grid, "columns", ", ".join(f"{f.name} {format_type(f.type)}" for f in schema)
             if schema is not None else "(none: no commit yet)")
    _add_row(grid, "completed commits", str(len(table.timeline.completed_commits())))
    checkpoint = read_checkpoint(table)
    if checkpoint is not None:
        _add_row(grid, "pipeline checkpoint", _checkpoint_text(checkpoint))
    pending = ", ".join(i.describe() for i in table.timeline.pending())
    _add_row(grid, "pending instants", pending or "none")
    _add_row(grid, "last commit", _fmt_ts(last.timestamp) if last else "(none)")
    archived = table.meta_path / ARCHIVE_FOLDER
    files = [n for n in list_names(archived) if archive_version(n) is not None]
    start = table.timeline.start()
    _add_row(grid, "archived", f"{len(files)} archive file(s); the active timeline starts at "
             f"{_fmt_ts(start)}" if files and start else "none")
    _add_row(grid, "metadata table", "present (hoodline writers remove it: they do not maintain "
             "it)" if (table.meta_path / METADATA_FOLDER).exists() else "none")
    _add_row(grid, "timeline timezone", cfg.timeline_timezone.value)
    _add_row(grid, "partitions", str(len(view.partitions())))
    _add_row(grid, "file groups", str(len(slices)))
    base_bytes = sum(s.file_size for s in slices)
    log_bytes = sum(s.log_bytes for s in slices)
    _add_row(grid, "size", _human_bytes(base_bytes + log_bytes) + (
        f" (base files {_human_bytes(base_bytes)}, log files {_human_bytes(log_bytes)})"
        if cfg.merge_on_read else ""))
    if cfg.merge_on_read:
        logs = sum(len(s.log_files) for s in slices)
        with_logs = sum(1 for s in slices if s.log_files)
        _add_row(grid, "log files", f"{logs} in {_count(with_logs, 'slice')}")
        # compaction takes slices one by one (those with the most logs first): the most log
        # files in one slice says how many writes wait for a merge, not the last compaction
        _add_row(grid, "uncompacted writes", "none" if not logs else
                 f"up to {_count(max(len(s.log_files) for s in slices), 'log file')} per "
                 "slice")
    console.print(grid)


def _warn_damage(table: HudiTable, view: FileSystemView) -> None:
    """Warn about committed files of the latest slices that are missing or cut short (the
    table stays readable: this is how one inspects it)."""
    from hoodline.table.integrity import accepted_losses, find_damage

    damage = find_damage(view, accepted_losses(table.meta_path))
    if damage:  # a writer's commit and clean between reading the timeline and the listing
        # make an older version look missing (damaged-table re-review): look once more
        damage = find_damage(table.fs_view(), accepted_losses(table.meta_path))
    for d in damage:
        err_console.print(f"warning: {d.describe()}", markup=False, highlight=False)
    if damage:
        err_console.print(
            "warning: these file groups show an older version or a torn log, and writers "
            "refuse the table: restore the files, or accept each loss with "
            f"`hoodline table accept-loss {table.base_path} FILE` (README: 'Inspecting and "
            "repairing a table')", markup=False, highlight=False)


#: partitions whose positions `table show` lists before it says how many more there are
SHOWN_POSITIONS = 20


def _checkpoint_text(checkpoint: PipelineCheckpoint) -> str:
    """The round a table's pipeline checkpoint is of, its source and -- Kafka -- where each
    partition goes on (what a new table's scan.startup.specific-offsets would take)."""
    text = (f"round {checkpoint.round_id} of source {checkpoint.source_type} "
            f"({checkpoint.source_identity})")
    if checkpoint.source_type != "kafka":
        return text
    from hoodline.connectors.kafka.serde import checkpoint_positions

    positions = [f"{tp.topic}:{tp.partition}:{offset}"
                 for tp, offset in checkpoint_positions(checkpoint.source).items()]
    more = len(positions) - SHOWN_POSITIONS
    shown = ", ".join(positions[:SHOWN_POSITIONS])
    return (f"{text}; next offsets (topic:partition:offset) {shown}"
            + (f" and {more} more" if more > 0 else ""))


def _check_spark_start(master: str) -> None:
    """No Java (or an unusable one), or a standalone master that does not answer, stops
    before the table is created, in one line."""
    from hoodline.spark.java import start_problem

    problem = start_problem(master)
    if problem is not None:
        raise SparkRuntimeError(problem)


@table_app.command("commits")
@_friendly_errors
def table_commits(
    path: TablePath,
    limit: Annotated[
        int, typer.Option(help="Show at most this many newest instants (0: all).", min=0)
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List the timeline: every instant with its state, and write statistics of commits.

    'rows written' (JSON: records) counts every row of the files a commit wrote, as Hudi's
    numWrites: a copy-on-write commit rewrites whole file groups, so it includes their
    untouched rows; inserts, updates and deletes count the commit's own records."""
    from hoodline.table.instant import State
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    instants = table.timeline.instants()[-limit:] if limit > 0 else table.timeline.instants()
    rows: list[dict[str, Any]] = []
    for inst in instants:
        row: dict[str, Any] = {
            "instant": inst.timestamp,
            "action": inst.action,
            "state": inst.state.name,
        }
        if inst.state is State.COMPLETED and inst.action in (
                "commit", "deltacommit", "replacecommit"):
            meta = table.timeline.read_commit_metadata(inst)
            stats = meta.write_stats()
            row.update(
                operation=meta.operation_type,
                files=len(stats),
                records=sum(s.num_writes for s in stats),
                inserts=sum(s.num_inserts for s in stats),
                updates=sum(s.num_update_writes for s in stats),
                deletes=sum(s.num_deletes for s in stats),
                bytes=sum(s.total_write_bytes for s in stats),
            )
        rows.append(row)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    out = RichTable(title=Text(f"timeline of {table.config.name}"))
    for col in ("instant", "action", "state", "operation", "files", "rows written",
                "inserts", "updates", "deletes", "written"):
        out.add_column(col, justify="right" if col in (
            "files", "rows written", "inserts", "updates", "deletes", "written") else "left")
    for row in rows:
        _add_row(
            out,
            row["instant"], row["action"], row["state"],
            str(row.get("operation", "")), str(row.get("files", "")), str(row.get("records", "")),
            str(row.get("inserts", "")), str(row.get("updates", "")), str(row.get("deletes", "")),
            _human_bytes(row["bytes"]) if "bytes" in row else "",
        )
    console.print(out)


@table_app.command("files")
@_friendly_errors
def table_files(
    path: TablePath,
    as_of: Annotated[
        str | None, typer.Option(
            "--as-of", help="Time to time-travel to: an instant time (17 digits), "
            "yyyyMMddHHmmss, yyyy-MM-dd or 'yyyy-MM-dd HH:mm:ss[.SSS]' (the table's timeline "
            "timezone).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    partition: Annotated[
        str | None, typer.Option(
            "--partition", help="Only the partitions whose path matches this glob, e.g. "
            "'day=2024-03-*' or 'day=2024-03-01/region=eu' ('*' also matches '/').")
    ] = None,
) -> None:
    """List the latest committed file slices (what a snapshot query reads)."""
    from hoodline.errors import TableError
    from hoodline.table import read
    from hoodline.table.instant import query_instant
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    commits = table.timeline.completed_commits()
    if as_of is not None:
        try:
            as_of = query_instant(as_of, "--as-of")
        except TableError as exc:
            example = commits[-1].timestamp if commits else "20261122151834238"
            raise ConfigError(f"{exc}, e.g. {example}; `hoodline table commits {path}` lists "
                              "the table's instants") from None
    slices = read.file_slices(table, as_of)
    if as_of is None:
        _warn_damage(table, table.fs_view())
    if partition is not None:
        import fnmatch

        every = len(slices)
        slices = [s for s in slices if fnmatch.fnmatchcase(s.partition_path, partition)]
        if not slices:
            err_console.print(f"note: no partition of the table's {every} file slices matches "
                              f"--partition {partition!r}", markup=False, highlight=False)
    if as_of is not None and not any(c.timestamp <= as_of for c in commits):
        first = f"its first commit is {commits[0].timestamp}" if commits else "it has no commit"
        err_console.print(
            f"note: nothing was committed at or before {as_of} ({first}); "
            f"`hoodline table commits {path}` lists the table's instants",
            markup=False,
            highlight=False,
        )
    if as_json:
        for s in slices:
            typer.echo(json.dumps({
                "partition": s.partition_path, "file_id": s.file_id,
                "base_instant": s.base_instant, "file": s.base_file, "bytes": s.file_size,
                "log_files": list(s.log_files), "log_bytes": s.log_bytes,
            }))
        return
    title = f"file slices of {table.config.name}" + (f" as of {as_of}" if as_of else "")
    out = RichTable(title=Text(title))
    columns = ("partition", "file id", "base instant", "file", "size", "log files", "log size")
    for col in columns:
        # names wrap rather than end in an ellipsis: a narrow or piped output keeps them whole
        out.add_column(col, justify="right" if col.endswith("size") else "left",
                       overflow="ellipsis" if col.endswith("size") else "fold")
    for s in slices:
        # a log file's name repeats the file id and base instant of its row: the rest tells
        # the files apart (".log.<version>_<write token>"); --json gives the full names
        head = f".{s.file_id}_{s.base_instant}"
        logs = "\n".join(name.removeprefix(head) for name in map(os.path.basename, s.log_files))
        logs = logs or "-"
        _add_row(out, s.partition_path or "(root)", s.file_id, s.base_instant,
                 s.base_file or "(log only)", _human_bytes(s.file_size), logs,
                 _human_bytes(s.log_bytes) if s.log_files else "-")
    console.print(out)
    log_bytes = sum(s.log_bytes for s in slices)
    console.print(
        f"{_count(len(slices), 'file slice')}, {_human_bytes(sum(s.file_size for s in slices))}"
        + (f" in base files, {_human_bytes(log_bytes)} in log files" if log_bytes else ""),
        markup=False,
    )


@table_app.command("rollback")
@_friendly_errors
def table_rollback(
    path: TablePath,
    instant: Annotated[
        str | None,
        typer.Option(help="Roll back only this instant (default: every pending instant); "
                     "also a pending compaction whose plan is unreadable, or the table's "
                     "newest commit when its file is damaged."),
    ] = None,
) -> None:
    """Roll back pending (requested/inflight) instants left by a failed or killed writer.

    With --instant, also a pending compaction whose plan file is damaged (it cannot run), or
    the newest completed commit when its file cannot be read (its files are removed; a
    pipeline writes that round again).
    Takes the table's writer lock, so it refuses to run while a live writer is writing."""
    from hoodline.errors import TimelineError
    from hoodline.table.compaction_plan import read_plan
    from hoodline.table.instant import COMPACTION
    from hoodline.table.lock import WriterLock
    from hoodline.table.metadata_table import remove_metadata_table
    from hoodline.table.rollback import describe_repair, rollback_instant, rollback_pending
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    with WriterLock(table, owner="hoodline table rollback"):
        remove_metadata_table(table)  # a rollback changes the timeline as a write does
        if instant is None:
            done = rollback_pending(table)
        else:
            target = table.timeline.find(instant)
            if target is None:
                raise TimelineError(
                    f"no instant {instant!r} on the timeline of '{table.base_path}'; "
                    "see `hoodline table commits`"
                )
            done = [rollback_instant(table, target)]
    if not done:
        compactions = table.timeline.pending([COMPACTION])
        damaged = []
        for inst in compactions:
            try:
                read_plan(table.timeline, inst)
            except TimelineError as exc:  # names the plan and the way out
                damaged.append(str(exc))
        for problem in damaged:
            console.print(f"nothing rolled back; {problem}", markup=False, highlight=False)
        if compactions and not damaged:
            console.print(
                f"nothing to roll back; {', '.join(i.describe() for i in compactions)} is a "
                f"pending compaction: `hoodline table compact {table.base_path}` finishes it "
                "(so does the next writer)", markup=False, highlight=False)
        elif not compactions:
            console.print("nothing to roll back: no pending instants")
    for inst in done:
        console.print(describe_repair(table, inst), markup=False, highlight=False)


@table_app.command("accept-loss")
@_friendly_errors
def table_accept_loss(
    path: TablePath,
    files: Annotated[list[str], typer.Argument(
        help="Each missing or shortened file as `hoodline table files` names it (relative to "
        "the table).", metavar="FILE")],
) -> None:
    """Go on without the rows of committed files that are missing or cut short.

    Writers refuse a table whose latest file slices lack what their commits recorded. This
    records, file by file, that the loss is accepted: writers then merge into the older version
    (a base file) or what is left of the log. Restoring the files keeps the rows instead."""
    from hoodline.table.integrity import accept_loss
    from hoodline.table.lock import WriterLock
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    with WriterLock(table, owner="hoodline table accept-loss"):
        chosen = accept_loss(table.fs_view(), table.meta_path, files)
    for d in chosen:
        console.print(f"accepted the loss: {d.describe()}", markup=False, highlight=False)
    if chosen:
        console.print("do not restore these files once a write went on: a new log file may "
                      "take a lost one's name (restore before accepting instead)",
                      markup=False, highlight=False)
    else:
        console.print("nothing to accept: every file named was accepted before",
                      markup=False, highlight=False)


@contextmanager
def _service_client(table: HudiTable, owner: str) -> Iterator[WriteClient]:
    """A write client for a table service run from the command line: the table's own payload
    class, the writer lock under ``owner``; says which instants an earlier writer left and the
    client finished on opening."""
    from hoodline.table.rollback import describe_repair
    from hoodline.table.write.client import WriteClient

    options = {
        "hoodline.write.lock.owner": owner,
        "hoodie.datasource.write.payload.class": table.config.payload_class,
    }
    with WriteClient(table, options) as client:
        for inst in client.repaired:
            console.print(f"{describe_repair(table, inst)}, left by an earlier writer",
                          markup=False)
        yield client


@table_app.command("compact")
@_friendly_errors
def table_compact(path: TablePath) -> None:
    """Compact a merge-on-read table now: every file slice with log files gets a new base file.

    Takes the table's writer lock (refused while a live writer writes). A pipeline compacts by
    itself the slices with 'hoodie.compact.inline.max.delta.commits' log files whose logs hold
    'hoodline.compaction.log-size-ratio' times their base file's bytes."""
    from hoodline.errors import TableError
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    if not table.config.merge_on_read:
        raise TableError(
            f"table '{table.base_path}' is {table.config.table_type}; only MERGE_ON_READ tables "
            "have log files to compact"
        )
    with _service_client(table, "hoodline table compact") as client:
        done = client.compact()
    if done is None:
        console.print("nothing to compact: no file slice has log files")
        return
    md = table.timeline.read_commit_metadata(done)
    stats = md.write_stats()
    logs = sum(s.total_log_files_compacted for s in stats)
    console.print(
        f"compaction {done.timestamp}: {_count(len(stats), 'file group')}, "
        f"{_count(logs, 'log file')} merged, {md.total_records_written():,} records in "
        f"{_human_bytes(md.total_bytes_written())} of base files",
        markup=False,
    )


@table_app.command("clean")
@_friendly_errors
def table_clean(
    path: TablePath,
    retain: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Keep the file versions the last RETAIN completed commits need (default: "
            "10, or more where the table's last clean kept more: a pipeline's "
            "[table.options] hoodie.cleaner.commits.retained is not stored in the table).",
        ),
    ] = None,
) -> None:
    """Delete file versions older than the last N completed commits need (KEEP_LATEST_COMMITS).

    Takes the table's writer lock (refused while a live writer writes; writers clean after
    every commit unless 'hoodie.clean.automatic' is off)."""
    from hoodline.table.clean import CLEANER_COMMITS_RETAINED, retention_of_last_clean
    from hoodline.table.table import HudiTable

    table = HudiTable.open(path)
    chosen = retain is None
    if retain is None:  # never delete more than the table's writers did
        retain = max(CLEANER_COMMITS_RETAINED.default, retention_of_last_clean(table) or 0)
    with _service_client(table, "hoodline table clean") as client:
        if chosen:  # once the lock is held: not before a refusal (walkthrough review)
            console.print(f"keeping the file versions the last {retain} commits need (the "
                          "default, or what the table's last clean kept; --retain N to choose)",
                          markup=False, highlight=False)
        done = client.clean(retain)
    if done is None:
        console.print("nothing to clean: every file version is still needed")
        return
    from hoodline.table.action_metadata import ActionBody, deserialize

    md = deserialize(ActionBody.CLEAN_METADATA, table.timeline.read_instant_bytes(done),
                     str(table.timeline.path_of(done)))
    deleted = md.get("totalFilesDeleted", 0)
    console.print(
        f"clean {done.timestamp}: {_count(int(deleted), 'file')} deleted, versions from commit "
        f"{md.get('earliestCommitToRetain', '?')} on kept",
        markup=False,
    )


#: options of ``hoodline`` itself, and whether each takes a value
_GLOBAL_OPTIONS = {"--debug": False, "--log-level": True}


def global_options_first(args: list[str]) -> list[str]:
    """``args`` with the options of ``hoodline`` itself moved before the command when they come
    after it (`hoodline run P.toml --log-level debug` said "No such option: --log-level";
    walkthrough review). Everything after ``--`` is left as it is."""
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in _GLOBAL_OPTIONS and rest:  # after the command
            takes_value = _GLOBAL_OPTIONS[name] and "=" not in arg
            moved.extend(args[i:i + 2] if takes_value else [arg])
            i += 2 if takes_value else 1
            continue
        rest.append(arg)
        i += 1
    return moved + rest


def main() -> None:
    app(args=global_options_first(sys.argv[1:]))


if __name__ == "__main__":
    main()
