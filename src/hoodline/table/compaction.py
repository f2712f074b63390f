"""Compaction of merge-on-read tables: merge each file slice's logs into a new base file.

Timeline (as Java Hudi writes it, table version 6)::

    <C>.compaction.requested   Avro container file: HoodieCompactionPlan (one operation per
                               file group: its base file, log files, base instant)
    <C>.compaction.inflight    (empty)
    <C>.commit                 commit metadata, ``compacted: true``, operationType COMPACT

Executing the plan writes, per operation, ``<fileId>_<token>_<C>.parquet``: the slice read as a
snapshot (base rows merged with the committed blocks of the planned log files), meta columns
kept except ``_hoodie_file_name`` (the new file's name), with the footer bloom filter and key
range. The base file is merged one row group at a time (:class:`~.log.merge.LogApplication`),
so a compaction holds the slice's log records and one row group of it, not the whole file;
logs that only bring new keys let its row groups be copied as they are. Once ``<C>.commit``
exists, the group's latest slice is that base file; later writes log against it (base
instant ``C``).

Two ways to run them (``hoodline.compaction.async``):

* **inline** (the default): a writer schedules and executes a compaction between two writes, so
  no deltacommit ever logs against a pending compaction;
* **asynchronous**: the writer schedules the plan between two writes and executes it in the
  background (:class:`~hoodline.table.background.BackgroundCompactor`) while further
  writes go on. As in Java Hudi, a write to a file group of a pending plan logs against the
  compaction instant (``.{fileId}_{C}.log.N``), and readers merge those logs with the slice the
  plan compacts (:meth:`~hoodline.table.fs_view.FileGroup.latest_merged`) until ``<C>.commit``
  exists. hudi-rs 0.5.0 does not read such logs before the compaction completes (it returns the
  slice the plan compacts), which is why inline stays the default.

Compactions take the slices that have accumulated the most log files, a bounded number at a
time (:func:`plan_file_slices`), so the work spreads over the writes; a file group is in at
most one pending plan. A compaction a crash interrupted is executed again from its plan by the
next writer (:func:`finish_pending_compactions`) when it opens.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodline import faults
from hoodline.errors import WriterLockError
from hoodline.faults import FaultPoint
from hoodline.table.bloom import KeyFilter
from hoodline.table.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from hoodline.table.compaction_plan import CompactionOperation, read_plan, serialize_plan
from hoodline.table.fs_view import CommittedInstants, FileSlice, base_file_name
from hoodline.table.instant import COMPACTION, Instant, State
from hoodline.table.log.merge import LogApplication, LogRecords, added_keys
from hoodline.table.markers import Markers
from hoodline.table.parallel import TaskRunner, thread_runner
from hoodline.table.parquet.row_groups import CopyPlan
from hoodline.table.read import (
    merge_ordering_field,
    open_base_file,
    read_slice_base,
    read_slice_logs,
    slice_base_row_groups,
    table_schema,
)
from hoodline.table.schema import arrow_to_avro_schema_json, data_schema
from hoodline.table.table import HudiTable
from hoodline.table.write.context import (
    DICTIONARY_META,
    WriteContext,
    ensure_partition_metadata,
    merge_schema,
    output_schema,
    without,
    write_token,
)
from hoodline.table.write.file_writer import (
    BaseFileWriter,
    copy_plan_for,
    footer_for,
    previous_filter,
    write_parquet_copying,
)
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import FILE_NAME, RECORD_KEY

log = logging.getLogger(__name__)


def planned_slice(op: CompactionOperation) -> FileSlice:
    """The file slice an operation compacts (paths relative to the table)."""
    part = op.partition_path

    def rel(name: str) -> str:
        return f"{part}/{name}" if part else name

    return FileSlice(
        part,
        op.file_id,
        op.base_instant,
        rel(op.base_file) if op.base_file else None,
        0,
        tuple(rel(f) for f in op.log_files),
    )

def plan_file_slices(
    slices: list[FileSlice], due_logs: int | None, log_size_ratio: float = 0.0,
    max_log_files: int = 0,
) -> list[FileSlice]:
    """The slices a compaction takes (pure policy).

    Slices of file groups in a pending compaction are never taken. ``due_logs`` None: every
    slice with log files (a compaction on demand). Otherwise the
    slices with at least ``due_logs`` log files (each write adds at most one to a slice, so
    that many writes went into the group since its last compaction) whose log files also hold
    at least ``log_size_ratio`` times their base file's bytes (a slice without a base file needs
    only the count), largest log share first, at most ``ceil(slices with logs / due_logs)`` of
    them. Rewriting a base file once its logs reached a share of it keeps the rewriting per
    write proportional to what the writes add, however large the table grows; the bound spreads
    it over the writes when every group is written each time. A slice with ``max_log_files``
    (> 0) log files is due whatever its share: small writes into a large base file gathered
    hundreds of log files per slice, every one listed again by each deltacommit."""
    with_logs = [s for s in slices if s.log_files and s.pending_compaction is None]
    if due_logs is None:
        return with_logs
    due = [
        s for s in with_logs
        if len(s.log_files) >= due_logs
        and (s.base_file is None or s.log_bytes >= log_size_ratio * s.file_size
             or 0 < max_log_files <= len(s.log_files))
    ]
    if not due:
        return []

    def share(s: FileSlice) -> float:
        return s.log_bytes / s.file_size if s.base_file is not None and s.file_size else 1e18

    due.sort(key=lambda s: (-share(s), -len(s.log_files), s.partition_path, s.file_id))
    return due[: max(1, math.ceil(len(with_logs) / due_logs))]


def schedule_compaction(
    table: HudiTable, due_logs: int | None = None, log_size_ratio: float = 0.0,
    max_log_files: int = 0,
) -> Instant | None:
    """Plan compacting the latest file slices :func:`plan_file_slices` picks; None when it
    picks none."""
    view = table.write_view()
    operations = [
        CompactionOperation(
            s.partition_path,
            s.file_id,
            s.base_instant,
            s.file_name,
            tuple(f.rsplit("/", 1)[-1] for f in s.log_files),
        )
        for s in plan_file_slices(view.latest_file_slices(), due_logs, log_size_ratio,
                                  max_log_files)
    ]
    if not operations:
        return None
    ts = table.new_instant_time()
    return table.timeline.create_requested(COMPACTION, ts, serialize_plan(operations))


@dataclass(frozen=True)
class CompactionTask:
    """One file group of a compaction, with everything a worker needs (picklable)."""

    ctx: WriteContext
    #: the read schema: meta columns and the table's data columns
    schema: pa.Schema
    operation: CompactionOperation
    #: instants whose log blocks are merged
    visible: CommittedInstants
    task_id: int


#: log keys looked up in the base file's bloom filter before the exact check of every key
_PROBE_KEYS = 256


def _keeps_every_base_row(
    base_keys: pa.ChunkedArray, logs: LogRecords | None, base_filter: KeyFilter | None
) -> bool:
    """Whether the logs neither replace nor delete a base row (they only bring new keys).

    A few of the log's keys are first looked up in the base file's bloom filter (which holds
    every base key): when one may be there, the logs most likely update the base and the exact
    check of every key against every base key (~8 ms per 150k base rows) is skipped; a false
    positive only costs the row groups' copy."""
    if logs is None:
        return True
    log_keys = (logs.winners.column(RECORD_KEY), logs.deleted)
    if base_filter is not None and any(
        base_filter.might_contain(keys.slice(0, _PROBE_KEYS)).any() for keys in log_keys
    ):
        return False
    return not any(
        len(keys) and pc.any(pc.is_in(base_keys, value_set=keys)).as_py() for keys in log_keys
    )


def compact_file_group(task: CompactionTask) -> WriteStat:
    """Write the compacted base file of one file group (runs on any worker)."""
    ctx, op, schema = task.ctx, task.operation, task.schema
    table = ctx.table()
    s = planned_slice(op)
    # the log records as they are written: not the file name (the new file names itself),
    # the commit time and partition path as dictionaries (one value per block, usually)
    logs = read_slice_logs(table, s, merge_schema(without(schema, (FILE_NAME,))), task.visible)
    name = base_file_name(op.file_id, write_token(task.task_id, 0), ctx.instant_ts)
    # the columns as the writers write them (nullability of the table schema), so a base file
    # a writer wrote can have its row groups copied
    out_schema = output_schema(ctx.data_schema)
    rows_schema = merge_schema(without(out_schema, (FILE_NAME,)))
    rel = f"{op.partition_path}/{name}" if op.partition_path else name
    path = table.base_path / rel
    plan: CopyPlan | None = None
    previous = added = None
    held: dict[str, pa.ChunkedArray] = {}
    base_file: pq.ParquetFile | None = None
    if s.base_file is not None:
        base_path = table.base_path / s.base_file
        base_file = open_base_file(base_path, s, DICTIONARY_META)
        # the old base file's bloom filter already holds its keys: add the keys the logs
        # brought that it lacks
        previous = previous_filter(base_file)
        if ctx.options.copy_row_groups:
            # the keys first: when the logs only bring new keys, row groups can be copied
            base_keys = base_file.read(columns=[RECORD_KEY], use_threads=False).column(0)
            held[RECORD_KEY] = base_keys
            if _keeps_every_base_row(base_keys, logs, previous):
                plan = copy_plan_for(ctx, base_path, out_schema)  # from the footer alone
    ensure_partition_metadata(table.base_path, op.partition_path, ctx.instant_ts)
    Markers(table, ctx.instant_ts).create(op.partition_path, name, "CREATE")
    path.parent.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        # the logs only brought new keys: the base file's row groups are copied as they are
        # (its small ones are read and written again with the log records)
        winners = logs.winners if logs is not None else out_schema.empty_table()
        rest = plan.left_over()
        parts = [read_slice_base(table, s, schema, threads=False, row_groups=rest)] if rest else []
        part = pa.concat_tables([_conformed(p, rows_schema) for p in (*parts, winners)])
        keys = pa.chunked_array(
            [*base_keys.chunks, *winners.column(RECORD_KEY).chunks], type=pa.string())
        added = winners.column(RECORD_KEY).combine_chunks()
        footer = footer_for(keys, ctx, previous, added)
        write_parquet_copying(path, plan, out_schema, name, part, footer, ctx.options)
        num_writes, from_logs = plan.rows() + part.num_rows, winners.num_rows
    else:
        # the base file row group by row group: one is held at a time besides the log records
        # (a merge of the whole file at once held it two or three times over)
        application = LogApplication(logs, schema, merge_ordering_field(table))
        pieces: Iterator[pa.Table] = iter(())
        if base_file is not None:
            if RECORD_KEY in held:
                application.expect(held[RECORD_KEY])  # one lookup for the whole file
            # the new file names itself: the old name is not read
            held[FILE_NAME] = pa.chunked_array(
                [pa.nulls(base_file.metadata.num_rows, pa.string())])
            # the repeating meta columns as dictionaries, as the file was opened to give them
            pieces = slice_base_row_groups(table, s, merge_schema(schema), held, base_file)
        kept_keys: list[pa.ChunkedArray] = []
        with BaseFileWriter(path, ctx.options, out_schema, {FILE_NAME: name}) as out:
            for piece in pieces:
                kept = _conformed(application.base_rows(piece), rows_schema)
                out.write(kept)
                kept_keys.append(kept.column(RECORD_KEY))
            log_rows, in_base = application.log_rows()
            out.write(_conformed(log_rows, rows_schema))
            if s.base_file is not None:
                added = added_keys(log_rows, in_base)
            keys = pa.chunked_array(
                [c for k in (*kept_keys, log_rows.column(RECORD_KEY)) for c in k.chunks],
                type=pa.string())
            out.finish(footer_for(keys, ctx, previous, added))
        num_writes, from_logs = out.rows, log_rows.num_rows
    size = path.stat().st_size
    return WriteStat(
        file_id=op.file_id,
        path=rel,
        prev_commit=op.base_instant,
        num_writes=num_writes,
        num_deletes=0,
        num_update_writes=0,
        num_inserts=0,
        total_write_bytes=size,
        total_write_errors=0,
        partition_path=op.partition_path,
        file_size_in_bytes=size,
        total_log_files_compacted=len(op.log_files),
        # records the logs contributed to the new base file
        total_log_records=from_logs,
    )


def _conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` as ``schema``: the base file's columns but ``_hoodie_file_name``, which names
    the new file and which its writer gives (log records come without it)."""
    if FILE_NAME in rows.schema.names:
        rows = rows.drop_columns([FILE_NAME])
    return rows.cast(schema)


def run_compaction(
    table: HudiTable, instant: Instant, options: WriteOptions, runner: TaskRunner | None = None,
    holds_lock: Callable[[], None] = lambda: None, checked: bool = False,
) -> Instant:
    """Execute a requested or inflight compaction; returns its completed commit. ``runner``
    runs the file groups' tasks (default: threads, ``hoodline.write.threads``); a pipeline
    passes its engine's, so they run as one job on the workers. ``holds_lock`` raises when the
    writer lost its lock meanwhile (paused past its expiry: the new holder finishes the plan),
    checked before the commit. ``checked``: the plan was made just now from a checked view
    (:func:`schedule_compaction`), so the slices are not listed and checked again."""
    tl = table.timeline
    operations = _without_accepted_losses(table, read_plan(tl, instant))
    if not checked:
        table.write_view()  # the slices the plan merges must hold what their commits recorded
    markers = Markers(table, instant.timestamp)
    for rel in markers.marked_files():  # a crashed attempt's files: written again below
        (table.base_path / rel).unlink(missing_ok=True)
    if instant.state is State.REQUESTED:
        instant = tl.transition_to_inflight(instant)
    schema = table_schema(table)
    data = data_schema(schema)
    ctx = WriteContext(
        base_path=table.base_path,
        config=table.config,
        options=options,
        instant_ts=instant.timestamp,
        operation=WriteOperation.UPSERT,
        data_schema=data,
    )
    visible = CommittedInstants.of(tl, as_of=instant.timestamp)
    # costliest first, so no worker is left with a big group at the end
    order = sorted(range(len(operations)), key=lambda i: -len(operations[i].log_files))
    tasks = [CompactionTask(ctx, schema, operations[i], visible, i) for i in order]
    run = runner if runner is not None else thread_runner(options.write_threads)
    stats = run(compact_file_group, tasks)
    metadata = CommitMetadata(
        partition_to_write_stats={},
        operation_type="COMPACT",
        extra_metadata={SCHEMA_KEY: arrow_to_avro_schema_json(data, table.config.name)},
        compacted=True,
    )
    for stat in stats:
        metadata.partition_to_write_stats.setdefault(stat.partition_path, []).append(stat)
    markers.require([s.path for s in stats])
    faults.reach(FaultPoint.COMPACTION_WRITTEN)
    try:
        holds_lock()
    except WriterLockError as exc:
        raise WriterLockError(f"{exc}; compaction {instant.timestamp} is not committed by this "
                              "writer (the lock's new holder finishes it)") from None
    done = tl.complete(instant, metadata)
    markers.delete_all()
    return done


def _without_accepted_losses(
    table: HudiTable, operations: Sequence[CompactionOperation]
) -> list[CompactionOperation]:
    """The plan's operations without the files it names that are gone and whose loss was
    accepted (``hoodline table accept-loss``): a plan made before the loss could neither run
    ("disappeared while it was read") nor be rolled back (damaged-table re-review)."""
    from hoodline.table.integrity import accepted_losses

    lost = {path for path, _instant in accepted_losses(table.meta_path)}
    if not lost:
        return list(operations)
    out = []
    for op in operations:
        def gone(name: str, part: str = op.partition_path) -> bool:
            rel = f"{part}/{name}" if part else name
            return rel in lost and not table.absolute(rel).exists()

        logs = tuple(f for f in op.log_files if not gone(f))
        base = "" if op.base_file and gone(op.base_file) else op.base_file
        if (logs, base) != (op.log_files, op.base_file):
            log.warning("compaction of file group %s in '%s' goes on without %d file(s) whose "
                        "loss was accepted", op.file_id, op.partition_path,
                        len(op.log_files) - len(logs) + (base != op.base_file))
            op = replace(op, log_files=logs, base_file=base)
        out.append(op)
    return out


def compact(
    table: HudiTable,
    options: WriteOptions,
    runner: TaskRunner | None = None,
    due_logs: int | None = None,
    log_size_ratio: float = 0.0,
    max_log_files: int = 0,
    holds_lock: Callable[[], None] = lambda: None,
) -> Instant | None:
    """Schedule and execute one compaction (None: nothing to do); ``due_logs``,
    ``log_size_ratio`` and ``max_log_files``: see :func:`plan_file_slices`. The caller holds
    the writer lock (``holds_lock``: see :func:`run_compaction`)."""
    requested = schedule_compaction(table, due_logs, log_size_ratio, max_log_files)
    if requested is None:
        return None
    return run_compaction(table, requested, options, runner, holds_lock, checked=True)


def finish_pending_compactions(
    table: HudiTable, options: WriteOptions, runner: TaskRunner | None = None
) -> list[Instant]:
    """Execute compactions a crash interrupted (oldest first), from their plans."""
    table.timeline.reload()
    return [
        run_compaction(table, inst, options, runner)
        for inst in table.timeline.pending([COMPACTION])
    ]
