"""A round's job on Spark: one DataFrame per :class:`~hoodline.pipeline.tasks.RoundJob`.

Stages (facts each has a test for):

* **readers** -- :func:`per_subtask` runs ``fn(i)`` as Spark task ``i`` of a stage with exactly
  ``n`` tasks (``spark.range(0, n, numPartitions=n)``: partition ``i`` holds exactly the row
  ``i``), so reader subtask *i* is Spark task *i*, also on retries. A zero-row range would have
  *no* tasks, which is why every subtask gets a row.
* **assigners** (BLOOM index) -- records shuffled by (partition path, record key).
* **writers** -- records shuffled by file group into exactly ``writers`` partitions; Spark calls
  a ``mapInArrow`` function for every one of them, also the empty ones, and adaptive execution
  does not coalesce a repartition with an explicit count: so every writer task reports.
* **direct** (``job.direct_write``, append-only bulk_insert) -- the reader tasks write their own
  records and report as writers: one stage, no shuffle.

Data rows and control rows travel in one *envelope* schema (the record columns plus ``_kind``,
``_task`` and ``_payload``): reader tasks emit record rows plus control rows (their outcome, their
bad records, or a task failure); the shuffles carry control rows along (their file group column
is null, so they land in one writer task); writer tasks pass them through and add one control row
per write status plus one "done" row. The driver gets everything it needs to commit from one
``toArrow()`` (:func:`decode`): no persist, no second action, no accumulators.

Spark's Arrow exchange takes timestamps in microseconds only: records travel with
:func:`wire_schema` types and the task functions cast them back to the table's types.

Functions passed to Spark are pickled to executors: they capture the picklable job, never a
SparkSession.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from hoodline.errors import EngineJobError
from hoodline.pipeline.engine import RoundOutputBuilder
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import ErrorRows, RoundJob, TaskFailure
from hoodline.spark.probe import task_attempt_id, task_identity
from hoodline.table.write.records import FILE_ID, PARTITION_PATH, RECORD_KEY

KIND_COLUMN = "_kind"
TASK_COLUMN = "_task"
PAYLOAD_COLUMN = "_payload"

RECORD = 0
READER_STATE = 1
BAD_RECORDS = 2
WRITE_STATUS = 3
WRITER_DONE = 4
TASK_FAILED = 5

RESULT_SCHEMA = pa.schema(
    [
        pa.field(KIND_COLUMN, pa.int8(), nullable=False),
        pa.field(TASK_COLUMN, pa.int32(), nullable=False),
        pa.field(PAYLOAD_COLUMN, pa.binary()),
    ]
)
_CONTROL = RESULT_SCHEMA.names


# -- types -----------------------------------------------------------------------------------------
def _wire_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_wire_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_wire_type(f.type)) for f in t])
    return t


def wire_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the types Spark exchanges with Python (cast back by the tasks)."""
    return pa.schema([f.with_type(_wire_type(f.type)) for f in schema])


_DDL_TYPES = {
    pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
    pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean", pa.string(): "string",
    pa.large_string(): "string", pa.binary(): "binary", pa.large_binary(): "binary",
    pa.date32(): "date",
}


def _ddl_type(t: pa.DataType) -> str:
    if t in _DDL_TYPES:
        return _DDL_TYPES[t]
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{_ddl_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"`{f.name}`: {_ddl_type(f.type)}" for f in t) + ">"
    raise EngineJobError(f"Arrow type {t} has no Spark equivalent here")


def spark_ddl(schema: pa.Schema) -> str:
    """Spark DDL for an Arrow schema (``mapInArrow`` output schemas)."""
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}" for f in schema)


def envelope_schema(data_schema: pa.Schema) -> pa.Schema:
    """``data_schema`` (all nullable) plus the kind, task and payload columns."""
    fields = [f.with_nullable(True) for f in data_schema]
    return pa.schema([*fields, *RESULT_SCHEMA])


# -- envelope rows ---------------------------------------------------------------------------------
def _control(schema: pa.Schema, kind: int, task: int, payload: bytes) -> pa.RecordBatch:
    arrays = [pa.nulls(1, f.type) for f in schema][: len(schema) - 3]
    arrays += [pa.array([kind], pa.int8()), pa.array([task], pa.int32()),
               pa.array([payload], pa.binary())]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _records(schema: pa.Schema, batch: pa.RecordBatch | pa.Table, task: int) -> pa.RecordBatch:
    n = batch.num_rows
    data = [f.name for f in schema][: len(schema) - 3]
    cols = [batch.column(name) for name in data]
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in cols]
    cols += [pa.array([RECORD] * n, pa.int8()), pa.array([task] * n, pa.int32()),
             pa.nulls(n, pa.binary())]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def batch_to_ipc(batch: pa.RecordBatch) -> bytes:
    """Arrow IPC stream bytes of one batch (how bad records travel as a payload)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def _split_envelope(
    batches: Iterator[pa.RecordBatch], data_names: list[str]
) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch]]:
    records: list[pa.RecordBatch] = []
    control: list[pa.RecordBatch] = []
    for batch in batches:
        is_record = pc.equal(batch.column(KIND_COLUMN), RECORD)
        if not pc.all(is_record).as_py():
            control.append(batch.filter(pc.invert(is_record)).select(_CONTROL))
            batch = batch.filter(is_record)
        if batch.num_rows:
            records.append(batch.select(data_names))
    return records, control


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
    """Reader task *i* runs ``job.read(i)``: record rows and control rows."""
    wire = wire_schema(job.record_schema)
    schema = envelope_schema(wire)

    def read(i: int) -> Iterator[pa.RecordBatch]:
        for item in job.read(i):
            if isinstance(item, pa.RecordBatch):
                if item.num_rows:
                    yield _records(schema, item.cast(wire) if item.schema != wire else item, i)
            elif isinstance(item, ErrorRows):
                yield _control(schema, BAD_RECORDS, i, batch_to_ipc(item.batch))
            elif isinstance(item, ReadOutcome):
                yield _control(schema, READER_STATE, i, item.to_bytes())
            else:
                yield _control(schema, TASK_FAILED, i, item.to_bytes())

    return per_subtask(spark, job.readers, read, spark_ddl(schema))


def assign_stage(df: DataFrame, job: RoundJob) -> DataFrame:
    """Shuffle records by (partition, key) to ``job.writers`` assigner tasks (BLOOM index);
    control rows pass through unchanged."""
    wire = wire_schema(job.record_schema)
    schema = envelope_schema(wire)
    names = wire.names

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, _ = task_identity()
        records, control = _split_envelope(batches, names)
        for ctl in control:
            yield pa.RecordBatch.from_arrays(
                [pa.nulls(ctl.num_rows, f.type) for f in wire] + list(ctl.columns), schema=schema
            )
        for out in job.assign(records, task):
            if isinstance(out, TaskFailure):
                yield _control(schema, TASK_FAILED, task, out.to_bytes())
            else:
                for b in out.cast(wire).combine_chunks().to_batches():
                    yield _records(schema, b, task)

    shuffled = df.repartition(job.writers, PARTITION_PATH, RECORD_KEY)
    return shuffled.mapInArrow(run, spark_ddl(schema))


def writer_stage(df: DataFrame, job: RoundJob) -> DataFrame:
    """Shuffle records by file group to ``job.writers`` writer tasks; each yields the control
    rows it received, one row per write status and one "done" row."""
    names = wire_schema(job.record_schema).names

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, _ = task_identity()
        # A writer's input is one task's share of one round: bounded by the round limits.
        records, control = _split_envelope(batches, names)
        out: list[tuple[int, bytes]] = []
        # the attempt *id* (unique per SparkContext) goes into the write token: attemptNumber
        # restarts when a stage is resubmitted, and a retry must never reuse a lost attempt's
        # file names
        for item in job.write(iter(records), task, task_attempt_id()):
            if isinstance(item, TaskFailure):
                out.append((TASK_FAILED, item.to_bytes()))
            else:
                out.append((WRITE_STATUS, item))
        out.append((WRITER_DONE, b""))
        yield from (c.cast(RESULT_SCHEMA) for c in control)  # pass-through from readers
        yield pa.RecordBatch.from_arrays(
            [pa.array([k for k, _ in out], pa.int8()),
             pa.array([task] * len(out), pa.int32()),
             pa.array([p for _, p in out], pa.binary())],
            schema=RESULT_SCHEMA,
        )

    if job.writers < 1:
        raise EngineJobError(f"need at least one writer task, got {job.writers}")
    return df.repartition(job.writers, FILE_ID).mapInArrow(run, spark_ddl(RESULT_SCHEMA))


def direct_stage(spark: SparkSession, job: RoundJob) -> DataFrame:
    """``job.direct_write``: reader task *i* writes its own records and reports as writer *i*;
    only result rows leave the tasks (no shuffle)."""

    def run(i: int) -> Iterator[pa.RecordBatch]:
        out: list[tuple[int, bytes]] = []
        for item in job.read_and_write(i, task_attempt_id()):
            if isinstance(item, bytes):
                out.append((WRITE_STATUS, item))
            elif isinstance(item, ErrorRows):
                out.append((BAD_RECORDS, batch_to_ipc(item.batch)))
            elif isinstance(item, ReadOutcome):
                out.append((READER_STATE, item.to_bytes()))
            else:
                out.append((TASK_FAILED, item.to_bytes()))
        out.append((WRITER_DONE, b""))
        yield pa.RecordBatch.from_arrays(
            [pa.array([k for k, _ in out], pa.int8()), pa.array([i] * len(out), pa.int32()),
             pa.array([p for _, p in out], pa.binary())],
            schema=RESULT_SCHEMA,
        )

    return per_subtask(spark, job.readers, run, spark_ddl(RESULT_SCHEMA))


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
    rows = results.select(_CONTROL).to_pydict()
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
