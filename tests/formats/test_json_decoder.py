from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodline.errors import ConfigError
from hoodline.formats.json_decoder import (
    MISSING_KEY,
    NOT_OBJECT,
    NULL_VALUE,
    UNPARSEABLE,
    WRONG_TYPE,
    JsonDecoder,
    _layout,
    _object_shaped,
    _rows_with_newline,
    iter_bad,
)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("flag", pa.bool_()),
    ]
)
FIELDS = SCHEMA.names
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def decoder() -> JsonDecoder:
    return JsonDecoder(SCHEMA, ["id"])


def _dups_hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


#: what json.loads makes of NaN / Infinity / -Infinity in the reference: refused in declared
#: fields, let through in the others (which the decoder does not read)
_CONSTANT = object()


def _no_constants(name: str) -> object:
    return _CONSTANT


def reference(raw: bytes | None) -> dict[str, object] | None:
    """The record json.loads + the declared schema say ``raw`` is, or None when it is bad."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_dups_hook,
                         parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    out: dict[str, object] = {f: doc.get(f) for f in FIELDS}
    if any(v is _CONSTANT for v in out.values()):
        return None
    i = out["id"]
    if not isinstance(i, int) or isinstance(i, bool) or not INT64_MIN <= i <= INT64_MAX:
        return None
    if out["name"] is not None and not isinstance(out["name"], str):
        return None
    s = out["score"]
    if s is not None:
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            return None
        out["score"] = float(s)
    if out["flag"] is not None and not isinstance(out["flag"], bool):
        return None
    return out


# -- strategies ---------------------------------------------------------------------------------
names = st.one_of(st.none(), st.text(max_size=20))
scores = st.one_of(
    st.none(), st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**6), 10**6)
)
good_docs = st.fixed_dictionaries(
    {"id": st.integers(INT64_MIN, INT64_MAX)},
    optional={
        "name": names,
        "score": scores,
        "flag": st.one_of(st.none(), st.booleans()),
        "extra": st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                      st.sampled_from([math.nan, math.inf, -math.inf])),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
            max_leaves=5,
        ),
    },
)


@st.composite
def good_value(draw: st.DrawFn) -> tuple[bytes, str | None]:
    doc = draw(good_docs)
    indent = draw(st.sampled_from([None, None, None, 2]))  # indent -> raw newlines
    ascii_only = draw(st.booleans())
    return json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode(), None


@st.composite
def bad_value(draw: st.DrawFn) -> tuple[bytes | None, str | None]:
    kind = draw(st.sampled_from(["none", "nonobj", "wrongtype", "missing", "garbage", "random",
                                 "constant"]))
    if kind == "none":
        return None, NULL_VALUE
    if kind == "nonobj":
        v = draw(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers())))
        return json.dumps(v).encode(), NOT_OBJECT
    if kind == "wrongtype":
        field, v = draw(
            st.sampled_from(
                [("id", "7"), ("id", 1.5), ("id", True), ("name", 5), ("flag", "yes"),
                 ("score", "x"), ("name", [1]), ("id", 2**70)]
            )
        )
        doc = {"id": 1, field: v}
        return json.dumps(doc).encode(), WRONG_TYPE
    if kind == "missing":
        doc = draw(st.sampled_from([{"name": "x"}, {"id": None}, {}]))
        return json.dumps(doc).encode(), MISSING_KEY
    if kind == "garbage":
        v = draw(st.sampled_from([b"", b"   ", b"{", b'{"id":1', b'{"id":1}{"id":2}', b"\xff\xfe",
                                  b'{"id":1,}', b'{"id": NaN}', b'{"id":1,"name":"a\x01"}']))
        return v, UNPARSEABLE
    if kind == "constant":  # also with an indent: raw newlines take another path
        doc = {"id": 1, "score": draw(st.sampled_from([math.nan, math.inf, -math.inf]))}
        return json.dumps(doc, indent=draw(st.sampled_from([None, 2]))).encode(), UNPARSEABLE
    return draw(st.binary(max_size=30)), None


values_strategy = st.lists(st.one_of(good_value(), bad_value()), max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values_strategy)
def test_any_mix_nothing_lost_good_equal_json_loads(
    items: list[tuple[bytes | None, str | None]],
) -> None:
    raws = [raw for raw, _ in items]
    result = decoder().decode(pa.array(raws, pa.binary()))
    expected = {i: reference(raw) for i, raw in enumerate(raws)}
    good = {i for i, rec in expected.items() if rec is not None}

    got_rows = result.records.to_pylist()
    got_idx = result.row_index.to_pylist()
    assert got_idx == sorted(good)
    for i, row in zip(got_idx, got_rows, strict=True):
        want = expected[i]
        assert want is not None
        for f in FIELDS:
            if isinstance(want[f], float):
                assert math.isclose(row[f], want[f], rel_tol=0, abs_tol=0) or row[f] == want[f]
            else:
                assert row[f] == want[f], (f, raws[i])

    bad = list(iter_bad(result.errors))
    assert [b[0] for b in bad] == sorted(set(range(len(raws))) - good)
    for index, reason, detail in bad:
        assert detail
        if reason == WRONG_TYPE:
            assert "field '" in detail, detail
        want_reason = items[index][1]
        if want_reason is not None:
            assert reason == want_reason, (raws[index], reason, detail)
    assert result.records.schema == SCHEMA


def test_bulk_parse_keeps_order_and_types() -> None:
    values = pa.array([json.dumps({"id": i, "name": f"n{i}", "score": i / 2}).encode()
                       for i in range(5000)], pa.large_binary())
    result = decoder().decode(values)
    assert len(result.errors) == 0
    assert result.records.column("id").to_pylist() == list(range(5000))
    assert result.row_index.to_pylist() == list(range(5000))
    assert result.records.column("score").to_pylist()[3] == 1.5


@pytest.mark.parametrize(
    ("raw", "reason", "needle"),
    [
        (b"null", NOT_OBJECT, "is null, not"),  # a bare null crashes pyarrow's reader if not caught
        (b"[1, 2]", NOT_OBJECT, "is an array, not"),
        (b'"x"', NOT_OBJECT, "is a string, not"),
        (b"7", NOT_OBJECT, "is a number, not"),
        (b"true", NOT_OBJECT, "is a boolean, not"),
        # pyarrow's "in row 0" is the row of a one-record parse, not the record's: left out
        (b'{"id": "7"}', WRONG_TYPE, "field 'id' holds a string where the schema wants a number"),
        (b'{"name": "x"}', MISSING_KEY, "field(s) id missing or null (every record needs its "
         "record key, partition and ordering fields)"),
        (b'{"id": 1}{"id": 2}', UNPARSEABLE, "Extra data"),
        (b'{"id": 1} null {"id": 2}', UNPARSEABLE, "Extra data"),  # reader: 3 rows, 1 all-null
        # the reader would skip the line silently
        (b"   ", UNPARSEABLE, "invalid JSON: the value holds only white space"),
        (b"", UNPARSEABLE, "invalid JSON: the value is empty"),
        (b'{"id": 1, "junk": "\xff"}', UNPARSEABLE, "invalid UTF-8: byte 0xff at offset 19"),
        # not read as UTF-16 because the first bytes look like its byte order mark
        (b'\xff\xfe{"id": 9}', UNPARSEABLE, "invalid UTF-8: byte 0xff at offset 0"),
        (b'\xfe\xff\x00{\x00}', UNPARSEABLE, "invalid UTF-8: byte 0xfe at offset 0"),
        (b'{"id": 1, "id": 2}', UNPARSEABLE, "key 'id' appears twice in the object"),
    ],
)
def test_bad_record_reasons(raw: bytes, reason: str, needle: str) -> None:
    values = pa.array([b'{"id": 0}', raw, b'{"id": 2}'], pa.binary())
    result = decoder().decode(values)
    assert result.row_index.to_pylist() == [0, 2]
    ((index, got_reason, detail),) = iter_bad(result.errors)
    assert (index, got_reason) == (1, reason)
    assert needle in detail and "in row" not in detail
    if reason == WRONG_TYPE:  # a [schema] or a registry's JSON Schema: the table's either way
        assert detail.startswith("does not match the table's schema: ")


WIDE = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()),
                  ("n", pa.int32()), ("ts", pa.timestamp("ms")), ("day", pa.date32()),
                  ("price", pa.decimal128(10, 2)), ("parts", pa.list_(pa.int64())),
                  ("inner", pa.struct([("a", pa.int64()), ("b", pa.int64())]))])
INT64_RANGE = "an integer from -9223372036854775808 to 9223372036854775807"


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        # pyarrow's own text: "Failed to convert JSON to int64, couldn't parse:1e30", no field
        (b'{"id": 1e30}', f"field 'id' holds 1e30, which is not an int64 ({INT64_RANGE})"),
        (b'{"id": 1.5}', f"field 'id' holds 1.5, which is not an int64 ({INT64_RANGE})"),
        (b'{"id": 9223372036854775808}',
         f"field 'id' holds 9223372036854775808, which is not an int64 ({INT64_RANGE})"),
        # more than one field of the type: the one that does not convert
        (b'{"id": 1, "qty": 2.5, "parts": [1]}',
         f"field 'qty' holds 2.5, which is not an int64 ({INT64_RANGE})"),
        (b'{"id": 1, "qty": 1, "parts": [1, 2.5]}',
         f"field 'parts' holds 2.5, which is not an int64 ({INT64_RANGE})"),
        (b'{"id": 1, "qty": 1, "inner": {"a": 1, "b": 1e3}}',
         f"field 'inner.b' holds 1e3, which is not an int64 ({INT64_RANGE})"),
        (b'{"id": 1, "n": 3000000000}',
         "field 'n' holds 3000000000, which is not an int32 (an integer from -2147483648 to "
         "2147483647)"),
        (b'{"id": 1, "ts": "soon"}',
         'field \'ts\' holds "soon", which is not a timestamp[ms] (an ISO-8601 date or time '
         'such as "2024-03-01T10:00:00Z")'),
        # more digits than the unit keeps: it said "not an ISO-8601 time" (data-types review)
        (b'{"id": 1, "ts": "2024-03-01T10:00:00.1234Z"}',
         'field \'ts\' holds "2024-03-01T10:00:00.1234Z", with 4 digits after the second\'s '
         "point: the table's timestamp[ms] column takes 3 digits; send fewer digits or declare "
         "the field with a finer unit"),
        # ... but not when something else is wrong too (month 13; review of the message)
        (b'{"id": 1, "ts": "2024-13-01T10:00:00.1234Z"}',
         'field \'ts\' holds "2024-13-01T10:00:00.1234Z", which is not a timestamp[ms] (an '
         'ISO-8601 date or time such as "2024-03-01T10:00:00Z")'),
        (b'{"id": 1, "ts": "2024-03-01T10:00:00.1234"}',
         'field \'ts\' holds "2024-03-01T10:00:00.1234", with 4 digits after the second\'s '
         "point: the table's timestamp[ms] column takes 3 digits; send fewer digits or declare "
         "the field with a finer unit"),
        # epoch numbers for a time: it said "holds a number where the schema wants a string"
        (b'{"id": 1, "ts": 1709287200000}',
         "field 'ts' holds a number (1709287200000) where the schema wants a timestamp[ms], "
         'given as ISO-8601 text such as "2024-03-01T10:00:00Z"; for epoch numbers declare the '
         "field int64"),
        (b'{"id": 1, "day": "2024-02-30"}',
         'field \'day\' holds "2024-02-30", which is not a date32[day] (an ISO-8601 date such '
         'as "2024-03-01")'),
        # a time in a date field was cut to its UTC date without a word (data-types review)
        (b'{"id": 1, "day": "2024-03-01T23:30:00-05:00"}',
         "field 'day' holds a time of day (2024-03-02 04:30:00 UTC), which is not a date32[day] "
         '(an ISO-8601 date such as "2024-03-01"); declare the field a timestamp to keep the '
         "time"),
        (b'{"id": 1, "price": 1.234}',
         "field 'price' holds 1.234, which requires scale 3 but the schema's type is "
         "decimal128(10, 2)"),
        (b'{"id": 1, "price": "cheap"}',
         'field \'price\' holds "cheap", which is not a decimal128 number'),
        (b'{"id": "7"}', 'field \'id\' holds a string where the schema wants a number: "7"'),
        (b'{"id": 1, "parts": {"a": 1}}',
         'field \'parts\' holds an object where the schema wants an array: {"a": 1}'),
    ],
)
def test_wrong_type_details_name_the_field_and_show_the_value(raw: bytes, detail: str) -> None:
    result = JsonDecoder(WIDE, ["id"]).decode(pa.array([b'{"id": 0}', raw], pa.binary()))
    ((index, reason, got),) = iter_bad(result.errors)
    assert (index, reason) == (1, WRONG_TYPE)
    assert got == f"does not match the table's schema: {detail}"


FLOATS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.float64()),
                    ("ratio", pa.float32()), ("samples", pa.list_(pa.float64())),
                    ("inner", pa.struct([("x", pa.float32())]))])


@pytest.mark.parametrize(
    ("raw", "reason", "detail"),
    [
        (b'{"id": 1, "amount": NaN}', UNPARSEABLE,
         "invalid JSON: NaN is not valid JSON (JSON has no NaN or Infinity: send null, or a "
         "finite number)"),
        (b'{"id": 1, "amount": Infinity}', UNPARSEABLE,
         "invalid JSON: Infinity is not valid JSON (JSON has no NaN or Infinity: send null, or "
         "a finite number)"),
        (b'{"id": 1, "amount": -Infinity}', UNPARSEABLE,
         "invalid JSON: -Infinity is not valid JSON (JSON has no NaN or Infinity: send null, or "
         "a finite number)"),
        (b'{"id": 1, "ratio":NaN}', UNPARSEABLE,
         "invalid JSON: NaN is not valid JSON (JSON has no NaN or Infinity: send null, or a "
         "finite number)"),
        (b'{"id": 1, "samples": [1.5, NaN]}', UNPARSEABLE,
         "invalid JSON: NaN is not valid JSON (JSON has no NaN or Infinity: send null, or a "
         "finite number)"),
        (b'{"id": 1, "inner": {"x": -Infinity}}', UNPARSEABLE,
         "invalid JSON: -Infinity is not valid JSON (JSON has no NaN or Infinity: send null, or "
         "a finite number)"),
        # spellings pyarrow takes as well (json.loads says where: "line 1 column 21 ...")
        (b'{"id": 1, "amount": Inf}', UNPARSEABLE, "invalid JSON: Expecting value: line "),
        (b'{"id": 1, "amount": -NaN}', UNPARSEABLE, "invalid JSON: Expecting value: line "),
        # pyarrow reads a number too big for a float32 as infinity
        (b'{"id": 1, "ratio": 1e39}', WRONG_TYPE,
         "does not match the table's schema: field 'ratio' holds 1e+39, which is too big for "
         "float (up to about 3.4e+38)"),
        (b'{"id": 1, "inner": {"x": -1e39}}', WRONG_TYPE,
         "does not match the table's schema: field 'inner' holds a number too big for float "
         '(up to about 3.4e+38): {"x": -1e+39}'),
        # beyond a double: pyarrow's reader refuses the record; the detail names the field
        (b'{"id": 1, "amount": 1e400}', UNPARSEABLE,
         "field 'amount' holds a number beyond the range of a double (about ±1.8e308); such "
         "numbers cannot be read, in any field"),
        (b'{"id": 1, "inner": {"x": -1e999}}', UNPARSEABLE, "field 'inner/x' holds a number "),
        (b'{"id": 1, "extra": [1, 1e400]}', UNPARSEABLE, "field 'extra/1' holds a number "),
    ],
)
def test_nan_and_infinity_in_declared_fields_are_refused_on_every_path(
    raw: bytes, reason: str, detail: str
) -> None:
    """pyarrow's reader takes NaN / Infinity as floats: the bulk parse wrote nan while a record
    looked at alone (a raw newline, many bad records) was refused. Now refused either way,
    with the detail json.loads gives."""
    good = [json.dumps({"id": i, "amount": i / 4}).encode() for i in range(40)]
    pretty = raw.replace(b", ", b",\n  ")  # a raw newline: the record is checked alone first
    dense = [b"{oops}"] * 12  # enough bad records for the json.loads check of the rest
    for values in ([*good, raw, *good], [*good, pretty, *good], [*dense, raw, *good]):
        at = values.index(raw if raw in values else pretty)
        result = JsonDecoder(FLOATS, ["id"]).decode(pa.array(values, pa.binary()))
        assert at not in result.row_index.to_pylist()
        got = {i: (r, d) for i, r, d in iter_bad(result.errors)}
        assert got[at][0] == reason and got[at][1].startswith(detail), got[at]
        assert result.records.num_rows + len(result.errors) == len(values)
        for name in ("amount", "ratio"):
            assert not pc.any(pc.invert(pc.is_finite(result.records.column(name)))).as_py()


def test_nan_in_an_undeclared_field_is_let_through_on_every_path() -> None:
    """A field the schema does not declare is not read: its NaN is no reason to refuse the
    record, whichever path the record takes (it used to depend on its neighbours)."""
    raw = b'{"id": 7, "amount": 1.5, "debug": NaN, "more": [Infinity]}'
    good = [json.dumps({"id": i}).encode() for i in range(40)]
    for values in ([raw, *good], [raw.replace(b", ", b",\n"), *good], [*[b"{x}"] * 12, raw]):
        result = JsonDecoder(FLOATS, ["id"]).decode(pa.array(values, pa.binary()))
        rows = dict(zip(result.row_index.to_pylist(), result.records.to_pylist(), strict=True))
        at = 12 if len(values) == 13 else 0
        assert rows[at]["id"] == 7 and rows[at]["amount"] == 1.5


def test_pretty_printed_values_are_good_but_raw_newline_in_string_is_not() -> None:
    pretty = json.dumps({"id": 5, "name": "a b"}, indent=2).encode()
    values = pa.array([pretty, b'{"id": 6, "name": "a\nb"}'], pa.binary())
    result = decoder().decode(values)
    assert result.records.to_pylist() == [{"id": 5, "name": "a b", "score": None, "flag": None}]
    assert [(i, r) for i, r, _ in iter_bad(result.errors)] == [(1, UNPARSEABLE)]


def test_empty_input_and_all_bad() -> None:
    empty = decoder().decode(pa.array([], pa.binary()))
    assert empty.records.num_rows == 0 and len(empty.errors) == 0
    assert empty.records.schema == SCHEMA
    bad = decoder().decode(pa.array([None, b"x"], pa.binary()))
    assert bad.records.num_rows == 0
    assert bad.errors.reason.to_pylist() == [NULL_VALUE, UNPARSEABLE]


def test_key_field_must_be_declared() -> None:
    with pytest.raises(ConfigError, match="'key'"):
        JsonDecoder(SCHEMA, ["key"])


def test_declared_types_timestamp_date_decimal_list() -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ms")), ("d", pa.date32()),
                        ("amount", pa.decimal128(10, 2)), ("tags", pa.list_(pa.string()))])
    values = pa.array([b'{"id":1,"ts":"2024-03-01T10:00:00","d":"2024-03-01",'
                       b'"amount":"12.50","tags":["a","b"]}'], pa.binary())
    result = JsonDecoder(schema, ["id"]).decode(values)
    assert len(result.errors) == 0, list(iter_bad(result.errors))
    row = result.records.to_pylist()[0]
    assert str(row["ts"]) == "2024-03-01 10:00:00"
    assert str(row["d"]) == "2024-03-01"
    assert str(row["amount"]) == "12.50"
    assert row["tags"] == ["a", "b"]


def test_many_bad_records_in_a_large_batch_are_all_isolated() -> None:
    raws = []
    for i in range(6000):
        if i % 7 == 3:
            raws.append(json.dumps({"id": str(i)}).encode())  # reader gives a row hint
        elif i % 11 == 5:
            raws.append(json.dumps({"id": i + 0.5}).encode())  # conversion error: no hint
        else:
            raws.append(json.dumps({"id": i, "name": "x"}).encode())
    result = decoder().decode(pa.array(raws, pa.binary()))
    bad = {i for i in range(6000) if i % 7 == 3 or i % 11 == 5}
    assert result.row_index.to_pylist() == sorted(set(range(6000)) - bad)
    assert result.records.column("id").to_pylist() == result.row_index.to_pylist()
    assert result.errors.index.to_pylist() == sorted(bad)
    assert set(result.errors.reason.to_pylist()) == {WRONG_TYPE}


def test_a_large_batch_keeps_every_row_and_finds_bad_ones_near_its_end() -> None:
    """A 5 MiB batch with a 1.5 MB row: rows stay in order, and bad rows far into the batch
    (with and without the reader's row hint) are found exactly."""
    n = 40_000
    long_row = 25_000
    bad = {31_003: WRONG_TYPE, 31_004: UNPARSEABLE, 38_000: WRONG_TYPE, 39_999: UNPARSEABLE}
    raws = []
    for i in range(n):
        if bad.get(i) == WRONG_TYPE:
            raws.append(json.dumps({"id": i, "score": "high"}).encode())
        elif bad.get(i) == UNPARSEABLE:
            raws.append(b'{"id": %d, "name": oops}' % i)
        else:
            name = "n" * (1_500_000 if i == long_row else 100)
            raws.append(json.dumps({"id": i, "name": name, "score": i / 2}).encode())
    values = pa.array(raws, pa.binary())
    assert pa.compute.sum(pa.compute.binary_length(values)).as_py() > 5 * (1 << 20)
    result = decoder().decode(values)
    good = [i for i in range(n) if i not in bad]
    assert result.row_index.to_pylist() == good
    assert result.records.column("id").to_pylist() == good
    assert result.records.column("score").to_pylist() == [i / 2 for i in good]
    assert len(result.records.column("name")[good.index(long_row)].as_py()) == 1_500_000
    assert [(i, r) for i, r, _ in iter_bad(result.errors)] == sorted(bad.items())


def test_surrounding_whitespace_is_fine_but_trailing_garbage_is_not() -> None:
    values = pa.array([b'  {"id": 1}  ', b'\t{"id": 2}\r\n', b'{"id": 3} x', b'x {"id": 4}',
                       b'{"id": 5}'], pa.binary())
    result = decoder().decode(values)
    assert result.records.column("id").to_pylist() == [1, 2, 5]
    assert result.row_index.to_pylist() == [0, 1, 4]
    assert [(i, r) for i, r, _ in iter_bad(result.errors)] == [(2, UNPARSEABLE), (3, UNPARSEABLE)]


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
def test_checks_read_a_sliced_buffer_at_its_offset_and_skip_null_slots(
    arrow_type: pa.DataType,
) -> None:
    # The checks before the parse read the offsets and data buffers directly: a slice starts at
    # an offset, and a null slot may still own bytes (here a raw newline and a non-object).
    raws = [b'{"id": 0}', b'{"id":1,\n"name":"a"}', b"[1]\n", b' {"id": 3}', b"null",
            b'{"id": 5, "name": "a\nb"}', b'{"id": 6}', b'{"id":7}\r\n', b'{"id": 8, "x": "\xff"}',
            b'{"id": 9}']
    prefix = [b'\n{"id": -1}'] * 3
    full = pa.array([*prefix, *raws, b"\n"], arrow_type)
    validity = [True] * len(full)
    validity[len(prefix) + 2] = False  # the null slot keeps its bytes "[1]\n"
    validity_buf = pa.array(validity, pa.bool_()).buffers()[1]
    with_null = pa.Array.from_buffers(arrow_type, len(full), [validity_buf, *full.buffers()[1:]])
    values = with_null.slice(len(prefix), len(raws))
    assert values.offset == len(prefix) and values.null_count == 1

    # What the bulk path sees (a wrong view is mostly rescued by the slow paths, so check it).
    offsets, data = _layout(values)
    shaped = _object_shaped(values, offsets, data, np.asarray(values.is_valid()))
    assert np.flatnonzero(shaped).tolist() == [0, 1, 3, 5, 6, 7, 8, 9]
    assert _rows_with_newline(offsets, data).tolist() == [1, 2, 5, 7]

    result = decoder().decode(values)

    assert result.row_index.to_pylist() == [0, 1, 3, 6, 7, 9]
    assert result.records.column("id").to_pylist() == [0, 1, 3, 6, 7, 9]
    assert [(i, r) for i, r, _ in iter_bad(result.errors)] == [
        (2, NULL_VALUE), (4, NOT_OBJECT), (5, UNPARSEABLE), (8, UNPARSEABLE)
    ]


@given(
    st.lists(st.binary(max_size=12), max_size=40),
    st.sets(st.integers(0, 400), max_size=6),
    st.integers(1, 9),
    st.sampled_from([b"\n", b"\r", b"\t"]),
)
def test_rows_with_newline_in_chunks_finds_what_a_whole_scan_finds(
    raws: list[bytes], at: set[int], chunk: int, control: bytes
) -> None:
    # the scan runs a few bytes at a time: a raw CR or LF anywhere (also at a chunk's first or
    # last byte) must still name its row, and a tab (also below 14) must not
    values = [bytearray(v) for v in raws]
    total = sum(len(v) for v in values)
    for pos in sorted(at):
        if not total:
            break
        pos %= total
        for v in values:
            if pos < len(v):
                v[pos : pos + 1] = control
                break
            pos -= len(v)
    arr = pa.array([bytes(v) for v in values], pa.binary())
    offsets, data = _layout(arr)
    expected = [i for i, v in enumerate(values) if b"\n" in v or b"\r" in v]
    assert _rows_with_newline(offsets, data, chunk).tolist() == expected


def test_dense_bad_records_are_found_without_a_reader_call_per_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every 3rd value is no JSON and every 7th has a wrong type: each is reported with its
    reason, every other row decodes, and the reader is not called three times per bad row."""
    n = 3000
    raw = []
    for i in range(n):
        if i % 3 == 2:
            raw.append(b'{"id": oops}')
        elif i % 7 == 6:
            raw.append(b'{"id": "seven"}')
        else:
            raw.append(json.dumps({"id": i, "name": f"n{i}"}).encode())
    dec = decoder()
    calls = {"n": 0}
    real = dec._read

    def counting(buf: pa.Buffer) -> pa.Table:
        calls["n"] += 1
        return real(buf)

    monkeypatch.setattr(dec, "_read", counting)
    result = dec.decode(pa.array(raw, pa.binary()))
    bad = {i: reason for i, reason, _ in iter_bad(result.errors)}
    want = {i: UNPARSEABLE for i in range(n) if i % 3 == 2}
    want |= {i: WRONG_TYPE for i in range(n) if i % 3 != 2 and i % 7 == 6}
    assert bad == want
    assert result.row_index.to_pylist() == [i for i in range(n) if i not in want]
    assert result.records.column("id").to_pylist() == result.row_index.to_pylist()
    assert calls["n"] < 3 * len(want) // 2  # narrowing alone: ~3 calls per bad row


def test_rows_stay_in_input_order_when_dense_failures_come_after_a_parsed_range() -> None:
    """The first rows parse, then failures pile up: the rows checked with json.loads are
    parsed together and come back interleaved with the range parsed before, in input order."""
    good = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(400)]
    raw = list(good)
    for i in range(200, 400, 2):
        raw[i] = b"{no json"
    raw[150] = b'{"id": "wrong"}'
    result = decoder().decode(pa.array(raw, pa.binary()))
    want = [i for i in range(400) if not (i >= 200 and i % 2 == 0) and i != 150]
    assert result.row_index.to_pylist() == want
    assert result.records.column("id").to_pylist() == want


@pytest.mark.parametrize("declared", ["map<string, int64>", "struct<a: fixed_size_binary[4]>"])
def test_types_json_cannot_be_read_as_are_refused_naming_the_field(declared: str) -> None:
    from hoodline.config.arrow_types import parse_type
    from hoodline.errors import ConfigError

    schema = pa.schema([("id", pa.int64()), ("m", parse_type(declared))])
    with pytest.raises(ConfigError, match=r"schema field 'm' is declared .*: JSON values cannot "
                                          r"be read as (map|fixed_size_binary)"):
        JsonDecoder(schema, ["id"])
