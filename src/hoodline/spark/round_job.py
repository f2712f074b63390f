"""One Spark job per round: reader stage -> (BLOOM: key shuffle + assigner) -> file-group shuffle
-> writers; built from :mod:`hoodline.spark.stages` and the engine-agnostic task functions.

Closures here capture only picklable plans (read tasks, the record spec), never a SparkSession.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from hoodline.pipeline.sources import ReadOutcome, ReadTask
from hoodline.pipeline.tasks import ErrorRows, run_assigner, run_reader, run_writer
from hoodline.pipeline.transform import RecordSpec, keyed_schema
from hoodline.spark.probe import task_attempt_id, task_identity
from hoodline.spark.stages import (
    BAD_RECORDS,
    KIND_COLUMN,
    PAYLOAD_COLUMN,
    READER_STATE,
    RECORD,
    TASK_COLUMN,
    ReaderEmit,
    batch_to_ipc,
    envelope_schema,
    reader_stage,
    spark_ddl,
    writer_stage,
)
from hoodline.table.write.records import FILE_ID, PARTITION_PATH, RECORD_KEY


def _wire_type(t: pa.DataType) -> pa.DataType:
    """Spark's Arrow exchange takes timestamps in microseconds only."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_wire_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_wire_type(f.type)) for f in t])
    return t


def wire_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the types Spark exchanges with Python (cast back by the writers)."""
    return pa.schema([f.with_type(_wire_type(f.type)) for f in schema])


def _reader_fn(tasks: Mapping[int, ReadTask], spec: RecordSpec, tag_bucket: bool):  # type: ignore[no-untyped-def]
    wire = wire_schema(keyed_schema(spec.ctx.data_schema))

    def read(i: int) -> Iterator[pa.RecordBatch | ReaderEmit]:
        for item in run_reader(tasks[i], spec, tag_bucket):
            if isinstance(item, pa.RecordBatch):
                yield item.cast(wire) if item.schema != wire else item
            elif isinstance(item, ErrorRows):
                yield ReaderEmit(BAD_RECORDS, batch_to_ipc(item.batch))
            elif isinstance(item, ReadOutcome):
                yield ReaderEmit(READER_STATE, item.to_bytes())

    return read


def _assign_stage(df: DataFrame, writers: int, spec: RecordSpec) -> DataFrame:
    """Shuffle records by (partition, key) and run the BLOOM tagger/assigner; control rows
    (reader states, bad records) pass through unchanged."""
    wire = wire_schema(keyed_schema(spec.ctx.data_schema))
    schema = envelope_schema(wire)
    data_names = wire.names

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task, _ = task_identity()
        records: list[pa.RecordBatch] = []
        for batch in batches:
            is_record = pc.equal(batch.column(KIND_COLUMN), RECORD)
            if not pc.all(is_record).as_py():
                yield batch.filter(pc.invert(is_record)).cast(schema)
                batch = batch.filter(is_record)
            if batch.num_rows:
                records.append(batch.select(data_names))
        tagged = run_assigner(spec, records, task, writers)
        for b in tagged.cast(wire).combine_chunks().to_batches():
            n = b.num_rows
            cols = [b.column(name) for name in data_names]
            cols += [pa.array([RECORD] * n, pa.int8()), pa.array([task] * n, pa.int32()),
                     pa.nulls(n, pa.binary())]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)

    shuffled = df.repartition(writers, PARTITION_PATH, RECORD_KEY)
    return shuffled.mapInArrow(run, spark_ddl(schema))


def round_job(
    session: SparkSession,
    tasks: Mapping[int, ReadTask],
    spec: RecordSpec,
    writers: int,
) -> DataFrame:
    """The round's DataFrame; ``toArrow()`` runs it and returns the envelope rows."""
    bloom = spec.ctx.config.index_type == "BLOOM"
    data_schema = wire_schema(keyed_schema(spec.ctx.data_schema))
    plans = dict(tasks)
    df = reader_stage(session, len(plans), _reader_fn(plans, spec, not bloom), data_schema)
    if bloom:
        df = _assign_stage(df, writers, spec)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
        task, _ = task_identity()
        # the attempt *id* (unique per SparkContext) in the write token: attemptNumber restarts
        # when a stage is resubmitted, and a retry must never reuse a lost attempt's file names
        yield from run_writer(spec, batches, task, task_attempt_id())

    return writer_stage(df, writers, FILE_ID, write)


__all__ = ["PAYLOAD_COLUMN", "TASK_COLUMN", "round_job"]
