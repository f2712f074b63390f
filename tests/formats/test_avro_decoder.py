"""The Confluent Avro decoder: against confluent-kafka's own serializer and deserializer, through
its registry client and the test registry; resolution rules; every bad value accounted for."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import struct
import threading
from decimal import Decimal as D
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from hoodline.errors import (
    ConfigError,
    SchemaChangedError,
    SchemaRegistryUnavailableError,
    is_retryable,
)
from hoodline.formats import registry_decoder
from hoodline.formats.json_decoder import MISSING_KEY, UNPARSEABLE
from hoodline.formats.registry import (
    UNKNOWN,
    RegistrySettings,
    WriterSchema,
    fetch_subject_schema,
    registry_options,
)
from hoodline.formats.registry_decoder import (
    INCOMPATIBLE_SCHEMA,
    NOT_WIRE_FORMAT,
    UNKNOWN_SCHEMA,
    RegistryDecoder,
    RegistryFormat,
)
from tests.helpers.pipeline_stream import unique
from tests.helpers.schema_registry import SchemaRegistry

ORDER: dict[str, Any] = {
    "type": "record", "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": ["null", "double"], "default": None},
        {"name": "ok", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "blob", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    ],
}
FLAT = {**ORDER, "fields": ORDER["fields"][:-1]}


def _frame(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return struct.pack(">bI", 0, schema_id) + buf.getvalue()


def _record(rng: random.Random, i: int, nested: bool) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": rng.randrange(-(2**62), 2**62), "qty": rng.randrange(-(2**31), 2**31),
        "name": rng.choice([None, "", "é-" + "x" * rng.randrange(0, 300)]),
        "price": rng.choice([None, rng.uniform(-1e9, 1e9)]),
        "ok": rng.random() < 0.5, "ts": rng.randrange(0, 2**41),
        "day": rng.choice([None, rng.randrange(-30000, 30000)]),
        "kind": rng.choice(["A", "B"]), "blob": rng.randbytes(rng.randrange(0, 40)),
    }
    if nested:
        rec["tags"] = [f"t{j}" for j in range(rng.randrange(0, 4))]
    return rec


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_decodes_what_confluent_serializes_like_confluents_deserializer(
    schema_registry: SchemaRegistry, nested: bool
) -> None:
    schema = ORDER if nested else FLAT
    subject = unique("orders") + "-value"
    client = SchemaRegistryClient({"url": schema_registry.url})
    ser = AvroSerializer(client, json.dumps(schema), conf={"subject.name.strategy":
                                                            lambda ctx, name: subject})
    deser = AvroDeserializer(client)
    ctx = SerializationContext("t", MessageField.VALUE)
    rng = random.Random(11)
    values = [ser(_record(rng, i, nested), ctx) for i in range(1500)]
    settings = RegistrySettings((("url", schema_registry.url),), subject)
    reader = fetch_subject_schema(settings)
    result = RegistryFormat(settings, reader.schema_id).decoder(reader.arrow, ["id"]).decode(
        pa.array(values, pa.binary()))
    assert len(result.errors) == 0
    assert result.row_index.to_pylist() == list(range(len(values)))
    expected = pa.Table.from_pylist([deser(v, ctx) for v in values], schema=reader.arrow)
    assert result.records.equals(expected)


def _lookup(schemas: dict[int, Any]) -> Any:
    def look(schema_id: int) -> WriterSchema | str:
        found = schemas.get(schema_id)
        return UNKNOWN if found is None else WriterSchema(schema_id, found)
    return look


READER = pa.schema([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int64()),
                    ("score", pa.float64()), ("channel", pa.string())])
V1 = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]},
    {"name": "qty", "type": "int"}, {"name": "gone", "type": "string"}]}
V2 = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]},
    {"name": "qty", "type": "long"}, {"name": "score", "type": ["null", "double"]},
    {"name": "channel", "type": "string", "default": "web"}]}
BAD_TYPE = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "qty", "type": "string"}]}


def test_resolution_defaults_promotions_and_every_bad_value_accounted_for() -> None:
    decoder = RegistryDecoder(READER, _lookup({1: V1, 2: V2, 3: BAD_TYPE}), required=["id"],
                          defaults={"channel": "web"})
    values = [
        _frame(1, V1, {"id": 1, "name": "a", "qty": 5, "gone": "x"}),       # 0 old version
        _frame(2, V2, {"id": 2, "name": None, "qty": 2**40, "score": 1.5, "channel": "app"}),
        b"",                                                                 # 2 empty
        None,                                                                # 3 no value
        b"\x01" + _frame(1, V1, {"id": 3, "name": "b", "qty": 1, "gone": ""})[1:],  # 4 magic
        _frame(9, V1, {"id": 4, "name": "c", "qty": 1, "gone": ""}),        # 5 unknown id
        _frame(3, BAD_TYPE, {"id": 5, "qty": "7"}),                          # 6 type changed
        _frame(1, V1, {"id": 6, "name": "d", "qty": 1, "gone": "zz"})[:-2],  # 7 truncated
        _frame(1, V1, {"id": 7, "name": "e", "qty": 1, "gone": ""}) + b"\x00",  # 8 trailing
        _frame(2, V2, {"id": 8, "name": "f", "qty": 9, "score": None, "channel": "web"}),
    ]
    result = decoder.decode(pa.array(values, pa.binary()))
    assert result.row_index.to_pylist() == [0, 1, 9]
    assert result.records.to_pylist() == [
        {"id": 1, "name": "a", "qty": 5, "score": None, "channel": "web"},
        {"id": 2, "name": None, "qty": 2**40, "score": 1.5, "channel": "app"},
        {"id": 8, "name": "f", "qty": 9, "score": None, "channel": "web"},
    ]
    reasons = dict(zip(result.errors.index.to_pylist(), result.errors.reason.to_pylist(),
                       strict=True))
    assert reasons == {2: NOT_WIRE_FORMAT, 3: NOT_WIRE_FORMAT, 4: NOT_WIRE_FORMAT,
                       5: UNKNOWN_SCHEMA, 6: INCOMPATIBLE_SCHEMA, 7: UNPARSEABLE,
                       8: UNPARSEABLE}
    details = dict(zip(result.errors.index.to_pylist(), result.errors.detail.to_pylist(),
                       strict=True))
    assert "schema id 9" in details[5]
    assert "'qty'" in details[6] and "schema id 3" in details[6]
    # every detail names the schema id
    for row in (7, 8):
        assert details[row].startswith(
            "schema id 1: Avro datum does not match its writer schema: "), details[row]


def test_a_datum_error_without_a_message_is_described() -> None:
    """fastavro raises a bare EOFError for some truncated datums; the detail must not end in
    an empty message."""
    assert registry_decoder._failure(EOFError()) == (
        "it ends before its schema's fields do (truncated)")
    assert registry_decoder._failure(EOFError("Expected 2 bytes, read 0")) == (
        "it ends before its schema's fields do (truncated: EOFError: Expected 2 bytes, read 0)")
    # reading a string past the end of the bytes
    assert registry_decoder._failure(IndexError("string index out of range")) == (
        "it ends before its schema's fields do (truncated: IndexError: string index out of "
        "range)")
    assert registry_decoder._failure(ValueError()) == "ValueError"


def test_narrower_table_column_reads_values_that_fit_and_refuses_the_rest() -> None:
    reader = pa.schema([("id", pa.int64()), ("qty", pa.int32())])
    decoder = RegistryDecoder(reader, _lookup({2: V2}), required=["id"])
    values = [_frame(2, V2, {"id": i, "name": None, "qty": q, "score": None, "channel": "w"})
              for i, q in enumerate([7, 2**40, -(2**31)])]
    result = decoder.decode(pa.array(values, pa.binary()))
    assert result.records.to_pylist() == [{"id": 0, "qty": 7}, {"id": 2, "qty": -(2**31)}]
    assert result.errors.index.to_pylist() == [1]
    assert result.errors.reason.to_pylist() == [INCOMPATIBLE_SCHEMA]
    assert "is outside the table's int32" in result.errors.detail[0].as_py()


def test_a_double_read_into_an_integer_column_keeps_whole_numbers_in_its_range() -> None:
    """A field become double (Avro long -> double, JSON Schema integer -> number) refused every
    record of the new version, values that fit included, although the README says only values
    that are not whole numbers go to the error table (schema review). Now each value is read
    into the table's integer column or is a bad record naming why."""
    reader = pa.schema([("id", pa.int64()), ("qty", pa.int64())])
    v2 = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "qty", "type": ["null", "double"]}]}
    qtys = [3.0, 2.5, None, -(2.0**63), 2.0**63, float("nan"), float("inf"), 1e15]
    values = [_frame(5, v2, {"id": i, "qty": q}) for i, q in enumerate(qtys)]
    result = RegistryDecoder(reader, _lookup({5: v2}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    assert result.records.to_pylist() == [
        {"id": 0, "qty": 3}, {"id": 2, "qty": None}, {"id": 3, "qty": -(2**63)},
        {"id": 7, "qty": 10**15}]
    assert result.errors.index.to_pylist() == [1, 4, 5, 6]
    assert set(result.errors.reason.to_pylist()) == {INCOMPATIBLE_SCHEMA}
    assert ("field 'qty' has a value that is no whole number in the range of the table's int64 "
            "column (the writer schema has double)") in result.errors.detail[0].as_py()


def test_narrower_decimal_float_and_time_columns_read_the_values_that_fit() -> None:
    """A declared decimal(12,2) for Avro's decimal(38,10), a float for a double, refused every
    record of the version, values that fit included; one time with microseconds in a
    millisecond column sent every record of the batch to the error table, those with a null
    time too (data-types review). Each value is read or is a bad record naming why."""
    reader = pa.schema([("id", pa.int64()), ("dec", pa.decimal128(12, 2)),
                        ("f", pa.float32()), ("ts", pa.timestamp("ms", tz="UTC"))])
    v = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "dec", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                          "precision": 38, "scale": 10}]},
        {"name": "f", "type": ["null", "double"]},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]}]}
    utc = dt.UTC
    t0 = dt.datetime(2024, 3, 1, 10, 0, 0, 123000, tzinfo=utc)
    rows = [  # (dec, f, ts)
        (D("1.23"), 0.5, t0),                              # 0: fits
        (D("1.2345"), None, None),                         # 1: digits after the point lost
        (D("12345678901.00"), None, None),                 # 2: 11 digits before it, 10 fit
        (D("-9999999999.99"), 0.1, None),                  # 3: fits (0.1 rounded, as JSON's)
        (None, 1e300, None),                               # 4: beyond a float
        (None, None, t0.replace(microsecond=123456)),      # 5: finer than milliseconds
        (None, float("inf"), None),                        # 6: infinity stays infinity
    ]
    values = [_frame(4, v, {"id": i, "dec": d, "f": f, "ts": t})
              for i, (d, f, t) in enumerate(rows)]
    result = RegistryDecoder(reader, _lookup({4: v}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    got = result.records.to_pylist()
    assert [r["id"] for r in got] == [0, 3, 6]
    assert got[0]["dec"] == D("1.23") and got[0]["f"] == 0.5 and got[0]["ts"] == t0
    assert got[1]["dec"] == D("-9999999999.99") and abs(got[1]["f"] - 0.1) < 1e-7
    assert got[2]["f"] == float("inf")
    assert result.errors.index.to_pylist() == [1, 2, 4, 5]
    assert set(result.errors.reason.to_pylist()) == {INCOMPATIBLE_SCHEMA}
    details = result.errors.detail.to_pylist()
    # each record's detail names its own field's problem, not the batch's others
    assert details[0] == (
        "schema id 4: field 'dec' has a value that does not fit (digits would be lost in) the "
        "table's decimal128(12, 2) column (the writer schema has decimal128(38, 10))")
    assert details[1] == details[0]
    assert details[2] == ("schema id 4: field 'f' has a value that is outside the range of "
                          "the table's float column (the writer schema has double)")
    assert details[3] == ("schema id 4: field 'ts' has a value that is more precise than the "
                          "table's timestamp[ms, tz=UTC] column (the writer schema has "
                          "timestamp[us, tz=UTC])")


def test_narrower_values_inside_records_and_lists_refuse_only_their_rows() -> None:
    """Inside a record or a list the value-by-value check did not look: one time with
    microseconds in a struct's millisecond field, or one decimal losing digits in a list,
    sent every record of the batch to the error table (review of the narrowing check)."""
    inner = pa.struct([("t", pa.timestamp("ms", tz="UTC"))])
    reader = pa.schema([("id", pa.int64()), ("inner", inner),
                        ("amounts", pa.list_(pa.decimal128(12, 2)))])
    v = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}},
        {"name": "amounts", "type": {"type": "array", "items": {
            "type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10}}}]}
    utc = dt.UTC
    t0 = dt.datetime(2024, 3, 1, 10, 0, 0, 123000, tzinfo=utc)
    rows = [(t0, [D("1.5")]), (t0.replace(microsecond=123456), [D("2")]),
            (t0, [D("3"), D("1.2345")]), (t0, [])]
    values = [_frame(3, v, {"id": i, "inner": {"t": t}, "amounts": a})
              for i, (t, a) in enumerate(rows)]
    result = RegistryDecoder(reader, _lookup({3: v}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    assert result.records.to_pylist() == [
        {"id": 0, "inner": {"t": t0}, "amounts": [D("1.50")]},
        {"id": 3, "inner": {"t": t0}, "amounts": []}]
    assert result.errors.index.to_pylist() == [1, 2]
    first, second = result.errors.detail.to_pylist()
    assert ("field 'inner' has a value that is more precise than its field 't' "
            "(timestamp[ms, tz=UTC]) in the table's struct<t: ") in first
    assert ("field 'amounts' has a value that does not fit (digits would be lost in) an element "
            "(decimal128(12, 2)) of the table's list<") in second


def test_a_value_arrow_refuses_for_other_reasons_refuses_only_its_row() -> None:
    """A long beyond 2**53 read into a double column (Avro's long -> double promotion) is
    refused by Arrow's cast and by no value-by-value rule: the halves of the column are cast
    to find it, and only its record is refused (one such value refused the batch)."""
    reader = pa.schema([("id", pa.int64()), ("w", pa.float64())])
    v = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "w", "type": "long"}]}
    ws = [1, 2**53 + 1, 3, -(2**60) - 1]
    values = [_frame(2, v, {"id": i, "w": w}) for i, w in enumerate(ws)]
    result = RegistryDecoder(reader, _lookup({2: v}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    assert result.records.to_pylist() == [{"id": 0, "w": 1.0}, {"id": 2, "w": 3.0}]
    assert result.errors.index.to_pylist() == [1, 3]
    first, second = result.errors.detail.to_pylist()
    assert ("field 'w' has a value that does not convert to the table's double (the writer "
            "schema has int64): Integer value 9007199254740993 not in range") in first
    # each refused record's detail names its own value
    assert f"Integer value {-(2**60) - 1} not in range" in second


def test_integers_are_read_into_a_decimal_column_that_holds_them() -> None:
    """A Protobuf field become uint64 makes a decimal(20, 0) column; records of the version
    before (int64, uint32) were all refused (review of the Protobuf column types). Every
    integer fits; a decimal too narrow for the type's every value is still refused."""
    reader = pa.schema([("id", pa.int64()), ("n", pa.decimal128(20, 0))])
    v = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "n", "type": "long"}]}
    values = [_frame(2, v, {"id": i, "n": n}) for i, n in enumerate([0, -(2**63), 2**63 - 1])]
    result = RegistryDecoder(reader, _lookup({2: v}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    assert [r["n"] for r in result.records.to_pylist()] == [D(0), D(-(2**63)), D(2**63 - 1)]
    narrow = pa.schema([("id", pa.int64()), ("n", pa.decimal128(10, 0))])
    result = RegistryDecoder(narrow, _lookup({2: v}), required=["id"]).decode(
        pa.array(values, pa.binary()))
    assert result.errors.reason.to_pylist() == [INCOMPATIBLE_SCHEMA] * 3


def test_every_field_that_cannot_be_read_is_named_at_once() -> None:
    """The refusal of a schema version named its first unreadable field only: a data engineer
    found the next one after fixing the first and running again (data-types review)."""
    reader = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.bool_())])
    v = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "a", "type": "string"},
        {"name": "b", "type": "string"}]}
    result = RegistryDecoder(reader, _lookup({6: v}), required=["id"]).decode(
        pa.array([_frame(6, v, {"id": 1, "a": "x", "b": "y"})], pa.binary()))
    assert result.errors.reason.to_pylist() == [INCOMPATIBLE_SCHEMA]
    assert result.errors.detail[0].as_py() == (
        "schema id 6: field 'a' is string in the writer schema, the table has int64; "
        "field 'b' is string in the writer schema, the table has bool")


def test_a_field_inside_a_record_changed_beyond_the_promotions_is_incompatible() -> None:
    """An int sent for a string field inside a nested record (a Debezium change event's
    before/after images) was cast into the text '7' (CDC review): the schema version is
    incompatible, naming the field inside; promotions inside records are read."""
    after = pa.struct([("id", pa.int64()), ("b", pa.string()), ("n", pa.int64())])
    reader = pa.schema([("id", pa.int64()), ("after", after)])
    inner_v = {"type": "record", "name": "Value", "fields": [
        {"name": "id", "type": "long"}, {"name": "b", "type": "int"},
        {"name": "n", "type": "int"}]}
    promoted_v = {**inner_v, "fields": [inner_v["fields"][0],
                                        {"name": "b", "type": "string"}, inner_v["fields"][2]]}

    def envelope(value: dict[str, Any]) -> dict[str, Any]:
        return {"type": "record", "name": "Envelope", "fields": [
            {"name": "id", "type": "long"}, {"name": "after", "type": value}]}

    bad, good = envelope(inner_v), envelope(promoted_v)
    decoder = RegistryDecoder(reader, _lookup({7: bad, 8: good}), required=["id"])
    result = decoder.decode(pa.array([
        _frame(7, bad, {"id": 1, "after": {"id": 1, "b": 7, "n": 3}}),
        _frame(8, good, {"id": 2, "after": {"id": 2, "b": "x", "n": 4}}),
    ], pa.binary()))
    assert result.records.to_pylist() == [{"id": 2, "after": {"id": 2, "b": "x", "n": 4}}]
    assert result.errors.index.to_pylist() == [0]
    assert result.errors.reason.to_pylist() == [INCOMPATIBLE_SCHEMA]
    assert ("field 'after.b' is int32 in the writer schema, the table has string"
            in result.errors.detail[0].as_py())


def test_a_narrower_integer_inside_a_record_reads_the_values_that_fit() -> None:
    """As before the nested check: a long written for an int32 field inside a record is read
    when the values fit (review: refused outright at first)."""
    reader = pa.schema([("id", pa.int64()), ("after", pa.struct([("n", pa.int32())]))])
    writer = {"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"},
        {"name": "after", "type": {"type": "record", "name": "V",
                                   "fields": [{"name": "n", "type": "long"}]}}]}
    result = RegistryDecoder(reader, _lookup({9: writer}), required=["id"]).decode(
        pa.array([_frame(9, writer, {"id": 1, "after": {"n": 7}})], pa.binary()))
    assert result.records.to_pylist() == [{"id": 1, "after": {"n": 7}}]


def test_missing_key_is_a_bad_record() -> None:
    schema = {"type": "record", "name": "R",
              "fields": [{"name": "id", "type": ["null", "long"]}]}
    decoder = RegistryDecoder(pa.schema([("id", pa.int64())]), _lookup({1: schema}),
                              required=["id"])
    result = decoder.decode(pa.array([_frame(1, schema, {"id": None}),
                                      _frame(1, schema, {"id": 4})], pa.binary()))
    assert result.records.column("id").to_pylist() == [4]
    assert result.errors.reason.to_pylist() == [MISSING_KEY]
    assert "'id'" in result.errors.detail[0].as_py()


def test_newer_schema_with_new_fields_asks_for_the_latest_version() -> None:
    reader = pa.schema([("id", pa.int64())])
    newer = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                      {"name": "x", "type": "int"}]}
    value = pa.array([_frame(5, newer, {"id": 1, "x": 2})], pa.binary())
    following = RegistryDecoder(reader, _lookup({5: newer}), reader_id=4)
    with pytest.raises(SchemaChangedError, match="schema id 5") as info:
        following.decode(value)
    assert is_retryable(info.value)
    pinned = RegistryDecoder(reader, _lookup({5: newer}))  # pinned/declared: x is skipped
    assert pinned.decode(value).records.to_pylist() == [{"id": 1}]
    # the subject's latest version is newer than the reader: the retry follows it
    behind = RegistryDecoder(reader, _lookup({5: newer}), reader_id=4, latest_id=lambda: 6)
    with pytest.raises(SchemaChangedError, match="schema id 5"):
        behind.decode(value)


def test_a_newer_version_with_a_lower_id_is_followed_too() -> None:
    """A registry gives a schema text it knew under another subject its old id: a subject's
    version 2 can have a lower id than its version 1. Only higher ids were checked, so the
    records of version 2 were read into version 1 and their new fields were dropped, committed,
    without a word (schema review)."""
    reader = pa.schema([("id", pa.int64())])
    newer = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                      {"name": "email", "type": "string"}]}
    value = pa.array([_frame(29, newer, {"id": 1, "email": "e"})], pa.binary())
    decoder = RegistryDecoder(reader, _lookup({29: newer}), reader_id=30, latest_id=lambda: 29)
    with pytest.raises(SchemaChangedError, match=r"schema id 29 carry field\(s\) email"):
        decoder.decode(value)


def test_a_higher_id_whose_fields_the_latest_version_lacks_is_read_not_retried_forever() -> None:
    """The reader is the subject's latest version: an id from another subject (a misrouted
    message) or a version whose text the registry knew under an older, lower id gave
    SchemaChangedError in every round and after every restart. It is read by Avro's rules."""
    reader = pa.schema([("id", pa.int64())])
    foreign = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "long"},
                                                             {"name": "x", "type": "int"}]}
    asked: list[int] = []

    def latest() -> int:
        asked.append(1)
        return 4

    decoder = RegistryDecoder(reader, _lookup({9: foreign}), reader_id=4, latest_id=latest)
    values = pa.array([_frame(9, foreign, {"id": i, "x": 2}) for i in range(3)], pa.binary())
    assert decoder.decode(values).records.to_pylist() == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert decoder.decode(values).records.num_rows == 3
    assert asked == [1]  # once per writer schema


def test_writer_fields_the_table_lacks_are_stepped_over_not_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The codec hands the decoder the table's columns: a writer field the table lacks (a long
    string, a nested record) is skipped in the bytes, and the fields after it read right."""
    reader = pa.schema([("id", pa.int64()), ("v", pa.string())])
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "blob", "type": ["null", "string"]},
        {"name": "v", "type": "string"}]}
    records = [{"id": 1, "blob": "x" * 500, "v": "a"}, {"id": 2, "blob": None, "v": "b"}]
    values = pa.array([_frame(6, writer, r) for r in records], pa.binary())
    seen: list[list[str]] = []
    real = registry_decoder.decode_records

    def spy(*args: Any) -> pa.Table:
        out = real(*args)
        seen.append(out.column_names)
        return out

    monkeypatch.setattr(registry_decoder, "decode_records", spy)
    decoded = RegistryDecoder(reader, _lookup({6: writer})).decode(values)
    assert decoded.records.to_pylist() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert seen == [["id", "v"]]  # 'blob' was not copied out


def test_primitive_key_schema_reads_into_the_one_key_field() -> None:
    decoder = RegistryDecoder(pa.schema([("id", pa.int64())]), _lookup({3: "long"}),
                          primitive_field="id")
    values = [struct.pack(">bI", 0, 3) + bytes([2 * k]) for k in (1, 2, 3)]
    assert decoder.decode(pa.array(values, pa.binary())).records.column("id").to_pylist() == [
        1, 2, 3]


def test_an_unavailable_registry_is_asked_again_then_stops_the_job(
        schema_registry: SchemaRegistry) -> None:
    frame = pa.array([struct.pack(">bI", 0, 424_242) + b"\x02"], pa.binary())

    def decoder(timeout_s: float) -> Any:
        settings = RegistrySettings((("url", schema_registry.url), ("max.retries", "0")),
                                    unique("s"), unavailable_timeout_s=timeout_s)
        return RegistryFormat(settings).decoder(pa.schema([("id", pa.int64())]))

    # answering 503 for a second: the lookup waits it out (the id is then unknown: bad records)
    schema_registry.fail_with = 503
    healed = threading.Timer(1.0, lambda: setattr(schema_registry, "fail_with", None))
    healed.start()
    try:
        assert decoder(30).decode(frame).errors.reason.to_pylist() == [UNKNOWN_SCHEMA]
    finally:
        healed.cancel()
        schema_registry.fail_with = None
    # still unavailable when the timeout is up: an error that stops the job, naming the option
    # (another id: the first one's answer is cached)
    other = pa.array([struct.pack(">bI", 0, 424_243) + b"\x02"], pa.binary())
    schema_registry.fail_with = 500
    try:
        with pytest.raises(SchemaRegistryUnavailableError, match="schema id 424243") as info:
            decoder(0).decode(other)
    finally:
        schema_registry.fail_with = None
    assert not is_retryable(info.value)
    assert schema_registry.url in str(info.value)
    assert "schema.registry.unavailable.timeout" in str(info.value)


def test_subject_errors_name_the_subject(schema_registry: SchemaRegistry) -> None:
    with pytest.raises(ConfigError, match="has no subject 'nope-value' version latest"):
        fetch_subject_schema(RegistrySettings((("url", schema_registry.url),), "nope-value"))
    subject = unique("pinned")
    schema_registry.register(subject, V1)
    second = schema_registry.register(subject, V2)
    pinned = fetch_subject_schema(RegistrySettings((("url", schema_registry.url),), subject, 1))
    assert pinned.version == 1 and "gone" in pinned.arrow.names
    latest = fetch_subject_schema(RegistrySettings((("url", schema_registry.url),), subject))
    assert latest.schema_id == second and latest.defaults == {"channel": "web"}
    assert all(f.nullable for f in latest.arrow)


def test_settings_need_a_url_and_never_show_secrets() -> None:
    own, client = registry_options({"topic": "t", "schema.registry.url": "http://r:8081",
                                    "schema.registry.basic.auth.user.info": "me:s3cret"})
    assert own == {"topic": "t"}
    settings = RegistrySettings(tuple(sorted(client.items())), "t-value")
    assert "s3cret" not in repr(settings) and "http://r:8081" in repr(settings)
    with pytest.raises(ConfigError, match=r"schema\.registry\.url"):
        RegistrySettings((("basic.auth.user.info", "a:b"),), "t-value")


def test_columns_decode_faster_than_one_record_at_a_time() -> None:
    """Not a timing target (that is bench/avro_decode.py): the columnar path must be the one
    taken for a flat schema -- it yields numpy-backed columns without a fastavro call."""
    calls = {"n": 0}
    original = fastavro.schemaless_reader

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return original(*args, **kwargs)

    decoder = RegistryDecoder(READER, _lookup({2: V2}))
    values = [_frame(2, V2, {"id": i, "name": "n", "qty": i, "score": 0.5, "channel": "c"})
              for i in range(1000)]
    fastavro.schemaless_reader = counting
    try:
        result = decoder.decode(pa.array(values, pa.binary()))
    finally:
        fastavro.schemaless_reader = original
    assert calls["n"] == 0
    assert np.array_equal(result.records.column("id").to_numpy(), np.arange(1000))


def test_a_recursive_writer_schema_is_a_bad_record_and_no_table_schema() -> None:
    """A version with a record inside itself (a tree) ended in RecursionError: a start with
    ~1,150 lines of traceback, or -- pinned to an older version -- every round failing and
    the topic blocked for good. Its records are bad records now, and as a table schema it is
    refused naming the record."""
    from hoodline.errors import TableError
    from hoodline.formats.registry_decoder import INCOMPATIBLE_SCHEMA
    from hoodline.table.schema import avro_schema_json_to_arrow

    node = {"type": "record", "name": "Node", "namespace": "x", "fields": [
        {"name": "v", "type": "long"},
        {"name": "kids", "type": {"type": "array", "items": "x.Node"}}]}
    tree = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "tree", "type": ["null", node]}]}
    with pytest.raises(TableError, match=r"Avro record 'Node' contains itself \(Node -> Node\)"):
        avro_schema_json_to_arrow(json.dumps(tree))
    reader = pa.schema([("id", pa.int64())])
    value = _frame(8, tree, {"id": 1, "tree": {"v": 1, "kids": [{"v": 2, "kids": []}]}})
    ok = _frame(7, {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]},
                {"id": 2})
    result = RegistryDecoder(reader, _lookup({8: tree, 7: {
        "type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}})).decode(
        pa.array([value, ok], pa.binary()))
    assert result.records.to_pylist() == [{"id": 2}]
    assert result.errors.reason.to_pylist() == [INCOMPATIBLE_SCHEMA]
    assert "contains itself" in result.errors.detail[0].as_py()
