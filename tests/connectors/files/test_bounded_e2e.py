"""End to end, bounded: a directory of Parquet / JSONL / CSV files read through the coordinator and
real readers, with a checkpoint before the listing, reader failures and a restart at another
parallelism, ends (every reader reaches END_OF_INPUT) with every row committed exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.connectors.files import FileSource, FileSourceSplit
from hoodline.testing.lifecycle import SourceLifecycleDriver


def write_files(root: Path, fmt: str) -> list[int]:
    expected: list[int] = []
    next_id = 0
    for i, rows in enumerate([0, 1, 5, 40, 900, 3, 700, 12, 1, 250]):
        ids = list(range(next_id, next_id + rows))
        next_id += rows
        expected += ids
        path = root / f"sub{i % 3}" / f"f{i}.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            table = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{x}" for x in ids]})
            pq.write_table(table, path, row_group_size=64)
        elif fmt == "jsonl":
            path.write_text("".join(json.dumps({"id": x, "name": f"n{x}"}) + "\n" for x in ids))
        else:
            path.write_text("id,name\n" + "".join(f"{x},n{x}\n" for x in ids))
    (root / "_SUCCESS").write_text("")
    (root / "notes.txt").write_text("not data")
    return expected


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_bounded_source_reads_everything_once_across_failures(tmp_path: Path, fmt: str) -> None:
    expected = write_files(tmp_path, fmt)
    source = FileSource.from_options({
        "path": str(tmp_path),
        "format": fmt,
        "split.target-size": 4096,  # the large files become several splits (not CSV)
        "read.batch-size": 50,
        "read.block-size": 2048,
        "schema": "id int64, name string",
    })
    driver: SourceLifecycleDriver[FileSourceSplit, object] = SourceLifecycleDriver(source, 3)
    with driver:
        driver.start()
        driver.checkpoint_and_complete()  # before the listing: restore must list again
        driver.global_restart(parallelism=2)
        driver.run_async_calls()  # the listing
        for subtask in range(2):
            driver.poll(subtask, max_batches=3, wait=0.01)
        driver.checkpoint_and_complete()
        driver.poll(0, max_batches=2, wait=0.01)
        driver.fail_reader(0)
        driver.poll(1, max_batches=2, wait=0.01)
        driver.checkpoint()  # never completes: the restart below discards it
        driver.global_restart(parallelism=4)
        driver.read_to_end()
        driver.checkpoint_and_complete()
        ids = driver.committed_table().column("id").to_pylist()
    assert sorted(ids) == expected
    assert len(ids) == len(set(ids))
