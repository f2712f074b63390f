"""Compaction beside the writes: writes log against a pending compaction (as Java Hudi's do),
reads merge those logs with the slice the plan compacts, and the background compactor runs,
fails and resumes plans while a writer goes on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodline.table.compaction import run_compaction, schedule_compaction
from hoodline.table.instant import COMPACTION
from hoodline.table.log.names import LogFileName
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.table.write.options import WriteOptions
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.table.write.helpers import (
    Model,
    apply_to_model,
    mor_table,
    rows,
    snapshot_dict,
)

ASYNC = {
    "hoodline.compaction.async": True,
    "hoodie.compact.inline.max.delta.commits": 2,
    "hoodline.compaction.log-size-ratio": 0.0,
}


def _logs(table: HudiTable) -> list[LogFileName]:
    found = (LogFileName.parse(p.name) for p in table.base_path.rglob(".*.log.*"))
    return sorted(n for n in found if n is not None)


INDEXES = pytest.mark.parametrize("index_type", ["BUCKET", "BLOOM"])


@INDEXES
def test_writes_during_a_pending_compaction_log_against_it_and_read_merged(
    tmp_path: Path, index_type: str
) -> None:
    table = mor_table(tmp_path, index_type)
    model: Model = {}
    at_commit: dict[str, Model] = {}
    # writes that may log against a pending compaction, and schedule none themselves
    options = {"hoodline.compaction.async": True, "hoodie.compact.inline": False}
    with WriteClient(table, options) as client:
        for batch in (rows(list(range(12)), region=["eu", "us"] * 6, ts=1),
                      rows([0, 1, 2], region=["eu", "us", "eu"], ts=2, v="w")):
            ts = client.upsert(batch)
            apply_to_model(model, batch)
            at_commit[ts] = dict(model)
        planned = schedule_compaction(table)
        assert planned is not None
        c = planned.timestamp
        view = table.fs_view()
        pending = [s for s in view.latest_file_slices() if s.pending_compaction == c]
        assert pending, "readers see the planned slices, marked pending"
        # a file group is in at most one pending plan
        assert schedule_compaction(table) is None
        steps: list[tuple[str, pa.Table]] = [
            ("upsert", rows([0, 3, 40], region=["eu", "us", "eu"], ts=3, v="x")),
            ("delete", rows([1, 2], region=["us", "eu"], ts=4)),
            ("insert", rows([50, 51], region=["us", "eu"], ts=5, v="i")),
            ("upsert", rows([3, 50], region="us", ts=6, v="y")),
        ]
        for op, batch in steps:
            ts = getattr(client, op)(batch)
            apply_to_model(model, batch, delete=op == "delete")
            at_commit[ts] = dict(model)
            assert snapshot_dict(table) == model, op
        # the writes appended to the compaction's slices (base instant C), version 1 first
        planned_ids = {s.file_id for s in pending}
        against_c = [n for n in _logs(table) if n.base_instant == c]
        assert against_c and {n.file_id for n in against_c} <= planned_ids
        assert min(n.version for n in against_c) == 1
        part, fid = pending[0].partition_path, pending[0].file_id
        write_slice = table.fs_view().write_slice(part, fid)
        assert write_slice is not None and write_slice.base_instant == c
        assert write_slice.base_file is None
        # time travel to every commit, also those after the plan, reads what the model held
        for ts, expected in at_commit.items():
            snap = read_snapshot(table, as_of=ts, columns=["region", "id", "ts", "v"])
            assert {(r["region"], r["id"]): (r["ts"], r["v"]) for r in snap.to_pylist()} == \
                expected, ts
        done = run_compaction(table, planned, client.options)
    assert done.timestamp == c and table.timeline.reload().pending() == []
    assert snapshot_dict(table) == model
    # after the compaction, the new base files + the logs written against C are the slices
    slices = {(s.partition_path, s.file_id): s for s in table.fs_view().latest_file_slices()}
    assert slices[(part, fid)].base_instant == c and slices[(part, fid)].base_file
    assert slices[(part, fid)].pending_compaction is None
    assert_hudi_matches_hoodline(table)


def _blocking_runner(
    release: threading.Event, started: threading.Event
) -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]:
    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        started.set()
        assert release.wait(30), "the test never released the compaction"
        return [fn(item) for item in items]

    return run


@INDEXES
def test_a_writer_goes_on_while_its_compaction_runs_in_the_background(
    tmp_path: Path, index_type: str
) -> None:
    table = mor_table(tmp_path, index_type)
    release, started = threading.Event(), threading.Event()
    model: Model = {}
    with WriteClient(table, ASYNC) as client:
        client.task_runner = _blocking_runner(release, started)
        writes = 0
        while client._background.running is None:  # until a write makes slices due
            batch = rows([0, 1, 4] if writes else list(range(10)), region=["eu", "us"] * 5
                         if not writes else ["eu", "us", "eu"], ts=writes + 1, v=f"w{writes}")
            client.upsert(batch)
            apply_to_model(model, batch)
            writes += 1
            assert writes <= 3, "two log files per slice make it due"
        assert started.wait(30)  # planned and handed to the background
        (c,) = table.timeline.reload().pending([COMPACTION])
        batch = rows([0, 3, 20], region=["eu", "us", "us"], ts=3, v="x")
        assert client.upsert(batch) > c.timestamp
        apply_to_model(model, batch)
        assert table.timeline.reload().pending([COMPACTION]) == [c]
        assert any(n.base_instant == c.timestamp for n in _logs(table))
        assert snapshot_dict(table) == model
        release.set()
    # close waited for the compaction
    assert table.timeline.reload().pending() == []
    compactions = [i for i in table.timeline.completed_commits() if i.action == "commit"]
    assert [i.timestamp for i in compactions] == [c.timestamp]
    assert snapshot_dict(table) == model
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize("hoodline_error", [False, True])
def test_a_compaction_that_fails_in_the_background_is_run_again_after_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, hoodline_error: bool
) -> None:
    """hoodline's own errors are logged in one line (a 170-line Python and Java trace followed
    an S3 outage's StorageError, chaos review); unexpected ones keep their traceback."""
    from hoodline.errors import StorageError

    table = mor_table(tmp_path, "BUCKET", bucket_count=1, partition_fields=())
    calls: list[int] = []

    def flaky(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        calls.append(len(items))
        if len(calls) == 1:
            raise (StorageError("disk full (injected)", retryable=True) if hoodline_error
                   else OSError("disk full (injected)"))
        return [fn(item) for item in items]

    model: Model = {}
    with caplog.at_level(logging.ERROR, logger="hoodline.table.background"), \
            WriteClient(table, ASYNC) as client:
        client.task_runner = flaky
        for t in range(1, 4):
            batch = rows([t, t + 1], ts=t, v=f"w{t}")
            client.upsert(batch)
            apply_to_model(model, batch)
            client._background.collect(wait=True)  # deterministic: let the plan run now
            if t == 2:
                (c,) = table.timeline.reload().pending([COMPACTION])
                assert f"compaction {c.timestamp} failed" in caplog.text
                assert "disk full (injected)" in caplog.text
                (failed,) = [r for r in caplog.records if "failed in the background" in
                             r.getMessage()]
                assert bool(failed.exc_info) is not hoodline_error
    assert calls == [1, 1]  # failed once, then the same plan again after the next write
    assert table.timeline.reload().pending() == []
    assert [i.timestamp for i in table.timeline.completed_commits() if i.action == "commit"] \
        == [c.timestamp]
    assert snapshot_dict(table) == model
    assert_hudi_matches_hoodline(table)


def test_async_compaction_is_off_by_default() -> None:
    options = WriteOptions.from_mapping({})
    assert options.compact_async is False and options.compact_inline is True
    assert WriteOptions.from_mapping({"hoodline.compaction.async": "true"}).compact_async


def test_a_compaction_stopped_by_a_lock_takeover_does_not_claim_its_plan_stays_pending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A pipeline paused past its lock's expiry resumed to "compaction ... failed in the
    background: ...; its plan stays pending and is executed again after the next write" and a
    hundred lines of traceback, while the writer that took the lock over had finished that
    plan: it says the lock was lost, to whom, and that the new holder finishes the plan."""
    import os
    import time

    table = mor_table(tmp_path, "BUCKET", bucket_count=1, partition_fields=())
    finished: list[list[Any]] = []

    def taken_over(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        lock = table.meta_path / ".hoodline" / "writer.lock"
        old = time.time() - 120
        os.utime(lock, (old, old))
        with WriteClient(HudiTable.open(table.base_path),
                         {"hoodline.write.lock.owner": "backfill"}) as other:
            finished.append(other.repaired)  # opening finished the pending compaction
        raise OSError("a log file disappeared while it was read (injected)")

    slow = {"hoodline.writer.lock.heartbeat.seconds": 30, "hoodline.writer.lock.expiry.seconds": 60}
    with caplog.at_level(logging.WARNING, logger="hoodline.table.background"), \
            WriteClient(table, {**ASYNC, **slow}) as client:
        client.task_runner = taken_over
        for t in range(1, 10):
            client.upsert(rows([t], ts=t))
            if client._background.running is not None:
                break
        assert client._background.collect(wait=True) is None
    assert finished and finished[0]
    assert "stays pending" not in caplog.text
    assert "stopped in the background" in caplog.text and "writer 'backfill'" in caplog.text
    assert "the lock's new holder finishes its plan" in caplog.text
