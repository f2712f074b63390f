"""Property: whatever the sequence of file arrivals, scans, polls, checkpoints (completed or not),
reader failures and global restarts at any parallelism, the file source commits every row exactly
once (synchronous readers, so every example is deterministic and hypothesis can shrink it)."""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodline.connectors.files import FileSource, FileSourceConfig, FileSourceSplit
from hoodline.testing.lifecycle import SourceLifecycleDriver

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])

# weighted: reading and scanning dominate, failures and restarts are frequent enough to hit
# splits in every state (pending, assigned, half read, finished but not yet checkpointed)
OP_KINDS = (["scan"] * 3 + ["poll"] * 6 + ["checkpoint+complete"] * 2 + ["checkpoint"]
            + ["complete-pending"] + ["fail"] * 2 + ["restart"] + ["files"] * 2)
OPS = st.lists(st.tuples(st.sampled_from(OP_KINDS), st.integers(0, 40)), min_size=10,
               max_size=60)


class Dropper:
    def __init__(self, root: Path, fmt: str, rng: random.Random) -> None:
        self.root, self.fmt, self.rng = root, fmt, rng
        self.expected: list[int] = []
        self.count = 0

    def drop(self, n: int) -> None:
        for _ in range(n):
            rows = self.rng.choice([0, 1, 9, 120, 400])
            first = len(self.expected)
            ids = list(range(first, first + rows))
            self.expected += ids
            path = self.root / f"d{self.count % 2}" / f"f{self.count:03d}.{self.fmt}"
            path.parent.mkdir(exist_ok=True)
            tmp = path.parent / f".{path.name}.tmp"
            if self.fmt == "parquet":
                table = pa.table({"id": pa.array(ids, pa.int64()), "name": ["x"] * rows})
                pq.write_table(table, tmp, row_group_size=40)
            else:
                tmp.write_text("".join(json.dumps({"id": i, "name": "x"}) + "\n" for i in ids))
            os.rename(tmp, path)
            self.count += 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, fmt=st.sampled_from(["jsonl", "parquet"]), parallelism=st.integers(1, 4),
       stable_scans=st.integers(1, 2), per_request=st.integers(1, 3), seed=st.integers(0, 99))
def test_every_row_exactly_once_under_any_lifecycle(
    ops: list[tuple[str, int]], fmt: str, parallelism: int, stable_scans: int,
    per_request: int, seed: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dropper = Dropper(root, fmt, random.Random(seed))
        dropper.drop(2)
        config = FileSourceConfig(
            root=str(root), format=fmt, continuous=True, stable_scans=stable_scans,
            schema=SCHEMA, split_target_size=1024, block_size=1024, batch_size=25,
            splits_per_request=per_request,
        )
        driver: SourceLifecycleDriver[FileSourceSplit, object] = SourceLifecycleDriver(
            FileSource(config, threaded_reader=False), parallelism)
        with driver:
            driver.start()
            for op, arg in ops:
                if op == "files":
                    dropper.drop(1 + arg % 3)
                elif op == "scan":
                    driver.run_async_calls()
                elif op == "poll":
                    for subtask in range(driver.parallelism):
                        driver.poll(subtask, max_batches=1 + (arg + subtask) % 4)
                elif op == "checkpoint+complete":
                    driver.checkpoint_and_complete()
                elif op == "checkpoint":
                    driver.checkpoint()
                elif op == "complete-pending" and driver.pending_checkpoints():
                    driver.complete_checkpoint(driver.pending_checkpoints()[0])
                elif op == "fail":
                    driver.fail_reader(arg % driver.parallelism)
                elif op == "restart":
                    driver.global_restart(parallelism=1 + arg % 4)
            for _ in range(stable_scans + 1):
                driver.run_async_calls()
            for _ in range(500):  # drain: everything discovered must arrive
                for subtask in range(driver.parallelism):
                    driver.poll(subtask, max_batches=50)
                driver.checkpoint_and_complete()
                if driver.committed_table().num_rows >= len(dropper.expected):
                    break
            table = driver.committed_table()
            ids = table.column("id").to_pylist() if table.num_rows else []
    assert sorted(ids) == dropper.expected
