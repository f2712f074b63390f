"""The columnar Avro codec produces exactly fastavro's bytes and reads them back."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.errors import TableError
from hoodline.table.log.avro_codec import (
    decode_records,
    encode_records,
    flat_fields,
    length_prefixed,
    record_list,
    record_offsets,
)
from hoodline.table.schema import arrow_to_avro

UTC = dt.UTC


def _table() -> pa.Table:
    return pa.table(
        {
            "key": pa.array(["a", "bé", "", "d" * 300, "e"], pa.string()),
            "n32": pa.array([0, -1, 2**31 - 1, -(2**31), None], pa.int32()),
            "n64": pa.array([0, 1, -(2**63), 2**63 - 1, 64], pa.int64()),
            "f32": pa.array([1.5, None, -0.0, 3.25, 1e30], pa.float32()),
            "f64": pa.array([1.5, 2.5, float("inf"), -7.125, None], pa.float64()),
            "flag": pa.array([True, False, None, True, False]),
            "blob": pa.array([b"\x00\x01", None, b"", b"\xff" * 200, b"x"], pa.binary()),
            "day": pa.array([dt.date(2024, 1, 2), None, dt.date(1969, 12, 31)] + [None] * 2),
            "at": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), None, None, None, None],
                pa.timestamp("us", tz="UTC"),
            ),
            "price": pa.array(
                [decimal.Decimal("1.23"), decimal.Decimal("-99999.99"), None,
                 decimal.Decimal("0.00"), decimal.Decimal("12345678.91")],
                pa.decimal128(10, 2),
            ),
        }
    )


def _fastavro_datums(table: pa.Table, schema: dict[str, Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for row in table.to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(buf.getvalue())
    return out


def _fastavro_record_list(rows: list[dict[str, Any]], schema: dict[str, Any]) -> bytes:
    """``rows`` written by fastavro, each prefixed by its length (a data block's records)."""
    parsed = fastavro.parse_schema(schema)
    body = b""
    for r in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        body += len(buf.getvalue()).to_bytes(4, "big") + buf.getvalue()
    return body


def test_flat_records_encode_to_fastavros_bytes() -> None:
    table = _table()
    schema = arrow_to_avro(table.schema, "t")
    assert flat_fields(schema) is not None
    ours = encode_records(table, schema).to_pylist()
    assert ours == _fastavro_datums(table, schema)


def test_flat_records_round_trip_through_the_columnar_decoder() -> None:
    table = _table()
    schema = arrow_to_avro(table.schema, "t")
    content = b"\x00" * 8 + length_prefixed(encode_records(table, schema))
    starts, ends = record_offsets(content, 8, table.num_rows)
    back = decode_records(content, starts, ends, schema)
    assert back.column_names == table.column_names
    for name in table.column_names:
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name


def test_decoder_reads_fastavro_datums_with_null_second_and_required_fields() -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": ["string", "null"]},
            {"name": "b", "type": "long"},
            {"name": "c", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
            {"name": "d", "type": ["null", {"type": "fixed", "name": "F", "size": 3}]},
        ],
    }
    rows = [
        {"a": "x", "b": -5, "c": "Y", "d": b"abc"},
        {"a": None, "b": 1 << 40, "c": "X", "d": None},
    ]
    body = _fastavro_record_list(rows, schema)
    starts, ends = record_offsets(body, 0, len(rows))
    back = decode_records(body, starts, ends, schema)
    assert back.to_pylist() == rows
    # and our encoder writes the same bytes
    table = pa.table(
        {
            "a": pa.array(["x", None]),
            "b": pa.array([-5, 1 << 40]),
            "c": pa.array(["Y", "X"]),
            "d": pa.array([b"abc", None], pa.binary(3)),
        }
    )
    assert length_prefixed(encode_records(table, schema)) == body


def test_a_required_long_after_an_optional_field_of_every_kind_reads_its_own_bytes() -> None:
    """A union's branch is read with the byte after it, which the value's first varint byte
    then uses: a value read otherwise (float, double, boolean, fixed, string, long) must not
    leave that byte for the required long after it."""
    value_types: list[Any] = [
        "float", "double", "boolean", {"type": "fixed", "name": "F", "size": 3}, "string", "long",
        "int", {"type": "enum", "name": "E", "symbols": ["X", "Y"]},
    ]
    values = [1.5, -2.25, True, b"\x81\x82\x83", "\x7f" * 200, 1 << 40, 3, "Y"]
    fields: list[dict[str, Any]] = []
    row: dict[str, Any] = {}
    for i, (t, v) in enumerate(zip(value_types, values, strict=True)):
        fields += [{"name": f"o{i}", "type": ["null", t]}, {"name": f"r{i}", "type": "long"}]
        row.update({f"o{i}": v, f"r{i}": 100 + i})
    schema = {"type": "record", "name": "r", "fields": fields}
    rows = [row, {**row, "o0": None, "o3": None}]
    body = _fastavro_record_list(rows, schema)
    starts, ends = record_offsets(body, 0, len(rows))
    assert decode_records(body, starts, ends, schema).to_pylist() == rows


@pytest.mark.parametrize(
    "when",
    [
        ["20261128101500123"] * 3,  # one commit time: one dictionary value, no copy
        ["20261128101500123", "20261128101500123", "20261128101500999"],  # last one differs
        ["20261128101500999", "20261128101500123", "20261128101500999"],  # a middle one does
        ["a", "bb", "a"],  # lengths differ
        ["", "", ""],  # the same empty value
        ["same", None, "same"],  # a null
    ],
)
def test_the_reader_gets_its_columns_strings_as_dictionaries_where_it_asks(
    when: list[str | None],
) -> None:
    """``wanted`` names the reader's columns: others are stepped over (the fields after them
    still read their own bytes), and a string column it types dictionary<int32, string>
    comes as one, with a single value when every record holds the same."""
    table = pa.table({
        "skipped": pa.array(["x" * 300, None, "yz"]),
        "when": pa.array(when, pa.string()),
        "n": pa.array([1, 2 << 40, -3]),
        "tail": pa.array(["p", "q", None]),
    })
    schema = arrow_to_avro(table.schema, "t")
    content = length_prefixed(encode_records(table, schema))
    starts, ends = record_offsets(content, 0, 3)
    dictionary = pa.dictionary(pa.int32(), pa.string())
    wanted = pa.schema([("n", pa.int64()), ("when", dictionary), ("tail", pa.string())])
    back = decode_records(content, starts, ends, schema, wanted)
    back.validate(full=True)
    assert back.column_names == ["when", "n", "tail"]  # the block's order, without 'skipped'
    assert back.schema.field("when").type == dictionary
    assert back.column("when").to_pylist() == when
    assert back.column("n").to_pylist() == [1, 2 << 40, -3]
    assert back.column("tail").to_pylist() == ["p", "q", None]
    distinct = list(dict.fromkeys(w for w in when if w is not None))
    assert back.column("when").chunk(0).dictionary.to_pylist() == distinct
    assert decode_records(content, starts, ends, schema).equals(table)  # no wanted: every one


def test_nested_records_take_the_generic_path_and_still_match_fastavro() -> None:
    table = pa.table(
        {
            "id": pa.array([1, 2]),
            "tags": pa.array([["a", "b"], None], pa.list_(pa.string())),
            "pos": pa.array([{"x": 1.0, "y": 2.0}, {"x": None, "y": 3.0}]),
        }
    )
    schema = arrow_to_avro(table.schema, "nested")
    assert flat_fields(schema) is None
    datums = encode_records(table, schema)
    assert datums.to_pylist() == _fastavro_datums(table, schema)
    content = length_prefixed(datums)
    starts, ends = record_offsets(content, 0, 2)
    assert decode_records(content, starts, ends, schema).to_pylist() == table.to_pylist()


def test_the_generic_path_refuses_nulls_where_the_avro_type_takes_none() -> None:
    """fastavro wrote a null boolean as false and the write went on (schema-evolution
    review); the columnar path refused it already."""
    flag = pa.array([True, None])
    table = pa.table({"flag": flag, "pos": pa.array([{"x": 1.0}, {"x": 2.0}])})
    schema = arrow_to_avro(pa.schema([pa.field("flag", pa.bool_(), False),
                                      pa.field("pos", table.schema.field("pos").type)]), "n")
    assert flat_fields(schema) is None
    with pytest.raises(TableError, match="column 'flag' has nulls but its Avro type is not "):
        encode_records(table, schema)


def test_logical_types_stored_raw_read_the_same_on_the_generic_path() -> None:
    """A uuid string and a local timestamp are stored as their Avro types (string, long), as
    the columnar path reads them. A nested field sends a record to fastavro, which gave UUID
    and naive datetime objects Arrow refused: every round failed, also after restarts."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "seen", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "tags", "type": {"type": "array", "items": {"type": "string",
                                                             "logicalType": "uuid"}}},
    ]}
    uid = "12345678-1234-5678-1234-567812345678"
    rows = [{"id": 1, "uid": uid, "seen": 1_700_000_000_123, "at": 5, "tags": [uid]},
            {"id": 2, "uid": uid, "seen": -1, "at": None, "tags": []}]
    assert flat_fields(schema) is None  # the array: the generic path
    body = _fastavro_record_list(rows, schema)
    starts, ends = record_offsets(body, 0, len(rows))
    back = decode_records(body, starts, ends, schema)
    assert back.to_pylist() == rows
    assert back.schema.field("uid").type == pa.string()
    assert back.schema.field("seen").type == pa.int64()


def test_large_random_columns_round_trip() -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    strings = [None if i % 17 == 0 else "k" * int(rng.integers(0, 40)) + str(i) for i in range(n)]
    table = pa.table(
        {
            "s": pa.array(strings, pa.string()),
            "v": pa.array(rng.integers(-(2**62), 2**62, n)),
            "d": pa.array(rng.normal(size=n)),
        }
    )
    schema = arrow_to_avro(table.schema, "big")
    content = length_prefixed(encode_records(table, schema))
    starts, ends = record_offsets(content, 0, n)
    back = decode_records(content, starts, ends, schema)
    assert back.equals(table.cast(back.schema))
    # spot-check against fastavro's reader
    parsed = fastavro.parse_schema(schema)
    for i in (0, 17, n // 2, n - 1):
        row = fastavro.schemaless_reader(io.BytesIO(content[starts[i] : ends[i]]), parsed, None)
        assert row == table.slice(i, 1).to_pylist()[0]


def test_truncated_records_fail_as_corrupt() -> None:
    table = pa.table({"s": pa.array(["hello", "world"])})
    schema = arrow_to_avro(table.schema, "t")
    content = length_prefixed(encode_records(table, schema))
    with pytest.raises(TableError, match="corrupt"):
        record_offsets(content[:-2], 0, 2)
    with pytest.raises(TableError, match="ends inside record 1 of 2"):  # no length prefix
        record_offsets(content[: len(content) // 2 + 1], 0, 2)
    with pytest.raises(TableError, match="negative Avro record length"):
        record_offsets(b"\xff\xff\xff\xf0" + content[4:], 0, 2)
    starts, ends = record_offsets(content, 0, 2)
    with pytest.raises(TableError, match="corrupt"):
        decode_records(content, starts, ends - 1, schema)


def test_a_string_running_into_the_next_record_fails_as_corrupt() -> None:
    """Strings are copied out as one array over the block whose spans must not overlap; a
    length that reaches into the next record is reported, not read across."""
    table = pa.table({"s": pa.array(["hello", "world", "!"]), "n": pa.array([1, 2, 3])})
    schema = arrow_to_avro(table.schema, "t")
    content = bytearray(length_prefixed(encode_records(table, schema)))
    starts, ends = record_offsets(bytes(content), 0, 3)
    back = decode_records(bytes(content), starts, ends, schema)
    assert back.column("s").to_pylist() == ["hello", "world", "!"]
    # record 0 is [union branch][length 5 = zig-zag 0x0a]["hello"]...: claim 8 bytes instead
    first = int(starts[0])
    assert content[first + 1] == 0x0A
    content[first + 1] = 0x10
    with pytest.raises(TableError, match="corrupt"):
        decode_records(bytes(content), starts, ends, schema)


def test_strings_are_checked_to_be_utf8_naming_the_field() -> None:
    """ASCII strings are viewed as they are, others checked by Arrow: bytes that are not
    UTF-8 in a string field fail naming it, not as a string column holding them."""
    table = pa.table({"n": pa.array([1, 2]), "s": pa.array(["plain", "caf\u00e9"])})
    schema = arrow_to_avro(table.schema, "t")
    content = bytearray(length_prefixed(encode_records(table, schema)))
    starts, ends = record_offsets(bytes(content), 0, 2)
    back = decode_records(bytes(content), starts, ends, schema)
    back.validate(full=True)
    assert back.column("s").to_pylist() == ["plain", "caf\u00e9"]
    at = bytes(content).index("caf\u00e9".encode())
    content[at + 3] = 0xFF  # the first byte of the two-byte é
    with pytest.raises(TableError, match="field 's' holds a value that is not UTF-8"):
        decode_records(bytes(content), starts, ends, schema)


def test_a_huge_string_length_fails_as_corrupt() -> None:
    """A length near 2^63 must not wrap around when added to the position."""
    table = pa.table({"s": pa.array(["hello"])})
    schema = arrow_to_avro(table.schema, "t")
    datum = encode_records(table, schema)[0].as_py()
    huge = bytes([0xFE] + [0xFF] * 8 + [0x01])  # zig-zag varint of 2^63 - 1
    corrupt = datum[:1] + huge + datum[2:]
    content = length_prefixed(pa.array([corrupt], pa.large_binary()))
    starts, ends = record_offsets(content, 0, 1)
    with pytest.raises(TableError, match="corrupt"):
        decode_records(content, starts, ends, schema)


def test_null_in_a_required_field_is_refused_naming_it() -> None:
    table = pa.table({"n": pa.array([1, None])})
    schema = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}
    with pytest.raises(TableError, match="'n'"):
        encode_records(table, schema)


def test_record_list_is_the_lead_then_length_prefixed_datums() -> None:
    table = _table()
    schema = arrow_to_avro(table.schema, "t")
    for constants in (None, {"key": "same"}):
        expected_rows = table if constants is None else table.drop_columns(["key"]).append_column(
            "key", pa.array(["same"] * table.num_rows)
        )
        datums = encode_records(expected_rows.select(table.column_names), schema)
        got = record_list(table, schema, constants, lead=b"\x00\x00\x00\x03LEAD")
        assert bytes(got) == b"\x00\x00\x00\x03LEAD" + length_prefixed(datums)
    nested = pa.table({"tags": pa.array([["a"], []], pa.list_(pa.string()))})
    nested_schema = arrow_to_avro(nested.schema, "n")
    assert bytes(record_list(nested, nested_schema, lead=b"x")) == b"x" + length_prefixed(
        encode_records(nested, nested_schema)
    )


def test_nested_optional_records_decode_column_by_column_like_fastavro() -> None:
    """Records inside records (optional or not, named once and referenced again, as Debezium's
    before/after images) take the columnar path, and read exactly as fastavro reads them."""
    value = {"type": "record", "name": "Value", "namespace": "db.t", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "score", "type": ["null", "double"]},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "inner", "type": ["null", {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"}, {"name": "at", "type": {
                "type": "long", "logicalType": "timestamp-micros"}}]}]},
    ]}
    envelope = {"type": "record", "name": "Envelope", "namespace": "db.t", "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "lsn", "type": ["null", "long"]}, {"name": "ts_ms", "type": "long"}]}},
        {"name": "op", "type": "string"},
    ]}
    fields = flat_fields(envelope, records=True)
    assert fields is not None and [f.kind for f in fields] == ["record", "record", "record",
                                                               "string"]
    assert flat_fields(envelope) is None  # the encoder keeps the generic path
    rng = np.random.default_rng(3)

    def image(i: int) -> dict[str, Any] | None:
        if rng.random() < 0.3:
            return None
        return {"id": i, "name": None if i % 3 == 0 else f"n{i}" * int(rng.integers(0, 5)),
                "score": None if i % 4 == 0 else i / 3, "kind": "AB"[i % 2],
                "inner": None if i % 5 == 0 else {"x": -i, "at": 1_700_000_000_000_000 + i}}

    rows = [{"before": image(i), "after": image(i + 1),
             "source": {"lsn": None if i % 7 == 0 else i * 8, "ts_ms": i}, "op": "cud"[i % 3]}
            for i in range(3000)]
    parsed = fastavro.parse_schema(envelope)
    datums = []
    for r in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        datums.append(buf.getvalue())
    content = length_prefixed(pa.array(datums, pa.large_binary()))
    starts, ends = record_offsets(content, 0, len(datums))
    got = decode_records(content, starts, ends, envelope)
    expected = [fastavro.schemaless_reader(io.BytesIO(d), parsed, None) for d in datums]
    assert got.to_pylist() == expected
    with pytest.raises(TableError):
        decode_records(content[:-3], starts, ends, envelope)


def _boundary_longs() -> list[int]:
    """Values whose zig-zag varints take every length from 1 to 10 bytes, at both ends."""
    out = [0, -1, 2**63 - 1, -(2**63)]
    for k in range(1, 10):
        edge = 2 ** (7 * k)  # zig-zag of v is 2v (v >= 0) or -2v - 1 (v < 0)
        out += [edge // 2 - 1, edge // 2, -(edge // 2), -(edge // 2) - 1]
    return out


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(
        st.tuples(
            st.sampled_from(_boundary_longs()), st.booleans(), st.integers(-(2**31), 2**31 - 1)
        ),
        min_size=1,
        max_size=80,
    )
)
def test_varints_of_every_length_decode_as_fastavro_reads_them(
    picks: list[tuple[int, bool, int]],
) -> None:
    """Varints are read 8 bytes at a time (longer ones byte by byte): every length, with nulls
    (rows not advanced) and fields after them, reads as fastavro reads it."""
    table = pa.table(
        {
            "v": pa.array([None if null else v for v, null, _ in picks], pa.int64()),
            "i": pa.array([i for _, _, i in picks], pa.int32()),
            "d": pa.array([float(v) for v, _, _ in picks], pa.float64()),
            "f": pa.array([float(i) for _, _, i in picks], pa.float32()),
        }
    )
    schema = arrow_to_avro(table.schema, "t")
    datums = _fastavro_datums(table, schema)
    content = length_prefixed(pa.array(datums, pa.large_binary()))
    starts, ends = record_offsets(content, 0, len(datums))
    back = decode_records(content, starts, ends, schema)
    assert back.to_pylist() == table.to_pylist()


def test_a_varint_longer_than_ten_bytes_or_past_the_block_fails_as_corrupt() -> None:
    table = pa.table({"n": pa.array([5], pa.int64())})
    schema = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}
    for datum in (b"\xff" * 11 + b"\x01", b"\xff" * 3, b"\xff" * 9):
        content = length_prefixed(pa.array([datum], pa.large_binary()))
        starts, ends = record_offsets(content, 0, 1)
        with pytest.raises(TableError, match="corrupt"):
            decode_records(content, starts, ends, schema)
    content = length_prefixed(encode_records(table, schema))
    starts, ends = record_offsets(content, 0, 1)
    assert decode_records(content, starts, ends, schema).column("n").to_pylist() == [5]


def test_a_union_branch_out_of_range_fails_naming_the_field() -> None:
    table = pa.table({"s": pa.array(["a", None, "c"]), "n": pa.array([1, 2, None])})
    schema = arrow_to_avro(table.schema, "t")
    datums = _fastavro_datums(table, schema)
    content = length_prefixed(pa.array(datums, pa.large_binary()))
    starts, ends = record_offsets(content, 0, 3)
    assert decode_records(content, starts, ends, schema).to_pylist() == table.to_pylist()
    bad = bytearray(content)
    bad[int(starts[1])] = 0x04  # branch 2 of a two-branch union
    with pytest.raises(TableError, match="field 's': Avro union branch byte 0x04 is out of range"):
        decode_records(bytes(bad), starts, ends, schema)


_COLUMN_KINDS = {
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "long": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
    "flag": (pa.bool_(), st.booleans()),
    "text": (pa.string(), st.text(max_size=5)),
}


@st.composite
def _tables_and_constants(draw: st.DrawFn) -> tuple[pa.Table, dict[str, str], pa.Schema]:
    """Columns of random kinds, nulls or not, some string fields given as constants (at least
    one real column, which gives the row count)."""
    n = draw(st.integers(1, 6))
    kinds = draw(st.lists(st.sampled_from(sorted(_COLUMN_KINDS)), min_size=1, max_size=7))
    columns: dict[str, pa.Array] = {}
    constants: dict[str, str] = {}
    fields: list[pa.Field] = []
    for i, kind in enumerate(kinds):
        name = f"c{i}"
        if kind == "text" and draw(st.booleans()) and (columns or i < len(kinds) - 1):
            constants[name] = draw(st.text(max_size=4))  # given without a column
            fields.append(pa.field(name, pa.string()))
            continue
        arrow_type, values = _COLUMN_KINDS[kind]
        nullable = st.none() | values if draw(st.booleans()) else values
        columns[name] = pa.array(draw(st.lists(nullable, min_size=n, max_size=n)), arrow_type)
        fields.append(pa.field(name, arrow_type))
    return pa.table(columns), constants, pa.schema(fields)


@given(_tables_and_constants())
@settings(max_examples=150, deadline=None)
def test_record_list_stacks_pieces_into_fastavros_bytes(
    case: tuple[pa.Table, dict[str, str], pa.Schema],
) -> None:
    # branch bytes, varints, fixed-width values and constants between strings are stacked into
    # one piece before the element-wise join: whatever their order and nulls, every record must
    # still be the bytes fastavro writes
    rows, constants, arrow_schema = case
    schema = arrow_to_avro(arrow_schema, "t")
    full = pa.table({
        f.name: pa.array([constants[f.name]] * rows.num_rows, pa.string())
        if f.name in constants else rows.column(f.name)
        for f in arrow_schema
    })
    got = bytes(record_list(rows, schema, constants or None, lead=b"L"))
    expected = pa.array(_fastavro_datums(full, schema), pa.large_binary())
    assert got == b"L" + length_prefixed(expected)


@settings(max_examples=80, deadline=None)
@given(
    picks=st.lists(
        st.tuples(st.sampled_from(_boundary_longs()), st.booleans()), min_size=1, max_size=40
    ),
    widest=st.integers(1, 10),
)
def test_varints_of_every_length_encode_as_fastavro_writes_them(
    picks: list[tuple[int, bool]], widest: int
) -> None:
    """Varints of up to 8 bytes are spread from one word, longer ones byte by byte: a column's
    widest value picks the way, so columns are drawn with every widest length."""
    fits = [(v, null) for v, null in picks if -(2 ** (7 * widest - 1)) <= v < 2 ** (7 * widest - 1)]
    table = pa.table({
        "v": pa.array([None if null else v for v, null in fits or [(0, False)]], pa.int64()),
        "i": pa.array([v >> 33 for v, _ in fits or [(0, False)]], pa.int32()),
    })
    schema = arrow_to_avro(table.schema, "t")
    assert encode_records(table, schema).to_pylist() == _fastavro_datums(table, schema)


def test_unions_of_several_types_decode_into_the_member_of_their_branch() -> None:
    """Branches told apart by name (records, enums) and by value type (strings, longs, maps,
    timestamps), also inside arrays; ``[int, long]`` is read as long, as Spark reads it."""
    from hoodline.table.log.avro_codec import decode_records
    from hoodline.table.schema import avro_schema_json_to_arrow

    card = {"type": "record", "name": "Card", "namespace": "ns",
            "fields": [{"name": "x", "type": "int"}]}
    schema: dict[str, Any] = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["null", "string", "long", card,
                               {"type": "enum", "name": "E", "symbols": ["P", "Q"]},
                               {"type": "map", "values": "int"}]},
        {"name": "w", "type": ["int", "long"]},
        {"name": "a", "type": {"type": "array", "items": ["string", "ns.Card"]}},
        {"name": "t", "type": ["string", {"type": "long", "logicalType": "timestamp-millis"}]},
    ]}
    when = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    values: list[Any] = [None, "s", 5, ("ns.Card", {"x": 1}), ("E", "Q"), {"k": 1}]
    parsed = fastavro.parse_schema(schema)
    buf, starts, ends = io.BytesIO(), [], []
    for i, v in enumerate(values):
        starts.append(buf.tell())
        fastavro.schemaless_writer(buf, parsed, {"u": v, "w": i, "a": ["a", ("ns.Card", {"x": i})],
                                                 "t": when if i % 2 else "later"})
        ends.append(buf.tell())
    table = decode_records(buf.getvalue(), np.array(starts), np.array(ends), schema)
    assert table.schema == avro_schema_json_to_arrow(json.dumps(schema))
    assert table.schema.field("w").type == pa.int64()
    members = [f.name for f in table.schema.field("u").type]
    assert members == [f"member{i}" for i in range(5)]
    got = table.column("u").to_pylist()
    assert got[0] is None
    assert [next(k for k, v in m.items() if v is not None) for m in got[1:]] == members
    assert [m[f"member{i}"] for i, m in enumerate(got[1:])] == ["s", 5, {"x": 1}, "Q", [("k", 1)]]
    assert table.column("a").to_pylist()[2] == [{"member0": "a", "member1": None},
                                                {"member0": None, "member1": {"x": 2}}]
    assert table.column("t").to_pylist()[:2] == [{"member0": "later", "member1": None},
                                                 {"member0": None, "member1": when}]
