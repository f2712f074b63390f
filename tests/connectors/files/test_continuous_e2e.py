"""End to end: a continuous file source over a directory where files keep arriving, driven through
checkpoints, uncompleted checkpoints, single-reader failures and global restarts with changing
parallelism, delivers every row exactly once.

Real parts: real files written by a concurrent writer thread (hidden temporary name, then renamed
into place), the real enumerator / threaded readers / versioned state bytes, the framework's
SourceCoordinator and its lifecycle driver whose sink model commits a reader's batches only when a
checkpoint taken after them completes (and drops them when the reader or the job fails first).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.connectors.files import (
    FileEnumeratorStateSerializer,
    FileSource,
    FileSourceConfig,
    FileSourceSplit,
    FileSplitEnumerator,
)
from hoodline.connectors.files.rejections import is_rejected_records
from hoodline.source.serialization import read_versioned
from hoodline.testing.lifecycle import SourceLifecycleDriver

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _committed(
    driver: SourceLifecycleDriver[FileSourceSplit, object],
) -> tuple[pa.Table, list[dict[str, object]]]:
    """Committed rows, and committed rejected records (bad lines) apart."""
    batches = driver.committed_batches()
    rows = [b for b in batches if not is_rejected_records(b)]
    bad = [r for b in batches if is_rejected_records(b) for r in b.to_pylist()]
    return pa.Table.from_batches(rows, schema=SCHEMA), bad


class DirectoryWriter(threading.Thread):
    """Drops ``files`` files with known, disjoint id ranges into ``root`` (some large)."""

    def __init__(self, root: Path, fmt: str, files: int, seed: int, corrupt_at: int | None):
        super().__init__(name="file-dropper", daemon=True)
        self.root, self.fmt, self.files = root, fmt, files
        self.rng = random.Random(seed)
        self.corrupt_at = corrupt_at
        self.expected: list[int] = []
        self.corrupt_path: str | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            next_id = 0
            for i in range(self.files):
                rows = self.rng.choice([1, 7, 50, 300, 1200])  # 1200 rows: several splits
                directory = self.root / f"day={i % 3}" / f"hour={i % 5}"
                directory.mkdir(parents=True, exist_ok=True)
                ext = "parquet" if self.fmt == "parquet" else "jsonl"
                final = directory / f"part-{i:04d}.{ext}"
                tmp = directory / f".part-{i:04d}.inprogress"
                if i == self.corrupt_at:  # a bad line between two good ones
                    tmp.write_text(f'{{"id": {next_id}, "name": "x"}}\n{{this is not json\n'
                                   f'{{"id": {next_id + 1}, "name": "y"}}\n')
                    self.expected.extend([next_id, next_id + 1])
                    next_id += 2
                    self.corrupt_path = str(final)
                else:
                    ids = list(range(next_id, next_id + rows))
                    next_id += rows
                    self._write(tmp, ids)
                    self.expected.extend(ids)
                os.rename(tmp, final)
                time.sleep(self.rng.uniform(0, 0.02))
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.done.set()

    def _write(self, path: Path, ids: list[int]) -> None:
        names = [f"n{i}" for i in ids]
        if self.fmt == "parquet":
            table = pa.table({"id": pa.array(ids, pa.int64()), "name": names})
            pq.write_table(table, path, row_group_size=100)
        else:
            with open(path, "w") as f:
                f.writelines(json.dumps({"id": i, "name": n}) + "\n" for i, n in zip(ids, names,
                                                                                   strict=True))


def _diagnostics(driver: SourceLifecycleDriver[FileSourceSplit, object]) -> str:
    enumerator = driver.coordinator.enumerator
    assert isinstance(enumerator, FileSplitEnumerator)
    return (
        f"readers hold {driver.owned_splits()}; enumerator pending "
        f"{[str(s) for s in enumerator.pending_splits]}, assignment {enumerator.assignment}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("fmt,seed", [("jsonl", 520), ("parquet", 620)])
def test_continuous_source_with_restarts_delivers_every_row_exactly_once(
    tmp_path: Path, fmt: str, seed: int
) -> None:
    root = tmp_path / "landing"
    root.mkdir()
    config = FileSourceConfig(
        root=str(root),
        format=fmt,
        continuous=True,
        stable_scans=2,
        schema=SCHEMA,
        split_target_size=4096 if fmt == "jsonl" else 8192,  # big files -> several splits
        block_size=2048,
        batch_size=128,
        tolerate_errors=True,
        splits_per_request=2,
    )
    source = FileSource(config)
    writer = DirectoryWriter(root, fmt, files=60, seed=seed,
                             corrupt_at=17 if fmt == "jsonl" else None)
    rng = random.Random(seed)
    driver: SourceLifecycleDriver[FileSourceSplit, object] = SourceLifecycleDriver(source, 2)
    driver.start()
    writer.start()
    actions: Counter[str] = Counter()
    split_kinds: set[str] = set()
    deadline = time.monotonic() + 30
    stalled_rounds, last_committed = 0, -1
    parallelisms = [3, 1, 4, 2]
    try:
        for step in itertools.count():
            assert time.monotonic() < deadline, "source did not deliver every row in time"
            driver.run_async_calls()  # one directory scan
            for subtask in range(driver.parallelism):
                driver.poll(subtask, max_batches=rng.randint(1, 6), wait=0.002)
            for splits in driver.owned_splits().values():
                split_kinds.update(s.kind.name for s in splits)
            roll = rng.random()
            if step % 17 == 8:  # regular rescaling restarts, mid-stream
                driver.global_restart(parallelism=parallelisms[actions["restart"] % 4])
                actions["restart"] += 1
            elif step % 11 == 5 or roll < 0.05:
                driver.fail_reader(rng.randrange(driver.parallelism))
                actions["fail"] += 1
            elif roll < 0.30:
                driver.checkpoint_and_complete()
                actions["complete"] += 1
            elif roll < 0.38:
                driver.checkpoint()  # completes later, or is aborted by a failure
                actions["dangling"] += 1
            elif roll < 0.45 and driver.pending_checkpoints():
                driver.complete_checkpoint(driver.pending_checkpoints()[-1])
                actions["late-complete"] += 1
            if step < 40:
                continue  # keep the lifecycle going for a while even if the writer is fast
            if writer.done.is_set():
                driver.checkpoint_and_complete()
                committed_rows = _committed(driver)[0].num_rows
                if committed_rows >= len(writer.expected):
                    break
                stalled_rounds = stalled_rounds + 1 if committed_rows == last_committed else 0
                last_committed = committed_rows
                assert stalled_rounds < 300, (
                    f"stalled at {committed_rows} of {len(writer.expected)} rows: rows lost; "
                    f"{_diagnostics(driver)}"
                )
    finally:
        writer.done.wait(10)
        driver.close()
    assert writer.error is None
    committed, bad_lines = _committed(driver)
    committed_ids = committed.column("id").to_pylist()
    assert len(committed_ids) == len(writer.expected), "rows lost or duplicated"
    assert sorted(committed_ids) == sorted(writer.expected)
    assert len(set(committed_ids)) == len(committed_ids)
    # the run really exercised the recovery paths
    assert actions["fail"] >= 2 and actions["restart"] >= 2 and actions["complete"], actions
    assert {"FILE", "BYTES" if fmt == "jsonl" else "ROW_GROUPS"} <= split_kinds
    # the final checkpoint knows every file and, for JSONL, the rejected corrupt one
    point = driver.restore_point
    assert point is not None
    state = read_versioned(FileEnumeratorStateSerializer(), point.enumerator_state)
    assert len(state.processed) == 60 and not state.pending
    # the bad line is delivered exactly once too, as a rejected record; no file was skipped
    assert not state.rejected
    if writer.corrupt_path is None:
        assert bad_lines == []
    else:
        assert [(r["value"], r["detail"].split(":")[0]) for r in bad_lines] == [
            (b"{this is not json", "line 2")]
