"""Data helpers for the file-source tests: small files with known rows."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def rows_table(first: int, count: int) -> pa.Table:
    ids = pa.array(range(first, first + count), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"n{i}" for i in range(first, first + count)])})


def write_parquet(path: Path, first: int, count: int, row_group_size: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows_table(first, count), path, row_group_size=row_group_size)
    return path


def write_jsonl(path: Path, first: int, count: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for i in range(first, first + count):
            f.write(json.dumps({"id": i, "name": f"n{i}"}) + "\n")
    return path


def write_csv(path: Path, first: int, count: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("id,name\n")
        for i in range(first, first + count):
            f.write(f"{i},n{i}\n")
    return path


WRITERS: dict[str, Callable[[Path, int, int], Path]] = {
    "parquet": write_parquet,
    "jsonl": write_jsonl,
    "csv": write_csv,
}
EXT = {"parquet": ".parquet", "jsonl": ".jsonl", "csv": ".csv"}


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, ns=(seconds * 10**9, seconds * 10**9))
