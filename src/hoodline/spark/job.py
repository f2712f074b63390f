"""A round's job on Spark: one RDD per :class:`~hoodline.pipeline.tasks.RoundJob`.

Stages (facts each has a test for):

* **readers** -- :func:`per_subtask` runs ``fn(i)`` as Spark task ``i`` of a stage with exactly
  ``n`` tasks (``parallelize(range(n), n)``: partition ``i`` holds exactly the element ``i``),
  so reader subtask *i* is Spark task *i*, also on retries; each task checks that it got
  exactly its own element.
* **assigners** (BLOOM index) -- records routed by record key, so all records of a key meet.
* **writers** -- records routed by file group into exactly ``writers`` partitions; Spark runs a
  task for every partition of a shuffle, also the empty ones: so every writer task reports.
* **direct** (``job.direct_write``, append-only bulk_insert) -- the reader tasks write their own
  records and report as writers: one stage, no shuffle.

**Spark moves bytes, not rows.** Every element of the job is an *envelope* ``(kind, task,
payload)``: records travel as Arrow IPC streams, one envelope per batch and target task (the
sending task already knows where each record goes), keyed by that target for the shuffle
(``partitionBy`` with the target as its own partition number). Spark's JVM only moves the
pickled envelopes: no query planning, no code generation, no Arrow-to-row conversion, and the
records keep their exact Arrow types. A DataFrame job of the same shape (``mapInArrow``,
``repartition``) cost the JVM ~200 ms CPU per round more, most of it planning (BENCHMARKS.md).
Control envelopes (a reader's outcome, its bad records, a task failure) travel the same way and
reach the driver in the results; the driver gets everything it needs to commit from one
``collect()`` (:func:`decode`): no persist, no second action, no accumulators.

**Files instead of bytes on one machine.** On a ``local[N]`` master (``files``: the round's
directory, see :meth:`~hoodline.spark.session.HoodlineSpark.shuffle_files_dir`) a record payload
is an Arrow IPC file there instead, and its envelope carries the file's path: every task runs on
this machine, so the JVM moves a few bytes per payload and never copies records (~1.2 s less JVM
CPU per 2M-message ingest, BENCHMARKS.md). A retried task reads the files named by the envelopes
Spark hands it, as it would have read their bytes; the engine removes the directory once the job
ended.

Functions passed to Spark are pickled to executors: they capture the picklable job, never a
SparkSession.
"""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np
import pyarrow as pa
from pyspark import RDD, SparkContext

from hoodline.errors import EngineJobError
from hoodline.pipeline.engine import RoundOutputBuilder
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import ErrorRows, RoundJob, TaskFailure
from hoodline.spark.probe import task_attempt_id, task_identity
from hoodline.spark.worker_gc import freeze_loaded
from hoodline.table.index.bucket import bucket_of_file_id, java_string_hashes
from hoodline.table.write.records import RECORD_KEY, FileGroupCodes, group_slices

RECORDS = 0
READER_STATE = 1
BAD_RECORDS = 2
WRITE_STATUS = 3
WRITER_DONE = 4
TASK_FAILED = 5
RECORDS_FILE = 6

#: ``(kind, task, payload)``: what the job's tasks exchange and return
Envelope = tuple[int, int, bytes]
#: an envelope keyed by the partition (task) of the next stage it goes to
Routed = tuple[int, Envelope]

T = TypeVar("T")


def target_partition(target: int) -> int:
    """The shuffle's partition function: a routed envelope's key *is* its target partition."""
    return target


#: Record payloads are LZ4-compressed by Arrow before they reach the JVM: every byte a payload
#: has is copied several times there (pickled, shuffled, unpickled) and crosses the Python-JVM
#: sockets twice (BENCHMARKS.md).
RECORDS_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


def to_ipc(data: pa.RecordBatch | pa.Table, options: pa.ipc.IpcWriteOptions | None = None
           ) -> bytes:
    """Arrow IPC stream bytes of ``data`` (how records and bad records travel)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema, options=options) as writer:
        writer.write(data)
    return bytes(sink.getvalue())


def _records(rows: pa.Table, task: int, files: str | None) -> Envelope:
    """The envelope of a record payload: its IPC bytes, or a file in ``files`` holding them
    (uncompressed: the file stays in the page cache and is memory-mapped by its reader)."""
    if files is None:
        return RECORDS, task, to_ipc(rows, RECORDS_IPC)
    path = os.path.join(files, f"{uuid.uuid4().hex}.arrow")
    try:
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write(rows)
    except OSError as exc:  # e.g. a full disk: the task, then the round, is tried again
        raise EngineJobError(
            f"could not write {rows.nbytes:,} bytes of records for the next task to {path}: "
            f"{exc}; free space under $TMPDIR (or point TMPDIR elsewhere), or set "
            "runtime.shuffle-files = false to send records through Spark's shuffle"
        ) from exc
    return RECORDS_FILE, task, os.fsencode(path)


def _control(item: ErrorRows | ReadOutcome | TaskFailure, task: int) -> Envelope:
    if isinstance(item, ErrorRows):
        return BAD_RECORDS, task, to_ipc(item.batch)
    if isinstance(item, ReadOutcome):
        return READER_STATE, task, item.to_bytes()
    return TASK_FAILED, task, item.to_bytes()


def _routed(records: pa.Table | pa.RecordBatch, targets: np.ndarray, task: int,
            files: str | None = None) -> Iterator[Routed]:
    """One RECORDS envelope per target task present, carrying its records."""
    table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
    present = np.unique(targets)
    for target in present:
        rows = table if len(present) == 1 else table.take(
            pa.array(np.flatnonzero(targets == target)))
        yield int(target), _records(rows.combine_chunks(), task, files)


def key_targets(records: pa.Table | pa.RecordBatch, tasks: int) -> np.ndarray:
    """The assigner task of every record: a hash of its record key (equal keys meet)."""
    hashes = java_string_hashes(records.column(RECORD_KEY))
    return (hashes & np.uint32(0x7FFFFFFF)).astype(np.int64) % tasks


def _routed_by_file_group(records: pa.Table | pa.RecordBatch, tasks: int, task: int,
                          files: str | None = None) -> Iterator[Routed]:
    """One RECORDS envelope per writer task present (a function of the file group: buckets
    spread evenly), its rows grouped by file group, so that the writer gathers each group from
    slices instead of copying its whole input (see ``file_group_parts``)."""
    table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
    found = FileGroupCodes.of_records(table)
    per_file = np.array([_file_group_target(fid, tasks) for fid in found.file_ids],
                        dtype=np.int64)
    targets = per_file[found.codes % found.width]
    order, _ = group_slices(targets * (int(found.codes.max()) + 1) + found.codes)
    if np.any(order[1:] < order[:-1]):
        table = table.take(pa.array(order))
        targets = targets[order]
    present, starts = np.unique(targets, return_index=True)
    stops = [*starts[1:].tolist(), len(targets)]
    for target, start, stop in zip(present.tolist(), starts.tolist(), stops, strict=True):
        rows = table.slice(start, stop - start).combine_chunks()
        yield target, _records(rows, task, files)


def _file_group_target(file_id: str, tasks: int) -> int:
    bucket = bucket_of_file_id(file_id)
    return (bucket if bucket is not None else zlib.crc32(file_id.encode())) % tasks


class _Inbox:
    """A task's input: record payloads decoded as they arrive, so that each payload's bytes can
    go as soon as its batches are read (a writer does not hold its whole input twice), and the
    control envelopes kept aside (complete once :meth:`batches` is exhausted)."""

    def __init__(self, routed: Iterable[Routed]) -> None:
        self._routed = routed
        self.control: list[Envelope] = []

    def batches(self) -> Iterator[pa.RecordBatch]:
        for _, envelope in self._routed:
            if envelope[0] == RECORDS:
                yield from pa.ipc.open_stream(envelope[2])
            elif envelope[0] == RECORDS_FILE:
                yield from pa.ipc.open_stream(pa.memory_map(os.fsdecode(envelope[2])))
            else:
                self.control.append(envelope)


def _shuffled(rdd: RDD[Routed], partitions: int) -> RDD[Routed]:
    return rdd.partitionBy(partitions, target_partition)


# -- stages ----------------------------------------------------------------------------------------
def per_subtask(sc: SparkContext, n: int, fn: Callable[[int], Iterable[T]]) -> RDD[T]:
    """An RDD whose task ``i`` (of exactly ``n``) yields ``fn(i)``'s elements."""
    if n < 1:
        raise EngineJobError(f"a stage needs at least one subtask, got {n}")

    def run(index: int, ids: Iterable[int]) -> Iterator[T]:
        freeze_loaded()
        got = list(ids)
        partition, _ = task_identity()
        if got != [partition] or index != partition:
            raise EngineJobError(
                f"task {partition} received subtask ids {got}; expected exactly [{partition}]"
            )
        yield from fn(partition)

    return sc.parallelize(range(n), n).mapPartitionsWithIndex(run)


def reader_stage(sc: SparkContext, job: RoundJob, files: str | None = None) -> RDD[Routed]:
    """Reader task *i* runs ``job.read(i)``: its records routed to the next stage's tasks
    (assigners by key, or writers by file group; as files in ``files``, when given), and its
    control envelopes (to task 0)."""
    by_key = job.key_shuffle

    def read(i: int) -> Iterator[Routed]:
        for item in job.read(i):
            if isinstance(item, pa.RecordBatch):
                if item.num_rows:
                    if by_key:
                        yield from _routed(item, key_targets(item, job.writers), i, files)
                    else:
                        yield from _routed_by_file_group(item, job.writers, i, files)
            else:
                yield 0, _control(item, i)

    return per_subtask(sc, job.readers, read)


def assign_stage(rdd: RDD[Routed], job: RoundJob, files: str | None = None) -> RDD[Routed]:
    """Records meet by key in ``job.writers`` assigner tasks (BLOOM index), which route them on
    by file group; control envelopes pass through unchanged."""

    def run(task: int, routed: Iterable[Routed]) -> Iterator[Routed]:
        freeze_loaded()
        inbox = _Inbox(routed)
        for out in job.assign(inbox.batches(), task):
            if isinstance(out, TaskFailure):
                yield 0, _control(out, task)
            elif out.num_rows:
                yield from _routed_by_file_group(out, job.writers, task, files)
        for envelope in inbox.control:
            yield 0, envelope

    return _shuffled(rdd, job.writers).mapPartitionsWithIndex(run)


def writer_stage(rdd: RDD[Routed], job: RoundJob) -> RDD[Envelope]:
    """Records meet by file group in ``job.writers`` writer tasks; each returns the control
    envelopes it received, one envelope per write status and one "done" envelope."""

    def run(task: int, routed: Iterable[Routed]) -> Iterator[Envelope]:
        freeze_loaded()
        # A writer's input is one task's share of one round: bounded by the round limits.
        inbox = _Inbox(routed)
        statuses: list[bytes] = []
        failures: list[Envelope] = []
        # the attempt *id* (unique per SparkContext) goes into the write token: attemptNumber
        # restarts when a stage is resubmitted, and a retry must never reuse a lost attempt's
        # file names
        for item in job.write(inbox.batches(), task, task_attempt_id()):
            if isinstance(item, TaskFailure):
                failures.append(_control(item, task))
            else:
                statuses.append(item)
        yield from inbox.control  # pass-through from readers
        yield from failures
        for status in statuses:
            yield WRITE_STATUS, task, status
        yield WRITER_DONE, task, b""

    if job.writers < 1:
        raise EngineJobError(f"need at least one writer task, got {job.writers}")
    return _shuffled(rdd, job.writers).mapPartitionsWithIndex(run)


def direct_stage(sc: SparkContext, job: RoundJob) -> RDD[Envelope]:
    """``job.direct_write``: reader task *i* writes its own records and reports as writer *i*;
    only result envelopes leave the tasks (no shuffle)."""

    def run(i: int) -> Iterator[Envelope]:
        for item in job.read_and_write(i, task_attempt_id()):
            if isinstance(item, bytes):
                yield WRITE_STATUS, i, item
            else:
                yield _control(item, i)
        yield WRITER_DONE, i, b""

    return per_subtask(sc, job.readers, run)


def round_rdd(sc: SparkContext, job: RoundJob, files: str | None = None) -> RDD[Envelope]:
    """The round's RDD; ``collect()`` runs it and returns the result envelopes. ``files``: a
    directory every task can reach where the shuffles' record payloads go as files (the caller
    removes it once the job ended); None: they travel through Spark's shuffle."""
    if job.direct_write:
        return direct_stage(sc, job)
    rdd = reader_stage(sc, job, files)
    if job.key_shuffle:
        rdd = assign_stage(rdd, job, files)
    return writer_stage(rdd, job)


def decode(results: Iterable[Envelope], builder: RoundOutputBuilder) -> RoundOutputBuilder:
    """Feed the result envelopes of :func:`round_rdd` to ``builder``."""
    for kind, task, payload in results:
        if kind == READER_STATE:
            builder.reader_outcome(task, ReadOutcome.from_bytes(payload))
        elif kind == BAD_RECORDS:
            for batch in pa.ipc.open_stream(payload):
                builder.bad_records(batch)
        elif kind == WRITE_STATUS:
            builder.write_status(task, payload)
        elif kind == WRITER_DONE:
            builder.writer_done(task)
        elif kind == TASK_FAILED:
            builder.failure(TaskFailure.from_bytes(payload))
        else:
            raise EngineJobError(f"unexpected envelope kind {kind} in round results")
    return builder
