"""Java's rule for a delete meeting an earlier log record, and the ordering values it compares."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from hoodline.table.log.avro_codec import encode_datum
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.log.content import CONTENT_VERSION, DELETE_RECORD_LIST_SCHEMA, read_delete_block
from hoodline.table.log.ordering import (
    JavaClass,
    OrderingValue,
    delete_is_outranked,
    raw_values,
    record_class,
    unwrapped,
)

LONG = JavaClass.LONG
INT = JavaClass.INTEGER


@pytest.mark.parametrize(
    ("record", "delete", "outranked"),
    [
        (OrderingValue(LONG, 20), OrderingValue(LONG, 10), True),  # the record is newer
        (OrderingValue(LONG, 10), OrderingValue(LONG, 10), False),  # ties: the delete wins
        (OrderingValue(LONG, 5), OrderingValue(LONG, 10), False),
        (OrderingValue(LONG, 20), OrderingValue(INT, 0), False),  # natural order: always deletes
        (OrderingValue(INT, 20), OrderingValue(INT, 0), False),
        (OrderingValue(LONG, 20), OrderingValue(LONG, 0), True),  # a Long 0 is not natural
        (OrderingValue(INT, 20), OrderingValue(LONG, 10), False),  # another class
        (OrderingValue(JavaClass.UTF8, "b"), OrderingValue(JavaClass.STRING, "a"), False),
        (OrderingValue(JavaClass.DOUBLE, 2.5), OrderingValue(JavaClass.DOUBLE, 1.5), True),
        (OrderingValue(LONG, None), OrderingValue(LONG, 10), False),  # null: the delete wins
        (OrderingValue(LONG, 20), None, False),
    ],
)
def test_a_delete_is_outranked_only_by_a_greater_value_of_its_own_class(
    record: OrderingValue, delete: OrderingValue | None, outranked: bool
) -> None:
    assert delete_is_outranked(record, delete) is outranked


@pytest.mark.parametrize(
    ("arrow_type", "java_class"),
    [
        (pa.int32(), INT),
        (pa.date32(), INT),  # the raw Avro value of a date: its epoch day
        (pa.int64(), LONG),
        (pa.timestamp("us", tz="UTC"), LONG),
        (pa.float32(), JavaClass.FLOAT),
        (pa.float64(), JavaClass.DOUBLE),
        (pa.bool_(), JavaClass.BOOLEAN),
        (pa.string(), JavaClass.UTF8),
        (pa.decimal128(10, 2), JavaClass.OTHER),
    ],
)
def test_a_precombine_fields_values_have_the_class_of_their_raw_avro_value(
    arrow_type: pa.DataType, java_class: JavaClass
) -> None:
    assert record_class(arrow_type) is java_class


def test_raw_values_of_dates_and_timestamps_are_their_integers() -> None:
    assert raw_values(pa.array([3, None], pa.int32()).cast(pa.date32())) == [3, None]
    assert raw_values(pa.array([7_000_000], pa.int64()).cast(pa.timestamp("us"))) == [7_000_000]


def test_a_java_delete_block_gives_each_key_its_unwrapped_ordering_value() -> None:
    """The union branch says the class: IntWrapper and DateWrapper both hold an int."""
    def item(key: str, wrapper: str | None, value: int = 0) -> dict[str, object]:
        ordering = (f"org.apache.hudi.avro.model.{wrapper}", {"value": value}) if wrapper else None
        return {"recordKey": key, "partitionPath": "p" if wrapper else None,
                "orderingVal": ordering}

    items = [item("a", "LongWrapper", 9), item("b", "DateWrapper", 9), item("c", "IntWrapper"),
             item("d", None)]
    body = encode_datum({"deleteRecordList": items}, DELETE_RECORD_LIST_SCHEMA)
    content = CONTENT_VERSION.to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
    header = {HeaderKey.INSTANT_TIME: "20260101000000000", HeaderKey.SCHEMA: json.dumps({})}
    (block,) = read_blocks(LogBlock(LogBlockType.DELETE, header, content).serialize())
    deletes = read_delete_block(block)
    assert deletes.keys == ["a", "b", "c", "d"]
    assert deletes.partition_paths == ["p", "p", "p", ""]
    assert deletes.orderings == [
        OrderingValue(LONG, 9), OrderingValue(JavaClass.LOCAL_DATE, 9), OrderingValue(INT, 0), None]
    assert [o is not None and o.natural for o in deletes.orderings] == [False, False, True, False]


def test_an_unknown_wrapper_is_a_class_never_compared() -> None:
    value = unwrapped(("org.apache.hudi.avro.model.ArrayWrapper", {"value": [1]}))
    assert value == OrderingValue(JavaClass.OTHER, [1])
    assert not delete_is_outranked(OrderingValue(JavaClass.OTHER, [2]), value)
