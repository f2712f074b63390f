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
