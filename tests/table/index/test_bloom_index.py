"""The BLOOM index on merge-on-read tables: a key that lives only in a log file is found there."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from hoodline.table.compaction import run_compaction, schedule_compaction
from hoodline.table.properties import IndexType, TableConfig, TableType
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)})


def test_a_key_written_again_after_a_compaction_planned_its_delete_stays_in_its_group(
    tmp_path: Path,
) -> None:
    """Deleted, then written again while a compaction that drops it from the base file was
    pending, the key lived only in a log file of its group; the index read base files only,
    the key's next write became an insert into another group, and the table held it twice
    (concurrency review: 3 of 3 pipelines with async compaction)."""
    table = HudiTable.create(tmp_path / "t", TableConfig(
        "t", ("id",), (), "v", table_type=TableType.MERGE_ON_READ, index_type=IndexType.BLOOM))
    # compactions only when this test runs them (async mode: writes log against pending ones)
    options = {"hoodie.compact.inline": False, "hoodline.compaction.async": True}
    with WriteClient(table, options) as client:
        client.upsert(_rows(["a", "b", "k"], 1))
        client.delete(_rows(["k"], 2))
        planned = schedule_compaction(table)  # its base file will not hold k
        assert planned is not None
        client.upsert(_rows(["k"], 3))  # found in the old base file: logged against the plan
        run_compaction(table, planned, client.options)
        client.upsert(_rows(["k"], 4))
        client.upsert(_rows(["k", "c"], 5))
    snap = read_snapshot(HudiTable.open(table.base_path))
    assert Counter(snap.column("id").to_pylist()) == {"a": 1, "b": 1, "c": 1, "k": 1}
    rows = {r["id"]: r for r in snap.to_pylist()}
    assert rows["k"]["v"] == 5
    groups = {r["_hoodie_file_name"].split("_")[0] for r in rows.values() if r["id"] != "c"}
    assert len(groups) == 1  # k stayed in the file group of a and b
