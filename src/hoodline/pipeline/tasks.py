"""What reader, assigner and writer tasks run (engine-agnostic; the Spark runtime calls these
from ``mapInArrow`` functions with its task id and attempt number).

* :func:`run_reader`: read the task's bounded plan, key the records (:mod:`.transform`) in
  blocks of about :data:`BLOCK_RECORDS`, tag them with their file group when the index is BUCKET
  (pure function of the key), and yield keyed record batches, error rows and finally the
  task's :class:`~hoodline.pipeline.sources.ReadOutcome`.
* :func:`run_assigner` (BLOOM index): all records of a key are in one task (shuffled by key);
  reduce them, look keys up and assign inserts to small files / new file groups (RFC-24).
* :func:`run_writer`: all records of a file group are in one task (shuffled by file group);
  reduce them per key (records of one key may come from several readers) and write each file
  group once; returns one serialized WriteStat per file group written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from hoodline.pipeline import test_hooks
from hoodline.pipeline.sources import ReadOutcome, ReadTask, read_task
from hoodline.pipeline.transform import (
    SEQ,
    Prepared,
    RecordSpec,
    file_rejection_errors,
    keyed_schema,
    prepare_files,
    prepare_kafka,
    resolve,
)
from hoodline.pipeline.write_buffer import WriteBuffer
from hoodline.table.write.client import tag_and_assign
from hoodline.table.write.file_writer import write_file_group
from hoodline.table.write.records import (
    FILE_ID,
    PARTITION_PATH,
    dictionary_codes,
    group_slices,
)

#: Source records keyed together (bigger blocks: fewer, faster vectorised calls).
BLOCK_RECORDS = 65_536


@dataclass(frozen=True)
class ErrorRows:
    """Bad records of a reader task (``ERROR_SCHEMA``)."""

    batch: pa.RecordBatch


def _conform(spec: RecordSpec, tables: Iterable[pa.Table | pa.RecordBatch]) -> pa.Table:
    schema = keyed_schema(spec.ctx.data_schema)
    parts = []
    for t in tables:
        if t.num_rows == 0:
            continue
        tbl = t if isinstance(t, pa.Table) else pa.Table.from_batches([t])
        tbl = tbl.select(schema.names)
        parts.append(tbl.cast(schema) if tbl.schema != schema else tbl)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _tag(spec: RecordSpec, records: pa.Table, view: object) -> pa.Table:
    untagged = records.drop_columns([FILE_ID])
    tagged = tag_and_assign(spec.ctx, untagged, view=view)  # type: ignore[arg-type]
    return tagged.select(keyed_schema(spec.ctx.data_schema).names)


def run_reader(
    task: ReadTask, spec: RecordSpec, tag_bucket: bool
) -> Iterator[pa.RecordBatch | ErrorRows | ReadOutcome]:
    """See module docs. ``tag_bucket``: fill the file group here (BUCKET index)."""
    view = spec.ctx.table().fs_view() if tag_bucket else None
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    first_row: dict[str, int] = {
        s.split_id: getattr(s, "records_to_skip", 0) for s in task.splits
    }
    paused = False

    def flush(prepared: Prepared) -> Iterator[pa.RecordBatch | ErrorRows]:
        if prepared.errors.num_rows:
            yield ErrorRows(prepared.errors)
        recs = prepared.records
        if recs.num_rows and view is not None:
            recs = _tag(spec, recs, view)
        yield from recs.combine_chunks().to_batches()

    for item in read_task(task):
        if isinstance(item, ReadOutcome):
            if pending:
                block = pa.Table.from_batches(pending).combine_chunks().to_batches()
                for b in block:
                    yield from flush(prepare_kafka(spec, b))
            for event in item.events:
                for rej in getattr(event, "rejected", ()):
                    yield ErrorRows(
                        file_rejection_errors(spec, rej.split_id, rej.rows_emitted, rej.reason)
                    )
            yield item
            return
        batch, split_id = item
        if not paused:
            paused = True
            test_hooks.hook("read")
        if spec.source_type == "files":
            sid = split_id or ""
            start = first_row.get(sid, 0)
            first_row[sid] = start + batch.num_rows
            yield from flush(prepare_files(spec, batch, sid, start))
            continue
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows >= BLOCK_RECORDS:
            block = pa.Table.from_batches(pending).combine_chunks().to_batches()
            pending, pending_rows = [], 0
            for b in block:
                yield from flush(prepare_kafka(spec, b))


def run_assigner(
    spec: RecordSpec, batches: Iterable[pa.RecordBatch], task_id: int, num_tasks: int
) -> pa.Table:
    """BLOOM index: reduce per key, tag by index lookup, assign inserts (see module docs)."""
    records = _conform(spec, batches)
    if records.num_rows == 0:
        return records
    records = resolve(records, spec.ctx.config.precombine_field)
    untagged = records.drop_columns([FILE_ID])
    tagged = tag_and_assign(spec.ctx, untagged, task_id, num_tasks)
    return tagged.select(keyed_schema(spec.ctx.data_schema).names)


def run_writer(
    spec: RecordSpec, batches: Iterable[pa.RecordBatch], task_id: int, attempt: int
) -> list[bytes]:
    """Write this task's file groups, one at a time from a bounded buffer (see
    :mod:`.write_buffer`); one JSON WriteStat per file group written."""
    schema = keyed_schema(spec.ctx.data_schema)
    with WriteBuffer(schema, spec.writer_buffer_bytes) as buffer:
        for batch in batches:
            if batch.num_rows:
                buffer.append(_conform(spec, [batch]).combine_chunks().to_batches()[0])
        if buffer.rows == 0:
            return []
        records = buffer.table()
        view = spec.ctx.table().fs_view()
        pcodes, partitions = dictionary_codes(records.column(PARTITION_PATH))
        fcodes, file_ids = dictionary_codes(records.column(FILE_ID))
        width = max(1, len(file_ids))
        order, groups = group_slices(pcodes * width + fcodes)
        ordering = spec.ctx.config.precombine_field
        stats = []
        for code, start, stop in groups:
            partition, file_id = partitions[code // width], file_ids[code % width]
            rows = resolve(records.take(pa.array(order[start:stop])), ordering)
            stat = write_file_group(spec.ctx, partition, file_id, rows.drop_columns([SEQ]),
                                    view.latest_file_slice(partition, file_id), task_id, attempt)
            if stat is not None:
                stats.append(stat)
    if stats:
        test_hooks.hook("write")
    return [json.dumps(s.to_dict()).encode() for s in stats]
