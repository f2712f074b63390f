"""Record preparation inside tasks (engine-agnostic, columnar): source batch -> keyed records.

A reader task turns what its source emitted into *keyed records* (:func:`keyed_schema`): the
table's data columns plus ``_hoodie_record_key``, ``_hoodie_partition_path``, a delete flag, the
file group (``_hoodline_file_id``, filled by the index) and a source sequence number used to break
ties deterministically. Bad records are split off as error-table rows (never dropped).

* Kafka, ``format = json``: values parsed in bulk into the declared schema; key, partition and
  ordering fields must be present and non-null. A *tombstone* (null value, non-null key) deletes
  its key: the message key is either a JSON object holding the key (and partition) fields, or --
  for a single-field key of an unpartitioned table -- the key value itself as UTF-8 text.
* Kafka, ``format = raw``: the message as columns (key, value, topic, partition, offset,
  timestamp); key fields name some of these.
* Files: the file source already decoded the rows; key/partition/ordering nulls are bad records.

Within one round a key's records are reduced to one (:func:`resolve`): highest ordering value,
ties and the no-ordering case by source order; a tombstone (which carries no ordering value)
beats the key's records read before it and loses to those read after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.formats.json_decoder import MISSING_KEY, BadRecords, JsonDecoder
from hoodline.pipeline.errors_table import ERROR_SCHEMA, build_error_batch
from hoodline.table.keygen import KeyGenerator
from hoodline.table.write.file_writer import WriteContext
from hoodline.table.write.prepare import dedupe
from hoodline.table.write.records import FILE_ID, IS_DELETE, PARTITION_PATH, RECORD_KEY

SEQ = "_hoodline_seq"
BAD_TOMBSTONE_KEY = "bad_tombstone_key"

#: The columns of a Kafka message in ``format = raw`` pipelines.
RAW_KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)


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


@dataclass(frozen=True)
class RecordSpec:
    """What a task needs to key records (picklable)."""

    ctx: WriteContext
    source_type: str  # "kafka" | "files"
    format: str  # "json" | "raw"
    #: Declared record schema (what JSON values are parsed into / what files hold).
    declared: pa.Schema
    delete_field: str | None
    round_id: int
    #: Bytes a writer task buffers in memory before spilling to local disk.
    writer_buffer_bytes: int = 256 * 1024 * 1024

    @property
    def key_fields(self) -> tuple[str, ...]:
        return self.ctx.config.record_key_fields

    @property
    def required(self) -> tuple[str, ...]:
        cfg = self.ctx.config
        fields = [*cfg.record_key_fields, *cfg.partition_fields]
        if cfg.precombine_field:
            fields.append(cfg.precombine_field)
        return tuple(dict.fromkeys(fields))

    @property
    def all_deletes(self) -> bool:
        return self.ctx.operation == "DELETE"


@dataclass(frozen=True)
class Prepared:
    """Keyed records (``keyed_schema``) and error rows (``ERROR_SCHEMA``) of one source batch."""

    records: pa.Table
    errors: pa.RecordBatch
    deletes: int


def _concat_bad(parts: list[BadRecords]) -> BadRecords:
    parts = [p for p in parts if len(p)]
    if not parts:
        return BadRecords(pa.array([], pa.int64()), pa.array([], pa.string()),
                          pa.array([], pa.string()))
    return BadRecords(
        pa.concat_arrays([p.index for p in parts]),
        pa.concat_arrays([p.reason.cast(pa.string()) for p in parts]),
        pa.concat_arrays([p.detail.cast(pa.string()) for p in parts]),
    )


def _remap(bad: BadRecords, rows: pa.Array) -> BadRecords:
    """Indexes of ``bad`` point into a subset; map them to the batch's rows."""
    return BadRecords(pc.take(rows, bad.index), bad.reason, bad.detail)


def _key(spec: RecordSpec, data: pa.Table, is_delete: pa.Array, seq: pa.Array) -> pa.Table:
    """Append key, partition path, delete flag, (null) file group and sequence columns."""
    schema = keyed_schema(spec.ctx.data_schema)
    n = data.num_rows
    if n == 0:
        return schema.empty_table()
    keygen = KeyGenerator(spec.ctx.config)
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


def _delete_flags(spec: RecordSpec, data: pa.Table) -> pa.Array:
    n = data.num_rows
    if spec.all_deletes:
        return pa.array(np.ones(n, dtype=bool))
    if spec.delete_field and spec.delete_field in data.column_names:
        col = data.column(spec.delete_field)
        flags = pc.fill_null(col, False)
        return flags.combine_chunks() if isinstance(flags, pa.ChunkedArray) else flags
    return pa.array(np.zeros(n, dtype=bool))


def _tombstone_keys(spec: RecordSpec, keys: pa.Array) -> tuple[pa.Table, pa.Array, BadRecords]:
    """Key/partition field columns decoded from message keys (+ their rows, + bad ones)."""
    cfg = spec.ctx.config
    names = list(dict.fromkeys((*cfg.record_key_fields, *cfg.partition_fields)))
    schema = pa.schema([spec.declared.field(n) for n in names])
    n = len(keys)
    rows = pa.array(np.arange(n, dtype=np.int64))
    starts_obj = pc.equal(pc.binary_slice(keys, 0, 1), pa.scalar(b"{", pa.binary()))
    plain = len(names) == 1 and not pc.any(starts_obj).as_py()
    if plain:
        try:
            text = pc.cast(keys, pa.string())
            values = pc.cast(text, schema.field(0).type)
            return pa.table([values], schema=schema), rows, _concat_bad([])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # some keys do not convert: fall through to per-key isolation
        good_vals: list[object] = []
        good_rows: list[int] = []
        bad_rows: list[int] = []
        for i, k in enumerate(keys.to_pylist()):  # rare path: only tombstones whose key is bad
            try:
                v = pc.cast(pa.array([k.decode("utf-8")]), schema.field(0).type)[0].as_py()
                good_vals.append(v)
                good_rows.append(i)
            except (UnicodeDecodeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
                bad_rows.append(i)
        bad = BadRecords(
            pa.array(bad_rows, pa.int64()),
            pa.array([BAD_TOMBSTONE_KEY] * len(bad_rows), pa.string()),
            pa.array([f"tombstone key is not a {schema.field(0).type} value"] * len(bad_rows),
                     pa.string()),
        )
        return (pa.table([pa.array(good_vals, schema.field(0).type)], schema=schema),
                pa.array(good_rows, pa.int64()), bad)
    result = JsonDecoder(schema, names).decode(keys)
    bad = result.errors
    bad = BadRecords(
        bad.index,
        pa.array([BAD_TOMBSTONE_KEY] * len(bad), pa.string()),
        pc.binary_join_element_wise(
            pa.scalar("tombstone key must be a JSON object with the key/partition fields: "),
            bad.detail, "",
        ) if len(bad) else bad.detail,
    )
    return result.records, result.row_index, bad


def prepare_kafka(spec: RecordSpec, batch: pa.RecordBatch) -> Prepared:
    """Keyed records and error rows of one batch of Kafka messages (``KAFKA_RECORD_SCHEMA``)."""
    n = batch.num_rows
    all_rows = pa.array(np.arange(n, dtype=np.int64))
    offsets = batch.column("offset")
    if spec.format == "raw":
        data = pa.Table.from_batches([batch]).select(RAW_KAFKA_SCHEMA.names)
        nulls = None
        for name in spec.required:
            m = data.column(name).is_null()
            nulls = m if nulls is None else pc.or_(nulls, m)
        bad_parts: list[BadRecords] = []
        if nulls is not None and pc.any(nulls).as_py():
            idx = pc.filter(all_rows, nulls)
            bad_parts.append(BadRecords(
                idx, pa.array([MISSING_KEY] * len(idx), pa.string()),
                pa.array([f"null in key field(s) {', '.join(spec.required)}"] * len(idx),
                         pa.string())))
            keep = pc.invert(nulls)
            data, seq = data.filter(keep), pc.filter(offsets, keep)
        else:
            seq = offsets
        recs = _key(spec, data, _delete_flags(spec, data), seq)
        return Prepared(recs, _errors(spec, batch, _concat_bad(bad_parts)), 0)

    values = batch.column("value")
    keys = batch.column("key")
    tomb = pc.and_(values.is_null(), keys.is_valid())
    has_tomb = pc.any(tomb).as_py()
    value_rows = pc.filter(all_rows, pc.invert(tomb)) if has_tomb else all_rows
    decoded = JsonDecoder(spec.declared, spec.required).decode(
        pc.take(values, value_rows) if has_tomb else values
    )
    bad_parts = [_remap(decoded.errors, value_rows)]
    good_rows = pc.take(value_rows, decoded.row_index)
    data = decoded.records
    tables = [_key(spec, data, _delete_flags(spec, data), pc.take(offsets, good_rows))]
    deletes = 0
    if has_tomb:
        tomb_rows = pc.filter(all_rows, tomb)
        key_cols, ok_rows, bad = _tombstone_keys(spec, pc.take(keys, tomb_rows))
        bad_parts.append(_remap(bad, tomb_rows))
        rows = pc.take(tomb_rows, ok_rows)
        if key_cols.num_rows:
            flags = pa.array(np.ones(key_cols.num_rows, dtype=bool))
            tables.append(_key(spec, key_cols, flags, pc.take(offsets, rows)))
            deletes = key_cols.num_rows
    recs = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return Prepared(recs, _errors(spec, batch, _concat_bad(bad_parts)), deletes)


def _errors(spec: RecordSpec, batch: pa.RecordBatch, bad: BadRecords) -> pa.RecordBatch:
    if not len(bad):
        return _empty_errors()
    order = pc.sort_indices(bad.index)
    bad = BadRecords(pc.take(bad.index, order), pc.take(bad.reason, order),
                     pc.take(bad.detail, order))
    positions = pa.Table.from_batches([batch]).select(
        ["topic", "partition", "offset", "key", "timestamp"]
    )
    return build_error_batch(bad, batch.column("value"), positions, source="kafka",
                             round_id=spec.round_id)


def _empty_errors() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in ERROR_SCHEMA],
                                      schema=ERROR_SCHEMA)


def prepare_files(spec: RecordSpec, batch: pa.RecordBatch, file: str, first_row: int) -> Prepared:
    """Keyed records and error rows of one batch a file split emitted (rows numbered from
    ``first_row`` within the split)."""
    data = pa.Table.from_batches([batch])
    n = data.num_rows
    seq = pa.array(np.arange(first_row, first_row + n, dtype=np.int64))
    nulls = None
    for name in spec.required:
        if name not in data.column_names:
            m = pa.array(np.ones(n, dtype=bool))
        else:
            m = data.column(name).is_null()
        nulls = m if nulls is None else pc.or_(nulls, m)
    errors = _empty_errors()
    if nulls is not None and pc.any(nulls).as_py():
        bad_idx = pc.filter(pa.array(np.arange(n, dtype=np.int64)), nulls)
        bad_rows = data.take(bad_idx)
        raw = pa.array([json.dumps(r, default=str).encode() for r in bad_rows.to_pylist()],
                       pa.binary())
        bad = BadRecords(
            pa.array(np.arange(len(bad_idx), dtype=np.int64)),
            pa.array([MISSING_KEY] * len(bad_idx), pa.string()),
            pa.array([f"null or missing in field(s) {', '.join(spec.required)}"] * len(bad_idx),
                     pa.string()),
        )
        positions = pa.table({"file": pa.array([file] * len(bad_idx), pa.string()),
                              "row": pc.add(pc.take(seq, bad_idx), 0)})
        errors = build_error_batch(bad, raw, positions, source="files", round_id=spec.round_id)
        keep = pc.invert(nulls)
        data, seq = data.filter(keep), pc.filter(seq, keep)
    recs = _key(spec, data, _delete_flags(spec, data), seq)
    return Prepared(recs, errors, 0)


def file_rejection_errors(
    spec: RecordSpec, file: str, rows_before: int, reason: str
) -> pa.RecordBatch:
    """An error row for a file (split) the file source skipped under tolerance ``all``."""
    bad = BadRecords(pa.array([0], pa.int64()), pa.array(["unreadable_file"], pa.string()),
                     pa.array([reason[:300]], pa.string()))
    positions = pa.table({"file": [file], "row": pa.array([rows_before], pa.int64())})
    return build_error_batch(bad, pa.nulls(1, pa.binary()), positions, source="files",
                             round_id=spec.round_id)


def _combined_key(t: pa.Table) -> pa.Array:
    out = pc.binary_join_element_wise(t.column(PARTITION_PATH), t.column(RECORD_KEY), "\x00")
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def resolve(records: pa.Table, ordering: str | None) -> pa.Table:
    """One record per (partition, key) for a round (see module docs). Deterministic: records
    are first ordered by their source sequence number."""
    n = records.num_rows
    if n < 2:
        return records
    if pc.count_distinct(_combined_key(records)).as_py() == n:
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
