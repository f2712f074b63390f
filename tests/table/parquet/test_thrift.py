"""The compact-protocol codec: every struct it decodes encodes back to the same bytes (Parquet
footers of pyarrow's writer, a struct of every wire type), known bytes for known values, and
clear errors for malformed input."""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.table.parquet import thrift
from hoodline.table.parquet.thrift import Field, Mapping, Sequence, ThriftError


def _footer_bytes(table: pa.Table, **kw: object) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kw)  # type: ignore[arg-type]
    data = bytes(sink.getvalue())
    (length,) = struct.unpack("<i", data[-8:-4])
    return data[-8 - length : -8]


@pytest.mark.parametrize("options", [
    {},
    {"compression": "zstd", "use_dictionary": False, "row_group_size": 7},
    {"write_statistics": False, "version": "1.0"},
    {"write_page_index": True, "data_page_size": 64},
])
def test_pyarrow_footers_encode_back_to_the_same_bytes(options: dict[str, object]) -> None:
    n = 40
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": pa.array([f"n{i % 5}" for i in range(n)]),
        "amount": pa.array([i * 0.5 for i in range(n)]),
        "ok": pa.array([i % 2 == 0 for i in range(n)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * n, pa.timestamp("us", "UTC")),
        "maybe": pa.array([None if i % 3 else i for i in range(n)], pa.int32()),
        "tags": pa.array([[f"t{i}"] * (i % 3) for i in range(n)]),
    }).replace_schema_metadata({"k": "v" * 300})
    raw = _footer_bytes(table, **options)
    assert thrift.encode_struct(thrift.decode_struct(raw)) == raw


def test_every_wire_type_round_trips_and_known_values_have_known_bytes() -> None:
    fields = [
        Field(1, thrift.BOOL_TRUE, True),
        Field(2, thrift.BOOL_FALSE, False),
        Field(3, thrift.I8, -5),
        Field(4, thrift.I16, -300),
        Field(5, thrift.I32, 2**31 - 1),
        Field(6, thrift.I64, -(2**63)),
        Field(7, thrift.DOUBLE, -1.5),
        Field(8, thrift.BINARY, b"\x00\xffbytes"),
        Field(9, thrift.LIST, Sequence(thrift.I32, list(range(-8, 12)))),  # 20: long form
        Field(10, thrift.SET, Sequence(thrift.BOOL_TRUE, [True, False, True])),
        Field(11, thrift.MAP, Mapping(thrift.BINARY, thrift.I64, [(b"a", 1), (b"b", -1)])),
        Field(12, thrift.STRUCT, [Field(1, thrift.I32, 7)]),
        Field(40, thrift.I32, 1),  # a jump of more than 15: the id is written out
        Field(41, thrift.MAP, Mapping(0, 0, [])),
    ]
    raw = thrift.encode_struct(fields)
    assert thrift.decode_struct(raw) == fields
    assert thrift.encode_struct(thrift.decode_struct(raw)) == raw
    # field 1, i32 150: header 0x15, zigzag(150) = 300 = varint ac 02, stop byte
    assert thrift.encode_struct([Field(1, thrift.I32, 150)]) == b"\x15\xac\x02\x00"
    # field 20 after field 1 (delta 19 > 15): type byte, zigzag varint id 40 = 0x28
    assert thrift.encode_struct([Field(1, thrift.BOOL_TRUE, True),
                                 Field(20, thrift.I64, -1)]) == b"\x11\x06\x28\x01\x00"
    # a list of 3 strings: 0x38 = size 3 << 4 | binary
    assert thrift.encode_struct([Field(1, thrift.LIST, Sequence(thrift.BINARY, [b"a", b"", b"c"]))]
                                ) == b"\x19\x38\x01a\x00\x01c\x00"


def test_integer_fields_are_changed_in_place_or_added_in_id_order() -> None:
    fields = thrift.decode_struct(b"\x15\xac\x02\x26\x02\x00")  # 1: i32 150, 3: i64 1
    thrift.set_int(fields, 3, 2**40)
    thrift.set_int(fields, 2, 9)
    assert [f.id for f in fields] == [1, 2, 3]
    assert thrift.get_int(fields, 3) == 2**40 and thrift.get_int(fields, 2) == 9
    assert thrift.get_int(fields, 7) is None
    assert thrift.decode_struct(thrift.encode_struct(fields)) == fields


@pytest.mark.parametrize(("raw", "message"), [
    (b"\x15\xac", "ends early"),
    (b"\x18\x05ab\x00", "past the end"),
    (b"\x1d\x00", "unknown thrift wire type 13"),
    (b"\x15\x02\x00\x00", "1 bytes follow"),
])
def test_malformed_structs_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ThriftError, match=message):
        thrift.decode_struct(raw)
