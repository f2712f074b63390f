"""Spark building blocks for a checkpoint round (verified behaviours, see tests).

* :func:`per_subtask` runs ``fn(i)`` as Spark task ``i`` of a stage with exactly ``n`` tasks
  (``spark.range(0, n, numPartitions=n)``: partition ``i`` holds exactly the row ``i``). Reader
  subtask *i* = Spark task *i*, also on retries. A zero-row range would have *no* tasks, which is
  why every subtask gets a row.
* :func:`to_writers` shuffles rows by a column (the file group id) into exactly ``writers``
  partitions. Spark calls a ``mapInArrow`` function for every one of them, also the empty ones,
  and adaptive execution does not coalesce a repartition with an explicit count: so every writer
  task can report. :func:`reporting` wraps a writer so it always yields at least one row (an
  explicit "empty" result, RFC-13) and stamps each row with the task's partition id.
* :func:`collect_table` brings a result back as one Arrow table (no Python rows).

Functions passed here are pickled to executors: they must not capture a SparkSession.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from hoodline.errors import SparkRuntimeError
from hoodline.spark.probe import task_identity

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

#: Column added by :func:`reporting` (the Spark partition = writer task index).
TASK_COLUMN = "_task"


def per_subtask(
    spark: SparkSession,
    n: int,
    fn: Callable[[int], Iterator[pa.RecordBatch]],
    schema: str | pa.Schema,
) -> DataFrame:
    """A DataFrame whose task ``i`` (of exactly ``n``) yields ``fn(i)``'s batches."""
    if n < 1:
        raise SparkRuntimeError(f"a stage needs at least one subtask, got {n}")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids: list[int] = []
        for batch in batches:
            ids.extend(batch.column(0).to_pylist())
        partition, _ = task_identity()
        if ids != [partition]:
            raise SparkRuntimeError(
                f"task {partition} received subtask ids {ids}; expected exactly [{partition}]"
            )
        yield from fn(partition)

    ddl = schema if isinstance(schema, str) else _ddl(schema)
    return spark.range(0, n, 1, numPartitions=n).mapInArrow(run, ddl)


def to_writers(df: DataFrame, writers: int, column: str) -> DataFrame:
    """Hash-partition ``df`` by ``column`` into exactly ``writers`` partitions."""
    if writers < 1:
        raise SparkRuntimeError(f"need at least one writer task, got {writers}")
    return df.repartition(writers, column)


def reporting(fn: ArrowFn, empty: Callable[[], pa.RecordBatch]) -> ArrowFn:
    """Wrap a writer: rows get a ``_task`` column; a task without output yields ``empty()``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, _ = task_identity()
        produced = False
        for out in fn(batches):
            if out.num_rows == 0:
                continue
            produced = True
            yield _with_task(out, partition)
        if not produced:
            yield _with_task(empty(), partition)

    return run


def _with_task(batch: pa.RecordBatch, partition: int) -> pa.RecordBatch:
    return batch.append_column(
        pa.field(TASK_COLUMN, pa.int32(), nullable=False),
        pa.array([partition] * batch.num_rows, pa.int32()),
    )


def check_every_task_reported(results: pa.Table, writers: int) -> None:
    """Raise unless the ``_task`` column covers exactly ``0..writers-1``."""
    seen = set(results.column(TASK_COLUMN).to_pylist())
    expected = set(range(writers))
    if seen != expected:
        raise SparkRuntimeError(
            f"write results came from tasks {sorted(seen)}, expected {sorted(expected)}; "
            "not committing"
        )


def collect_table(df: DataFrame) -> pa.Table:
    """Run ``df`` and return its rows as one Arrow table."""
    return df.toArrow()


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
    raise SparkRuntimeError(f"Arrow type {t} has no Spark equivalent here")


def _ddl(schema: pa.Schema) -> str:
    """Spark DDL for an Arrow schema (the types hoodline declares)."""
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}" for f in schema)


def spark_ddl(schema: pa.Schema) -> str:
    """Public form of the Arrow -> Spark DDL mapping used for ``mapInArrow`` output schemas."""
    return _ddl(schema)


# -- one Spark job per round: data rows and control rows in one envelope -------------------------
#
# A round is a single Spark job: reader tasks emit record rows plus control rows (their split
# states, their bad records); the shuffle by file group carries control rows along (their file
# group column is null, so they all land in one writer task), writer tasks pass them through and
# add one control row per WriteStatus (or one "empty" row). The driver gets everything it needs
# to commit from one ``toArrow()``: no persist, no second action, no accumulators.

KIND_COLUMN = "_kind"
PAYLOAD_COLUMN = "_payload"

RECORD = 0
READER_STATE = 1
BAD_RECORDS = 2
WRITE_STATUS = 3
WRITER_EMPTY = 4

RESULT_SCHEMA = pa.schema(
    [
        pa.field(KIND_COLUMN, pa.int8(), nullable=False),
        pa.field(TASK_COLUMN, pa.int32(), nullable=False),
        pa.field(PAYLOAD_COLUMN, pa.binary()),
    ]
)


def envelope_schema(data_schema: pa.Schema) -> pa.Schema:
    """``data_schema`` (all nullable) plus the task, kind and payload columns."""
    fields = [f.with_nullable(True) for f in data_schema]
    return pa.schema([*fields, *RESULT_SCHEMA])


def _control(schema: pa.Schema, kind: int, task: int, payload: bytes) -> pa.RecordBatch:
    arrays = [pa.nulls(1, f.type) for f in schema][: len(schema) - 3]
    arrays += [pa.array([kind], pa.int8()), pa.array([task], pa.int32()),
               pa.array([payload], pa.binary())]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def batch_to_ipc(batch: pa.RecordBatch) -> bytes:
    """Arrow IPC stream bytes of one batch (how bad records travel as a payload)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def ipc_to_batches(payload: bytes) -> list[pa.RecordBatch]:
    return list(pa.ipc.open_stream(payload))


class ReaderEmit:
    """What a reader function yields besides record batches (see :func:`reader_stage`)."""

    def __init__(self, kind: int, payload: bytes) -> None:
        if kind not in (READER_STATE, BAD_RECORDS):
            raise ValueError(f"a reader emits READER_STATE or BAD_RECORDS, not {kind}")
        self.kind = kind
        self.payload = payload


def reader_stage(
    spark: SparkSession,
    n: int,
    fn: Callable[[int], Iterator[pa.RecordBatch | ReaderEmit]],
    data_schema: pa.Schema,
) -> DataFrame:
    """``n`` reader tasks; ``fn(i)`` yields record batches (``data_schema``) and
    :class:`ReaderEmit` objects (exactly one ``READER_STATE``, optionally ``BAD_RECORDS``)."""
    schema = envelope_schema(data_schema)
    names = data_schema.names

    def run(i: int) -> Iterator[pa.RecordBatch]:
        states = 0
        for item in fn(i):
            if isinstance(item, ReaderEmit):
                states += item.kind == READER_STATE
                yield _control(schema, item.kind, i, item.payload)
                continue
            if item.num_rows == 0:
                continue
            n_rows = item.num_rows
            cols = [item.column(name) for name in names]
            cols += [pa.array([RECORD] * n_rows, pa.int8()), pa.array([i] * n_rows, pa.int32()),
                     pa.nulls(n_rows, pa.binary())]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
        if states != 1:
            raise SparkRuntimeError(
                f"reader subtask {i} reported {states} split states; exactly one is required"
            )

    return per_subtask(spark, n, run, spark_ddl(schema))


def _split_envelope(
    batches: Iterator[pa.RecordBatch], data_names: list[str]
) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch]]:
    import pyarrow.compute as pc

    records: list[pa.RecordBatch] = []
    control: list[pa.RecordBatch] = []
    for batch in batches:
        is_record = pc.equal(batch.column(KIND_COLUMN), RECORD)
        if not pc.all(is_record).as_py():
            control.append(
                batch.filter(pc.invert(is_record)).select([KIND_COLUMN, TASK_COLUMN,
                                                           PAYLOAD_COLUMN])
            )
            batch = batch.filter(is_record)
        if batch.num_rows:
            records.append(batch.select(data_names))
    return records, control


def keyed_stage(
    df: DataFrame,
    tasks: int,
    key_columns: list[str],
    fn: Callable[[pa.Table, int], pa.Table],
    in_schema: pa.Schema,
    out_schema: pa.Schema,
) -> DataFrame:
    """Shuffle record rows by ``key_columns`` into ``tasks`` tasks and apply ``fn(records,
    task_index)`` (e.g. prepare + index tag + bucket assignment: records with one key meet in
    one task). ``fn`` is called in every task, with an empty table when it got no records.
    Control rows (reader states, bad records) pass through unchanged."""
    if tasks < 1:
        raise SparkRuntimeError(f"need at least one task, got {tasks}")
    env = envelope_schema(out_schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, _ = task_identity()
        records, control = _split_envelope(batches, in_schema.names)
        table = (
            pa.Table.from_batches(records).cast(in_schema) if records else in_schema.empty_table()
        )
        out = fn(table, task)
        n = out.num_rows
        if n:
            arrays = [out.column(f.name).combine_chunks().cast(f.type) for f in out_schema]
            arrays += [pa.array([RECORD] * n, pa.int8()), pa.array([task] * n, pa.int32()),
                       pa.nulls(n, pa.binary())]
            yield pa.RecordBatch.from_arrays(arrays, schema=env)
        for ctl in control:
            m = ctl.num_rows
            arrays = [pa.nulls(m, f.type) for f in out_schema]
            arrays += [ctl.column(KIND_COLUMN).cast(pa.int8()),
                       ctl.column(TASK_COLUMN).cast(pa.int32()),
                       ctl.column(PAYLOAD_COLUMN).cast(pa.binary())]
            yield pa.RecordBatch.from_arrays(arrays, schema=env)

    return df.repartition(tasks, *key_columns).mapInArrow(run, spark_ddl(env))


def writer_stage(
    df: DataFrame,
    writers: int,
    file_group_column: str,
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[bytes]],
) -> DataFrame:
    """Shuffle records by file group to ``writers`` tasks; ``fn`` gets this task's record
    batches (control columns removed) and yields one serialized WriteStatus per file group."""
    data_names = [n for n in df.columns if n not in (KIND_COLUMN, TASK_COLUMN, PAYLOAD_COLUMN)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, _ = task_identity()
        # A writer's input is one task's share of one round: bounded by the round limits.
        records, control = _split_envelope(batches, data_names)
        statuses = list(fn(iter(records)))
        yield from (c.cast(RESULT_SCHEMA) for c in control)  # pass-through from readers
        kind = WRITE_STATUS if statuses else WRITER_EMPTY
        payloads = statuses or [b""]
        yield pa.RecordBatch.from_arrays(
            [pa.array([kind] * len(payloads), pa.int8()),
             pa.array([task] * len(payloads), pa.int32()),
             pa.array(payloads, pa.binary())],
            schema=RESULT_SCHEMA,
        )

    return to_writers(df, writers, file_group_column).mapInArrow(run, spark_ddl(RESULT_SCHEMA))


class RoundResult:
    """What the driver needs to commit a round, checked for completeness."""

    def __init__(self, table: pa.Table, readers: int, writers: int) -> None:
        rows = table.to_pydict()
        self.reader_states: dict[int, bytes] = {}
        self.bad_records: list[pa.RecordBatch] = []
        self.write_statuses: list[bytes] = []
        writer_tasks: set[int] = set()
        for kind, task, payload in zip(
            rows[KIND_COLUMN], rows[TASK_COLUMN], rows[PAYLOAD_COLUMN], strict=True
        ):
            if kind == READER_STATE:
                if task in self.reader_states:
                    raise SparkRuntimeError(f"reader subtask {task} reported its state twice")
                self.reader_states[task] = payload
            elif kind == BAD_RECORDS:
                self.bad_records.extend(ipc_to_batches(payload))
            elif kind == WRITE_STATUS:
                self.write_statuses.append(payload)
                writer_tasks.add(task)
            elif kind == WRITER_EMPTY:
                writer_tasks.add(task)
            else:
                raise SparkRuntimeError(f"unexpected row kind {kind} in round results")
        if set(self.reader_states) != set(range(readers)):
            raise SparkRuntimeError(
                f"split states came from reader subtasks {sorted(self.reader_states)}, expected "
                f"0..{readers - 1}; not committing"
            )
        if writer_tasks != set(range(writers)):
            raise SparkRuntimeError(
                f"write results came from tasks {sorted(writer_tasks)}, expected "
                f"0..{writers - 1}; not committing"
            )
