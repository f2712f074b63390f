"""What every file-group writer shares: the picklable write context, write tokens, and the
rows a write adds (meta columns first)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.storage.ops import create_exclusive
from hoodline.storage.paths import TablePath
from hoodline.table.fs_view import PARTITION_METADATA_FILE
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    IS_DELETE,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    align_to_schema,
)


@dataclass(frozen=True)
class WriteContext:
    """Everything a write task needs; picklable so Spark executors can receive it."""

    #: the table's location (a local path, or an object store path that pickles as its URL
    #: and storage options)
    base_path: str | TablePath
    config: TableConfig
    options: WriteOptions
    instant_ts: str
    operation: WriteOperation
    data_schema: pa.Schema

    def __post_init__(self) -> None:
        object.__setattr__(self, "operation", WriteOperation.parse(self.operation))

    def table(self) -> HudiTable:
        return HudiTable(self.base_path, self.config)


#: meta columns whose values repeat within a file: a merge reads them from the old version as
#: dictionary arrays and writes them from those (no string per row is built or hashed)
DICTIONARY_META = (COMMIT_TIME, PARTITION_PATH)
#: their type while held as dictionaries
META_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def dictionary_column(value: str, n: int) -> pa.DictionaryArray:
    """``n`` rows of ``value`` as a dictionary array of that one value."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string())
    )


def constant_column(value: str, n: int) -> pa.Array:
    """``n`` copies of ``value`` without a Python object per row."""
    return pc.cast(dictionary_column(value, n), pa.string())


def merge_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the :data:`DICTIONARY_META` columns it has as dictionaries."""
    return pa.schema(
        [f.with_type(META_DICTIONARY) if f.name in DICTIONARY_META else f for f in schema],
        metadata=schema.metadata,
    )


def write_token(task_id: int, attempt: int) -> str:
    """Hudi write token ``<task partition>-<stage>-<attempt>`` (no ``_``)."""
    return f"{task_id}-0-{attempt}"


def output_schema(data_schema: pa.Schema) -> pa.Schema:
    meta = [pa.field(c, pa.string()) for c in META_COLUMNS]
    return pa.schema(meta + list(data_schema))


def ensure_partition_metadata(base_path: TablePath, partition: str, instant_ts: str) -> None:
    """Write ``<partition>/.hoodie_partition_metadata`` once, as Java Hudi does (atomically);
    a non-partitioned table has it in the base path, with depth 0."""
    folder = base_path / partition if partition else base_path
    target = folder / PARTITION_METADATA_FILE
    if target.is_file():
        return
    depth = len(partition.split("/")) if partition else 0
    data = f"#partition metadata\ncommitTime={instant_ts}\npartitionDepth={depth}\n".encode()
    try:
        create_exclusive(target, data, folder)
    except FileExistsError:
        pass


def split_deletes(records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(upsert records, delete records). Without deletes (the usual case) the records come
    back as they are: filtering copied every column of a writer's input, ~7 % of a
    merge-on-read writer's time (py-spy, 2M-message upsert)."""
    if IS_DELETE not in records.schema.names:
        return records, records.slice(0, 0)
    flag = pc.fill_null(records.column(IS_DELETE), False)
    if not pc.any(flag).as_py():
        return records, records.slice(0, 0)
    return records.filter(pc.invert(flag)), records.filter(flag)


def new_rows(
    upserts: pa.Table,
    ctx: WriteContext,
    partition: str,
    file_name: str,
    task_id: int,
    given: Collection[str] = (),
    dictionaries: bool = False,
) -> pa.Table:
    """The meta columns and data columns of written records, but the meta columns named in
    ``given``: those hold one value in the whole write (commit time, partition path, file
    name), and a writer that encodes such a value once takes it instead of a column.
    ``dictionaries``: the :data:`DICTIONARY_META` columns as one-value dictionary arrays (as a
    merge holds the old rows' ones, :func:`merge_schema`)."""
    n = upserts.num_rows
    seq = pc.binary_join_element_wise(
        pa.scalar(f"{ctx.instant_ts}_{task_id}_"),
        pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string()),
        "",
    )
    data = align_to_schema(upserts, ctx.data_schema, "the records")
    constants = {COMMIT_TIME: ctx.instant_ts, PARTITION_PATH: partition, FILE_NAME: file_name}
    meta: dict[str, pa.Array | pa.ChunkedArray] = {
        COMMIT_SEQNO: seq, RECORD_KEY: upserts.column(RECORD_KEY)}
    cols = [
        meta[c] if c in meta
        else dictionary_column(constants[c], n) if dictionaries and c in DICTIONARY_META
        else constant_column(constants[c], n)
        for c in META_COLUMNS
        if c not in given
    ]
    schema = without(output_schema(ctx.data_schema), given)
    if dictionaries:
        schema = merge_schema(schema)
    return pa.Table.from_arrays([*cols, *data.columns], schema=schema)


def without(schema: pa.Schema, names: Collection[str]) -> pa.Schema:
    """``schema`` without the fields ``names``."""
    return pa.schema([f for f in schema if f.name not in names], metadata=schema.metadata)


