"""The round loop on the Spark driver (Hudi RFC-13/RFC-24 on Spark; see DESIGN.md).

Restore: open the table through the write client (writer lock, inflight instants rolled back),
read the pipeline checkpoint from the latest completed commit's ``extraMetadata`` and build the
source's :class:`~hoodline.runtime.SourceRounds` from it (readers register with their restored
splits; another reader parallelism rebalances).

Each round: plan every reader's bounded task; a round with nothing to read commits nothing and
keeps every split assignment. Otherwise start an instant and run ONE Spark job (readers ->
shuffle -> writers, every writer reports); the write coordinator (this loop) checks every task
reported, writes bad records to the error table (tolerance ``all``) or stops (``none``), and
commits the instant with the checkpoint in its extra metadata -- atomically with the data. Only
then is checkpoint completion notified (Kafka offsets committed to the group, for monitoring).

Failures: the instant is rolled back (markers), the round's splits go back to the enumerator
(``round_failed``), and the round is retried after an exponential backoff; after
``runtime.max-consecutive-failures`` failed rounds in a row :class:`RoundFailedError` stops
the job. A commit is never made twice: before committing, the timeline's latest checkpoint must
be the one this round started from, and after an unclear failure the timeline decides whether
the round's instant landed.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodline import errors as hoodline_errors
from hoodline.errors import (
    BadRecordError,
    CheckpointMismatchError,
    ConfigError,
    FileSourceError,
    HoodlineError,
    InvalidRecordsError,
    KafkaOffsetOutOfRangeError,
    PipelineError,
    RoundFailedError,
    SchemaEvolutionError,
    SplitSerializationError,
    TableError,
    TableNotFoundError,
    WriterLockError,
)
from hoodline.pipeline import test_hooks
from hoodline.pipeline.api import RoundReport, RunSummary
from hoodline.pipeline.checkpoint import CHECKPOINT_KEY, PipelineCheckpoint
from hoodline.pipeline.config import PipelineConfig
from hoodline.pipeline.errors_table import (
    ERROR_PARTITION_FIELD,
    ERROR_RECORD_KEY,
    ERROR_SCHEMA,
    raise_for_bad_records,
)
from hoodline.pipeline.sources import (
    ReadOutcome,
    SourceAdapter,
    build_adapter,
)
from hoodline.pipeline.transform import RAW_KAFKA_SCHEMA, RecordSpec
from hoodline.runtime.source_rounds import SourceRounds
from hoodline.spark.round_job import round_job
from hoodline.spark.session import HoodlineSpark
from hoodline.spark.stages import RoundResult, collect_table
from hoodline.table.commit_metadata import WriteStat
from hoodline.table.instant import COMMIT
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import PreparedBatch, WriteClient

log = logging.getLogger(__name__)

_FATAL = (BadRecordError, CheckpointMismatchError, ConfigError, WriterLockError,
          SplitSerializationError)

#: Errors raised inside tasks that a retry cannot fix (the same input fails the same way).
_FATAL_IN_TASK = (FileSourceError, KafkaOffsetOutOfRangeError, InvalidRecordsError,
                  SchemaEvolutionError, ConfigError, BadRecordError)
_TASK_ERROR = re.compile(r"hoodline\.errors\.(\w+): ([^\n]*)")


def deterministic_task_error(exc: BaseException) -> HoodlineError | None:
    """The hoodline error a Spark task raised, when retrying the round cannot help."""
    found = _TASK_ERROR.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(hoodline_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, _FATAL_IN_TASK):
        return cls(message)
    return None


def _table_schema(config: PipelineConfig) -> pa.Schema:
    if config.source.type == "kafka" and config.source.format == "raw":
        return RAW_KAFKA_SCHEMA
    return config.schema


def _open_or_create(config: PipelineConfig) -> HudiTable:
    t = config.table
    try:
        table = HudiTable.open(t.path)
    except TableNotFoundError:
        table = HudiTable.create(
            t.path,
            TableConfig(
                name=t.name,
                record_key_fields=t.record_key,
                partition_fields=t.partition_fields,
                precombine_field=t.precombine_field,
                index_type=t.index,
                bucket_count=t.bucket_count,
            ),
            exist_ok=True,
        )
    c = table.config
    if c.index_type != t.index or (c.index_type == "BUCKET" and c.bucket_count != t.bucket_count):
        raise ConfigError(
            f"table '{t.path}' uses index {c.index_type} (bucket count {c.bucket_count}), but the "
            f"pipeline sets table.index = {t.index!r}, table.bucket-count = {t.bucket_count}; an "
            "existing table keeps its index: set the table's values or write to a new path"
        )
    if tuple(c.record_key_fields) != tuple(t.record_key) or (
        tuple(c.partition_fields) != tuple(t.partition_fields)
    ):
        raise ConfigError(
            f"table '{t.path}' has record key {list(c.record_key_fields)} and partition fields "
            f"{list(c.partition_fields)}, but the pipeline sets table.record-key = "
            f"{list(t.record_key)} and table.partition-fields = {list(t.partition_fields)}; "
            "make them match the table or write to a new path"
        )
    return table


def _error_table(config: PipelineConfig) -> HudiTable:
    path = config.errors.table_path
    try:
        return HudiTable.open(path)
    except TableNotFoundError:
        return HudiTable.create(
            path,
            TableConfig(
                name=f"{config.table.name}_errors",
                record_key_fields=(ERROR_RECORD_KEY,),
                partition_fields=(ERROR_PARTITION_FIELD,),
                index_type="BUCKET",
                bucket_count=1,
            ),
            exist_ok=True,
        )


@dataclass
class _Totals:
    rounds: int = 0
    commits: int = 0
    records_read: int = 0
    records_written: int = 0
    error_records: int = 0
    last_instant: str | None = None


class RoundRunner:
    """Runs a pipeline's rounds on a Spark session (see module docs)."""

    def __init__(
        self,
        config: PipelineConfig,
        spark: HoodlineSpark,
        *,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.config = config
        self.spark = spark
        self.writers = config.runtime.writer_parallelism or max(
            1, spark.context.defaultParallelism
        )
        self._sleep = sleep

    # -- helpers -------------------------------------------------------------------------------
    def _wait(self, seconds: float, stop: threading.Event | None) -> bool:
        """Sleep (interruptible by ``stop``); True when stop was requested."""
        if seconds <= 0:
            return bool(stop and stop.is_set())
        if stop is not None:
            return stop.wait(seconds)
        (self._sleep or time.sleep)(seconds)
        return False

    @staticmethod
    def _restore(table: HudiTable) -> PipelineCheckpoint | None:
        table.timeline.reload()
        found = table.timeline.latest_extra_metadata(CHECKPOINT_KEY)
        if found is None:
            return None
        return PipelineCheckpoint.decode(found[1])

    # -- main loop -----------------------------------------------------------------------------
    def run(
        self,
        once: bool = False,
        on_round: Callable[[RoundReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> RunSummary:
        cfg = self.config
        table = _open_or_create(cfg)
        client = WriteClient(table, dict(cfg.table.options)).open()
        errors_client: WriteClient | None = None
        adapter: SourceAdapter | None = None
        rounds: SourceRounds[Any, Any] | None = None
        try:
            if client.repaired:
                log.warning("rolled back %d pending instant(s) left by a previous run: %s",
                            len(client.repaired), [i.timestamp for i in client.repaired])
            restored = self._restore(table)
            adapter = build_adapter(cfg)
            if restored is not None:
                restored.check_compatible(adapter.source_type, adapter.identity, cfg.table.path)
            rounds = SourceRounds(
                adapter.source,
                cfg.runtime.reader_parallelism,
                restored.source if restored else None,
            )
            if cfg.errors.tolerance == "all":
                errors_client = WriteClient(_error_table(cfg)).open()
            return self._loop(client, errors_client, adapter, rounds, restored, once,
                              on_round, stop)
        finally:
            if rounds is not None:
                rounds.close()
            if adapter is not None:
                adapter.close()
            if errors_client is not None:
                errors_client.close()
            client.close()

    def _loop(
        self,
        client: WriteClient,
        errors_client: WriteClient | None,
        adapter: SourceAdapter,
        rounds: SourceRounds[Any, Any],
        restored: PipelineCheckpoint | None,
        once: bool,
        on_round: Callable[[RoundReport], None] | None,
        stop: threading.Event | None,
    ) -> RunSummary:
        cfg = self.config
        rt = cfg.runtime
        op = cfg.table.operation.upper()
        data_schema = client.plan_schema(_table_schema(cfg), op)
        round_id = restored.round_id if restored else 0
        totals = _Totals()
        failures = 0
        retries = 0
        last_start: float | None = None
        stopped_because = "stopped"
        while True:
            if stop is not None and stop.is_set():
                break
            if last_start is not None:
                wait = last_start + rt.round_min_interval_s - time.monotonic()
                if self._wait(wait, stop):
                    break
            last_start = time.monotonic()
            try:
                adapter.before_plan(rounds)
                plans = rounds.plan_round()
                tasks, lag = adapter.bound(plans, round_id + 1, rt.round_max_records,
                                           rt.round_max_bytes)
                empty = all(t.empty for t in tasks.values())
                if not empty:
                    report = self._round(client, errors_client, adapter, rounds, plans, tasks,
                                         round_id + 1, data_schema, op, last_start, lag, retries)
            except _FATAL:
                rounds.round_failed()
                raise
            except Exception as exc:
                rounds.round_failed()
                adapter.reset()
                fatal = deterministic_task_error(exc)
                if fatal is not None:
                    raise fatal from exc
                failures += 1
                retries += 1
                log.warning("round %d failed (%d in a row): %s", round_id + 1, failures, exc)
                if failures >= rt.max_consecutive_failures:
                    raise RoundFailedError(
                        f"round {round_id + 1} failed {failures} times in a row (limit "
                        f"runtime.max-consecutive-failures = {rt.max_consecutive_failures}); "
                        f"last error: {type(exc).__name__}: {exc}"
                    ) from exc
                if self._wait(rt.backoff_s(failures), stop):
                    break
                continue
            if empty:
                failures = 0
                totals.rounds += 1
                report = RoundReport(round_id + 1, None, False, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0,
                                     time.monotonic() - last_start, 0.0, lag, retries)
                retries = 0
                if on_round is not None:
                    on_round(report)
                if all(p.no_more_splits and not p.splits for p in plans.values()):
                    stopped_because = "end-of-input"
                    break
                if once and adapter.drained():
                    stopped_because = "drained"
                    break
                idle = min(rt.round_max_interval_s, max(rt.round_min_interval_s, 0.2))
                if self._wait(idle - (time.monotonic() - last_start), stop):
                    break
                continue
            failures = 0
            retries = 0
            round_id += 1
            totals.rounds += 1
            totals.commits += 1
            totals.records_read += report.records_read
            totals.records_written += report.records_written
            totals.error_records += report.error_records
            totals.last_instant = report.instant
            if on_round is not None:
                on_round(report)
            if once and adapter.drained():
                stopped_because = "drained"
                break
        return RunSummary(totals.rounds, totals.commits, totals.records_read,
                          totals.records_written, totals.error_records, totals.last_instant,
                          stopped_because)

    # -- one round -----------------------------------------------------------------------------
    def _round(
        self,
        client: WriteClient,
        errors_client: WriteClient | None,
        adapter: SourceAdapter,
        rounds: SourceRounds[Any, Any],
        plans: dict[int, Any],
        tasks: dict[int, Any],
        round_id: int,
        data_schema: pa.Schema,
        op: str,
        started: float,
        lag: dict[str, int],
        retries: int,
    ) -> RoundReport:
        cfg = self.config
        table = client.table
        ts = client.start_instant()
        committed = False
        checkpoint = None
        try:
            ctx = client.context(ts, PreparedBatch(op, data_schema.empty_table(), data_schema))
            spec = RecordSpec(ctx, cfg.source.type, cfg.source.format, _table_schema(cfg),
                              cfg.table.delete_field, round_id,
                              cfg.runtime.writer_buffer_bytes)
            t_job = time.monotonic()
            df = round_job(self.spark.session, tasks, spec, self.writers)
            result = RoundResult(collect_table(df), len(tasks), self.writers)
            self.spark.wait_until_idle()  # no zombie attempt may write after this point
            job_s = time.monotonic() - t_job
            outcomes = [ReadOutcome.from_bytes(result.reader_states[i]) for i in sorted(tasks)]
            bad = (pa.Table.from_batches(result.bad_records, schema=ERROR_SCHEMA)
                   if result.bad_records else ERROR_SCHEMA.empty_table())
            if bad.num_rows:
                bad = bad.sort_by([("topic", "ascending"), ("partition", "ascending"),
                                   ("offset", "ascending"), ("file", "ascending"),
                                   ("row", "ascending")])
            if bad.num_rows and cfg.errors.tolerance != "all":
                raise_for_bad_records(bad.combine_chunks().to_batches()[0],
                                      cfg.errors.table_path)
            stats = [WriteStat.from_dict(json.loads(s)) for s in result.write_statuses]
            for o in outcomes:
                rounds.reads_done(o.subtask, adapter.continuing(plans[o.subtask].splits, o))
            adapter.forward_events(rounds, outcomes)
            adapter.observe(sum(o.records for o in outcomes), sum(o.nbytes for o in outcomes))
            t_commit = time.monotonic()
            if bad.num_rows and errors_client is not None:
                errors_client.upsert(bad)
            test_hooks.hook("before_commit")
            checkpoint = rounds.checkpoint(round_id)
            pcp = PipelineCheckpoint(round_id, adapter.source_type, adapter.identity, checkpoint)
            self._guard(table, round_id)
            client.commit(ctx, stats, {CHECKPOINT_KEY: pcp.encode()})
            committed = True
            commit_s = time.monotonic() - t_commit
            test_hooks.hook("after_commit")
        except BaseException as error:
            if not committed and (checkpoint is None or not self._landed(table, ts)):
                if isinstance(error, Exception):  # not on Ctrl-C: the user wants out now
                    try:  # tasks of the failed job may still run: let them end first
                        self.spark.wait_until_idle(timeout_s=60)
                    except Exception as exc:
                        log.warning("tasks still running while rolling back %s: %s", ts, exc)
                self._rollback(client, ts)
                raise
            # the commit landed although an error was raised after it: the round is done
            log.warning("round %d: error after its commit %s landed; continuing", round_id, ts)
            commit_s = 0.0
            job_s = 0.0
            outcomes = []
            bad = ERROR_SCHEMA.empty_table()
            stats = []
        assert checkpoint is not None
        rounds.checkpoint_complete(checkpoint)
        try:
            adapter.after_commit(rounds)
        except Exception as exc:  # monitoring only
            log.warning("checkpoint-complete notification failed: %s", exc)
        if client.options.clean_automatic:
            try:
                client.clean()
            except TableError as exc:
                log.warning("clean after round %d failed: %s", round_id, exc)
        # one Spark job reads and writes: reading = the slowest reader task, writing = the rest
        read_s = min(job_s, max((o.seconds for o in outcomes), default=0.0))
        records_read = sum(o.records for o in outcomes)
        duration = time.monotonic() - started
        return RoundReport(
            round_id=round_id,
            instant=ts,
            committed=True,
            records_read=records_read,
            records_written=sum(s.num_inserts + s.num_update_writes for s in stats),
            records_deleted=sum(s.num_deletes for s in stats),
            error_records=bad.num_rows,
            files_written=len(stats),
            read_seconds=read_s,
            write_seconds=max(0.0, job_s - read_s),
            commit_seconds=commit_s,
            duration_seconds=duration,
            records_per_second=records_read / duration if duration > 0 else 0.0,
            lag=lag,
            retries=retries,
        )

    def _guard(self, table: HudiTable, round_id: int) -> None:
        """Never commit a round twice: the table's checkpoint must be the previous round's."""
        current = self._restore(table)
        have = current.round_id if current else 0
        if have != round_id - 1:
            raise PipelineError(
                f"table '{table.base_path}' already holds checkpoint round {have}; this writer "
                f"was about to commit round {round_id}. Another writer changed the table; "
                "restart the pipeline to resume from the table's checkpoint"
            )

    @staticmethod
    def _landed(table: HudiTable, ts: str) -> bool:
        try:
            table.timeline.reload()
            return table.timeline.is_completed_commit(ts)
        except Exception:
            return False

    @staticmethod
    def _rollback(client: WriteClient, ts: str) -> None:
        try:
            client.table.timeline.reload()
            inst = client.table.timeline.find(ts, COMMIT)
            if inst is not None:
                client.rollback(ts)
        except Exception as exc:  # the next open rolls it back
            log.warning("rollback of instant %s failed (left for the next start): %s", ts, exc)


__all__ = ["RoundRunner"]
