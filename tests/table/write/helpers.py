"""Helpers of the table-write tests (imported by tests and the conftest)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa

from hoodline.table.properties import TableConfig
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable

#: tiny sizes so a few hundred rows already need several file groups
SMALL_FILES = {
    "hoodie.parquet.max.file.size": 6000,
    "hoodie.parquet.small.file.limit": 4000,
    "hoodie.copyonwrite.record.size.estimate": 100,
    "hoodline.index.bloom.min.entries": 50,
    "hoodie.index.bloom.fpp": 0.001,
}


def tree_digest(path: Path, skip_lock: bool = True) -> dict[str, str]:
    """sha256 of every file under ``path`` (relative path -> digest)."""
    out: dict[str, str] = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = Path(root) / name
            rel = full.relative_to(path).as_posix()
            if skip_lock and rel.startswith(".hoodie/.hoodline/"):
                continue
            out[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


def make_config(index: str, **kw: object) -> TableConfig:
    base: dict[str, object] = {
        "name": "trips",
        "record_key_fields": ("id",),
        "partition_fields": ("region",),
        "precombine_field": "ts",
        "index_type": index,
        "bucket_count": 3,
    }
    base.update(kw)
    return TableConfig(**base)  # type: ignore[arg-type]


def rows(
    ids: list[int], region: str | list[str] = "eu", ts: int | list[int] = 1, v: str = "v"
) -> pa.Table:
    regions = region if isinstance(region, list) else [region] * len(ids)
    tss = ts if isinstance(ts, list) else [ts] * len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(regions, pa.string()),
            "ts": pa.array(tss, pa.int64()),
            "v": pa.array([f"{v}{i}" for i in ids], pa.string()),
        }
    )


def snapshot_dict(table: HudiTable) -> dict[tuple[str, int], tuple[int, str]]:
    snap = read_snapshot(table, columns=["region", "id", "ts", "v"])
    return {(r["region"], r["id"]): (r["ts"], r["v"]) for r in snap.to_pylist()}


#: (region, id) -> (ts, v): what a table written with :func:`rows` should hold
Model = dict[tuple[str, int], tuple[int, str]]


def mor_table(tmp_path: Path, index: str, **kw: object) -> HudiTable:
    """A merge-on-read table of the :func:`make_config` layout at ``tmp_path/mor_<index>``."""
    return HudiTable.create(
        tmp_path / f"mor_{index}", make_config(index, table_type="MERGE_ON_READ", **kw)
    )


def apply_to_model(model: Model, batch: pa.Table, delete: bool = False) -> None:
    """``batch`` upserted into (or, ``delete``, deleted from) ``model``."""
    for r in batch.to_pylist():
        if delete:
            model.pop((r["region"], r["id"]), None)
        else:
            model[(r["region"], r["id"])] = (r["ts"], r["v"])
