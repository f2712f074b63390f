"""Debezium change events -> table rows and deletes (columnar).

A Debezium change event carries ``op`` (``c`` create, ``u`` update, ``r`` snapshot read, ``d``
delete, ``t`` truncate, ``m`` message), the row images ``before`` and ``after``, the event's
``ts_ms`` and a ``source`` block with the connector's position in the database log (Postgres:
``lsn``; MySQL: binlog ``file``, ``pos`` and ``row``). With Kafka Connect's JSON converter and
schemas enabled the event is wrapped as ``{"schema": ..., "payload": {...}}``; both forms are
read.

What a table gets:

* ``c``/``r``/``u``: the ``after`` image, upserted; ``d``: a delete of the ``before`` image's key;
* three columns besides the row's own: ``_event_op`` (the change that wrote the row),
  ``_event_ts_ms`` (when the database made it: ``source.ts_ms``, else the event's ``ts_ms``) and
  ``_event_order``, the table's ordering (precombine) field: the source position as fixed-width
  digits (Postgres: the LSN; MySQL: binlog file number, position, row), then ``_event_ts_ms``
  -- text that sorts like the log, so among changes of a key the latest in the database wins,
  and with ``DefaultHoodieRecordPayload`` a late duplicate of an older change never overwrites a
  newer stored one;
* Debezium's tombstones (a null value after a delete, for log compaction) are skipped.

Bad records, never dropped: ``not_change_event`` (no ``op``: a schema change or heartbeat on the
topic, or another message), ``unsupported_change`` (``t`` truncate and ``m`` messages are not
applied: truncating a table is left to the user; other ops are not Debezium's),
``missing_image`` (no ``after`` for c/r/u or ``before`` for d), ``missing_key`` (the image lacks
a key field), ``missing_position`` (a Postgres event without ``source.lsn``, a MySQL one without
``source.file``/``pos``: its ordering value would not compare with the others' and could win
over every later change of its key) and ``unavailable_value`` (an ``after`` image holding
Debezium's placeholder for a TOASTed value the change did not touch: upserted, it would
overwrite the stored value with the placeholder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.formats.json_decoder import MISSING_KEY, BadRecords, DecodeResult, JsonDecoder

__all__ = [
    "EVENT_COLUMNS",
    "EVENT_OP",
    "EVENT_ORDER",
    "EVENT_TS",
    "ChangeRows",
    "change_rows",
    "envelope_schema",
    "moved_images",
]

EVENT_OP = "_event_op"
EVENT_ORDER = "_event_order"
EVENT_TS = "_event_ts_ms"
#: The columns a change-event table gets besides the row's own.
EVENT_COLUMNS = pa.schema([(EVENT_OP, pa.string()), (EVENT_ORDER, pa.string()),
                           (EVENT_TS, pa.int64())])

NOT_CHANGE_EVENT = "not_change_event"
UNSUPPORTED_CHANGE = "unsupported_change"
MISSING_IMAGE = "missing_image"
MISSING_POSITION = "missing_position"
UNAVAILABLE = "unavailable_value"

#: Debezium's default ``unavailable.value.placeholder``: the value of a TOASTed Postgres column
#: an update did not change (the database does not log it unless the table's replica identity
#: is FULL)
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

_SOURCE = pa.struct([("connector", pa.string()), ("lsn", pa.int64()), ("file", pa.string()),
                     ("pos", pa.int64()), ("row", pa.int64()), ("ts_ms", pa.int64())])


def envelope_schema(row: pa.Schema, *, wrapped: bool = True) -> pa.Schema:
    """The event fields hoodline reads, with ``row`` as the images' type (``payload``: the
    schemas-enabled JSON wrapping)."""
    image = pa.struct([f.with_nullable(True) for f in row])
    fields = [pa.field("before", image), pa.field("after", image), pa.field("op", pa.string()),
              pa.field("ts_ms", pa.int64()), pa.field("source", _SOURCE)]
    if wrapped:
        fields.append(pa.field("payload", pa.struct(fields)))
    return pa.schema(fields)


@dataclass(frozen=True)
class ChangeRows:
    """Rows (the row's columns + :data:`EVENT_COLUMNS`), whether each is a delete, their input
    indexes, and the bad records; ``before``: each row's before image (null where the event
    had none), for partition moves (:func:`moved_images`)."""

    result: DecodeResult
    deletes: pa.BooleanArray
    before: pa.StructArray


def _digits(arr: pa.Array | pa.ChunkedArray, width: int) -> pa.Array:
    text = pc.cast(pc.fill_null(arr, 0), pa.string())
    return pc.utf8_lpad(text, width=width, padding="0")


def _event_order(source: pa.StructArray, ts: pa.Array) -> pa.Array:
    lsn, file_, pos, row = (pc.struct_field(source, name) for name in ("lsn", "file", "pos", "row"))
    file_no = pc.cast(pc.if_else(
        pc.match_substring_regex(file_, r"\.[0-9]+$"),
        pc.extract_regex(file_, r"\.(?P<n>[0-9]+)$").field("n"), "0"), pa.int64())
    mysql = pc.binary_join_element_wise(_digits(file_no, 10), _digits(pos, 20),
                                        _digits(row, 10), "")
    position = pc.if_else(lsn.is_valid(), _digits(lsn, 20),
                          pc.if_else(pos.is_valid(), mysql, ""))
    return pc.binary_join_element_wise(position, _digits(ts, 15), "")


def change_rows(
    envelope: pa.Table, row_index: pa.Array, row: pa.Schema, required: Sequence[str]
) -> tuple[pa.Table, pa.Array, pa.Array, BadRecords, pa.StructArray]:
    """Rows of decoded events ``envelope`` (columns of :func:`envelope_schema`): (rows, their
    input indexes, delete flags, bad records with input indexes, the rows' before images)."""
    cols = {name: envelope.column(name).combine_chunks() for name in ("before", "after", "op",
                                                                       "ts_ms", "source")}
    if "payload" in envelope.column_names:
        payload = envelope.column("payload").combine_chunks()
        wrapped = payload.is_valid()
        if pc.any(wrapped).as_py():
            for name in cols:
                cols[name] = pc.if_else(wrapped, pc.struct_field(payload, name), cols[name])
    op = cols["op"]
    upsert = pc.fill_null(pc.is_in(op, pa.array(["c", "u", "r"])), False)
    delete = pc.fill_null(pc.equal(op, "d"), False)
    image = pc.if_else(delete, cols["before"], cols["after"])
    ok = pc.and_(pc.or_(upsert, delete), image.is_valid())
    bad_idx: list[np.ndarray] = []
    bad_reason: list[str] = []
    bad_detail: list[object] = []

    def flag(mask: pa.Array, reason: str, detail: object) -> None:
        rows = np.flatnonzero(np.asarray(pc.fill_null(mask, False)))
        if len(rows):
            bad_idx.append(rows)
            bad_reason.extend([reason] * len(rows))
            bad_detail.extend(detail(rows) if callable(detail) else [detail] * len(rows))

    flag(op.is_null(), NOT_CHANGE_EVENT, "no 'op' field: not a Debezium change event (a schema "
         "change, heartbeat or other message on the topic?)")
    other = pc.and_(op.is_valid(), pc.invert(pc.or_(upsert, delete)))
    ops = op.to_numpy(zero_copy_only=False)
    flag(other, UNSUPPORTED_CHANGE, lambda rows: [_unsupported(str(ops[i])) for i in rows])
    missing = pc.and_(pc.or_(upsert, delete), image.is_null())
    flag(missing, MISSING_IMAGE, lambda rows: [
        f"op '{ops[i]}' event without its '{'before' if ops[i] == 'd' else 'after'}' image"
        for i in rows])
    unordered = pc.and_(ok, _lacks_position(cols["source"]))
    connectors = pc.struct_field(cols["source"], "connector").to_numpy(zero_copy_only=False)
    flag(unordered, MISSING_POSITION, lambda rows: [
        f"a {connectors[i]} change event without its log position (source."
        f"{'lsn' if connectors[i] == 'postgresql' else 'file and source.pos'}): its ordering "
        "value would not compare with those of the other changes" for i in rows])
    toasted = _placeholders(pc.if_else(upsert, cols["after"], pa.scalar(None, image.type)), row)
    placeholder = pa.array(np.logical_or.reduce([*toasted.values(), np.zeros(len(op), bool)]))
    placeholder = pc.and_(pc.and_(ok, pc.invert(unordered)), placeholder)
    flag(placeholder, UNAVAILABLE, lambda rows: [
        _unavailable([name for name, hits in toasted.items() if hits[i]]) for i in rows])

    keep = pc.and_(ok, pc.invert(pc.or_(unordered, placeholder)))
    image = image.filter(keep)
    before = cols["before"].filter(keep)
    fields = {f.name: pc.struct_field(image, f.name) for f in row}
    ts = pc.if_else(pc.struct_field(cols["source"], "ts_ms").is_valid(),
                    pc.struct_field(cols["source"], "ts_ms"), cols["ts_ms"]).filter(keep)
    order = _event_order(cols["source"].filter(keep), ts)
    table = pa.Table.from_arrays(
        [*fields.values(), op.filter(keep), order, ts],
        schema=pa.schema([*(f.with_nullable(True) for f in row), *EVENT_COLUMNS]),
    )
    index = row_index.filter(keep)
    deletes = delete.filter(keep)
    local = np.flatnonzero(np.asarray(keep))
    if required and table.num_rows:
        absent = {name: np.asarray(table.column(name).is_null()) for name in required}
        nulls = np.logical_or.reduce(list(absent.values()))
        if nulls.any():
            is_delete = np.asarray(deletes)
            bad_idx.append(local[nulls])
            bad_reason.extend([MISSING_KEY] * int(nulls.sum()))
            bad_detail.extend(
                _missing_key([n for n in required if absent[n][i]], bool(is_delete[i]))
                for i in np.flatnonzero(nulls))
            mask = pa.array(~nulls)
            table, index, deletes = table.filter(mask), index.filter(mask), deletes.filter(mask)
            before = before.filter(mask)
    if bad_idx:
        idx = np.concatenate(bad_idx)
        order_ = np.argsort(idx, kind="stable")
        taken = pc.take(row_index, pa.array(idx[order_]))
        bad = BadRecords(taken, pa.array(np.asarray(bad_reason, dtype=object)[order_].tolist(),
                                         pa.string()),
                         pa.array(np.asarray(bad_detail, dtype=object)[order_].tolist(),
                                  pa.string()))
    else:
        bad = BadRecords(pa.array([], pa.int64()), pa.array([], pa.string()),
                         pa.array([], pa.string()))
    return table, index, deletes, bad, before


def moved_images(
    rows: pa.Table, before: pa.StructArray, row: pa.Schema, fields: Sequence[str],
    keys: Sequence[str] = (),
) -> tuple[pa.Table, pa.Array]:
    """The before images of the updates in ``rows`` (from :func:`change_rows`) whose ``fields``
    (the table's partition fields) changed: (those images as rows, with the update's event
    columns and ``_event_op`` 'd', and their positions in ``rows``). An update moving its row to
    another partition must delete it from the old one: Hudi's BUCKET and BLOOM indexes find a
    key within its partition only (CDC review: the key stayed in the table twice). An image
    without a value for one of ``fields`` (Postgres logs none for an update unless the table's
    replica identity is FULL) cannot tell: not taken; nor one without a value for one of
    ``keys`` (the record key fields: its old row cannot be named)."""
    present = [f for f in fields if f in row.names]
    if not present or not rows.num_rows:
        return pa.schema([*row, *EVENT_COLUMNS]).empty_table(), pa.array([], pa.int64())
    moved = pc.and_(pc.fill_null(pc.equal(rows.column(EVENT_OP), "u"), False), before.is_valid())
    changed = pa.array(np.zeros(rows.num_rows, dtype=bool))
    for name in present:
        old = pc.struct_field(before, name)
        moved = pc.and_(moved, old.is_valid())
        changed = pc.or_(changed, pc.fill_null(pc.not_equal(old, rows.column(name)), True))
    for name in keys:
        if name in row.names:
            moved = pc.and_(moved, pc.struct_field(before, name).is_valid())
    at = pa.array(np.flatnonzero(np.asarray(pc.fill_null(pc.and_(moved, changed), False))),
                  pa.int64())
    images = pc.take(before, at)
    taken = rows.take(at)
    table = pa.Table.from_arrays(
        [*(pc.struct_field(images, f.name) for f in row),
         pa.array(["d"] * len(at), pa.string()), taken.column(EVENT_ORDER),
         taken.column(EVENT_TS)],
        schema=pa.schema([*(f.with_nullable(True) for f in row), *EVENT_COLUMNS]))
    return table, at


def _unsupported(op: str) -> str:
    what = ("truncate and message events are not row changes" if op in ("t", "m")
            else "it is not one of Debezium's ops (c, r, u, d, t, m)")
    return (f"op '{op}' is not applied: {what} (with errors.tolerance = all they go to the "
            "error table and the run goes on; truncate the table yourself if needed)")


def _missing_key(names: list[str], delete: bool) -> str:
    text = (f"the change's {'before' if delete else 'after'} image has no value for "
            f"{', '.join(repr(n) for n in names)} (record key, partition or ordering field)")
    if delete:
        text += ("; a delete's 'before' image holds only the primary key unless the source "
                 "table's replica identity is FULL (Postgres: ALTER TABLE ... REPLICA IDENTITY "
                 "FULL): partition fields outside the primary key need it")
    return text


def _unavailable(columns: list[str]) -> str:
    names = ", ".join(repr(c) for c in columns)
    return (f"column(s) {names} hold Debezium's placeholder '{UNAVAILABLE_VALUE}' (a TOASTed "
            "value the change did not touch, which Postgres does not log): upserted, the "
            "placeholder would replace the stored value; give the source table REPLICA "
            "IDENTITY FULL (ALTER TABLE ... REPLICA IDENTITY FULL) so the events carry it")


def _lacks_position(source: pa.Array) -> pa.Array:
    """Whether each event of a Postgres or MySQL connector lacks its log position (events of
    other connectors, or without ``source.connector``, are ordered by time alone)."""
    connector = pc.struct_field(source, "connector")
    no_lsn = pc.and_(pc.equal(connector, "postgresql"),
                     pc.struct_field(source, "lsn").is_null())
    no_pos = pc.and_(pc.equal(connector, "mysql"), pc.or_(
        pc.struct_field(source, "pos").is_null(), pc.struct_field(source, "file").is_null()))
    return pc.fill_null(pc.or_(no_lsn, no_pos), False)


def _placeholders(after: pa.Array, row: pa.Schema) -> dict[str, np.ndarray]:
    """The columns of ``after`` (strings, bytes, lists of them) holding
    :data:`UNAVAILABLE_VALUE` in some event: name -> which events."""
    found: dict[str, np.ndarray] = {}
    for f in row:
        column = pc.struct_field(after, f.name)
        if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            values = _is_placeholder(pc.list_flatten(column), f.type.value_type)
            if values is None:
                continue
            hits = np.zeros(len(column), dtype=bool)
            parents = pc.list_parent_indices(column).to_numpy()
            hits[parents[np.asarray(pc.fill_null(values, False))]] = True
        else:
            values = _is_placeholder(column, f.type)
            if values is None:
                continue
            hits = np.asarray(pc.fill_null(values, False))
        if hits.any():
            found[f.name] = hits
    return found


def _is_placeholder(values: pa.Array, kind: pa.DataType) -> pa.Array | None:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.equal(values, UNAVAILABLE_VALUE)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.equal(values, pa.scalar(UNAVAILABLE_VALUE.encode(), kind))
    return None


class DebeziumJsonDecoder:
    """Debezium JSON events (plain or schemas-enabled) -> :class:`ChangeRows`."""

    def __init__(self, row: pa.Schema, required: Sequence[str] = ()) -> None:
        self.row = row
        self.required = tuple(required)
        self._json = JsonDecoder(envelope_schema(row))

    def decode(self, values: pa.Array) -> ChangeRows:
        parsed = self._json.decode(values)
        table, index, deletes, bad, before = change_rows(parsed.records, parsed.row_index,
                                                         self.row, self.required)
        errors = _merge_bad(parsed.errors, bad)
        assert table.num_rows + len(errors) == len(values), "change decoder lost records"
        return ChangeRows(DecodeResult(table, index, errors), deletes, before)


def _merge_bad(a: BadRecords, b: BadRecords) -> BadRecords:
    if not len(b):
        return a
    if not len(a):
        return b
    idx = pa.concat_arrays([a.index, b.index])
    order = pc.sort_indices(idx)
    return BadRecords(pc.take(idx, order),
                      pc.take(pa.concat_arrays([a.reason, b.reason]), order),
                      pc.take(pa.concat_arrays([a.detail, b.detail]), order))
