"""The round driver: runs a pipeline as checkpoint rounds on an engine (Hudi RFC-13/RFC-24 with
FLIP-27 sources; see DESIGN.md). Engine-agnostic: the engine runs each round's tasks.

**Start.** Open (or create) the table through the write client (writer lock; instants a dead
writer left pending are rolled back), read the pipeline checkpoint from the latest completed
commit's ``extraMetadata``, refuse a checkpoint of another source, and build the source's
:class:`~hoodline.runtime.SourceRounds` from it (readers register with their restored splits;
another reader parallelism rebalances).

**Each round**, in four steps:

1. *plan* -- the connector plug-in bounds every reader's splits to this round
   (:meth:`~hoodline.pipeline.plugin.SourcePlugin.bound`); a round with nothing to read starts no
   instant and keeps every split assignment.
2. *execute* -- start an instant and run ONE job on the engine (readers -> shuffle -> writers,
   every task reports), then wait until no task of it runs.
3. *commit* -- bad records stop the job (tolerance ``none``) or go to the error table (``all``);
   the splits the readers continue with are recorded, the checkpoint is taken and the instant is
   committed with the checkpoint in its extra metadata, atomically with the data. Never twice:
   before committing, the table's latest checkpoint must be the one this round started from.
4. *report* -- checkpoint completion is notified (Kafka offsets committed to the group,
   monitoring only), optional cleaning, and a :class:`~hoodline.pipeline.report.RoundReport`.

**Failures.** A round that fails before its commit landed is rolled back (markers name its
files) after the engine has no task of it running; its splits go back to the enumerator
(``round_failed``). Errors whose class says they are not retryable
(:func:`hoodline.errors.is_retryable`: bad records, configuration, an incompatible checkpoint,
another writer, an unreadable file ...) stop the job at once; others are retried after an
exponential backoff, and after ``runtime.max-consecutive-failures`` failed rounds in a row
:class:`~hoodline.errors.RoundFailedError` stops it. When the commit's outcome is unknown
(:class:`~hoodline.errors.CommitOutcomeUnknownError`) the timeline decides whether it landed.
Errors after the commit landed do not undo the round: they are logged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodline import faults
from hoodline.config.enums import ErrorTolerance
from hoodline.errors import (
    CommitOutcomeUnknownError,
    ConfigError,
    HoodlineError,
    PipelineError,
    RoundFailedError,
    SchemaChangedError,
    SchemaEvolutionError,
    SparkRuntimeError,
    WriterLockError,
    is_retryable,
)
from hoodline.faults import FaultPoint
from hoodline.pipeline.checkpoint import CHECKPOINT_KEY, PipelineCheckpoint
from hoodline.pipeline.config import PipelineConfig, SourceFormat
from hoodline.pipeline.engine import Engine, RoundOutput
from hoodline.pipeline.errors_table import (
    ERROR_SMALL_FILE_LIMIT,
    drop_orphaned_errors,
    open_error_table,
    raise_for_bad_records,
    round_metadata,
)
from hoodline.pipeline.outage import wait_out_outage
from hoodline.pipeline.plugin import RecordPreparer, RoundPlan, SourcePlugin
from hoodline.pipeline.plugins import load_plugin
from hoodline.pipeline.report import RoundReport, RunSummary, StopReason
from hoodline.pipeline.target import open_target_table, settle_after_commit
from hoodline.pipeline.tasks import RoundJob
from hoodline.pipeline.transform import RecordSpec
from hoodline.runtime.source_rounds import ReaderPlan, SourceCheckpoint, SourceRounds
from hoodline.storage.paths import is_store_outage, retry_timeout_s
from hoodline.table.archive import archived_commit_with, has_archived_instants
from hoodline.table.commit_metadata import JAVA_POSITION_KEYS
from hoodline.table.instant import COMPACTION
from hoodline.table.rollback import describe_repair
from hoodline.table.schema import nested_evolution, widens
from hoodline.table.table import HudiTable
from hoodline.table.write.client import PreparedBatch, WriteClient, table_data_schema
from hoodline.table.write.context import WriteContext
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.prepare import type_conflicts

__all__ = ["RoundDriver", "open_target_table"]

log = logging.getLogger(__name__)

#: Schema changes met in a row before they count as failed rounds (a version that keeps
#: changing under the pipeline, or a decoder that cannot settle, must not loop forever)
_MAX_SCHEMA_CHANGES = 3

#: Longest the driver waits for the tasks of a failed job to end before rolling back.
FAILED_JOB_DRAIN_S = 60.0


#: a round writing at least this many files of fewer than TINY_FILE_RECORDS records on
#: average gets a warning (once a run)
TINY_FILES_WARNING = 1000
TINY_FILE_RECORDS = 10


def _record_schema(config: PipelineConfig, source: pa.Schema, client: WriteClient) -> pa.Schema:
    """The schema a round's records get. With a registry format and no [schema], the subject's
    version: the table's type kept for columns it already has (values are read into it) unless
    the version widens it (int -> long ...: the column widens) or adds fields to a nested
    record (the struct gains them), and columns the version no longer has kept (null in new
    rows) -- a table never loses a column."""
    if not config.source.format.uses_registry or len(config.schema):
        return source
    names = source.names
    t = config.table
    wanted = [*t.record_key, *t.partition_fields, *(f for f in (t.precombine_field,
                                                                 t.delete_field) if f)]
    missing = [n for n in dict.fromkeys(wanted) if n not in names]
    if missing:
        # a Protobuf file's first message is read unless source.schema-message names
        # another: the likeliest fix when the file holds several (Protobuf review)
        message = ("source.schema-message (the message of the file the topic holds; "
                   "default: the file's first), "
                   if config.source.format is SourceFormat.PROTOBUF else "")
        raise ConfigError(
            f"field(s) {', '.join(repr(m) for m in missing)} named in [table] are not in the "
            f"Schema Registry subject's schema (fields: {', '.join(names)}); fix [table] or "
            f"{message}source.schema-subject / source.schema-version"
        )
    old = table_data_schema(client.table)
    if old is None:
        return source
    fields = [_followed(old.field(f.name), f) if f.name in old.names else f for f in source]
    fields += [f.with_nullable(True) for f in old if f.name not in names]
    return pa.schema(fields)


def _followed(stored: pa.Field, version: pa.Field) -> pa.Field:
    """A table column as a subject's version has it: widened, or a struct with the version's
    new fields (:func:`nested_evolution`), else the table's type (values are read into it)."""
    if widens(stored.type, version.type):
        return version
    grown = nested_evolution(stored.type, version.type)
    return stored.with_type(grown if grown is not None else stored.type).with_nullable(True)


def _check_declared_types(config: PipelineConfig, records: pa.Schema, client: WriteClient) -> None:
    """A [schema] field the existing table stores as another kind of type (a string for a
    number column, ...) is refused before any round: every record would fail alike."""
    if not len(config.schema):
        return
    conflicts = type_conflicts(records, table_data_schema(client.table))
    if conflicts:
        raise ConfigError(
            f"[schema] does not fit table '{config.table.path}': {'; '.join(conflicts)}. "
            "Declare those fields with the table's types (or a wider type of the same kind), or "
            "write to a new table path"
        )


def _first_plan(config: PipelineConfig, client: WriteClient, records: pa.Schema) -> pa.Schema:
    """The data schema of the run's first round; a [schema] that leaves out columns of the
    table is refused naming them (the table layer would say they are "missing from the data")."""
    try:
        return client.plan_schema(records, config.table.operation)
    except SchemaEvolutionError:
        table = table_data_schema(client.table)
        left_out = ([] if table is None or not len(config.schema)
                    else [n for n in table.names if n not in records.names])
        if not left_out:
            raise
        raise ConfigError(
            f"[schema] leaves out column(s) {', '.join(repr(n) for n in left_out)} of table "
            f"'{config.table.path}': a table never loses a column. Declare them again (records "
            "without them write null), or write to a new table path"
        ) from None


def read_checkpoint(table: HudiTable) -> PipelineCheckpoint | None:
    """The pipeline checkpoint of the table's latest commit that carries one."""
    return _checkpoint_commit(table)[0]


def _checkpoint_commit(
    table: HudiTable,
) -> tuple[PipelineCheckpoint | None, dict[str, str], str | None]:
    """The pipeline checkpoint of the table's latest commit that carries one, that commit's
    extra metadata (what the source stored beside its positions; {} if none) and instant."""
    table.timeline.reload()
    found = table.timeline.latest_commit_with(CHECKPOINT_KEY)
    if found is None:
        return None, {}, None
    metadata = dict(found[1].extra_metadata)
    return PipelineCheckpoint.decode(metadata[CHECKPOINT_KEY]), metadata, found[0].timestamp


def _archived_checkpoint(
    table: HudiTable, where: str,
) -> tuple[PipelineCheckpoint | None, dict[str, str], str | None]:
    """The pipeline checkpoint of the newest archived commit that carries one (as
    :func:`_checkpoint_commit`): Java writers' archival does not keep it active, as hoodline's
    does, and a pipeline found none and read its source again as for a new table."""
    found = archived_commit_with(table, CHECKPOINT_KEY)
    if found is None:
        return None, {}, None
    instant, metadata = found
    log.warning("table '%s': the pipeline's last checkpoint is in commit %s, which another "
                "writer's archival moved to the archived timeline; resuming from it", where,
                instant)
    checkpoint = PipelineCheckpoint.decode(metadata[CHECKPOINT_KEY])
    # the double-commit guard sees no checkpoint on the active timeline: rounds count anew
    return replace(checkpoint, round_id=0), metadata, instant


def check_start(cfg: PipelineConfig, table: HudiTable) -> None:
    """Before any engine starts (``hoodline run``): a start the source refuses from another
    writer's positions on the table (a new pipeline on a table Hudi's Kafka Connect sink
    wrote) ends the run now, not after Spark's start. Changes nothing; a table whose checkpoint
    may be archived is left to the run's start."""
    restored, metadata, own = _checkpoint_commit(table)
    if restored is None and has_archived_instants(table):
        return
    java = _java_commit_after(table, own)
    if java is None:
        return
    refused = load_plugin(cfg).refusal(java[0], java[1],
                                       metadata if restored is not None else None)
    if refused is not None:
        raise refused


def _java_commit_after(table: HudiTable, own: str | None) -> tuple[str, dict[str, str]] | None:
    """The instant and extra metadata of the newest completed commit after ``own`` (the
    pipeline's last checkpoint: no commit after it carries the pipeline's; None: any) with the
    positions of one of Java Hudi's Kafka writers (Hudi Streamer, the Kafka Connect sink), not
    empty (Hudi Streamer passes over empty ones)."""
    for inst in reversed(table.timeline.completed_commits()):
        if own is not None and inst.timestamp <= own:
            return None
        extra = table.timeline.read_commit_metadata(inst).extra_metadata
        if any(extra.get(key, "").strip() for key in JAVA_POSITION_KEYS):
            return inst.timestamp, dict(extra)
    return None


@dataclass
class _Run:
    """What one run holds open: the table's writer, the source, the round counter."""

    config: PipelineConfig
    client: WriteClient
    errors_client: WriteClient | None
    plugin: SourcePlugin
    preparer: RecordPreparer
    rounds: SourceRounds[Any, Any]
    #: the last committed round (the table's checkpoint)
    round_id: int
    #: the record schema the source delivers, and the schema commits get
    record_schema: pa.Schema
    data_schema: pa.Schema
    operation: WriteOperation
    #: writer tasks per round (runtime.writer-parallelism; 0: the engine's parallelism then)
    writers: int
    #: what the plug-in last said the table's schema is (a registry subject's version)
    source_schema: pa.Schema | None = None
    #: failed rounds' instants whose rollback failed too (storage unreachable): tried again
    #: before every round, so they do not stay pending until the next start
    unrolled: list[str] = field(default_factory=list)
    #: a round wrote many tiny files, and a warning said so (once a run)
    warned_tiny_files: bool = False

    @property
    def table(self) -> HudiTable:
        return self.client.table

    def close(self, failing: bool = False) -> None:
        """Close the source, the error table's writer and the table's writer, each even when
        an earlier one fails. ``failing``: the run is ending with an error, which a failure
        to close must not replace (it is logged): the error table's lock release, failing in
        an S3 outage, hid why the run stopped and left the table's writer open (chaos
        review). Otherwise the first failure is raised once all were tried."""
        _close_all([("the source's readers", self.rounds.close),
                    *_writers_and_source(self.plugin, self.errors_client, self.client)],
                   failing)


def _writers_and_source(
    plugin: SourcePlugin | None, errors_client: WriteClient | None, client: WriteClient
) -> list[tuple[str, Callable[[], None]]]:
    steps: list[tuple[str, Callable[[], None]]] = []
    if plugin is not None:
        steps.append(("the source", plugin.close))
    if errors_client is not None:
        steps.append(("the error table's writer", errors_client.close))
    steps.append(("the table's writer", client.close))
    return steps


def _close_all(steps: list[tuple[str, Callable[[], None]]], failing: bool) -> None:
    """Run every ``(name, close)`` step even when an earlier one fails; with ``failing`` log
    each failure, else raise the first once all were tried (later ones logged)."""
    first: Exception | None = None
    for name, close in steps:
        try:
            close()
        except Exception as exc:  # each is tried; see the docstring for which is raised
            if failing or first is not None:
                log.warning("closing %s failed too: %s: %s", name, type(exc).__name__, exc)
            else:
                first = exc
    if first is not None:
        raise first


@dataclass
class _Totals:
    rounds: int = 0
    commits: int = 0
    records_read: int = 0
    records_written: int = 0
    error_records: int = 0
    last_instant: str | None = None

    def add(self, report: RoundReport) -> None:
        self.rounds += 1
        if report.committed:
            self.commits += 1
            self.records_read += report.records_read
            self.records_written += report.records_written
            self.error_records += report.error_records
            self.last_instant = report.instant

    def summary(self, reason: StopReason) -> RunSummary:
        return RunSummary(self.rounds, self.commits, self.records_read, self.records_written,
                          self.error_records, self.last_instant, reason)


@dataclass(frozen=True)
class _Services:
    """What the table's services did after a round's commit."""

    compaction: str | None
    seconds: float
    failed: bool
    pending_compactions: int


@dataclass(frozen=True)
class _Planned:
    """A planned round: the logical readers' plans and their bounded tasks."""

    round_id: int
    plans: Mapping[int, ReaderPlan[Any]]
    plan: RoundPlan


def _reason_counts(bad: pa.Table) -> dict[str, int]:
    """Error rows per reason code."""
    if not bad.num_rows:
        return {}
    counts = pc.value_counts(bad.column("reason")).to_pylist()
    return {str(c["values"]): int(c["counts"]) for c in counts}


class RoundDriver:
    """Runs a pipeline's rounds on an engine (see module docs)."""

    def __init__(
        self,
        config: PipelineConfig,
        engine: Engine,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.engine = engine
        self._clock = clock
        self._sleep = sleep

    # -- start ----------------------------------------------------------------------------------
    def _open(self) -> _Run:
        cfg = self.config
        client = WriteClient(open_target_table(cfg), dict(cfg.table.options))
        client.task_runner = self.engine.run_tasks  # compaction runs as a job of the engine
        client.open()
        plugin: SourcePlugin | None = None
        errors_client: WriteClient | None = None
        try:
            if client.repaired:
                log.warning("repaired what a previous run left pending: %s", "; ".join(
                    describe_repair(client.table, i) for i in client.repaired))
            restored, metadata, own = _checkpoint_commit(client.table)
            archived = restored is None and has_archived_instants(client.table)
            if archived:
                restored, metadata, own = _archived_checkpoint(client.table, cfg.table.path)
            plugin = load_plugin(cfg)
            source_state = restored.source if restored is not None else None
            java = _java_commit_after(client.table, own)
            adopted = java is not None and plugin.adopt(
                java[0], java[1], metadata if restored is not None else None)
            if adopted:
                source_state = None  # a Java writer's (newer) positions, not the pipeline's
            elif restored is None and archived:
                log.warning(
                    "table '%s' has no pipeline checkpoint, on its active timeline or archived, "
                    "but has archived instants: this run reads its source as for a new table",
                    cfg.table.path)
            if restored is not None and source_state is not None:
                changed = restored.check_compatible(plugin.name, plugin.identity,
                                                    cfg.table.path, plugin.identity_change)
                if changed is not None:
                    log.warning("table '%s': %s", cfg.table.path, changed)
                plugin.restored(metadata)
            operation = cfg.table.operation
            source_schema = plugin.table_schema(cfg)
            record_schema = _record_schema(cfg, source_schema, client)
            _check_declared_types(cfg, record_schema, client)
            data_schema = _first_plan(cfg, client, record_schema)
            if cfg.errors.tolerance is ErrorTolerance.ALL:
                errors_client = WriteClient(
                    open_error_table(cfg.errors.table_path, f"{client.table.config.name}_errors",
                                     cfg.table.storage_options),
                    # the table's lock settings: a takeover of the table's lock (expired by
                    # them) failed half-way at the error table's default 60-s lock (chaos review)
                    replace(WriteOptions(), small_file_limit=ERROR_SMALL_FILE_LIMIT, **{
                        f: getattr(client.options, f)
                        for f in ("lock_owner", "lock_expiry_seconds", "lock_heartbeat_seconds")}),
                ).open()
                # a crash between the error table's commit and the target's left the rolled-
                # back round's bad records there
                drop_orphaned_errors(errors_client, client.table)
            rounds: SourceRounds[Any, Any] = SourceRounds(
                plugin.source, cfg.runtime.reader_parallelism, source_state)
        except BaseException:
            _close_all(_writers_and_source(plugin, errors_client, client), failing=True)
            raise
        return _Run(cfg, client, errors_client, plugin, plugin.preparer(cfg), rounds,
                    restored.round_id if restored else 0, record_schema, data_schema, operation,
                    cfg.runtime.writer_parallelism, source_schema)

    def _follow_schema(self, run: _Run) -> None:
        """Before a round: when the source's schema changed (a registry subject's new version),
        the round reads into the new schema and its commit evolves the table. A version the
        table cannot take stops the pipeline, or -- with errors.tolerance = all -- is not
        followed: records written with it go to the error table."""
        cfg = self.config
        source_schema = run.plugin.table_schema(cfg)
        if run.source_schema is not None and source_schema.equals(run.source_schema):
            return
        record_schema = _record_schema(cfg, source_schema, run.client)
        try:
            data_schema = run.client.plan_schema(record_schema, run.operation)
        except SchemaEvolutionError as exc:
            if cfg.errors.tolerance is not ErrorTolerance.ALL:
                raise
            log.warning("the source's new schema is not followed (records that need it go to "
                        "the error table): %s", exc)
            run.source_schema = source_schema
            return
        added = [n for n in data_schema.names if n not in run.data_schema.names]
        log.info("the table's schema follows the source's: %s",
                 f"new column(s) {', '.join(added)}" if added else "field types/defaults")
        run.source_schema, run.record_schema, run.data_schema = (
            source_schema, record_schema, data_schema)
        run.preparer = run.plugin.preparer(cfg)

    # -- the loop -------------------------------------------------------------------------------
    def run(
        self,
        once: bool = False,
        on_round: Callable[[RoundReport], None] | None = None,
        stop: threading.Event | None = None,
        on_failure: Callable[[BaseException, bool], None] | None = None,
    ) -> RunSummary:
        """Run rounds until ``stop`` is set (continuous), or -- with ``once`` -- until what the
        source held when the run started is committed (see module docs for failures).
        ``on_failure(error, retried)`` hears of every failed round."""
        run = wait_out_outage(
            self._open, what="starting", patience_s=retry_timeout_s(
                self.config.table.storage_options),
            backoff_s=self.config.runtime.backoff_s, clock=self._clock,
            wait=lambda seconds: self._wait(seconds, stop))
        if run is None:  # stopped while the store was out
            return _Totals().summary(StopReason.STOPPED)
        ended = False
        try:
            summary = self._loop(run, once, on_round or (lambda _: None), stop,
                                 on_failure or (lambda _e, _r: None))
            ended = True
            return summary
        finally:
            run.close(failing=not ended)

    def _wait(self, seconds: float, stop: threading.Event | None) -> bool:
        """Sleep (interruptible by ``stop``); True when stop was requested."""
        if seconds <= 0:
            return bool(stop and stop.is_set())
        if stop is not None:
            return stop.wait(seconds)
        self._sleep(seconds)
        return False

    def _loop(
        self,
        run: _Run,
        once: bool,
        on_round: Callable[[RoundReport], None],
        stop: threading.Event | None,
        on_failure: Callable[[BaseException, bool], None],
    ) -> RunSummary:
        rt = self.config.runtime
        totals = _Totals()
        failures = 0
        schema_changes = 0  # in a row, without a round that went through
        #: since when failed rounds met an object store that does not answer, or None
        outage_since: float | None = None
        outage_rounds = 0
        patience = retry_timeout_s(self.config.table.storage_options)
        last_start: float | None = None
        while not (stop is not None and stop.is_set()):
            if last_start is not None:
                if self._wait(last_start + rt.round_min_interval_s - self._clock(), stop):
                    break
            last_start = self._clock()
            try:
                planned = self._plan(run)
                if planned.plan.empty and not run.plugin.commit_pending(run.rounds):
                    report = self._empty_report(run, planned, last_start, failures)
                else:
                    report = self._round(run, planned, last_start, failures)
            except BaseException as exc:
                run.rounds.round_failed()
                run.plugin.reset()
                if isinstance(exc, Exception) and not isinstance(exc, HoodlineError):
                    # py4j's "Connection refused" when Spark's JVM died: say that, and stop
                    try:
                        self.engine.check_alive()
                    except SparkRuntimeError as dead:
                        on_failure(dead, False)
                        raise dead from exc
                if isinstance(exc, SchemaChangedError) and schema_changes < _MAX_SCHEMA_CHANGES:
                    # not a failure: records of a newer schema version met on the way; the
                    # round is planned again with the subject's latest version (the plugin
                    # fetches it again after reset), at once
                    schema_changes += 1
                    log.info("round %d: %s", run.round_id + 1, exc)
                    last_start = None
                    continue
                if is_store_outage(exc):
                    outage_since = self._clock() if outage_since is None else outage_since
                else:
                    outage_since = None
                # an object store's outage is waited out for its retry_timeout, as its
                # client's own retries promise (they gave up after ~3 s on a refused
                # connection, and 5 failed rounds stopped the run within a minute of an
                # outage: chaos review on S3); the failures count again once it ran out
                outage_s = None if outage_since is None else self._clock() - outage_since
                waiting = outage_s is not None and outage_s < patience
                counted = failures + 1
                if waiting:
                    counted = min(counted, rt.max_consecutive_failures - 1)
                retried = is_retryable(exc) and counted < rt.max_consecutive_failures
                on_failure(exc, retried)
                if not is_retryable(exc):
                    raise
                failures = counted
                if failures >= rt.max_consecutive_failures:
                    outage = ("" if outage_s is None else
                              f" (the object store failed for {outage_s:.0f} s, past its "
                              f"retry_timeout of {patience:.0f} s)")
                    raise RoundFailedError(
                        f"round {run.round_id + 1} failed {failures} times in a row (limit "
                        f"runtime.max-consecutive-failures = {rt.max_consecutive_failures})"
                        f"{outage}; last error: {type(exc).__name__}: {exc}"
                        f"{self._disk_hint(exc)}"
                    ) from exc
                if waiting:
                    outage_rounds += 1
                    backoff = rt.backoff_s(outage_rounds)
                    log.warning(
                        "round %d failed: the object store has failed for %.0f s (waited out "
                        "for up to its retry_timeout, %.0f s); retrying in %.1fs: %s: %s",
                        run.round_id + 1, outage_s, patience, backoff,
                        type(exc).__name__, exc)
                else:
                    outage_rounds = 0
                    backoff = rt.backoff_s(failures)
                    log.warning("round %d failed (%d in a row); retrying in %.1fs: %s: %s%s",
                                run.round_id + 1, failures, backoff, type(exc).__name__, exc,
                                self._disk_hint(exc))
                if self._wait(backoff, stop):
                    break
                continue
            failures = 0
            schema_changes = 0
            outage_since, outage_rounds = None, 0
            totals.add(report)
            self._warn_tiny_files(run, report)
            on_round(report)
            if report.committed:
                if once and run.plugin.drained():
                    return totals.summary(StopReason.DRAINED)
                continue
            if all(p.no_more_splits and not p.splits for p in planned.plans.values()):
                return totals.summary(StopReason.END_OF_INPUT)
            if once and run.plugin.drained():
                return totals.summary(StopReason.DRAINED)
            # no job ran: a dead engine (Spark's JVM killed) would go unnoticed until data came
            self.engine.check_alive()
            idle = min(rt.round_max_interval_s, max(rt.round_min_interval_s, 0.2))
            if self._wait(idle - (self._clock() - last_start), stop):
                break
        return totals.summary(StopReason.STOPPED)

    def _warn_tiny_files(self, run: _Run, report: RoundReport) -> None:
        """A round that wrote thousands of files of a few records each, once a run: the mark of
        a partition field with a value per record or so (a timestamp to the second made a
        folder and a file per record, and every later round listed them all)."""
        files = report.files_written
        if (run.warned_tiny_files or files < TINY_FILES_WARNING
                or report.records_written >= files * TINY_FILE_RECORDS):
            return
        run.warned_tiny_files = True
        t = self.config.table
        log.warning(
            "round %d wrote %d files for %.1f of its records each on average: check "
            "table.partition-fields "
            "%s (a field with about a value per record, such as a timestamp, makes a folder "
            "and a file per value; partition by a day or a coarser value) and "
            "table.bucket-count (%d per partition with index BUCKET)", report.round_id, files,
            report.records_written / files, list(t.partition_fields),
            run.table.config.bucket_count)

    def _disk_hint(self, exc: BaseException) -> str:
        """For a failure that ran out of disk space ("No space left on device", also from a
        Spark task, whose error names no file): which disks to look at."""
        if "No space left on device" not in str(exc) and "errno 28" not in str(exc):
            return ""
        cfg = self.config
        errors = (f", the error table's ({cfg.errors.table_path})"
                  if cfg.errors.tolerance is ErrorTolerance.ALL else "")
        return (f" -- a disk is full: the table's ({cfg.table.path}){errors} or the temporary "
                "folder's (TMPDIR, SPARK_LOCAL_DIRS; on a cluster, the executors'). Free space "
                "there: the failed rounds are rolled back and the next start goes on")

    # -- step 1: plan ---------------------------------------------------------------------------
    def _plan(self, run: _Run) -> _Planned:
        rt = self.config.runtime
        run.plugin.before_plan(run.rounds)
        plans = run.rounds.plan_round()
        budget = run.plugin.record_budget(rt.round_max_records, rt.round_max_bytes)
        round_id = run.round_id + 1
        return _Planned(round_id, plans, run.plugin.bound(plans, round_id, budget))

    def _empty_report(
        self, run: _Run, planned: _Planned, started: float, retries: int
    ) -> RoundReport:
        return RoundReport(planned.round_id, None, False, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0,
                           self._clock() - started, 0.0, dict(planned.plan.lag), retries,
                           files_waiting=run.plugin.files_waiting(run.rounds))

    # -- one round: execute, commit, report -----------------------------------------------------
    def _round(self, run: _Run, planned: _Planned, started: float, retries: int) -> RoundReport:
        for failed in list(run.unrolled):
            self._rollback(run, failed)
        self._follow_schema(run)
        try:
            ts = run.client.start_instant()
        except WriterLockError as error:
            lost = run.client.lost_lock()
            if lost is None:
                raise
            raise self._lost_lock_error(lost, planned.round_id, None) from error
        try:
            ctx = run.client.context(
                ts, PreparedBatch(run.operation, run.data_schema.empty_table(), run.data_schema)
            )
            output, job_s = self._execute(run, planned, ctx)
            checkpoint, commit_s, errors = self._commit(run, planned, output, ctx)
        except BaseException as error:
            if isinstance(error, Exception):  # not on Ctrl-C: the user wants out now
                try:  # tasks of the failed job may still run: let them end first
                    self.engine.wait_until_idle(FAILED_JOB_DRAIN_S)
                except Exception as exc:
                    log.warning("tasks still running while rolling back %s: %s", ts, exc)
                lost = run.client.lost_lock()
                if lost is not None:
                    # whatever failed, the lock taken over is the cause, and the job ends: no
                    # rollback "tried again before the next round" (the new holder did it);
                    # the files the tasks wrote since then go, now that no task runs
                    run.client.discard_lost_instant(ts)
                    raise self._lost_lock_error(lost, planned.round_id, ts) from error
            self._rollback(run, ts)
            raise
        run.round_id = planned.round_id
        services = self._after_commit(run, checkpoint)
        return self._report(run, planned, ts, output, errors, job_s, commit_s, started, retries,
                            services)

    def _execute(
        self, run: _Run, planned: _Planned, ctx: WriteContext
    ) -> tuple[RoundOutput, float]:
        cfg = self.config
        spec = RecordSpec(ctx, run.record_schema, cfg.table.delete_field, planned.round_id,
                          cfg.runtime.writer_buffer_bytes)
        layout = run.client.table.write_view()
        layout.file_groups()  # listed here, once: the tasks receive it loaded (RoundJob.layout)
        # 0: the engine's parallelism now (a cluster's executors register after its start)
        writers = run.writers or max(1, self.engine.default_parallelism)
        job = RoundJob(planned.round_id, planned.plan.tasks, spec, run.preparer, writers,
                       layout)
        started = self._clock()
        output = self.engine.run_round(job)
        self.engine.wait_until_idle()  # no zombie attempt may write after this point
        return output, self._clock() - started

    def _commit(
        self, run: _Run, planned: _Planned, output: RoundOutput, ctx: WriteContext
    ) -> tuple[SourceCheckpoint, float, dict[str, int]]:
        """Commit the round; returns its checkpoint, the time taken and its error records
        count per reason."""
        cfg = self.config
        bad = output.bad_records
        if bad.num_rows and cfg.errors.tolerance is not ErrorTolerance.ALL:
            raise_for_bad_records(bad, cfg.errors.table_path)
        started = self._clock()
        outcomes = list(output.outcomes.values())
        for o in outcomes:
            held = planned.plans[o.subtask].splits
            run.rounds.reads_done(o.subtask, run.plugin.continuing(held, o))
        run.plugin.forward_events(run.rounds, outcomes)
        run.plugin.observe(sum(o.records for o in outcomes), sum(o.nbytes for o in outcomes))
        checkpoint = run.rounds.checkpoint()
        # input the source's driver side skipped, recorded by this checkpoint for the first time
        skipped = run.plugin.source_errors(run.rounds, planned.round_id)
        if skipped:
            bad = pa.concat_tables([bad, pa.Table.from_batches(skipped, bad.schema)])
        if bad.num_rows and run.errors_client is not None:
            run.errors_client.upsert(bad, round_metadata(run.table, ctx.instant_ts))
        faults.reach(FaultPoint.BEFORE_COMMIT)
        stored = PipelineCheckpoint(planned.round_id, run.plugin.name, run.plugin.identity,
                                    checkpoint)
        self._guard(run.table, planned.round_id)
        try:
            run.client.commit(ctx, output.write_stats, {
                **run.plugin.commit_metadata(run.rounds), CHECKPOINT_KEY: stored.encode()})
        except CommitOutcomeUnknownError as exc:
            if not self._landed(run.table, ctx.instant_ts):
                raise
            log.warning("round %d: the commit's outcome was unclear (%s); the timeline shows "
                        "instant %s completed", planned.round_id, exc, ctx.instant_ts)
        return checkpoint, self._clock() - started, _reason_counts(bad)

    def _after_commit(self, run: _Run, checkpoint: SourceCheckpoint) -> _Services:
        """The commit landed: the checkpoint is the new restore point. Failures from here on
        do not undo the round (they are logged). Returns what the table's services (compaction,
        cleaning, archival) did."""
        run.rounds.checkpoint_complete(checkpoint)
        try:
            settle_after_commit(run.table)
        except (HoodlineError, OSError) as exc:  # the next start drops the mark instead
            log.warning("round %d committed; dropping the table's provisional mark failed: %s",
                        run.round_id, exc)
        try:
            faults.reach(FaultPoint.AFTER_COMMIT)
            run.plugin.after_commit(run.rounds)
        except Exception as exc:  # monitoring only
            log.warning("round %d committed; notifying the source failed: %s", run.round_id, exc)
        started = self._clock()
        compaction: str | None = None
        failed = False
        try:
            compacted = run.client.after_commit()
        except HoodlineError as exc:  # the next write finishes a compaction left pending
            log.warning("table services after round %d failed: %s", run.round_id, exc)
            failed = True
        else:
            if compacted is not None:
                compaction = compacted.timestamp
                log.info("round %d: compaction %s committed", run.round_id, compaction)
        seconds = self._clock() - started
        try:
            pending = (len(run.table.timeline.pending([COMPACTION]))
                       if run.table.config.merge_on_read else 0)
        except (HoodlineError, OSError):
            pending = 0
        return _Services(compaction, seconds, failed, pending)

    def _report(
        self,
        run: _Run,
        planned: _Planned,
        ts: str,
        output: RoundOutput,
        error_reasons: dict[str, int],
        job_s: float,
        commit_s: float,
        started: float,
        retries: int,
        services: _Services | None = None,
    ) -> RoundReport:
        outcomes = output.outcomes.values()
        stats = output.write_stats
        # one job reads and writes: reading = the slowest reader task, writing = the rest
        read_s = min(job_s, max((o.seconds for o in outcomes), default=0.0))
        records_read = sum(o.records for o in outcomes)
        duration = self._clock() - started
        return RoundReport(
            round_id=planned.round_id,
            instant=ts,
            committed=True,
            records_read=records_read,
            records_written=sum(s.num_inserts + s.num_update_writes for s in stats),
            records_deleted=sum(s.num_deletes for s in stats),
            error_records=sum(error_reasons.values()),
            error_reasons=error_reasons,
            files_written=len(stats),
            read_seconds=read_s,
            write_seconds=max(0.0, job_s - read_s),
            commit_seconds=commit_s,
            duration_seconds=duration,
            records_per_second=records_read / duration if duration > 0 else 0.0,
            lag=dict(planned.plan.lag),
            files_waiting=run.plugin.files_waiting(run.rounds),
            retries=retries,
            bytes_read=sum(o.nbytes for o in outcomes),
            bytes_written=sum(s.total_write_bytes for s in stats),
            compaction=services.compaction if services else None,
            services_seconds=services.seconds if services else 0.0,
            services_failed=services.failed if services else False,
            pending_compactions=services.pending_compactions if services else 0,
        )

    # -- safety ---------------------------------------------------------------------------------
    @staticmethod
    def _lost_lock_error(lost: str, round_id: int, ts: str | None) -> WriterLockError:
        """The error that ends a run whose writer lost the table's lock (``lost``: who took it):
        said plainly, as the run's last line."""
        instant = f" (instant {ts})" if ts is not None else ""
        return WriterLockError(
            f"{lost}; this pipeline stopped without committing round {round_id}{instant}. "
            "Restart it once the other writer is done: it resumes from the table's checkpoint"
        )

    @staticmethod
    def _guard(table: HudiTable, round_id: int) -> None:
        """Never commit a round twice: the table's checkpoint must be the previous round's."""
        current = read_checkpoint(table)
        have = current.round_id if current else 0
        if have != round_id - 1:
            raise PipelineError(
                f"table '{table.base_path}' already holds checkpoint round {have}; this writer "
                f"was about to commit round {round_id}. Another writer changed the table; "
                "restart the pipeline to resume from the table's checkpoint"
            )

    @staticmethod
    def _landed(table: HudiTable, ts: str) -> bool:
        table.timeline.reload()
        return table.timeline.is_completed_commit(ts)

    @staticmethod
    def _rollback(run: _Run, ts: str) -> None:
        """Roll the failed round's instant ``ts`` back; when that fails too, it is tried again
        before the next round (and by the next start, whatever happens meanwhile)."""
        step = f"rollback of instant {ts}"
        try:
            run.table.timeline.reload()
            inst = run.table.timeline.find(ts, run.table.write_action)
            if inst is not None and not inst.is_completed:
                run.client.rollback(ts)
            if run.errors_client is not None:  # the round's bad records go with it
                step = f"rollback of the error table's commit of the failed instant {ts}"
                drop_orphaned_errors(run.errors_client, run.table, ts)
        except Exception as exc:
            if ts not in run.unrolled:
                run.unrolled.append(ts)
                log.warning("%s failed (tried again before the next round): %s", step, exc)
            return
        if ts in run.unrolled:
            run.unrolled.remove(ts)
            log.warning("instant %s of a failed round is rolled back now", ts)
