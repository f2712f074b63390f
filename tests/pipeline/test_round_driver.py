"""The round driver's policy without Spark or a broker: the file source, a real table and the
in-process engine. Each test names the rule it covers and fails when that rule is removed:
restore, retry with backoff, the failure limit, non-retryable errors stopping at once, the
double-commit guard, a retried round checkpointing again (issue 9 bug 1), commits whose outcome
is unknown, and errors after the commit."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import itertools
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline import faults
from hoodline.config import ErrorTolerance
from hoodline.errors import (
    BadRecordError,
    CommitOutcomeUnknownError,
    ConfigError,
    EngineJobError,
    FileSourceError,
    PipelineError,
    RoundFailedError,
    TableError,
    WriterLockError,
)
from hoodline.faults import FaultAction, FaultPoint
from hoodline.pipeline import driver as driver_module
from hoodline.pipeline.checkpoint import CHECKPOINT_KEY, PipelineCheckpoint
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.driver import RoundDriver, read_checkpoint
from hoodline.pipeline.errors_table import drop_orphaned_errors, round_metadata
from hoodline.pipeline.progress import format_round_line
from hoodline.pipeline.report import RoundReport, StopReason
from hoodline.pipeline.tasks import RoundJob
from hoodline.table import fs_view
from hoodline.table import rollback as rollback_module
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.instant import COMMIT
from hoodline.table.properties import IndexType, TableType
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.engine import InProcessEngine
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline


def _write_file(root: Path, name: str, rows: list[dict[str, Any]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rows(ids: range, version: int = 1) -> list[dict[str, Any]]:
    return [{"id": i, "v": f"v{version}-{i}", "ts": version} for i in ids]


def _config(root: Path, table: Path, continuous: bool = False,
            table_options: dict[str, object] | None = None,
            schema: dict[str, str] | None = None, **runtime: object) -> PipelineConfig:
    options: dict[str, object] = {"path": str(root), "format": "jsonl"}
    if continuous:  # a restart lists the directory again
        options.update({"source.mode": "continuous", "source.monitor-interval": 0.02,
                        "source.stable-scans": 1})
    return config_from_dict({
        "source": {"type": "files", "format": "json", "options": options},
        # the rows of a.jsonl (ts 1) and b.jsonl (ts 2) that share a key may be read in
        # different rounds, in any order: the ordering field decides which one stays
        "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts",
                  "options": {"hoodie.datasource.write.payload.class":
                              "org.apache.hudi.common.model.DefaultHoodieRecordPayload"},
                  **(table_options or {})},
        "schema": schema or {"id": "int64", "v": "string", "ts": "int64"},
        "runtime": {"reader-parallelism": 2, "retry-backoff": 0.5, "retry-backoff-max": 10,
                    "round": {"max-records": 100, "min-interval": 0}, **runtime},
    })


class _Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        time.sleep(0.005)


def _driver(cfg: PipelineConfig, engine: InProcessEngine) -> tuple[RoundDriver, _Sleeps]:
    sleeps = _Sleeps()
    return RoundDriver(cfg, engine, sleep=sleeps), sleeps


def _table_rows(path: Path) -> dict[int, str]:
    snap = read_snapshot(HudiTable.open(path))
    return dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(), strict=True))


def _actions(path: Path) -> list[tuple[str, str]]:
    return [(i.action, i.state.name) for i in HudiTable.open(path).timeline.instants()]


def _failing_jobs(n: int) -> Any:
    left = {"n": n}

    def before(job: RoundJob) -> None:
        if left["n"] > 0:
            left["n"] -= 1
            raise EngineJobError("test: executor lost")

    return before


def _failing_guard(times: int, message: str) -> Any:
    """RoundDriver._guard (it runs after the error table's commit, before the table's) failing
    its first ``times`` calls; patch it in with ``monkeypatch.setattr(RoundDriver, "_guard",
    ...)``. ``.calls`` counts the failures."""
    real = RoundDriver._guard

    def guard(t: HudiTable, round_id: int) -> None:
        if guard.calls < times:  # type: ignore[attr-defined]
            guard.calls += 1  # type: ignore[attr-defined]
            raise EngineJobError(message)
        real(t, round_id)

    guard.calls = 0  # type: ignore[attr-defined]
    return staticmethod(guard)


def _tolerant(cfg: PipelineConfig) -> PipelineConfig:
    """``cfg`` with errors.tolerance = all."""
    return dataclasses.replace(cfg, errors=dataclasses.replace(cfg.errors,
                                                               tolerance=ErrorTolerance.ALL))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    _write_file(root, "a.jsonl", _rows(range(0, 150)))
    _write_file(root, "b.jsonl", _rows(range(100, 200), version=2))
    return root


def test_once_reads_everything_in_rounds_and_restores_from_the_commit(
    src: Path, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    reports: list[RoundReport] = []
    summary = _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(
        once=True, on_round=reports.append)
    assert summary.stopped_because is StopReason.DRAINED
    assert summary.records_read == 250
    committed = [r.round_id for r in reports if r.committed]
    assert committed == list(range(1, len(committed) + 1)) and len(committed) >= 2
    expected = {i: f"v1-{i}" for i in range(100)} | {i: f"v2-{i}" for i in range(100, 200)}
    assert _table_rows(table) == expected
    # a restart resumes from the table's checkpoint: only the new file is read
    _write_file(src, "c.jsonl", _rows(range(190, 210), version=3))
    reports.clear()
    summary = _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(
        once=True, on_round=reports.append)
    assert summary.records_read == 20
    assert next(r.round_id for r in reports if r.committed) == committed[-1] + 1
    assert _table_rows(table) == expected | {i: f"v3-{i}" for i in range(190, 210)}


@pytest.mark.parametrize("index, table_type", [("BUCKET", "COPY_ON_WRITE"),
                                               ("BLOOM", "COPY_ON_WRITE"),
                                               ("BUCKET", "MERGE_ON_READ")])
def test_tasks_write_against_the_listing_the_driver_made_for_the_round(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: str, table_type: str
) -> None:
    listed_in_tasks: list[str] = []
    listed = {"n": 0}
    real = fs_view.list_data_files

    def spy(base_path: Any, partition: str) -> Any:
        listed["n"] += 1
        if any(f.filename.endswith("pipeline/tasks.py") for f in inspect.stack()):
            listed_in_tasks.append(" < ".join(f.function for f in inspect.stack()[1:6]))
        return real(base_path, partition)

    monkeypatch.setattr(fs_view, "list_data_files", spy)
    cfg = _config(src, tmp_path / "t", table_options={"index": index, "type": table_type})
    reports: list[RoundReport] = []
    _driver(cfg, InProcessEngine())[0].run(once=True, on_round=reports.append)
    assert sum(r.committed for r in reports) >= 2
    assert listed["n"] > 0  # the driver listed
    assert listed_in_tasks == []  # readers, assigners and writers did not
    expected = {i: f"v1-{i}" for i in range(100)} | {i: f"v2-{i}" for i in range(100, 200)}
    assert _table_rows(tmp_path / "t") == expected


def test_failed_rounds_are_rolled_back_and_retried_with_exponential_backoff(
    src: Path, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    driver, sleeps = _driver(_config(src, table), InProcessEngine(before_job=_failing_jobs(3)))
    reports: list[RoundReport] = []
    driver.run(once=True, on_round=reports.append)
    first = next(r for r in reports if r.committed)
    assert first.round_id == 1 and first.retries == 3
    assert sleeps.calls[:3] == [0.5, 1.0, 2.0]
    assert _actions(table).count(("rollback", "COMPLETED")) == 3
    assert len(_table_rows(table)) == 200


def test_too_many_failures_in_a_row_stop_with_the_cause(src: Path, tmp_path: Path) -> None:
    table = tmp_path / "t"
    cfg = _config(src, table, **{"max-consecutive-failures": 3})
    driver, sleeps = _driver(cfg, InProcessEngine(before_job=_failing_jobs(100)))
    with pytest.raises(RoundFailedError, match=r"round 1 failed 3 times.*executor lost"):
        driver.run(once=True)
    assert len(sleeps.calls) == 2
    assert all(a == ("rollback", "COMPLETED") for a in _actions(table))


def test_a_failed_close_of_the_error_tables_writer_hides_neither_the_cause_nor_the_rest(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In an S3 outage the run gave up, then releasing the error table's lock failed too: that
    error replaced why the run stopped and the table's own writer was never closed (its lock
    stayed until it expired; chaos review on S3, 2 of 2)."""
    table = tmp_path / "t"
    cfg = _config(src, table, **{"max-consecutive-failures": 2})
    cfg = dataclasses.replace(cfg, errors=dataclasses.replace(
        cfg.errors, tolerance=ErrorTolerance.ALL, table_path=str(table) + "_errors"))
    real_close = WriteClient.close
    closed: list[str] = []

    def close(self: WriteClient) -> None:
        closed.append(str(self.table.base_path))
        real_close(self)
        if str(self.table.base_path).endswith("_errors"):
            raise OSError("cannot reach S3: connection refused")

    monkeypatch.setattr(WriteClient, "close", close)
    driver, _ = _driver(cfg, InProcessEngine(before_job=_failing_jobs(100)))
    with caplog.at_level("WARNING", logger="hoodline"), \
            pytest.raises(RoundFailedError, match=r"round 1 failed 2 times"):
        driver.run(once=True)
    assert closed == [str(table) + "_errors", str(table)]
    assert "closing the error table's writer failed too: OSError: cannot reach S3" in caplog.text
    # the table's lock was released: another writer opens it at once
    with WriteClient(str(table), {"hoodie.datasource.write.payload.class":
                                  "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
                                  "hoodline.writer.lock.expiry.seconds": 600}):
        pass


def test_an_object_store_outage_is_waited_out_for_its_retry_timeout(
    src: Path, tmp_path: Path
) -> None:
    """Round failures of a store that does not answer do not use up
    runtime.max-consecutive-failures until the outage lasted the storage's retry_timeout
    (default 3 min), as the store client's retries promise: a refused connection gave up in
    ~3 s, and 5 failed rounds stopped the run within a minute of an S3 outage (chaos review)."""
    from hoodline.errors import StorageError

    now = [0.0]
    down = {"until": 100.0}

    def unreachable(job: RoundJob) -> None:
        now[0] += 10.0
        if now[0] < down["until"]:
            raise StorageError("cannot write 's3://b/t/x': cannot reach S3 at "
                               "http://127.0.0.1:9 (connection refused)", retryable=True)

    table = tmp_path / "t"
    cfg = _config(src, table, **{"max-consecutive-failures": 2})
    driver = RoundDriver(cfg, InProcessEngine(before_job=unreachable),
                         clock=lambda: now[0], sleep=lambda s: None)
    assert driver.run(once=True).records_read == 250  # ~9 failed rounds in 100 s, then on
    assert len(_table_rows(table)) == 200
    # an outage past the retry_timeout stops the run, saying so
    down["until"] = 10_000.0
    _write_file(src, "c.jsonl", _rows(range(300, 310)))
    driver = RoundDriver(cfg, InProcessEngine(before_job=unreachable),
                         clock=lambda: now[0], sleep=lambda s: None)
    with pytest.raises(RoundFailedError, match=r"failed 2 times in a row .*the object store "
                                               r"failed for 1[89]\d s, past its retry_timeout "
                                               r"of 180 s"):
        driver.run(once=True)
    # other failures count at once, as before
    driver = RoundDriver(cfg, InProcessEngine(before_job=_failing_jobs(100)),
                         clock=lambda: now[0], sleep=lambda s: None)
    with pytest.raises(RoundFailedError, match="failed 2 times in a row"):
        driver.run(once=True)


def test_a_non_retryable_task_error_stops_at_once_without_retrying(
    src: Path, tmp_path: Path
) -> None:
    (src / "c.jsonl").write_text('{"id": 5, "v": "x", "ts": 1}\nthis is not json\n')
    table = tmp_path / "t"
    engine = InProcessEngine()
    driver, sleeps = _driver(_config(src, table), engine)
    with pytest.raises(FileSourceError, match=r"c\.jsonl"):
        driver.run(once=True)
    assert sleeps.calls == []  # no backoff: retrying cannot help
    assert ("commit", "INFLIGHT") not in _actions(table)  # its instant was rolled back


def test_bad_records_with_tolerance_none_stop_at_once_naming_the_record(
    src: Path, tmp_path: Path
) -> None:
    _write_file(src, "c.jsonl", [{"v": "no id", "ts": 1}])
    table = tmp_path / "t"
    driver, sleeps = _driver(_config(src, table), InProcessEngine())
    with pytest.raises(BadRecordError, match=r"c\.jsonl' row 0.*\[schema\]"):
        driver.run(once=True)
    assert sleeps.calls == []


def test_a_round_failing_after_its_checkpoint_was_taken_is_retried_and_commits(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9 bug 1: the retry must checkpoint again (old runner: 'checkpoint id N is not
    greater than the last one' on every retry until the job stopped)."""
    table = tmp_path / "t"
    # _guard runs after checkpoint()
    monkeypatch.setattr(RoundDriver, "_guard",
                        _failing_guard(2, "test: commit failed after the checkpoint was taken"))
    reports: list[RoundReport] = []
    _driver(_config(src, table), InProcessEngine())[0].run(once=True, on_round=reports.append)
    first = next(r for r in reports if r.committed)
    assert (first.round_id, first.retries) == (1, 2)
    assert len(_table_rows(table)) == 200


def test_injected_failure_before_commit_is_retried(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    for k, v in faults.fault_env(FaultPoint.BEFORE_COMMIT, FaultAction.FAIL,
                                 tmp_path / "count", times=2).items():
        monkeypatch.setenv(k, v)
    reports: list[RoundReport] = []
    _driver(_config(src, table), InProcessEngine())[0].run(once=True, on_round=reports.append)
    assert next(r for r in reports if r.committed).retries == 2
    assert len(_table_rows(table)) == 200


def test_an_error_after_the_commit_landed_never_commits_twice(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    for k, v in faults.fault_env(FaultPoint.AFTER_COMMIT, FaultAction.FAIL,
                                 tmp_path / "count").items():
        monkeypatch.setenv(k, v)
    reports: list[RoundReport] = []
    _driver(_config(src, table), InProcessEngine())[0].run(once=True, on_round=reports.append)
    ids = [r.round_id for r in reports if r.committed]
    assert ids == list(range(1, len(ids) + 1))
    assert all(r.retries == 0 for r in reports)
    assert ("rollback", "COMPLETED") not in _actions(table)
    assert len(_table_rows(table)) == 200


def _landing_then_unknown(landed: bool) -> Any:
    real = WriteClient.commit
    calls = {"n": 0}

    def commit(self: WriteClient, ctx: Any, stats: Any, extra: Any = None) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            if landed:
                real(self, ctx, stats, extra)
            raise CommitOutcomeUnknownError("test: connection reset", ctx.instant_ts)
        return real(self, ctx, stats, extra)

    return commit


def test_commit_outcome_unknown_but_landed_counts_as_committed(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    monkeypatch.setattr(WriteClient, "commit", _landing_then_unknown(landed=True))
    reports: list[RoundReport] = []
    _driver(_config(src, table), InProcessEngine())[0].run(once=True, on_round=reports.append)
    first = next(r for r in reports if r.committed)
    assert (first.round_id, first.retries) == (1, 0)
    assert ("rollback", "COMPLETED") not in _actions(table)
    assert len(_table_rows(table)) == 200


def test_commit_outcome_unknown_and_not_landed_is_rolled_back_and_retried(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    monkeypatch.setattr(WriteClient, "commit", _landing_then_unknown(landed=False))
    reports: list[RoundReport] = []
    _driver(_config(src, table), InProcessEngine())[0].run(once=True, on_round=reports.append)
    first = next(r for r in reports if r.committed)
    assert (first.round_id, first.retries) == (1, 1)
    assert _actions(table).count(("rollback", "COMPLETED")) == 1
    assert len(_table_rows(table)) == 200


def test_the_guard_refuses_to_commit_when_another_writer_moved_the_checkpoint(
    src: Path, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    cfg = _config(src, table, continuous=True)
    _driver(cfg, InProcessEngine())[0].run(once=True)
    before = read_checkpoint(HudiTable.open(table))
    assert before is not None
    _write_file(src, "c.jsonl", _rows(range(300, 310)))

    def other_writer_commits(job: RoundJob) -> None:
        """Another writer (no lock: e.g. after a lock take-over) commits round N+1 first."""
        hudi = HudiTable.open(table)
        last = hudi.timeline.last_completed_commit()
        assert last is not None
        schema = hudi.timeline.read_commit_metadata(last).extra_metadata["schema"]
        ts = hudi.new_instant_time()
        inst = hudi.timeline.transition_to_inflight(hudi.timeline.create_requested(COMMIT, ts))
        stolen = PipelineCheckpoint(before.round_id + 1, before.source_type,
                                    before.source_identity, before.source)
        hudi.timeline.complete(inst, CommitMetadata({}, "UPSERT", {"schema": schema}),
                               {CHECKPOINT_KEY: stolen.encode()})

    driver, sleeps = _driver(cfg, InProcessEngine(before_job=other_writer_commits))
    expected = rf"already holds checkpoint round {before.round_id + 1}"
    with pytest.raises(PipelineError, match=expected):
        driver.run(once=True)
    assert sleeps.calls == []  # another writer: stop, do not retry
    assert 300 not in _table_rows(table)


def test_the_stored_checkpoint_names_the_source_and_refuses_another_one(
    src: Path, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    _driver(_config(src, table), InProcessEngine())[0].run(once=True)
    commit = HudiTable.open(table).timeline.last_completed_commit()
    assert commit is not None
    meta = HudiTable.open(table).timeline.read_commit_metadata(commit)
    stored = PipelineCheckpoint.decode(meta.extra_metadata[CHECKPOINT_KEY])
    assert stored.source_type == "files" and str(src) in stored.source_identity
    assert base64.b64decode(meta.extra_metadata[CHECKPOINT_KEY])[:4] == b"HLPC"
    other = tmp_path / "other"
    _write_file(other, "x.jsonl", _rows(range(3)))
    from hoodline.errors import CheckpointMismatchError

    with pytest.raises(CheckpointMismatchError, match="a table keeps the source its checkpoint"):
        _driver(_config(other, table), InProcessEngine())[0].run(once=True)



def test_a_declared_field_of_another_kind_than_the_tables_column_is_refused_at_start(
    src: Path, tmp_path: Path
) -> None:
    """[schema] declares ts a string while the table stores int64: the run stops before any
    round, naming the field and both types (it used to fail every round, then give up)."""
    table = tmp_path / "t"
    _driver(_config(src, table), InProcessEngine())[0].run(once=True)
    before = _actions(table)
    _write_file(src, "c.jsonl", [{"id": 500, "v": "x", "ts": "t7002"}])
    cfg = _config(src, table, schema={"id": "int64", "v": "string", "ts": "string"})
    with pytest.raises(ConfigError, match=r"'ts' is string, the table stores int64"):
        _driver(cfg, InProcessEngine())[0].run(once=True)
    assert _actions(table) == before
    # a narrower type of the same kind is read into the table's column, as before
    (src / "c.jsonl").unlink()
    _write_file(src, "d.jsonl", [{"id": 501, "v": "y", "ts": 7}])
    narrower = _config(src, table, schema={"id": "int64", "v": "string", "ts": "int32"})
    assert _driver(narrower, InProcessEngine())[0].run(once=True).records_read == 1
    assert _table_rows(table)[501] == "y"


def test_a_declared_nested_field_wider_than_the_tables_is_refused_at_start(
    src: Path, tmp_path: Path
) -> None:
    """[schema] widened a field inside a struct (only top-level columns widen): every round
    then failed on a value that did not fit, with pyarrow's 'Integer value ... not in range',
    five times, and the run died, nothing going to the error table (schema-evolution review)."""
    table = tmp_path / "t"
    schema = {"id": "int64", "v": "string", "ts": "int64", "info": "struct<a: int32>"}
    _write_file(src, "a.jsonl", [{"id": 1, "v": "a", "ts": 1, "info": {"a": 1}}])
    _driver(_config(src, table, schema=schema), InProcessEngine())[0].run(once=True)
    before = _actions(table)
    _write_file(src, "b.jsonl", [{"id": 2, "v": "b", "ts": 2, "info": {"a": 3_000_000_000}}])
    wider = _config(src, table, schema={**schema, "info": "struct<a: int64>"})
    with pytest.raises(ConfigError, match=r"'info\.a' is int64, the table stores int32 "
                                          r"\(fields inside nested columns do not widen\)"):
        _driver(wider, InProcessEngine())[0].run(once=True)
    assert _actions(table) == before


def test_a_json_line_without_its_key_reaches_the_error_table_as_written(
    src: Path, tmp_path: Path
) -> None:
    """errors.tolerance = all: the reader rejects a line whose key or ordering field is null
    or missing, keeping its bytes (extra fields, spacing) and line number; its neighbours
    are written."""
    lines = [b'{"id": 500, "v": "a", "ts": 1}',
             b'{ "v" : "nokey", "ts": 2, "extra": [1, 2, 3] }',
             b'{"id": 501, "v": "b", "ts": null}',
             b'{"id": 502, "v": "c", "ts": 3}']
    (src / "c.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    table = tmp_path / "t"
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": "jsonl"}},
        "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts"},
        "schema": {"id": "int64", "v": "string", "ts": "int64"},
        "errors": {"tolerance": "all"},
        "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
    })
    assert cfg.errors.table_path.endswith("t_errors")
    _driver(cfg, InProcessEngine())[0].run(once=True)
    rows = _table_rows(table)
    assert rows[500] == "a" and rows[502] == "c" and 501 not in rows
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).sort_by("row").to_pylist()
    bad = [(e["value"], e["reason"], e["detail"].split(":")[0]) for e in errors
           if e["file"].endswith("c.jsonl")]
    assert bad == [(lines[1], "missing_key", "line 2"), (lines[2], "missing_key", "line 3")]


def _csv_config(src: Path, table: Path, options: dict[str, object] | None = None
                ) -> PipelineConfig:
    """The CSV files of ``src`` into ``table`` with errors.tolerance = all, one round."""
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": "csv", **(options or {})}},
        "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts"},
        "schema": {"id": "int64", "v": "string", "ts": "int64"},
        "errors": {"tolerance": "all"},
        "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
    })


def test_a_csv_row_whose_value_does_not_convert_reaches_the_error_table_alone(
    src: Path, tmp_path: Path
) -> None:
    """errors.tolerance = all: a CSV value that is not of its declared type costs only its
    row (to the error table with its CSV text, reason and row number); the file's other rows
    are written."""
    (src / "c.csv").write_text("id,v,ts\n500,a,1\n501,b,two\n502,c,3\n,nokey,4\n")
    table = tmp_path / "t"
    cfg = _csv_config(src, table)
    _driver(cfg, InProcessEngine())[0].run(once=True)
    rows = _table_rows(table)
    assert rows[500] == "a" and rows[502] == "c" and 501 not in rows
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).to_pylist()
    bad = [(e["value"], e["reason"], e["detail"]) for e in errors if e["file"].endswith("c.csv")]
    assert sorted(bad) == [
        (b'"","nokey","4"', "missing_key", "row 3 (counted from 0): field(s) id missing or "
         "null (every record needs its record key, partition and ordering fields)"),
        (b'"501","b","two"', "wrong_type",
         "row 1 (counted from 0): column 'ts' holds 'two', which does not convert to int64")]
    # the same numbers
    assert sorted(e["row"] for e in errors if e["file"].endswith("c.csv")) == [1, 3]


def test_a_csv_row_with_the_wrong_number_of_fields_reaches_the_error_table_alone(
    src: Path, tmp_path: Path
) -> None:
    """errors.tolerance = all: a row with too few fields goes to the error table with its
    text and its position; empty lines do not count; the file's other rows are written."""
    (src / "c.csv").write_text("id,v,ts\n500,a,1\n\n501,short\n502,c,3\n")
    table = tmp_path / "t"
    cfg = _csv_config(src, table)
    _driver(cfg, InProcessEngine())[0].run(once=True)
    rows = _table_rows(table)
    assert rows[500] == "a" and rows[502] == "c" and 501 not in rows
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).to_pylist()
    assert [(e["value"], e["reason"], e["row"], e["detail"]) for e in errors
            if e["file"].endswith("c.csv")] == [
        (b"501,short", "unparseable", 1,
         "row 1 (counted from 0): 2 field(s) where the file's rows have 3")]


def test_a_csv_file_rejected_after_some_rows_says_how_many_it_kept(
    src: Path, tmp_path: Path
) -> None:
    """Bytes that are not UTF-8 reject the file (no row of it can be isolated); rows of it read
    before (whole blocks of read.block-size) stay in the table, and the error record says how
    many. A row with the wrong number of fields costs only itself."""
    good = "".join(f"{i},v{i},{i}\n" for i in range(500, 700))
    (src / "c.csv").write_bytes(("id,v,ts\n" + good + "701,short\n").encode()
                                + b"702,\xff\xfe,3\n")
    os.utime(src / "c.csv", ns=(_CHANGED_AT_NS, _CHANGED_AT_NS))  # the errors' day
    table = tmp_path / "t"
    cfg = _csv_config(src, table, {"read.block-size": 1024, "read.use-threads": False})
    _driver(cfg, InProcessEngine())[0].run(once=True)
    kept = [k for k in _table_rows(table) if 500 <= k < 700]
    assert 0 < len(kept) < 200
    errors = [e for e in read_snapshot(HudiTable.open(cfg.errors.table_path)).to_pylist()
              if e["file"].endswith("c.csv")]
    assert [(e["reason"], e["day"]) for e in errors] == [("unreadable_file", "2024-03-01")]
    assert errors[0]["detail"].endswith(f"; {len(kept)} row(s) of it read before the error are "
                                        "kept")


def test_the_file_sources_own_tolerance_is_refused_in_a_pipeline(src: Path, tmp_path: Path) -> None:
    """[errors] tolerance decides for the source too; a second setting in [source.options]
    used to win silently."""
    doc = {
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": "jsonl", "errors.tolerance": "none"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64", "v": "string", "ts": "int64"},
        "errors": {"tolerance": "all"},
    }
    with pytest.raises(ConfigError, match=r"\[source.options\] \(files source\): "
                       r"errors.tolerance = 'none': .*\[errors\] tolerance \(now 'all'\).*"
                       r"remove it from \[source.options\]"):
        config_from_dict(doc)


def test_a_round_followed_by_an_inline_compaction_says_so(src: Path, tmp_path: Path) -> None:
    """Merge-on-read: the round whose writer compacted the table reports the compaction's
    commit, and its progress line says so (it used to be an INFO log line only)."""
    table = tmp_path / "t"
    cfg = _config(src, table, table_options={
        "type": "MERGE_ON_READ", "index": "BUCKET",
        "options": {"hoodie.datasource.write.payload.class":
                    "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
                    "hoodie.compact.inline.max.delta.commits": 2,
                    "hoodline.compaction.log-size-ratio": 0}})
    reports: list[RoundReport] = []
    _driver(cfg, InProcessEngine())[0].run(once=True, on_round=reports.append)
    compacted = [r.compaction for r in reports if r.compaction]
    done = [i.timestamp for i in HudiTable.open(table).timeline.completed_commits()
            if i.action == "commit"]
    assert compacted and compacted == done
    lines = [format_round_line(r) for r in reports if r.compaction]
    assert [line.rsplit("; compaction committed: ", 1)[1] for line in lines] == compacted
    assert not any("compaction" in format_round_line(r) for r in reports if not r.compaction)
    # the metrics say so too: compactions, the services' time, the backlog (none left)
    from hoodline.pipeline.metrics import PipelineMetrics

    metrics = PipelineMetrics("t", "files")
    for r in reports:
        metrics.observe_round(r)
    committed = [r for r in reports if r.committed]
    assert all(r.services_seconds > 0 for r in committed) and not any(
        r.services_failed for r in committed)
    reg = metrics.registry
    labels = {"table": "t", "source": "files"}
    assert reg.get_sample_value("hoodline_compactions_total", labels) == len(compacted)
    assert reg.get_sample_value("hoodline_round_phase_seconds_count",
                                {**labels, "phase": "services"}) == len(committed)
    pending = HudiTable.open(table).timeline.pending(["compaction"])
    assert reg.get_sample_value("hoodline_pending_compactions", labels) == len(pending)
    assert reg.get_sample_value("hoodline_table_service_failures_total", labels) == 0


@pytest.mark.parametrize("table_type", list(TableType))
def test_a_late_delete_keeps_the_newer_row_on_both_table_types(
    tmp_path: Path, table_type: TableType
) -> None:
    """DefaultHoodieRecordPayload, a delete-flagged record older than the stored one: copy-on-
    write kept the row, merge-on-read deleted it (its delete blocks said "natural order"). Now
    a merge-on-read delete block carries each delete's ordering value, as Java writes for
    upserts that delete, and hoodline and hudi-rs keep the newer row on both types."""
    root, table = tmp_path / "in", tmp_path / "t"
    _write_file(root, "a.jsonl", [{"id": i, "v": f"v{i}", "ts": 10} for i in (1, 2, 3)])
    cfg = _config(root, table, table_options={
        "type": table_type.config_text, "index": "BUCKET", "delete-field": "deleted"},
        schema={"id": "int64", "v": "string", "ts": "int64", "deleted": "bool"})
    _driver(cfg, InProcessEngine())[0].run(once=True)
    _write_file(root, "b.jsonl", [{"id": 1, "ts": 5, "deleted": True},  # older than stored
                                  {"id": 2, "ts": 12, "deleted": True}])
    _driver(cfg, InProcessEngine())[0].run(once=True)
    assert _table_rows(table) == {1: "v1", 3: "v3"}
    assert_hudi_matches_hoodline(HudiTable.open(table))


def _files_config(src: Path, table: Path, tolerance: str, fmt: str = "jsonl",
                  options: dict[str, object] | None = None) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": fmt, **(options or {})}},
        "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts"},
        "schema": {"id": "int64", "v": "string", "ts": "int64"},
        "errors": {"tolerance": tolerance},
        "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
    })


def test_a_file_a_reader_task_cannot_see_is_no_deleted_file(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Input on a node-local disk of a cluster: the driver discovered the files, executors
    elsewhere found nothing, and with errors.tolerance = all the files went to the error table
    as "deleted after it was discovered", never to be read. The driver still sees them, so
    they were not deleted: the run stops saying the executors do not see the path."""
    from hoodline.connectors.files import formats

    real = formats.stat

    def executor_stat(path: str) -> tuple[int, int]:
        if path.endswith("b.jsonl"):
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(formats, "stat", executor_stat)  # the tasks' view, not the driver's
    table = tmp_path / "t"
    with pytest.raises(FileSourceError, match=r"reader task \d did not find file '.*b.jsonl', "
                                              r"which the driver sees: the executors do not see "
                                              r"the source path"):
        _driver(_files_config(src, table, "all"), InProcessEngine())[0].run(once=True)
    assert not (tmp_path / "t_errors").exists() or read_snapshot(
        HudiTable.open(tmp_path / "t_errors")).num_rows == 0


#: 2024-03-01T12:00:00Z, the modification time given to a changed file
_CHANGED_AT_NS = 1_709_294_400 * 10**9


def _change(path: Path) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"id": 999, "v": "late", "ts": 9}) + "\n")
    os.utime(path, ns=(_CHANGED_AT_NS, _CHANGED_AT_NS))


def test_a_file_changed_after_it_was_read_reaches_the_error_table_once(
    src: Path, tmp_path: Path
) -> None:
    """errors.tolerance = all: lines appended to a file already read are not read (a file is
    read once); the change is an error record, committed in a round of its own when nothing
    else is read, dated by the file's new modification time, and recorded once."""
    table = tmp_path / "t"
    cfg = _files_config(src, table, "all")
    assert _driver(cfg, InProcessEngine())[0].run(once=True).records_written == 200
    _change(src / "a.jsonl")
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.commits, summary.records_read, summary.error_records) == (1, 0, 1)
    assert 999 not in _table_rows(table)
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).to_pylist()
    path = str(src / "a.jsonl")
    assert [(e["error_id"], e["file"], e["row"], e["value"], e["reason"], e["day"])
            for e in errors] == [
        (f"file/{path}@{_CHANGED_AT_NS}", path, None, None, "file_changed", "2024-03-01")]
    assert errors[0]["detail"].startswith("file changed after it was read (size ")
    again = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (again.commits, again.error_records) == (0, 0)
    assert len(read_snapshot(HudiTable.open(cfg.errors.table_path))) == 1


def test_a_file_changed_after_it_was_read_stops_a_strict_pipeline(
    src: Path, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    cfg = _files_config(src, table, "none")
    _driver(cfg, InProcessEngine())[0].run(once=True)
    commits = _actions(table)
    _change(src / "a.jsonl")
    with pytest.raises(FileSourceError, match=r"a\.jsonl': file changed after it was read"):
        _driver(cfg, InProcessEngine())[0].run(once=True)
    assert _actions(table) == commits


def test_a_file_whose_splits_cannot_be_planned_reaches_the_error_table(
    tmp_path: Path,
) -> None:
    """A Parquet file larger than split.target-size is cut by its footer when discovered; an
    unreadable footer rejects it there, before any reader: still an error record."""
    src = tmp_path / "in"
    src.mkdir()
    rows = pa.table({"id": list(range(2000)), "v": ["x" * 20] * 2000, "ts": [1] * 2000})
    pq.write_table(rows, src / "good.parquet")
    pq.write_table(rows, src / "cut.parquet", row_group_size=200)
    data = (src / "cut.parquet").read_bytes()
    (src / "cut.parquet").write_bytes(data[:-20])
    os.utime(src / "cut.parquet", ns=(_CHANGED_AT_NS, _CHANGED_AT_NS))
    cfg = _files_config(src, tmp_path / "t", "all", "parquet", {"split.target-size": 1024})
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.records_written, summary.error_records) == (2000, 1)
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).to_pylist()
    path = str(src / "cut.parquet")
    assert [(e["error_id"], e["file"], e["row"], e["reason"], e["day"]) for e in errors] == [
        (f"file/{path}/0", path, 0, "unreadable_file", "2024-03-01")]
    assert "footer" in errors[0]["detail"]


def test_a_folder_of_small_files_is_read_in_one_round_spread_over_the_readers(
    tmp_path: Path,
) -> None:
    """Each reader took one file per round: 20 small files took 10 rounds (and a folder of
    10,000 took 5,000). Readers now take files up to their share of round.max-bytes, the
    waiting files spread over them."""
    root, table = tmp_path / "in", tmp_path / "t"
    for i in range(20):
        _write_file(root, f"f{i:02d}.jsonl", _rows(range(i * 5, i * 5 + 5)))
    reports: list[RoundReport] = []
    _driver(_config(root, table, **{"reader-parallelism": 2}), InProcessEngine())[0].run(
        once=True, on_round=reports.append)
    committed = [r for r in reports if r.committed]
    assert len(committed) == 1 and committed[0].records_read == 100
    assert len(_table_rows(table)) == 100
    # ... and round.max-bytes still bounds a round: about 4 files' bytes a round, 2 per reader
    # (a reader takes files while it holds less than its share: 3 when they are smaller)
    size = max(p.stat().st_size for p in root.iterdir())
    reports = []
    _driver(_config(root, tmp_path / "t2", **{"reader-parallelism": 2,
                                              "round": {"max-bytes": 4 * size}}),
            InProcessEngine())[0].run(once=True, on_round=reports.append)
    read = [r.records_read for r in reports if r.committed]
    assert sum(read) == 100 and len(read) >= 4 and max(read) <= 30, read
    # the backlog in files is reported (the file source's lag in records is unknown): the
    # files not yet handed out after each round, down to none
    committed = [r for r in reports if r.committed]
    waiting = [r.files_waiting for r in committed]
    assert waiting[-1] == 0 and all(w is not None for w in waiting), waiting
    assert waiting == sorted(waiting, reverse=True) and waiting[0] > 0, waiting  # type: ignore[type-var]
    handed = [20 - w for w in waiting]  # type: ignore[operator]
    assert [round(n * 5) for n in handed] == list(itertools.accumulate(read)), (handed, read)
    assert format_round_line(committed[0]).endswith(f" waiting={waiting[0]} files")


def test_a_schema_that_leaves_out_a_column_of_the_table_is_refused_naming_it(
    src: Path, tmp_path: Path
) -> None:
    """It was refused as "column 'v' (string) of the table is missing from the data": the data
    was fine, the [schema] had left the column out (schema review)."""
    table = tmp_path / "t"
    _driver(_config(src, table), InProcessEngine())[0].run(once=True)
    narrowed = _config(src, table, schema={"id": "int64", "ts": "int64"})
    with pytest.raises(ConfigError, match=r"\[schema\] leaves out column\(s\) 'v' of table "
                       r"'.*t': a table never loses a column"):
        _driver(narrowed, InProcessEngine())[0].run(once=True)


def test_a_round_that_ran_out_of_disk_says_which_disks_to_look_at(
    src: Path, tmp_path: Path
) -> None:
    """A full disk failed the rounds with "OSError: [Errno 28] Error writing bytes to file.
    Detail: [errno 28] No space left on device": no file, no disk (large-table review)."""
    table = tmp_path / "t"

    def full(job: RoundJob) -> None:
        raise EngineJobError("the round's Spark job failed: OSError: [Errno 28] Error writing "
                             "bytes to file. Detail: [errno 28] No space left on device")

    driver, _ = _driver(_config(src, table), InProcessEngine(before_job=full))
    with pytest.raises(RoundFailedError, match=rf"No space left on device -- a disk is full: "
                       rf"the table's \({table}\) or the temporary folder's"):
        driver.run(once=True)


def test_a_round_of_many_tiny_files_warns_once_naming_the_partition_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A timestamp to the second as the partition field made 10,000 folders of one record
    each in one round, without a word, and every later round listed them (large-table
    review). (The threshold, 1,000 files, is lowered here to keep the test small.)"""
    from hoodline.pipeline import driver as driver_module

    monkeypatch.setattr(driver_module, "TINY_FILES_WARNING", 20)
    root = tmp_path / "in"
    _write_file(root, "a.jsonl", _rows(range(0, 30)))
    _write_file(root, "b.jsonl", _rows(range(30, 60)))
    by_id = _config(root, tmp_path / "t", table_options={"partition-fields": ["id"]},
                    **{"round": {"max-records": 30, "min-interval": 0}})
    with caplog.at_level("WARNING", logger="hoodline"):
        _driver(by_id, InProcessEngine())[0].run(once=True)
    warned = [r.getMessage() for r in caplog.records if "files for" in r.getMessage()]
    assert len(warned) == 1, warned  # once a run
    assert ("wrote 30 files for 1.0 of its records each on average: check "
            "table.partition-fields ['id']") in warned[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="hoodline"):
        _driver(_config(root, tmp_path / "t2"), InProcessEngine())[0].run(once=True)
    assert not [r for r in caplog.records if "files for" in r.getMessage()]


def _taken_over_during_the_round(table: Path) -> tuple[Any, list[str]]:
    """A ``before_job`` hook: while the round's instant is started (the pipeline "frozen" past
    its lock's expiry), a WriteClient ('backfill') takes the lock over, rolls the instant back,
    writes one row and closes; the job then runs and its tasks write their files. Returns the
    hook and the list the round's instant time is put in."""
    instants: list[str] = []

    def hook(job: RoundJob) -> None:
        if instants:
            return
        instants.append(job.spec.ctx.instant_ts)
        lock = table / ".hoodie" / ".hoodline" / "writer.lock"
        old = time.time() - 120
        os.utime(lock, (old, old))
        with WriteClient(HudiTable.open(table), {
                "hoodline.write.lock.owner": "backfill",
                "hoodie.datasource.write.payload.class":
                    "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}) as c:
            c.upsert(pa.table({"id": pa.array([999], pa.int64()), "v": ["backfill"],
                               "ts": pa.array([9], pa.int64())}))

    return hook, instants


#: the pipeline's heartbeat thread does not beat within a test (30 s); its lock lives 60 s
_SLOW_HEARTBEAT = {"options": {
    "hoodie.datasource.write.payload.class":
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    "hoodline.writer.lock.heartbeat.seconds": 30, "hoodline.writer.lock.expiry.seconds": 60}}


def test_a_pipeline_that_lost_its_lock_ends_with_one_line_saying_who_took_it(
    src: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A pipeline whose lock was taken over (paused past the expiry, or a contender with a
    shorter expiry) ended with a false "rollback ... failed (tried again before the next
    round)" warning and "the write client ... is not open; use 'with WriteClient(...)'" or
    "lost the lock (now held by nobody)": the error says who took the lock and that the
    pipeline stopped, and nothing claims a retry."""
    table = tmp_path / "t"
    hook, instants = _taken_over_during_the_round(table)
    cfg = _config(src, table, table_options=_SLOW_HEARTBEAT)
    driver, sleeps = _driver(cfg, InProcessEngine(before_job=hook))
    with caplog.at_level("WARNING", logger="hoodline"), \
            pytest.raises(WriterLockError) as err:
        driver.run(once=True)
    msg = str(err.value)
    assert "lost the lock on table" in msg and "writer 'backfill' (pid " in msg, msg
    assert "older than the holder's expiry of 60s" in msg
    assert f"this pipeline stopped without committing round 1 (instant {instants[0]})" in msg
    assert "not open" not in msg
    assert "tried again" not in caplog.text and "rollback of instant" not in caplog.text
    assert sleeps.calls == []  # not retried


def test_a_pipeline_that_lost_its_lock_deletes_what_its_tasks_wrote_for_the_round(
    src: Path, tmp_path: Path
) -> None:
    """The round's tasks wrote their files after the new holder had rolled the round's instant
    back; left behind, readers counted them as committed once the active timeline started after
    that instant (here at once: it was the table's first), and the rolled-back round was read.
    Once its tasks stopped, the pipeline deletes them."""
    table = tmp_path / "t"
    hook, instants = _taken_over_during_the_round(table)
    cfg = _config(src, table, table_options=_SLOW_HEARTBEAT)
    with pytest.raises(WriterLockError, match="writer 'backfill'"):
        _driver(cfg, InProcessEngine(before_job=hook))[0].run(once=True)
    left = [p.name for p in table.rglob("*") if instants[0] in p.name and ".hoodie" not in p.parts]
    assert left == []
    assert not (table / ".hoodie" / ".temp" / instants[0]).exists()
    assert _table_rows(table) == {999: "backfill"}


def test_a_checkpoint_another_writers_archival_moved_away_is_resumed_from_the_archive(
    src: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java writers' archival (and hoodline's before it kept the newest checkpoint) archives a
    pipeline's last checkpoint behind more than 'hoodie.keep.max.commits' commits of theirs:
    the next run started over as on a new table, reading everything again, with a warning
    (upgrade review; third code review of stop 58). It resumes from the archived checkpoint."""
    from hoodline.table import archive

    table = tmp_path / "t"
    cfg = _config(src, table)
    _driver(cfg, InProcessEngine())[0].run(once=True)  # makes the table
    # archival as an older hoodline did it: the checkpoint commit not kept
    monkeypatch.setattr(archive, "_newest_checkpoint", lambda timeline: None)
    with WriteClient(HudiTable.open(table), {
            "hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 4,
            "hoodie.cleaner.commits.retained": 2,
            "hoodie.datasource.write.payload.class":
                "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}) as client:
        for i in range(8):  # another writer's commits, none with a checkpoint
            client.upsert(pa.table({"id": [1000 + i], "v": ["x"], "ts": [9]}))
    assert read_checkpoint(HudiTable.open(table)) is None  # archived
    with caplog.at_level("WARNING", logger="hoodline.pipeline.driver"):
        again = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert "which another writer's archival moved to the archived timeline; resuming from it" \
        in caplog.text
    assert again.records_read == 0  # every file was read before
    _write_file(src, "c.jsonl", _rows(range(500, 510)))
    more = _driver(cfg, InProcessEngine())[0].run(once=True)  # and on from its own checkpoint
    assert more.records_read == 10
    assert read_checkpoint(HudiTable.open(table)) is not None


def test_a_round_refuses_a_table_whose_newest_base_file_was_deleted(
    src: Path, tmp_path: Path
) -> None:
    """(review finding 1) The round merged into the previous version and committed the loss."""
    table = tmp_path / "t"
    _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(once=True)
    last = HudiTable.open(table).timeline.completed_commits()[-1].timestamp
    (newest,) = [f for f in table.glob("*.parquet") if last in f.name][:1]
    newest.unlink()
    _write_file(src, "c.jsonl", _rows(range(190, 210), version=3))
    with pytest.raises(TableError, match=rf"'{newest.name}' is missing; commit {last}"):
        _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(once=True)
    assert HudiTable.open(table).timeline.completed_commits()[-1].timestamp == last


def test_an_empty_last_commit_stops_the_pipeline_instead_of_replaying_its_round(
    src: Path, tmp_path: Path
) -> None:
    """(review finding 6) Read as "nothing written", it moved the checkpoint back a round."""
    table = tmp_path / "t"
    _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(once=True)
    last = HudiTable.open(table).timeline.completed_commits()[-1]
    done = table / ".hoodie" / last.file_name
    done.write_bytes(b"")
    _write_file(src, "c.jsonl", _rows(range(190, 210), version=3))
    with pytest.raises(TableError, match=rf"'{done}' is empty"):
        _driver(_config(src, table, continuous=True), InProcessEngine())[0].run(once=True)
    assert done.read_bytes() == b""


def test_the_error_table_is_locked_with_the_tables_lock_settings(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error table's writer was made with default options, so its lock kept a 60-s expiry
    whatever [table.options] said: a writer that took over the table's stale lock (3 s) then
    stopped half-way at the error table's (chaos review, 2 of 2)."""
    import hoodline.pipeline.driver as driver_module

    made: list[tuple[str, Any]] = []
    real = driver_module.WriteClient

    def spy(table: Any, options: Any = None) -> Any:
        client = real(table, options)
        made.append((str(client.table.base_path), client.options))
        return client

    monkeypatch.setattr(driver_module, "WriteClient", spy)
    _write_file(src, "a.jsonl", _rows(range(3)))
    table = tmp_path / "t"
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": "jsonl"}},
        "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts",
                  "options": {"hoodline.writer.lock.expiry.seconds": 3,
                              "hoodline.writer.lock.heartbeat.seconds": 0.5,
                              "hoodline.write.lock.owner": "ingest-7"}},
        "schema": {"id": "int64", "v": "string", "ts": "int64"},
        "errors": {"tolerance": "all"},
        "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
    })
    _driver(cfg, InProcessEngine())[0].run(once=True)
    (errors,) = [o for path, o in made if path.endswith("t_errors")]
    assert (errors.lock_expiry_seconds, errors.lock_heartbeat_seconds, errors.lock_owner) == (
        3.0, 0.5, "ingest-7")


def test_an_engine_that_died_while_rounds_were_idle_stops_the_run(
    src: Path, tmp_path: Path
) -> None:
    """Spark's JVM killed while the source had nothing new: the run went on reporting idle
    rounds for minutes, and failed only once data came (chaos review). Idle rounds ask the
    engine whether it is alive."""
    from hoodline.errors import SparkRuntimeError

    class DiesWhenIdle(InProcessEngine):
        checks = 0

        def check_alive(self) -> None:
            DiesWhenIdle.checks += 1
            if DiesWhenIdle.checks >= 3:
                raise SparkRuntimeError("Spark's JVM (pid 1) is gone (killed by signal 9)")

    import threading

    stop = threading.Event()
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        reports.append(report)
        if len(reports) >= 30:  # the old driver went on forever: end it
            stop.set()

    with pytest.raises(SparkRuntimeError, match="is gone"):
        _driver(_config(src, tmp_path / "t", continuous=True), DiesWhenIdle())[0].run(
            on_round=on_round, stop=stop)
    assert DiesWhenIdle.checks == 3 and len(reports) < 30
    assert _table_rows(tmp_path / "t")  # the data before was committed


def test_a_raw_error_of_a_dead_engine_is_named_as_that(src: Path, tmp_path: Path) -> None:
    """A round failing with py4j's ConnectionRefusedError (the JVM gone) was retried with that
    text: the engine is asked, and its answer stops the run."""
    from hoodline.errors import SparkRuntimeError

    class Dead(InProcessEngine):
        def run_round(self, job: Any) -> Any:
            raise ConnectionRefusedError(111, "Connection refused")

        def check_alive(self) -> None:
            raise SparkRuntimeError("Spark's JVM (pid 1) is gone (exit code 137)")

    failures: list[tuple[str, bool]] = []
    with pytest.raises(SparkRuntimeError, match="is gone") as info:
        _driver(_config(src, tmp_path / "t"), Dead())[0].run(
            once=True, on_failure=lambda exc, retried: failures.append((str(exc), retried)))
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    assert failures == [("Spark's JVM (pid 1) is gone (exit code 137)", False)]


@pytest.mark.parametrize("fmt", ["protobuf", "avro"])
def test_a_key_missing_from_the_subject_names_the_options_that_choose_the_schema(
    tmp_path: Path, fmt: str
) -> None:
    """With a Protobuf file of several messages the first is read unless
    source.schema-message names another: the error named only the subject and version
    options (Protobuf review)."""
    from hoodline.errors import ConfigError
    from hoodline.pipeline.driver import _record_schema

    config = config_from_dict({
        "source": {"type": "kafka", "format": fmt,
                   "options": {"topic": "t", "properties": {"bootstrap.servers": "127.0.0.1:9"},
                               "schema.registry": {"url": "http://127.0.0.1:9"}}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
    })
    with pytest.raises(ConfigError) as raised:
        _record_schema(config, pa.schema([("zzz", pa.int64())]), None)  # type: ignore[arg-type]
    text = str(raised.value)
    assert "field(s) 'id' named in [table] are not in the Schema Registry subject's schema" in text
    assert ("source.schema-message (the message of the file the topic holds" in text) == (
        fmt == "protobuf")


class _Killed(BaseException):
    """Stands for a kill -9 of the pipeline (no rollback in the process)."""


def test_a_round_killed_between_the_error_tables_commit_and_its_own_leaves_no_error_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Error review: the error table commits a round's bad records before the target commits
    the round. Killed in between and restarted with a [schema] that reads the record, the
    replay wrote it to the table while the error table still listed it as bad; the restart
    now rolls back the error commit of the round whose instant it rolled back."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text('{"id": 1, "v": 7, "ts": 1}\n'
                                 '{"id": 2, "v": 2.5, "ts": 1}\n')
    table = tmp_path / "t"

    def config(v_type: str) -> PipelineConfig:
        return config_from_dict({
            "source": {"type": "files", "format": "json",
                       "options": {"path": str(src), "format": "jsonl"}},
            "table": {"path": str(table), "record-key": ["id"], "precombine-field": "ts"},
            "schema": {"id": "int64", "v": v_type, "ts": "int64"},
            "errors": {"tolerance": "all"},
            "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
        })

    def killed(t: HudiTable, round_id: int) -> None:  # after the error commit, before the target's
        raise _Killed

    cfg = config("int64")
    with monkeypatch.context() as m:
        m.setattr(RoundDriver, "_guard", staticmethod(killed))
        m.setattr(RoundDriver, "_rollback", staticmethod(lambda run, ts: None))
        with pytest.raises(_Killed):
            _driver(cfg, InProcessEngine())[0].run(once=True)
    errors = HudiTable.open(cfg.errors.table_path)
    assert [e["error_id"] for e in read_snapshot(errors).to_pylist()] == [
        f"file/{src / 'a.jsonl'}/1"]
    # the user declares v as it is sent: a double
    cfg = config("double")
    _driver(cfg, InProcessEngine())[0].run(once=True)
    assert sorted(read_snapshot(HudiTable.open(table)).column("id").to_pylist()) == [1, 2]
    errors = HudiTable.open(cfg.errors.table_path)
    assert read_snapshot(errors).num_rows == 0
    assert [i.action for i in errors.timeline.completed()] == ["rollback"]


def test_a_failed_round_takes_its_error_commit_with_it_before_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round whose target commit fails after the error table committed its bad records: the
    rollback of its instant rolls back that error commit too (the retry writes them again)."""
    src = tmp_path / "in"
    _write_file(src, "a.jsonl", _rows(range(3)))
    (src / "c.jsonl").write_text('{"id": 500, "v": "a", "ts": "late"}\n')
    table = tmp_path / "t"
    cfg = _tolerant(_config(src, table))
    monkeypatch.setattr(RoundDriver, "_guard",
                        _failing_guard(1, "test: the target's commit failed"))
    _driver(cfg, InProcessEngine())[0].run(once=True)
    errors = HudiTable.open(cfg.errors.table_path)
    assert [e["error_id"] for e in read_snapshot(errors).to_pylist()] == [
        f"file/{src / 'c.jsonl'}/0"]
    done = errors.timeline.completed()
    assert [i.action for i in done].count("rollback") == 1
    assert len(errors.timeline.completed_commits()) == 1


def test_files_waiting_counts_the_files_readers_hold_and_have_not_read_to_the_end(
    tmp_path: Path
) -> None:
    """Metrics review: the backlog was the files not yet handed to a reader, counted before
    the round; files readers held and had not finished were not in it (0 with 16 unread)."""
    src = tmp_path / "in"
    for f in range(10):
        _write_file(src, f"f{f}.jsonl", _rows(range(f * 10, f * 10 + 10)))
    cfg = _config(src, tmp_path / "t", round={"max-records": 25, "min-interval": 0})
    reports: list[RoundReport] = []
    _driver(cfg, InProcessEngine())[0].run(once=True, on_round=reports.append)
    committed = [r for r in reports if r.committed]
    assert sum(r.records_read for r in committed) == 100 and len(committed) >= 4
    read = 0
    for r in committed:
        read += r.records_read
        assert r.files_waiting is not None
        # 10 records a file: at least the files the records left are in; at most the files
        # not read to their end, each counted once (two readers: each may have one partly read)
        assert -(-(100 - read) // 10) <= r.files_waiting <= min(10, 11 - read // 10)
    assert committed[0].files_waiting >= 7 and committed[-1].files_waiting == 0


def test_error_rows_of_a_file_read_in_pieces_name_the_file_and_its_record_number(
    tmp_path: Path,
) -> None:
    """Error review: a file larger than split.target-size is read in pieces; its error rows
    named the piece (`big.jsonl#bytes[7168:8192]`) as their file and counted rows from the
    piece's start, so `where file = ...` found nothing and two records shared a number. Now
    the file and its record number, as for a file read whole (blank lines not counted)."""
    src = tmp_path / "in"
    src.mkdir()
    lines = [json.dumps({"id": i, "v": "x" * 20, "ts": 1}) for i in range(300)]
    lines[150] = json.dumps({"id": 150, "v": "x", "ts": "late"})
    lines[299] = json.dumps({"id": 299, "v": "x", "ts": "later"})
    lines.insert(100, "   ")  # blank: no record number
    (src / "big.jsonl").write_text("\n".join(lines) + "\n")
    cfg = _files_config(src, tmp_path / "t", "all", "jsonl", {"split.target-size": 1024})
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.records_written, summary.error_records) == (298, 2)
    path = str(src / "big.jsonl")
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).sort_by("row").to_pylist()
    assert [(e["error_id"], e["file"], e["row"], e["detail"].split(":")[0]) for e in errors] == [
        (f"file/{path}/150", path, 150, "line 152"), (f"file/{path}/299", path, 299, "line 301")]

    pq_src = tmp_path / "pq"
    pq_src.mkdir()
    ts = [1] * 1000
    ts[10], ts[650] = 2**40, 2**41  # beyond the declared int32
    pq.write_table(pa.table({"id": list(range(1000)), "v": ["x" * 20] * 1000, "ts": ts}),
                   pq_src / "big.parquet", row_group_size=200)
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(pq_src), "format": "parquet",
                               "split.target-size": 1024}},
        "table": {"path": str(tmp_path / "t2"), "record-key": ["id"], "precombine-field": "ts"},
        "schema": {"id": "int64", "v": "string", "ts": "int32"},
        "errors": {"tolerance": "all"},
        "runtime": {"round": {"max-records": 10000, "min-interval": 0}},
    })
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.records_written, summary.error_records) == (998, 2)
    path = str(pq_src / "big.parquet")
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).sort_by("row").to_pylist()
    assert [(e["file"], e["row"], e["reason"]) for e in errors] == [
        (path, 10, "wrong_type"), (path, 650, "wrong_type")]


@pytest.mark.parametrize("small_file_limit", [None, 1])
def test_a_days_error_file_takes_later_rounds_rows_only_while_it_is_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_file_limit: int | None
) -> None:
    """Error review: the error table had one bucket per day, so every round with bad records
    rewrote the day's whole file (10 -> 109 MB over 10 rounds, 571 MB on disk with the
    versions cleaning keeps). Its rows now fill the day's small files (BLOOM index) and a file
    past the limit is left alone: with a limit of 1 byte no file is small, and each round's
    rows go to a file of their own."""
    if small_file_limit is not None:
        monkeypatch.setattr(driver_module, "ERROR_SMALL_FILE_LIMIT", small_file_limit)
    src = tmp_path / "in"
    for f in range(3):
        rows = [json.dumps(r) for r in _rows(range(f * 10, f * 10 + 9))]
        src.mkdir(exist_ok=True)
        (src / f"f{f}.jsonl").write_text("\n".join([*rows, '{"id": 99, "ts": "bad"}']) + "\n")
        os.utime(src / f"f{f}.jsonl", ns=(_CHANGED_AT_NS, _CHANGED_AT_NS))  # one day
    cfg = _tolerant(_config(src, tmp_path / "t", **{
        "reader-parallelism": 1, "round": {"max-records": 10, "min-interval": 0}}))
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.records_written, summary.error_records) == (27, 3)
    errors = HudiTable.open(cfg.errors.table_path)
    assert errors.config.index_type == IndexType.BLOOM
    assert len(errors.timeline.completed_commits()) == 3
    groups = {fid for fid, _tok, _ts in (fs_view.parse_base_file_name(p.name)
                                         for p in Path(cfg.errors.table_path).rglob("*.parquet"))}
    assert len(groups) == (3 if small_file_limit == 1 else 1)
    assert read_snapshot(errors).num_rows == 3
    assert_hudi_matches_hoodline(errors)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_file_record_refused_for_its_key_or_partition_keeps_what_was_read(
    tmp_path: Path, fmt: str
) -> None:
    """Error review: a JSON line refused after it was read (an empty key, a partition value
    that cannot be a folder) kept its parsed fields re-written as JSON (an undeclared field
    lost, the spacing changed) and a CSV row came back as JSON, with no line or row number in
    the detail. Now a JSON line's bytes as read and its line, a CSV row as a CSV line and its
    row, as for the records the readers refuse."""
    src = tmp_path / "in"
    src.mkdir()
    if fmt == "jsonl":
        lines = [b'{"id": "a", "region": "eu", "ts": 1}',
                 b'{ "id" : "",  "region": "eu", "ts": 2, "extra": "keepme" }',
                 b"",
                 b'{"id": "c", "region": "..", "ts": 3}']
        (src / "f.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        want = [(lines[1], "missing_key", "line 2: "),
                (lines[3], "unreadable_partition", "line 4: ")]
    else:
        (src / "f.csv").write_text("id,region,ts,extra\na,eu,1,x\n,eu,2,keepme\nc,..,3,y\n")
        want = [(b'"","eu","2"', "missing_key", "row 1 (counted from 0): "),
                (b'"c","..","3"', "unreadable_partition", "row 2 (counted from 0): ")]
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": fmt}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"], "precombine-field": "ts",
                  "partition-fields": ["region"]},
        "schema": {"id": "string", "region": "string", "ts": "int64"},
        "errors": {"tolerance": "all"},
        "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
    })
    summary = _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (summary.records_written, summary.error_records) == (1, 2)
    errors = read_snapshot(HudiTable.open(cfg.errors.table_path)).sort_by("row").to_pylist()
    got = [(e["value"], e["reason"], e["detail"][:len(w[2])]) for e, w in zip(errors, want,
                                                                           strict=True)]
    assert got == want


def test_an_error_commit_is_kept_unless_its_round_is_known_to_have_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code review of the error commit's rollback: a target table made anew at its path (its
    old commits gone, not failed) made the first start roll back a committed round's error
    rows; and a rollback of a round whose instant another writer's error commit does not name
    must not touch that commit. Only a pending instant or one a rollback names has failed."""
    src = tmp_path / "in1"
    src.mkdir()
    (src / "a.jsonl").write_text('{"id": 1, "v": "x", "ts": 1}\n{"id": 2, "v": "y", "ts": "bad"}\n')

    def config(source: Path) -> PipelineConfig:
        return config_from_dict({
            "source": {"type": "files", "format": "json",
                       "options": {"path": str(source), "format": "jsonl"}},
            "table": {"path": str(tmp_path / "t"), "record-key": ["id"], "precombine-field": "ts"},
            "schema": {"id": "int64", "v": "string", "ts": "int64"},
            "errors": {"tolerance": "all", "table-path": str(tmp_path / "errors")},
            "runtime": {"round": {"max-records": 1000, "min-interval": 0}},
        })

    _driver(config(src), InProcessEngine())[0].run(once=True)
    kept = [f"file/{src / 'a.jsonl'}/1"]
    errors_path = tmp_path / "errors"
    assert read_snapshot(HudiTable.open(errors_path)).column("error_id").to_pylist() == kept
    shutil.rmtree(tmp_path / "t")  # the table rebuilt from another folder
    other = tmp_path / "in2"
    other.mkdir()
    (other / "b.jsonl").write_text('{"id": 3, "v": "z", "ts": 1}\n')
    _driver(config(other), InProcessEngine())[0].run(once=True)
    assert read_snapshot(HudiTable.open(errors_path)).column("error_id").to_pylist() == kept
    # a round's failure names its own instant: another round's error commit stays
    target = HudiTable.open(tmp_path / "t")
    with WriteClient(HudiTable.open(errors_path)) as errors:
        pending = target.new_instant_time()
        target.timeline.create_requested(target.write_action, pending)
        errors.upsert(read_snapshot(errors.table).select(
            [n for n in read_snapshot(errors.table).column_names if not n.startswith("_hoodie")]),
            round_metadata(target, pending))
        assert drop_orphaned_errors(errors, target, target.new_instant_time()) is None
        assert drop_orphaned_errors(errors, target, pending) is not None


def test_an_error_commit_rollback_cut_short_is_finished_before_the_next_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code review: when rolling back the failed round's error commit failed half-way, the
    error table kept a pending commit and rollback for the rest of the run (its archival
    blocked); the retry before the next round finishes it."""
    src = tmp_path / "in"
    _write_file(src, "a.jsonl", _rows(range(3)))
    (src / "c.jsonl").write_text('{"id": 500, "v": "a", "ts": "late"}\n')
    cfg = _tolerant(_config(src, tmp_path / "t"))
    failed = {"finish": 0}
    real_finish = rollback_module._finish

    def finish(table: HudiTable, *args: Any, **kwargs: Any) -> Any:
        if table.base_path.name.endswith("_errors") and not failed["finish"]:
            failed["finish"] += 1
            raise OSError("test: the store failed during the rollback")
        return real_finish(table, *args, **kwargs)

    guard = _failing_guard(1, "test: the target's commit failed")
    monkeypatch.setattr(RoundDriver, "_guard", guard)
    monkeypatch.setattr(rollback_module, "_finish", finish)
    _driver(cfg, InProcessEngine())[0].run(once=True)
    assert (guard.__func__.calls, failed["finish"]) == (1, 1)
    errors = HudiTable.open(cfg.errors.table_path)
    assert errors.timeline.pending() == []
    assert [e["error_id"] for e in read_snapshot(errors).to_pylist()] == [
        f"file/{src / 'c.jsonl'}/0"]
    assert_hudi_matches_hoodline(errors)


def test_a_hudi_streamer_checkpoint_a_source_cannot_use_is_named(
    src: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A table Hudi Streamer wrote from files (its checkpoint: the newest file time): the
    files source reads its folder as for a new table, and says so."""
    import json
    import logging

    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY

    table = tmp_path / "t"
    cfg = _files_config(src, table, "none")
    _driver(cfg, InProcessEngine())[0].run(once=True)
    for commit in (table / ".hoodie").glob("*.commit"):
        body = json.loads(commit.read_text())
        extra = body["extraMetadata"]
        for key in [k for k in extra if k.startswith("hoodline.")]:
            del extra[key]
        extra[STREAMER_CHECKPOINT_KEY] = "1764374400000"
        commit.write_text(json.dumps(body))
    with caplog.at_level(logging.WARNING):
        _driver(cfg, InProcessEngine())[0].run(once=True)
    assert ("carries the positions of a Java Hudi writer (deltastreamer.checkpoint.key = "
            "'1764374400000'), which the files source does not use") in caplog.text
