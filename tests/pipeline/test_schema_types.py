from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.errors import ConfigError
from hoodline.pipeline.schema_types import format_type, parse_schema, parse_type


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
    ],
)
def test_parse_type(text: str, expected: pa.DataType) -> None:
    assert parse_type(text, "f") == expected


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
    ],
)
def test_bad_types_name_the_field_and_the_type(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_type(text, "amount")
    msg = str(err.value)
    assert "schema field 'amount'" in msg and repr(text) in msg and needle in msg


def test_parse_schema_keeps_order_and_rejects_non_strings() -> None:
    schema = parse_schema({"b": "string", "a": "int64"})
    assert schema.names == ["b", "a"]
    with pytest.raises(ConfigError, match="schema field 'a': type must be a string"):
        parse_schema({"a": 5})
    with pytest.raises(ConfigError, match="declares no fields"):
        parse_schema({})


_prims = st.sampled_from(
    [pa.string(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(),
     pa.float64(), pa.bool_(), pa.date32(), pa.binary(), pa.large_string(), pa.timestamp("ms"),
     pa.timestamp("us", tz="UTC"), pa.decimal128(10, 2), pa.decimal256(60, 5)]
)
_names = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
_types = st.recursive(
    _prims,
    lambda inner: st.one_of(
        st.builds(pa.list_, inner),
        st.dictionaries(_names, inner, min_size=1, max_size=3).map(
            lambda d: pa.struct(list(d.items()))
        ),
    ),
    max_leaves=6,
)


@given(_types)
def test_format_then_parse_round_trips(t: pa.DataType) -> None:
    assert parse_type(format_type(t), "f") == t
