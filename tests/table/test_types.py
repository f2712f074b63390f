"""Column types survive write -> commit schema -> read identically in hudi-rs and hoodline."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa

from hoodline.table import read
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.table.handwriter import HandWriter


def _data(ids: list[str], base: int) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids),
            "i8": pa.array([base + i for i in range(n)], pa.int8()),
            "i16": pa.array([base] * n, pa.int16()),
            "u32": pa.array([base] * n, pa.uint32()),
            "f32": pa.array([base + 0.5] * n, pa.float32()),
            "b": pa.array([True] * n),
            "ts_us": pa.array([dt.datetime(2024, 1, 1, 12, 0, base)] * n, pa.timestamp("us")),
            "ts_ms": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * n, pa.timestamp("ms", tz="UTC")
            ),
            "day": pa.array([dt.date(2024, 1, base + 1)] * n, pa.date32()),
            "dec": pa.array([decimal.Decimal(f"{base}.25")] * n, pa.decimal128(10, 2)),
            "tags": pa.array([["x", None]] * n, pa.list_(pa.string())),
            "pt": pa.array(
                [{"x": 1.0, "y": None}] * n, pa.struct([("x", pa.float64()), ("y", pa.float64())])
            ),
            "raw": pa.array([b"\x00\x01"] * n, pa.binary()),
            "big": pa.array(["s"] * n, pa.large_string()),
        }
    )


def test_types_round_trip_like_hudi_rs(tmp_path: Path) -> None:
    cfg = TableConfig(name="types", record_key_fields=("id",), partition_fields=())
    table = HudiTable.create(tmp_path / "types", cfg)
    w = HandWriter(table)
    p = w.start()
    w.write_group(p, ("", "g1"), _data(["a", "b"], 1))
    w.commit(p)
    p = w.start()
    w.write_group(p, ("", "g1"), _data(["b"], 7))
    w.commit(p)
    assert_hudi_matches_hoodline(table)
    snap = read.read_snapshot(table)
    assert snap.schema.field("i8").type == pa.int32()  # Avro int
    assert snap.schema.field("ts_us").type == pa.timestamp("us", tz="UTC")
    assert snap.schema.field("dec").type == pa.decimal128(10, 2)
    row_b = next(r for r in snap.to_pylist() if r["id"] == "b")
    assert row_b["i8"] == 7 and row_b["dec"] == decimal.Decimal("7.25")
