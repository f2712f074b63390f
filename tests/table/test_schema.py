from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from hoodline.errors import SchemaEvolutionError, TableError
from hoodline.table.schema import (
    arrow_to_avro,
    arrow_to_avro_schema_json,
    avro_schema_json_to_arrow,
    check_evolution,
    nested_evolution,
)

FULL = pa.schema(
    [
        pa.field("_hoodie_commit_time", pa.string()),
        pa.field("id", pa.string(), nullable=False),
        pa.field("n", pa.int64()),
        pa.field("i", pa.int32()),
        pa.field("f", pa.float32()),
        pa.field("d", pa.float64()),
        pa.field("b", pa.bool_()),
        pa.field("bin", pa.binary()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ts_ms", pa.timestamp("ms", tz="UTC")),
        pa.field("dec", pa.decimal128(12, 3)),
        pa.field("tags", pa.list_(pa.field("element", pa.string()))),
        pa.field("pt", pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.float64())])),
        pa.field("attrs", pa.map_(pa.string(), pa.field("value", pa.int64()))),
    ]
)


def test_avro_shape_like_hudi_spark_writer() -> None:
    avro = arrow_to_avro(FULL, "trips")
    assert avro["type"] == "record"
    assert avro["name"] == "trips_record" and avro["namespace"] == "hoodie.trips"
    names = [f["name"] for f in avro["fields"]]
    assert "_hoodie_commit_time" not in names and names[0] == "id"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["id"]["type"] == "string"  # not nullable: no union
    assert fields["n"] == {"name": "n", "type": ["null", "long"], "default": None}
    assert fields["ts"]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}
    dec = fields["dec"]["type"][1]
    assert dec["type"] == "fixed" and dec["logicalType"] == "decimal"
    assert (dec["precision"], dec["scale"], dec["size"]) == (12, 3, 6)
    assert fields["pt"]["type"][1]["type"] == "record"


def test_round_trip_keeps_types() -> None:
    back = avro_schema_json_to_arrow(arrow_to_avro_schema_json(FULL, "trips"))
    expected = pa.schema([f for f in FULL if f.name != "_hoodie_commit_time"])
    assert back.names == expected.names
    for f in expected:
        assert back.field(f.name).type == f.type, f.name
        assert back.field(f.name).nullable == f.nullable, f.name


def test_narrow_types_widen_like_hudi_rs() -> None:
    s = pa.schema(
        [
            pa.field("a", pa.int8()),
            pa.field("t", pa.timestamp("us")),
            pa.field("s", pa.large_string()),
        ]
    )
    back = avro_schema_json_to_arrow(arrow_to_avro_schema_json(s, "t"))
    assert back.field("a").type == pa.int32()
    assert back.field("t").type == pa.timestamp("us", tz="UTC")
    assert back.field("s").type == pa.string()


def test_unsupported_types_name_column() -> None:
    with pytest.raises(TableError, match="'u'"):
        arrow_to_avro(pa.schema([pa.field("u", pa.uint64())]), "t")
    with pytest.raises(TableError, match="'m'"):
        arrow_to_avro(pa.schema([pa.field("m", pa.map_(pa.int32(), pa.int32()))]), "t")
    # was pyarrow's "precision should be between 1 and 38", naming nothing (data-types review)
    with pytest.raises(TableError, match=r"column 'd' is decimal256\(76, 20\): Hudi tables hold "
                                         "decimals of up to 38 digits"):
        arrow_to_avro(pa.schema([pa.field("d", pa.decimal256(76, 20))]), "t")
    with pytest.raises(TableError, match="not valid Avro JSON"):
        avro_schema_json_to_arrow("{oops")
    with pytest.raises(TableError, match="union"):
        avro_schema_json_to_arrow(
            json.dumps(
                {
                    "type": "record",
                    "name": "r",
                    "fields": [{"name": "x", "type": ["null"]}],
                }
            )
        )


OLD = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("v", pa.int64())])


def test_evolution_accepts_new_nullable_column_and_reordering() -> None:
    new = pa.schema(
        [
            pa.field("extra", pa.string()),
            pa.field("v", pa.int64()),
            pa.field("id", pa.string(), nullable=False),
        ]
    )
    out = check_evolution(OLD, new, ["id"])
    assert out.names == ["id", "v", "extra"]
    assert check_evolution(None, new, ["id"]).names == ["extra", "v", "id"]
    # same columns, int32 data for an int32 column: fine; int8 maps to the same Avro int
    s32 = pa.schema([pa.field("id", pa.string()), pa.field("v", pa.int32())])
    s8 = pa.schema([pa.field("id", pa.string()), pa.field("v", pa.int8())])
    assert check_evolution(s32, s8, ["id"]).field("v").type == pa.int32()


@pytest.mark.parametrize(
    ("new", "column"),
    [
        (pa.schema([pa.field("id", pa.string()), pa.field("v", pa.string())]), "'v'"),
        (pa.schema([pa.field("id", pa.string())]), "column 'v'"),
        (pa.schema([pa.field("v", pa.int64())]), "record key column 'id'"),
        (
            pa.schema(
                [
                    pa.field("id", pa.string()),
                    pa.field("v", pa.int64()),
                    pa.field("req", pa.int64(), nullable=False),
                ]
            ),
            "'req'",
        ),
    ],
)
def test_evolution_refusals_name_column(new: pa.Schema, column: str) -> None:
    with pytest.raises(SchemaEvolutionError, match=column):
        check_evolution(OLD, new, ["id"])


def test_dropped_key_column_is_named_as_key() -> None:
    old = pa.schema([pa.field("id", pa.string()), pa.field("k2", pa.string())])
    with pytest.raises(SchemaEvolutionError, match="record key column 'k2'"):
        check_evolution(old, pa.schema([pa.field("id", pa.string())]), ["id", "k2"])


ADDR = pa.struct([pa.field("street", pa.string(), nullable=False)])
ADDR_ZIP = pa.struct([pa.field("street", pa.string(), nullable=False), ("zip", pa.string())])


@pytest.mark.parametrize(("old", "new", "evolved"), [
    (ADDR, ADDR_ZIP, ADDR_ZIP),
    (pa.list_(ADDR), pa.list_(ADDR_ZIP), pa.list_(ADDR_ZIP)),
    (pa.map_(pa.string(), ADDR), pa.map_(pa.string(), ADDR_ZIP), pa.map_(pa.string(), ADDR_ZIP)),
    # fields first in the table's order, then the new ones; deeper records evolve too
    (pa.struct([("a", pa.int64()), ("in", ADDR)]),
     pa.struct([("b", pa.string()), ("in", ADDR_ZIP), ("a", pa.int64())]),
     pa.struct([("a", pa.int64()), ("in", ADDR_ZIP), ("b", pa.string())])),
    # the data lacking a field the table has, but bringing another: both kept
    (ADDR_ZIP, pa.struct([("city", pa.string())]),
     pa.struct([*ADDR_ZIP, pa.field("city", pa.string())])),
])
def test_a_nested_record_gains_nullable_fields(
    old: pa.DataType, new: pa.DataType, evolved: pa.DataType
) -> None:
    """It was refused as a type change; an Avro record gaining optional fields is the usual
    evolution of nested data."""
    assert nested_evolution(old, new) == evolved
    table = pa.schema([pa.field("id", pa.string(), nullable=False), ("c", old)])
    data = pa.schema([pa.field("id", pa.string(), nullable=False), ("c", new)])
    assert check_evolution(table, data, ["id"]).field("c").type == evolved


@pytest.mark.parametrize(("old", "new"), [
    (ADDR, ADDR),  # nothing new
    (ADDR_ZIP, ADDR),  # fewer fields: read as null, no evolution
    (ADDR, pa.struct([*ADDR, pa.field("zip", pa.string(), nullable=False)])),  # required
    (ADDR, pa.struct([("street", pa.int64()), ("zip", pa.string())])),  # a field changes type
    (ADDR, pa.string()),
])
def test_what_is_no_nested_evolution(old: pa.DataType, new: pa.DataType) -> None:
    assert nested_evolution(old, new) is None


def test_new_fields_need_avro_names_that_differ_from_their_siblings_by_more_than_case() -> None:
    """A 'first-name' column (JSON Schema, a declared [schema]) was written, and from then on
    hudi-rs and Java's Avro parser refused the table's schema; a 'Qty' beside 'qty' (a rename
    that changed the case) made Spark refuse it. Both are refused when they would enter the
    table; names the table already has are left as they are."""
    base = pa.schema([("id", pa.int64()), ("qty", pa.int64())])
    for bad, why in [("first-name", "is not a valid Avro name"),
                     ("2nd", "is not a valid Avro name"),
                     ("a.b", "is not a valid Avro name"),
                     ("Qty", "differs from field 'qty' only in case")]:
        new = base.append(pa.field(bad, pa.string()))
        with pytest.raises(SchemaEvolutionError, match=rf"field '{re.escape(bad)}' {why}"):
            check_evolution(base, new, ["id"])
        with pytest.raises(SchemaEvolutionError, match=rf"field '{re.escape(bad)}' {why}"):
            check_evolution(None, new, ["id"])
    nested = pa.schema([("id", pa.int64()), ("addr", pa.list_(pa.struct([
        ("zip", pa.string()), ("Zip", pa.string())])))])
    with pytest.raises(SchemaEvolutionError, match=r"field 'addr.Zip' differs from field "
                       r"'addr.zip' only in case"):
        check_evolution(None, nested, ["id"])
    # a case clash whose other half the table has, wherever it comes in the data
    with pytest.raises(SchemaEvolutionError, match="only in case"):
        check_evolution(base, pa.schema([("Qty", pa.int64()), ("id", pa.int64()),
                                          ("qty", pa.int64())]), ["id"])
    # names the table has already are not refused again (the table can still be written)
    legacy = base.append(pa.field("first-name", pa.string()))
    assert check_evolution(legacy, legacy, ["id"]).names == ["id", "qty", "first-name"]
    ok = base.append(pa.field("_Name_2", pa.string()))
    assert check_evolution(base, ok, ["id"]).names == ["id", "qty", "_Name_2"]
