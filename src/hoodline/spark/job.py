"""A round's job on Spark: one DataFrame per :class:`~hoodline.pipeline.tasks.RoundJob`.

Stages (facts each has a test for):

* **readers** -- :func:`per_subtask` runs ``fn(i)`` as Spark task ``i`` of a stage with exactly
  ``n`` tasks (``spark.range(0, n, numPartitions=n)``: partition ``i`` holds exactly the row
  ``i``), so reader subtask *i* is Spark task *i*, also on retries. A zero-row range would have
  *no* tasks, which is why every subtask gets a row.
* **assigners** (BLOOM index) -- records routed by record key, so all records of a key meet.
* **writers** -- records routed by file group into exactly ``writers`` partitions; Spark calls a
  ``mapInArrow`` function for every one of them, also the empty ones, and adaptive execution
  does not coalesce a repartition with an explicit count: so every writer task reports.
* **direct** (``job.direct_write``, append-only bulk_insert) -- the reader tasks write their own
  records and report as writers: one stage, no shuffle.

**Spark moves bytes, not rows.** Every row of the job is an *envelope* row (``_route``,
``_kind``, ``_task``, ``_payload``): records travel as Arrow IPC streams, one row per batch and
target task (the sending task already knows where each record goes), so the JVM copies a few
large binary values instead of converting every column of every record to rows and back, and the
records keep their exact Arrow types. ``_route`` picks the target partition exactly: Spark's hash
partitioning is ``pmod(murmur3_32(value, seed 42), n)``, and :func:`spark_routes` gives, for every
target ``t``, a value Spark sends to partition ``t``. Control rows (a reader's outcome, its bad
records, a task failure) travel in the same envelope and reach the driver in the result rows; the
driver gets everything it needs to commit from one ``toArrow()`` (:func:`decode`): no persist, no
second action, no accumulators.

Functions passed to Spark are pickled to executors: they capture the picklable job, never a
SparkSession.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import cache

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from hoodline.errors import EngineJobError
from hoodline.pipeline.engine import RoundOutputBuilder
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import ErrorRows, RoundJob, TaskFailure
from hoodline.spark.probe import task_attempt_id, task_identity
from hoodline.spark.worker_gc import freeze_loaded
from hoodline.table.index.bucket import bucket_of_file_id, java_string_hashes
from hoodline.table.write.records import FILE_ID, RECORD_KEY, dictionary_codes

ROUTE_COLUMN = "_route"
KIND_COLUMN = "_kind"
TASK_COLUMN = "_task"
PAYLOAD_COLUMN = "_payload"

RECORDS = 0
READER_STATE = 1
BAD_RECORDS = 2
WRITE_STATUS = 3
WRITER_DONE = 4
TASK_FAILED = 5

#: (nullable like Spark's columns: what a task yields must match what it passes through)
ENVELOPE = pa.schema(
    [
        pa.field(ROUTE_COLUMN, pa.int32()),
        pa.field(KIND_COLUMN, pa.int8()),
        pa.field(TASK_COLUMN, pa.int32()),
        pa.field(PAYLOAD_COLUMN, pa.binary()),
    ]
)
ENVELOPE_DDL = (
    f"`{ROUTE_COLUMN}` int, `{KIND_COLUMN}` tinyint, `{TASK_COLUMN}` int, "
    f"`{PAYLOAD_COLUMN}` binary"
)

#: The seed of Spark's hash partitioning (``HashPartitioning`` uses ``Murmur3Hash(_, 42)``).
_SPARK_HASH_SEED = 42


def spark_partition(value: int, partitions: int) -> int:
    """The partition Spark's ``repartition(partitions, int column)`` sends ``value`` to."""
    return mmh3.hash(struct.pack("<i", value), _SPARK_HASH_SEED, signed=True) % partitions


@cache
def spark_routes(partitions: int) -> tuple[int, ...]:
    """For every target partition ``t``, an int value Spark's hash partitioning sends to ``t``."""
    routes: dict[int, int] = {}
    value = 0
    while len(routes) < partitions:
        routes.setdefault(spark_partition(value, partitions), value)
        value += 1
    return tuple(routes[t] for t in range(partitions))


# -- envelope rows ---------------------------------------------------------------------------------
def _rows(kind: int, task: int, payloads: list[bytes], routes: list[int] | None = None
          ) -> pa.RecordBatch:
    n = len(payloads)
    return pa.RecordBatch.from_arrays(
        [pa.array(routes if routes is not None else [0] * n, pa.int32()),
         pa.array([kind] * n, pa.int8()), pa.array([task] * n, pa.int32()),
         pa.array(payloads, pa.binary())],
        schema=ENVELOPE,
    )


#: Record payloads are LZ4-compressed by Arrow before they reach the JVM: every byte a payload
#: has is copied several times there (Arrow to rows, the shuffle's serializer and its own
#: compression, rows to Arrow) and crosses the Python-JVM sockets twice (BENCHMARKS.md).
RECORDS_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


def to_ipc(data: pa.RecordBatch | pa.Table, options: pa.ipc.IpcWriteOptions | None = None
           ) -> bytes:
    """Arrow IPC stream bytes of ``data`` (how records and bad records travel)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema, options=options) as writer:
        writer.write(data)
    return bytes(sink.getvalue())


def _from_ipc(payloads: Iterable[bytes]) -> Iterator[pa.RecordBatch]:
    for payload in payloads:
        yield from pa.ipc.open_stream(payload)


def _control(item: ErrorRows | ReadOutcome | TaskFailure, task: int) -> pa.RecordBatch:
    if isinstance(item, ErrorRows):
        return _rows(BAD_RECORDS, task, [to_ipc(item.batch)])
    if isinstance(item, ReadOutcome):
        return _rows(READER_STATE, task, [item.to_bytes()])
    return _rows(TASK_FAILED, task, [item.to_bytes()])


def _routed(records: pa.Table | pa.RecordBatch, targets: np.ndarray, task: int,
            partitions: int) -> pa.RecordBatch:
    """One RECORDS row per target task present, carrying its records."""
    routes = spark_routes(partitions)
    table = records if isinstance(records, pa.Table) else pa.Table.from_batches([records])
    present = np.unique(targets)
    payloads: list[bytes] = []
    for target in present:
        rows = table if len(present) == 1 else table.take(
            pa.array(np.flatnonzero(targets == target)))
        payloads.append(to_ipc(rows.combine_chunks(), RECORDS_IPC))
    return _rows(RECORDS, task, payloads, [routes[int(t)] for t in present])


def key_targets(records: pa.Table | pa.RecordBatch, tasks: int) -> np.ndarray:
    """The assigner task of every record: a hash of its record key (equal keys meet)."""
    hashes = java_string_hashes(records.column(RECORD_KEY))
    return (hashes & np.uint32(0x7FFFFFFF)).astype(np.int64) % tasks


def file_group_targets(records: pa.Table | pa.RecordBatch, tasks: int) -> np.ndarray:
    """The writer task of every record: a function of its file group (buckets spread evenly)."""
    codes, file_ids = dictionary_codes(records.column(FILE_ID))
    per_group = np.array([_file_group_target(fid, tasks) for fid in file_ids], dtype=np.int64)
    targets: np.ndarray = per_group[codes]
    return targets


def _file_group_target(file_id: str, tasks: int) -> int:
    bucket = bucket_of_file_id(file_id)
    return (bucket if bucket is not None else zlib.crc32(file_id.encode())) % tasks


def _split_envelope(batches: Iterator[pa.RecordBatch]) -> tuple[list[bytes], list[pa.RecordBatch]]:
    """The record payloads and the control rows of a task's input."""
    payloads: list[bytes] = []
    control: list[pa.RecordBatch] = []
    for batch in batches:
        is_records = pc.equal(batch.column(KIND_COLUMN), RECORDS)
        if not pc.all(is_records).as_py():
            control.append(batch.filter(pc.invert(is_records)).cast(ENVELOPE))
            batch = batch.filter(is_records)
        if batch.num_rows:
            payloads.extend(batch.column(PAYLOAD_COLUMN).to_pylist())
    return payloads, control


# -- stages ----------------------------------------------------------------------------------------
def per_subtask(
    spark: SparkSession,
    n: int,
    fn: Callable[[int], Iterator[pa.RecordBatch]],
    ddl: str,
) -> DataFrame:
    """A DataFrame whose task ``i`` (of exactly ``n``) yields ``fn(i)``'s batches."""
    if n < 1:
        raise EngineJobError(f"a stage needs at least one subtask, got {n}")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_loaded()
        ids: list[int] = []
        for batch in batches:
            ids.extend(batch.column(0).to_pylist())
        partition, _ = task_identity()
        if ids != [partition]:
            raise EngineJobError(
                f"task {partition} received subtask ids {ids}; expected exactly [{partition}]"
            )
        yield from fn(partition)

    return spark.range(0, n, 1, numPartitions=n).mapInArrow(run, ddl)


def reader_stage(spark: SparkSession, job: RoundJob) -> DataFrame:
    """Reader task *i* runs ``job.read(i)``: its records routed to the next stage's tasks
    (assigners by key, or writers by file group), and its control rows."""
    by_key = job.key_shuffle

    def read(i: int) -> Iterator[pa.RecordBatch]:
        for item in job.read(i):
            if isinstance(item, pa.RecordBatch):
                if item.num_rows:
                    targets = (key_targets(item, job.writers) if by_key
                               else file_group_targets(item, job.writers))
                    yield _routed(item, targets, i, job.writers)
            else:
                yield _control(item, i)

    return per_subtask(spark, job.readers, read, ENVELOPE_DDL)


def assign_stage(df: DataFrame, job: RoundJob) -> DataFrame:
    """Records meet by key in ``job.writers`` assigner tasks (BLOOM index), which route them on
    by file group; control rows pass through unchanged."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_loaded()
        task, _ = task_identity()
        payloads, control = _split_envelope(batches)
        yield from control
        for out in job.assign(_from_ipc(payloads), task):
            if isinstance(out, TaskFailure):
                yield _control(out, task)
            elif out.num_rows:
                yield _routed(out, file_group_targets(out, job.writers), task, job.writers)

    shuffled = df.repartition(job.writers, ROUTE_COLUMN)
    return shuffled.mapInArrow(run, ENVELOPE_DDL)


def writer_stage(df: DataFrame, job: RoundJob) -> DataFrame:
    """Records meet by file group in ``job.writers`` writer tasks; each yields the control rows
    it received, one row per write status and one "done" row."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_loaded()
        task, _ = task_identity()
        # A writer's input is one task's share of one round: bounded by the round limits.
        payloads, control = _split_envelope(batches)
        statuses: list[bytes] = []
        failures: list[pa.RecordBatch] = []
        # the attempt *id* (unique per SparkContext) goes into the write token: attemptNumber
        # restarts when a stage is resubmitted, and a retry must never reuse a lost attempt's
        # file names
        for item in job.write(_from_ipc(payloads), task, task_attempt_id()):
            if isinstance(item, TaskFailure):
                failures.append(_control(item, task))
            else:
                statuses.append(item)
        yield from control  # pass-through from readers
        yield from failures
        yield _rows(WRITE_STATUS, task, statuses)
        yield _rows(WRITER_DONE, task, [b""])

    if job.writers < 1:
        raise EngineJobError(f"need at least one writer task, got {job.writers}")
    return df.repartition(job.writers, ROUTE_COLUMN).mapInArrow(run, ENVELOPE_DDL)


def direct_stage(spark: SparkSession, job: RoundJob) -> DataFrame:
    """``job.direct_write``: reader task *i* writes its own records and reports as writer *i*;
    only result rows leave the tasks (no shuffle)."""

    def run(i: int) -> Iterator[pa.RecordBatch]:
        statuses: list[bytes] = []
        for item in job.read_and_write(i, task_attempt_id()):
            if isinstance(item, bytes):
                statuses.append(item)
            else:
                yield _control(item, i)
        yield _rows(WRITE_STATUS, i, statuses)
        yield _rows(WRITER_DONE, i, [b""])

    return per_subtask(spark, job.readers, run, ENVELOPE_DDL)


def round_dataframe(session: SparkSession, job: RoundJob) -> DataFrame:
    """The round's DataFrame; ``toArrow()`` runs it and returns the result rows."""
    if job.direct_write:
        return direct_stage(session, job)
    df = reader_stage(session, job)
    if job.key_shuffle:
        df = assign_stage(df, job)
    return writer_stage(df, job)


def decode(results: pa.Table, builder: RoundOutputBuilder) -> RoundOutputBuilder:
    """Feed the result rows of :func:`round_dataframe` to ``builder``."""
    rows = results.select([KIND_COLUMN, TASK_COLUMN, PAYLOAD_COLUMN]).to_pydict()
    for kind, task, payload in zip(
        rows[KIND_COLUMN], rows[TASK_COLUMN], rows[PAYLOAD_COLUMN], strict=True
    ):
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
            raise EngineJobError(f"unexpected row kind {kind} in round results")
    return builder
