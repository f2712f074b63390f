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
