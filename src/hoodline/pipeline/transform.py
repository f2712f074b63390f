"""Keyed records (engine-agnostic, columnar): what every connector's records become in a task.

A reader task turns what its source emitted into *keyed records* (:func:`keyed_schema`): the
table's data columns plus ``_hoodie_record_key``, ``_hoodie_partition_path``, a delete flag, the
file group (``_hoodline_file_id``, filled by the index) and a source sequence number used to break
ties deterministically. Bad records are split off as error-table rows (never dropped). How a
source's batches are decoded is the connector's part (its plug-in's record preparer, see
:mod:`hoodline.pipeline.plugin`); the helpers here are shared by every connector.

Within one round a key's records are reduced to one (:func:`resolve`): highest ordering value,
ties and the no-ordering case by source order; a tombstone (a delete that carries no ordering
value) beats the key's records read before it and loses to those read after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.formats.json_decoder import (
    MISSING_KEY,
    UNREADABLE_PARTITION,
    BadRecords,
    missing_fields_text,
)
from hoodline.pipeline.errors_table import ERROR_SCHEMA
from hoodline.storage.paths import parse_location
from hoodline.table.keygen.generator import (
    LOCAL_MAX_FOLDER_BYTES,
    OBJECT_STORE_MAX_KEY_BYTES,
    KeyGenerator,
    object_store_folder_bytes,
)
from hoodline.table.keygen.values import nan_rows
from hoodline.table.write.context import WriteContext
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.prepare import dedupe
from hoodline.table.write.records import (
    FILE_ID,
    IS_DELETE,
    PARTITION_PATH,
    RECORD_KEY,
    all_distinct,
)

SEQ = "_hoodline_seq"


def keyed_schema(data_schema: pa.Schema) -> pa.Schema:
    """Data columns (nullable) + key, partition path, delete flag, file group, sequence."""
    fields = [f.with_nullable(True) for f in data_schema]
    fields += [
        pa.field(RECORD_KEY, pa.string()),
        pa.field(PARTITION_PATH, pa.string()),
        pa.field(IS_DELETE, pa.bool_()),
        pa.field(FILE_ID, pa.string()),
        pa.field(SEQ, pa.int64()),
    ]
    return pa.schema(fields)


def required_fields(
    record_key: Sequence[str], partition_fields: Sequence[str], ordering: str | None
) -> tuple[str, ...]:
    """Fields every record must carry, not null: the field of a single-field key, the partition
    fields and the ordering field. A multi-field key needs one of its fields
    (:func:`unkeyable_values`)."""
    key = list(record_key) if len(record_key) == 1 else []
    return tuple(dict.fromkeys([*key, *partition_fields, *([ordering] if ordering else [])]))


@dataclass(frozen=True)
class RecordSpec:
    """What a task needs to key records and write them (picklable)."""

    ctx: WriteContext
    #: Declared record schema (what JSON values are parsed into / what files hold).
    declared: pa.Schema
    delete_field: str | None
    round_id: int
    #: Bytes a writer task buffers in memory before spilling to local disk.
    writer_buffer_bytes: int = 256 * 1024 * 1024

    @property
    def required(self) -> tuple[str, ...]:
        """Fields every record must carry (see :func:`required_fields`)."""
        cfg = self.ctx.config
        return required_fields(cfg.record_key_fields, cfg.partition_fields, cfg.precombine_field)

    @property
    def all_deletes(self) -> bool:
        return self.ctx.operation is WriteOperation.DELETE

    @property
    def record_schema(self) -> pa.Schema:
        """The keyed records' schema."""
        return keyed_schema(self.ctx.data_schema)


@dataclass(frozen=True)
class Prepared:
    """Keyed records (``keyed_schema``) and error rows (``ERROR_SCHEMA``) of one source batch."""

    records: pa.Table
    errors: pa.RecordBatch


def concat_bad(parts: list[BadRecords]) -> BadRecords:
    """One :class:`BadRecords` of several (indexes must already refer to the same rows)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return BadRecords(pa.array([], pa.int64()), pa.array([], pa.string()),
                          pa.array([], pa.string()))
    return BadRecords(
        pa.concat_arrays([p.index for p in parts]),
        pa.concat_arrays([p.reason.cast(pa.string()) for p in parts]),
        pa.concat_arrays([p.detail.cast(pa.string()) for p in parts]),
    )


def remap_bad(bad: BadRecords, rows: pa.Array) -> BadRecords:
    """Indexes of ``bad`` point into a subset; map them to the batch's rows."""
    return BadRecords(pc.take(rows, bad.index), bad.reason, bad.detail)


def unkeyable_records(spec: RecordSpec, data: pa.Table) -> BadRecords:
    """Rows that cannot be keyed: a single key field, partition or ordering fields null or
    absent (``missing_key``), or else :func:`unkeyable_values`."""
    n = data.num_rows
    nulls: pa.Array | pa.ChunkedArray | None = None
    for name in spec.required:
        if name not in data.column_names:
            m: pa.Array | pa.ChunkedArray = pa.array(np.ones(n, dtype=bool))
        else:
            m = data.column(name).is_null()
        nulls = m if nulls is None else pc.or_(nulls, m)
    if nulls is None or not pc.any(nulls).as_py():
        return unkeyable_values(spec, data)
    rows = pa.array(np.arange(n, dtype=np.int64))
    idx = _combined(pc.filter(rows, nulls))
    details = missing_fields_text(data.take(idx), spec.required, "null or missing in field(s) {}")
    missing = BadRecords(idx, pa.array([MISSING_KEY] * len(idx), pa.string()), details)
    complete = _combined(pc.filter(rows, pc.invert(nulls)))
    unreadable = unkeyable_values(spec, data.take(complete))
    return concat_bad([missing, remap_bad(unreadable, complete)])


def _nan_ordering(spec: RecordSpec, data: pa.Table) -> tuple[BadRecords, pa.Array] | None:
    """Rows whose ordering value is NaN (``missing_key``) and their mask: NaN has no order among
    numbers that every reader agrees on (see
    :func:`~hoodline.table.keygen.values.require_ordering`)."""
    ordering = spec.ctx.config.precombine_field
    if ordering is None or ordering not in data.column_names:
        return None
    nan = nan_rows(data.column(ordering))
    if nan is None or not pc.any(nan).as_py():
        return None
    mask = _combined(nan)
    idx = _combined(pc.filter(pa.array(np.arange(data.num_rows, dtype=np.int64)), mask))
    detail = f"ordering field '{ordering}' is NaN, which has no order among numbers"
    return BadRecords(idx, pa.array([MISSING_KEY] * len(idx), pa.string()),
                      pa.array([detail] * len(idx), pa.string())), mask


def unkeyable_values(spec: RecordSpec, data: pa.Table) -> BadRecords:
    """Rows with all fields of a multi-field key null or empty, or a single key field or a
    partition value that is an empty string (``missing_key``), or a partition value that makes
    no partition path (``unreadable_partition``: no folder name, or a date no input format of
    the table's timestamp key generator reads): bad records, not a reason to stop the job."""
    parts: list[BadRecords] = []
    taken: pa.Array | None = None
    nan = _nan_ordering(spec, data)
    if nan is not None:
        parts.append(nan[0])
        taken = nan[1]
    keygen = _key_generator(spec)
    keyless = keygen.keyless_rows(data) if data.num_rows else None
    if keyless is not None and taken is not None:
        keyless = pc.and_(keyless, pc.invert(taken))
    if keyless is not None and pc.any(keyless).as_py():
        idx = _combined(pc.filter(pa.array(np.arange(data.num_rows, dtype=np.int64)), keyless))
        fields = ", ".join(spec.ctx.config.record_key_fields)
        parts.append(BadRecords(
            idx, pa.array([MISSING_KEY] * len(idx), pa.string()),
            pa.array([f"record key fields {fields} are all null or empty"] * len(idx),
                     pa.string()),
        ))
        taken = keyless if taken is None else pc.or_(taken, keyless)
    for bad in keygen.unusable_rows(data) if data.num_rows else []:
        mask = bad.rows if taken is None else pc.and_(bad.rows, pc.invert(taken))
        idx = _combined(pc.filter(pa.array(np.arange(data.num_rows, dtype=np.int64)), mask))
        if not len(idx):
            continue
        values = pc.cast(pc.take(data.column(bad.field), idx), pa.string())
        detail = pc.binary_join_element_wise(
            pa.scalar(f"{bad.role} field '{bad.field}' value '"), values,
            pa.scalar(f"' {bad.why}"), "",
        )
        reason = MISSING_KEY if bad.empty else UNREADABLE_PARTITION
        parts.append(BadRecords(idx, pa.array([reason] * len(idx), pa.string()),
                                _combined(detail)))
        taken = mask if taken is None else pc.or_(taken, mask)
    return concat_bad(parts)


def _key_generator(spec: RecordSpec) -> KeyGenerator:
    """The table's key generator; a partition value making a folder name longer than the
    storage takes (a local file system's folder name; an object store's whole key) is a bad
    record: it failed every retry of its round."""
    where = parse_location(spec.ctx.base_path)
    if isinstance(where, Path):
        return KeyGenerator(spec.ctx.config, LOCAL_MAX_FOLDER_BYTES)
    return KeyGenerator(spec.ctx.config, object_store_folder_bytes(where.key),
                        f"more than an object store's key ({OBJECT_STORE_MAX_KEY_BYTES:,} "
                        "bytes) takes after the table's path and a file name")


def _combined(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def without_rows(data: pa.Table, seq: pa.Array, bad: BadRecords) -> tuple[pa.Table, pa.Array]:
    """``data`` and its sequence numbers without the rows ``bad`` names."""
    if not len(bad):
        return data, seq
    keep = pc.invert(pc.is_in(pa.array(np.arange(data.num_rows, dtype=np.int64)), bad.index))
    return data.filter(keep), pc.filter(seq, keep)


def key_records(spec: RecordSpec, data: pa.Table, is_delete: pa.Array, seq: pa.Array) -> pa.Table:
    """Append key, partition path, delete flag, (null) file group and sequence columns."""
    schema = keyed_schema(spec.ctx.data_schema)
    n = data.num_rows
    if n == 0:
        return schema.empty_table()
    keygen = _key_generator(spec)
    keys = keygen.record_keys(data)
    parts = keygen.partition_paths(data)
    cols: list[pa.Array | pa.ChunkedArray] = []
    for f in spec.ctx.data_schema:
        if f.name in data.column_names:
            cols.append(pc.cast(data.column(f.name), f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    cols += [keys, parts, is_delete, pa.nulls(n, pa.string()), pc.cast(seq, pa.int64())]
    return pa.Table.from_arrays(cols, schema=schema)


def delete_flags(spec: RecordSpec, data: pa.Table) -> pa.Array:
    """Per row: is it a delete (operation delete, or the delete field set)?"""
    n = data.num_rows
    if spec.all_deletes:
        return pa.array(np.ones(n, dtype=bool))
    if spec.delete_field and spec.delete_field in data.column_names:
        col = data.column(spec.delete_field)
        flags = pc.fill_null(col, False)
        return flags.combine_chunks() if isinstance(flags, pa.ChunkedArray) else flags
    return pa.array(np.zeros(n, dtype=bool))


def empty_errors() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in ERROR_SCHEMA],
                                      schema=ERROR_SCHEMA)


def _combined_key(t: pa.Table) -> pa.Array:
    out = pc.binary_join_element_wise(t.column(PARTITION_PATH), t.column(RECORD_KEY), "\x00")
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def resolve(records: pa.Table, ordering: str | None) -> pa.Table:
    """One record per (partition, key) for a round (see module docs). Deterministic: records
    are first ordered by their source sequence number."""
    n = records.num_rows
    if n < 2:
        return records
    if all_distinct(_combined_key(records)):  # hashes: ~4x cheaper than Arrow's count
        return records
    records = records.take(pc.sort_indices(records, sort_keys=[(SEQ, "ascending")]))
    if ordering is None or ordering not in records.column_names:
        return dedupe(records, None)
    tomb = pc.and_(pc.fill_null(records.column(IS_DELETE), False),
                   records.column(ordering).is_null())
    if not pc.any(tomb).as_py():
        return dedupe(records, ordering)
    rest = dedupe(records.filter(pc.invert(tomb)), ordering)
    last_tomb = dedupe(records.filter(tomb), None)
    rest_keys = _combined_key(rest)
    tomb_keys = _combined_key(last_tomb)
    pos = pc.index_in(tomb_keys, value_set=rest_keys)
    rest_seq = pc.take(rest.column(SEQ), pos)
    tomb_wins = pc.fill_null(pc.greater(last_tomb.column(SEQ), rest_seq), True)
    winners = last_tomb.filter(tomb_wins)
    rest = rest.filter(pc.invert(pc.is_in(rest_keys, value_set=_combined_key(winners))))
    return pa.concat_tables([rest, winners])
