"""Log block framing, block contents and log file names, byte for byte as Java Hudi writes them."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodline.errors import TableError
from hoodline.table.log import content
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.log.content import (
    DELETE_RECORD_LIST_SCHEMA,
    DeleteList,
    avro_data_block,
    delete_block,
    read_data_blocks,
    read_delete_block,
    rollback_block,
    same_records_schema,
)
from hoodline.table.log.names import LogFileName, is_log_file
from hoodline.table.log.ordering import JavaClass, OrderingValue
from hoodline.table.schema import arrow_to_avro

# A rollback command block written by Java Hudi (Spark 3.5), 105 bytes: hudi-rs test data
# crates/core/tests/data/log_files/valid_log_rollback (header entries in Java's HashMap order).
JAVA_ROLLBACK_BLOCK = bytes.fromhex(
    "234855444923"
    "000000000000005b"
    "00000001"
    "00000000"
    "00000003"
    "00000000" "00000011" + b"20250126040936578".hex() +
    "00000003" "00000001" "30"
    "00000001" "00000011" + b"20250126040826878".hex() +
    "0000000000000000"
    "00000000"
    "0000000000000061"
)


def test_rollback_block_bytes_equal_javas() -> None:
    block = LogBlock(
        LogBlockType.COMMAND,
        {
            HeaderKey.INSTANT_TIME: "20250126040936578",
            HeaderKey.COMMAND_BLOCK_TYPE: "0",
            HeaderKey.TARGET_INSTANT_TIME: "20250126040826878",
        },
    )
    assert block.serialize() == JAVA_ROLLBACK_BLOCK
    assert len(JAVA_ROLLBACK_BLOCK) == 105
    (parsed,) = read_blocks(JAVA_ROLLBACK_BLOCK)
    assert parsed.type is LogBlockType.COMMAND
    assert parsed.header == block.header
    assert rollback_block("20250126040936578", "20250126040826878").header == block.header


def test_block_lengths_follow_javas_formula() -> None:
    schema = arrow_to_avro(pa.schema([("k", pa.string())]), "t")
    data = avro_data_block(pa.table({"k": ["a", "b"]}), schema, "20260101000000000").serialize()
    size = int.from_bytes(data[6:14], "big")
    assert len(data) == 14 + size  # size counts everything after itself, trailing length included
    assert int.from_bytes(data[-8:], "big") == size + 6


def test_avro_data_block_round_trips_and_fastavro_reads_its_records() -> None:
    table = pa.table({"k": ["a", "bb", None], "v": pa.array([1, -2, 3], pa.int64())})
    schema = arrow_to_avro(table.schema, "t")
    block = avro_data_block(table, schema, "20260101000000000")
    (back,) = read_blocks(block.serialize())
    assert back.type is LogBlockType.AVRO_DATA
    assert back.instant == "20260101000000000"
    assert json.loads(back.header[HeaderKey.SCHEMA]) == schema
    content = bytes(back.content)
    assert content[:8] == bytes.fromhex("00000003 00000003")
    assert read_data_blocks([back]).to_pylist() == table.to_pylist()
    # the first record, decoded independently
    length = int.from_bytes(content[8:12], "big")
    row = fastavro.schemaless_reader(
        io.BytesIO(content[12 : 12 + length]), fastavro.parse_schema(schema), None
    )
    assert row == {"k": "a", "v": 1}


def test_delete_block_is_a_delete_record_list_with_int_wrapper_zero() -> None:
    block = delete_block(pa.array(["k1", "k2"]), "region=us", "20260101000000000", "{}")
    content = bytes(block.content)
    assert content[:4] == bytes.fromhex("00000003")
    length = int.from_bytes(content[4:8], "big")
    datum = content[8 : 8 + length]
    assert len(content) == 8 + length
    decoded = fastavro.schemaless_reader(
        io.BytesIO(datum), fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA), None
    )
    assert [r["recordKey"] for r in decoded["deleteRecordList"]] == ["k1", "k2"]
    assert {r["partitionPath"] for r in decoded["deleteRecordList"]} == {"region=us"}
    assert [r["orderingVal"] for r in decoded["deleteRecordList"]] == [{"value": 0}] * 2
    # Spark SQL's DELETE writes the same bytes per item: key, partition, then 04 00 (IntWrapper 0)
    item = b"\x02\x04k1\x02\x12region=us\x04\x00"
    assert datum.startswith(b"\x04" + item)
    assert datum.endswith(b"\x00")
    (back,) = read_blocks(block.serialize())
    assert read_delete_block(back) == DeleteList(
        ["k1", "k2"], ["region=us", "region=us"], [OrderingValue(JavaClass.INTEGER, 0)] * 2)


def test_torn_and_foreign_bytes_are_skipped_up_to_the_next_block() -> None:
    a = rollback_block("20260101000000001", "20260101000000000").serialize()
    b = rollback_block("20260101000000003", "20260101000000002").serialize()
    blocks = list(read_blocks(a[:-5] + b"junk" + b + a[:20]))
    assert [blk.instant for blk in blocks] == ["20260101000000003"]
    assert list(read_blocks(b"")) == []


def test_block_without_instant_time_is_reported() -> None:
    block = LogBlock(LogBlockType.COMMAND, {})
    with pytest.raises(TableError, match="INSTANT_TIME"):
        _ = block.instant


def test_log_file_names_parse_and_format_as_java() -> None:
    name = ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"
    parsed = LogFileName.parse(name)
    assert parsed == LogFileName(
        "20250331030642808", 1, "0-26-85", "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    )
    assert parsed is not None and parsed.name == name
    assert is_log_file(name)
    for bad in (
        "d0304c53-0_20250331030642808.log.1_0-26-85",  # no leading dot
        ".d0304c53-0_20250331030642808.log.1_0-26",  # token of two parts
        ".d0304c53-0_2025033103064280.log.1_0-26-85",  # 16-digit instant
        ".d0304c53-0_20250331030642808.log.0_0-26-85",  # version 0
        "x_1-0-1_20250331030642808.parquet",
    ):
        assert LogFileName.parse(bad) is None, bad
    # Java's comparator: instant, then version, then token
    older = LogFileName("20250101000000000", 9, "0-0-0", "f-0")
    newer = LogFileName("20250101000000001", 1, "0-0-0", "f-0")
    assert sorted([newer, older]) == [older, newer]
    with pytest.raises(TableError, match="write token"):
        LogFileName("20250101000000000", 1, "0_1", "f-0")


def _data_blocks(*tables: pa.Table) -> list[LogBlock]:
    """Avro data blocks of ``tables`` as read back from one log file."""
    data = b"".join(
        avro_data_block(t, arrow_to_avro(t.schema, "t"), "20260101000000000").serialize()
        for t in tables
    )
    return list(read_blocks(data))


def test_consecutive_avro_blocks_of_one_schema_decode_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parts = [
        pa.table({"k": ["a", None, "ccc"], "v": pa.array([1, 2, 3], pa.int64())}),
        pa.table({"k": pa.array([], pa.string()), "v": pa.array([], pa.int64())}),
        pa.table({"k": ["d", "ee"], "v": pa.array([-4, 2**40], pa.int64())}),
    ]
    blocks = _data_blocks(*parts)
    alone = [read_data_blocks([b]).to_pylist() for b in blocks]
    calls: list[int] = []
    real = content.decode_records

    def counting(
        data: bytes | memoryview, starts: Any, ends: Any, schema: Any, wanted: Any = None
    ) -> pa.Table:
        calls.append(len(starts))
        return real(data, starts, ends, schema, wanted)

    monkeypatch.setattr(content, "decode_records", counting)
    together = read_data_blocks(blocks)
    assert calls == [5]  # one decode for the three blocks' records
    assert together.to_pylist() == [row for rows in alone for row in rows]
    assert together.to_pylist() == pa.concat_tables(parts).to_pylist()


def test_blocks_of_other_schemas_or_types_are_not_read_together() -> None:
    (a,) = _data_blocks(pa.table({"k": ["a"]}))
    (b,) = _data_blocks(pa.table({"k": ["b"], "w": [1]}))
    (d,) = read_blocks(delete_block(pa.array(["a"]), "", "20260101000000000", "{}").serialize())
    assert same_records_schema(a, a)
    assert not same_records_schema(a, b)
    assert not same_records_schema(d, d)  # delete blocks are never joined
    with pytest.raises(TableError, match="one SCHEMA header"):
        read_data_blocks([a, b])
    with pytest.raises(TableError, match="one type"):
        read_data_blocks([a, d])


def test_a_corrupt_block_among_joined_blocks_is_reported() -> None:
    good, bad = _data_blocks(pa.table({"k": ["a", "b"]}), pa.table({"k": ["c", "d"]}))
    cut = LogBlock(bad.type, bad.header, bytes(bad.content)[:-3], bad.offset)
    with pytest.raises(TableError, match="corrupt"):
        read_data_blocks([good, cut])
