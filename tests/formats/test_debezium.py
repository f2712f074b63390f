"""Debezium change events -> rows, deletes, ordering, and bad records (JSON decoder; the Avro
envelope shares :func:`change_rows`)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pyarrow as pa
import pytest

from hoodline.errors import SchemaChangedError
from hoodline.formats.debezium import DebeziumJsonDecoder, envelope_schema
from hoodline.formats.registry import WriterSchema
from hoodline.formats.registry_decoder import RegistryDecoder

ROW = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])


def _decode(events: list[Any]) -> Any:
    values = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in events]
    return DebeziumJsonDecoder(ROW, ["id"]).decode(pa.array(values, pa.binary()))


def test_ops_images_and_event_columns() -> None:
    out = _decode([
        {"before": None, "after": {"id": 1, "name": "a", "day": 19000}, "op": "c", "ts_ms": 5,
         "source": {"lsn": 100, "ts_ms": 4}},
        {"schema": {"type": "struct"}, "payload": {
            "before": {"id": 1}, "after": {"id": 1, "name": "b", "day": 19001}, "op": "u",
            "ts_ms": 6, "source": {"lsn": 120, "ts_ms": 5}}},
        {"before": {"id": 2, "name": "x"}, "after": None, "op": "d", "ts_ms": 7,
         "source": {"lsn": 101, "ts_ms": 6}},
        {"before": None, "after": {"id": 3, "name": "s", "day": None}, "op": "r", "ts_ms": 9},
    ])
    rows = out.result.records.to_pylist()
    assert [(r["id"], r["name"], r["_event_op"]) for r in rows] == [
        (1, "a", "c"), (1, "b", "u"), (2, "x", "d"), (3, "s", "r")]
    assert out.deletes.to_pylist() == [False, False, True, False]
    assert [r["_event_ts_ms"] for r in rows] == [4, 5, 6, 9]  # source.ts_ms, else ts_ms
    orders = [r["_event_order"] for r in rows]
    assert orders[0] < orders[2] < orders[1]  # by LSN, not by arrival
    assert orders[0] == f"{100:020d}{4:015d}"
    assert len(out.result.errors) == 0


def test_mysql_binlog_positions_sort_by_file_then_position_then_row() -> None:
    def ev(file: str, pos: int, row: int) -> dict[str, Any]:
        return {"after": {"id": 1}, "op": "u", "ts_ms": 1,
                "source": {"file": file, "pos": pos, "row": row, "ts_ms": 1}}

    out = _decode([ev("mysql-bin.000010", 5, 0), ev("mysql-bin.000009", 999999, 3),
                   ev("mysql-bin.000010", 5, 1), ev("mysql-bin.000010", 40, 0)])
    orders = out.result.records.column("_event_order").to_pylist()
    assert sorted(range(4), key=lambda i: orders[i]) == [1, 0, 2, 3]


def test_events_that_are_not_row_changes_are_bad_records_with_reasons() -> None:
    out = _decode([
        {"after": {"id": 1}, "op": "c"},
        {"before": None, "after": None, "op": "t", "ts_ms": 8},
        {"ddl": "ALTER TABLE x ADD y INT", "databaseName": "db"},
        {"before": None, "after": None, "op": "d", "ts_ms": 9},
        {"after": {"name": "nokey"}, "op": "c"},
        b"not json",
    ])
    assert out.result.row_index.to_pylist() == [0]
    errors = out.result.errors
    assert dict(zip(errors.index.to_pylist(), errors.reason.to_pylist(), strict=True)) == {
        1: "unsupported_change", 2: "not_change_event", 3: "missing_image", 4: "missing_key",
        5: "unparseable"}
    assert "op 't'" in errors.detail[0].as_py()


def test_avro_envelope_with_a_new_image_field_asks_for_the_latest_version() -> None:
    value = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "long"},
                                                       {"name": "email", "type": "string"}]}
    envelope = {"type": "record", "name": "E", "fields": [
        {"name": "before", "type": ["null", value]}, {"name": "after", "type": ["null", "V"]},
        {"name": "op", "type": "string"}]}
    reader = envelope_schema(pa.schema([("id", pa.int64())]), wrapped=False)
    decoder = RegistryDecoder(reader, lambda i: WriterSchema(i, envelope), reader_id=1,
                          nested=("before", "after"))
    frame = struct.pack(">bI", 0, 2) + b"\x00" + b"\x02\x02\x02a" + b"\x02c"
    with pytest.raises(SchemaChangedError, match=r"after\.email"):
        decoder.decode(pa.array([frame], pa.binary()))


def test_postgres_and_mysql_events_without_their_log_position_are_bad_records() -> None:
    """An event without its position got an ordering value of another width, which as text
    sorted above every positioned one: it won over every later change of its key, silently."""
    out = _decode([
        {"after": {"id": 1}, "op": "u", "ts_ms": 9,
         "source": {"connector": "postgresql", "lsn": None, "ts_ms": 9}},
        {"after": {"id": 2}, "op": "u", "ts_ms": 9,
         "source": {"connector": "mysql", "file": "mysql-bin.000003", "ts_ms": 9}},
        {"after": {"id": 3}, "op": "u", "ts_ms": 9,
         "source": {"connector": "postgresql", "lsn": 5, "ts_ms": 9}},
        # another connector (no lsn or binlog position of its own): ordered by time alone
        {"after": {"id": 4}, "op": "u", "ts_ms": 9, "source": {"connector": "sqlserver"}},
    ])
    assert out.result.records.column("id").to_pylist() == [3, 4]
    errors = out.result.errors
    assert errors.index.to_pylist() == [0, 1]
    assert errors.reason.to_pylist() == ["missing_position"] * 2
    assert "postgresql change event without its log position (source.lsn)" in \
        errors.detail[0].as_py()
    assert "source.file and source.pos" in errors.detail[1].as_py()


def test_the_toast_placeholder_is_a_bad_record_naming_its_columns() -> None:
    """An update that did not touch a TOASTed column carries Debezium's placeholder in it:
    upserted, it replaced the stored value with the placeholder text, silently."""
    row = pa.schema([("id", pa.int64()), ("note", pa.string()), ("blob", pa.binary()),
                     ("tags", pa.list_(pa.string())), ("n", pa.int64())])
    toast = "__debezium_unavailable_value"
    events = [
        {"after": {"id": 1, "note": toast, "tags": ["a", toast], "n": 1}, "op": "u"},
        {"after": {"id": 2, "note": "kept", "tags": ["a"], "n": 2}, "op": "u"},
        {"after": {"id": 3, "tags": [toast]}, "op": "u"},
        # a delete uses its image's key alone: a placeholder elsewhere does not matter
        {"before": {"id": 4, "note": toast}, "op": "d"},
    ]
    values = pa.array([json.dumps(e).encode() for e in events], pa.binary())
    out = DebeziumJsonDecoder(row, ["id"]).decode(values)
    assert out.result.records.column("id").to_pylist() == [2, 4]
    errors = out.result.errors
    assert errors.index.to_pylist() == [0, 2]
    assert errors.reason.to_pylist() == ["unavailable_value"] * 2
    assert errors.detail[0].as_py().startswith("column(s) 'note', 'tags' hold Debezium's "
                                               "placeholder")
    assert errors.detail[1].as_py().startswith("column(s) 'tags' hold")
    assert "REPLICA IDENTITY FULL" in errors.detail[0].as_py()


def test_the_toast_placeholder_in_a_bytes_column_is_a_bad_record() -> None:
    from hoodline.formats.debezium import change_rows

    row = pa.schema([("id", pa.int64()), ("blob", pa.binary())])
    image = pa.struct(list(row))
    after = pa.array([{"id": 1, "blob": b"__debezium_unavailable_value"},
                      {"id": 2, "blob": b"x"}], image)
    envelope = pa.table({
        "before": pa.nulls(2, image), "after": after, "op": pa.array(["u", "u"]),
        "ts_ms": pa.array([1, 2], pa.int64()),
        "source": pa.nulls(2, envelope_schema(row, wrapped=False).field("source").type)})
    rows, _, _, bad, _ = change_rows(envelope, pa.array([0, 1], pa.int64()), row, ["id"])
    assert rows.column("id").to_pylist() == [2]
    assert bad.reason.to_pylist() == ["unavailable_value"] and "'blob'" in bad.detail[0].as_py()


def test_a_key_missing_from_a_delete_image_is_named_with_the_replica_identity_hint() -> None:
    """A table partitioned by a column outside the primary key: Postgres's default replica
    identity puts only the key in a delete's 'before' image."""
    out = DebeziumJsonDecoder(ROW, ["id", "name"]).decode(pa.array([
        json.dumps({"before": {"id": 1}, "op": "d"}).encode(),
        json.dumps({"after": {"name": "x"}, "op": "c"}).encode(),
    ], pa.binary()))
    details = out.result.errors.detail.to_pylist()
    assert out.result.errors.reason.to_pylist() == ["missing_key"] * 2
    assert details[0].startswith("the change's before image has no value for 'name'")
    assert "REPLICA IDENTITY FULL" in details[0]
    assert details[1].startswith("the change's after image has no value for 'id'")
    assert "REPLICA" not in details[1]


def test_an_op_that_is_not_debeziums_is_not_called_a_truncate() -> None:
    out = _decode([{"after": {"id": 1}, "op": "x"}, {"op": "m"}])
    details = out.result.errors.detail.to_pylist()
    assert "not one of Debezium's ops" in details[0] and "truncate and message" in details[1]


def test_a_wrong_type_inside_a_change_event_names_the_column() -> None:
    """Details named the envelope ('after', 'payload'), not the column (CDC review)."""
    from hoodline.formats.debezium import DebeziumJsonDecoder

    row = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("at", pa.timestamp("us"))])
    values = [b'{"op":"c","after":{"id":1,"qty":"abc"},"source":{"lsn":5}}',
              b'{"payload":{"op":"c","after":{"id":2,"qty":1099511627844},"source":{"lsn":6}}}',
              b'{"op":"c","after":{"id":4,"at":1700000000000000},"source":{"lsn":8}}']
    details = DebeziumJsonDecoder(row, ["id"]).decode(
        pa.array(values, pa.binary())).result.errors.detail.to_pylist()
    assert [d.split(" holds ")[0].rsplit(" ", 1)[1] for d in details] == [
        "'after.qty'", "'payload.after.qty'", "'after.at'"]
    assert "which is not an int32" in details[1]
    assert "given as ISO-8601 text" in details[2] and "(1700000000000000)" in details[2]
