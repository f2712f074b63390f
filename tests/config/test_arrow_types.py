"""The one type syntax of the pipeline's [schema] and the file source's 'schema' option."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.config.arrow_types import (
    format_type,
    parse_schema,
    parse_type,
    schema_from_mapping,
)
from hoodline.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("string", pa.string()),
        ("int64", pa.int64()),
        ("int32", pa.int32()),
        ("double", pa.float64()),
        ("bool", pa.bool_()),
        ("BOOLEAN", pa.bool_()),
        ("timestamp[ms]", pa.timestamp("ms")),
        ("timestamp[us, UTC]", pa.timestamp("us", tz="UTC")),
        ("timestamp[ns,Europe/Paris]", pa.timestamp("ns", tz="Europe/Paris")),
        ("timestamp[s, +05:30]", pa.timestamp("s", tz="+05:30")),
        ("date32", pa.date32()),
        ("decimal(10, 2)", pa.decimal128(10, 2)),
        ("decimal(50,10)", pa.decimal256(50, 10)),
        ("decimal256(10,0)", pa.decimal256(10, 0)),
        ("list<string>", pa.list_(pa.string())),
        (" list < list<int64> > ", pa.list_(pa.list_(pa.int64()))),
        ("struct<a: int64, b: list<double>>",
         pa.struct([("a", pa.int64()), ("b", pa.list_(pa.float64()))])),
        # spellings the file source's schema option accepted (Arrow names and aliases)
        ("decimal128(10, 2)", pa.decimal128(10, 2)),
        ("decimal128(10,-2)", pa.decimal128(10, -2)),
        ("utf8", pa.string()),
        ("str", pa.string()),
        ("large_utf8", pa.large_string()),
        ("halffloat", pa.float16()),
        ("time64[us]", pa.time64("us")),
        ("duration[ms]", pa.duration("ms")),
        ("date32[day]", pa.date32()),
        ("timestamp[ us ,UTC ]", pa.timestamp("us", tz="UTC")),
        # Parquet maps and Avro fixed could not be declared, so their columns were dropped
        # (data-types review)
        ("map<string, int64>", pa.map_(pa.string(), pa.int64())),
        ("map<string, struct<a: list<int32>>>",
         pa.map_(pa.string(), pa.struct([("a", pa.list_(pa.int32()))]))),
        ("fixed_size_binary[16]", pa.binary(16)),
    ],
)
def test_parse_type(text: str, expected: pa.DataType) -> None:
    assert parse_type(text, "schema field 'f'") == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("int65", "unknown type 'int65'"),
        ("list<", "unexpected end"),
        ("list<int64>>", "unexpected '>'"),
        ("decimal(10)", "expected ','"),
        ("decimal(2, 3)", "scale 3 must not exceed precision 2"),
        ("decimal(0, 0)", "precision 0"),
        ("timestamp[m]", "unit must be s, ms, us or ns"),
        ("struct<a int64>", "expected ':'"),
        ("struct<a: int64, a: bool>", "declared twice"),
        ("int64 not null", "unexpected 'not'"),
        ("", "empty"),
        ("int64;", "unexpected character ';'"),
        ("decimal128(39, 2)", "decimal128 precision 39 must be between 1 and 38"),
        ("time32[parsec]", "unknown type 'time32[parsec]'"),
        ("map<string>", "expected ','"),
        ("fixed_size_binary[0]", "width 0 must be at least 1"),
    ],
)
def test_bad_types_name_the_field_and_the_type(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_type(text, "schema field 'amount'")
    msg = str(err.value)
    assert msg.startswith("schema field 'amount': ") and repr(text) in msg and needle in msg


def test_schema_table_keeps_order_and_rejects_non_strings() -> None:
    schema = schema_from_mapping({"b": "string", "a": "int64"})
    assert schema.names == ["b", "a"]
    with pytest.raises(ConfigError, match="schema field 'a': type must be a string"):
        schema_from_mapping({"a": 5})
    with pytest.raises(ConfigError, match="declares no fields"):
        schema_from_mapping({})
    with pytest.raises(ConfigError, match="schema field 't': invalid type 'int65'"):
        schema_from_mapping({"t": "int65"})


def test_schema_text_fields_nullability_and_nested_types() -> None:
    s = parse_schema("a int64, b string not null, c decimal128(10, 2), d timestamp[us], e bool")
    assert s == pa.schema([("a", pa.int64()), pa.field("b", pa.string(), False),
                           ("c", pa.decimal128(10, 2)), ("d", pa.timestamp("us")),
                           ("e", pa.bool_())])
    nested = parse_schema("ts timestamp[ms, UTC] NOT NULL, s struct<x: int64, y: list<string>>, "
                          "m decimal(12, 2)")
    assert nested == pa.schema([
        pa.field("ts", pa.timestamp("ms", tz="UTC"), False),
        ("s", pa.struct([("x", pa.int64()), ("y", pa.list_(pa.string()))])),
        ("m", pa.decimal128(12, 2)),
    ])


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("a int65", "option 'schema', column 'a': invalid type 'int65' (unknown type 'int65')"),
        ("a int64, a string", "option 'schema': column 'a' is declared twice"),
        ("a", "option 'schema': entry 'a' must be 'name type'"),
        (" , ", "option 'schema' is empty"),
    ],
)
def test_bad_schema_text_names_the_option_and_entry(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_schema(text)
    assert needle in str(err.value)


_prims = st.sampled_from(
    [pa.string(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(),
     pa.float64(), pa.bool_(), pa.date32(), pa.binary(), pa.large_string(), pa.timestamp("ms"),
     pa.timestamp("us", tz="UTC"), pa.decimal128(10, 2), pa.decimal256(60, 5),
     pa.decimal256(10, 2), pa.large_binary(), pa.time64("ns"), pa.duration("s"), pa.float16()]
)
_names = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
_types = st.recursive(
    _prims,
    lambda inner: st.one_of(
        st.builds(pa.list_, inner),
        st.builds(pa.map_, st.just(pa.string()), inner),
        st.integers(1, 64).map(pa.binary),
        st.dictionaries(_names, inner, min_size=1, max_size=3).map(
            lambda d: pa.struct(list(d.items()))
        ),
    ),
    max_leaves=6,
)


@given(_types)
def test_format_then_parse_round_trips(t: pa.DataType) -> None:
    assert parse_type(format_type(t)) == t
