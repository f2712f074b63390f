"""Failures on the real broker: a failed round is rolled back and retried without duplicates, a
failure after the commit landed never commits twice, too many failures stop with a clear error,
and a crash that left an inflight instant (with files) recovers exactly on restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.errors import RoundFailedError
from hoodline.faults import FaultAction, FaultPoint, fault_env
from hoodline.pipeline.api import Pipeline, RoundReport
from hoodline.pipeline.driver import RoundDriver
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.instant import State
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_completed_commits
from tests.helpers.pipeline_stream import Stream, create_topic, kafka_config, table_rows, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.fixture
def stream(broker: EmbeddedBroker) -> Stream:
    topic = create_topic(broker.bootstrap_servers, unique("pc-fail"), 2)
    s = Stream(broker.bootstrap_servers, topic, 2, seed=3)
    s.produce(600, 150, deletes=0.1, tombstones=0.05)
    return s


def _config(table: Path, stream: Stream, **runtime: object):  # type: ignore[no-untyped-def]
    return kafka_config(table, stream.bootstrap, stream.topic,
                        **{"reader-parallelism": 2, "retry-backoff": 0.01,
                           "round": {"max-records": 400, "min-interval": 0}, **runtime})


def _actions(table: Path) -> list[tuple[str, str]]:
    hudi = HudiTable.open(table)
    return [(i.action, i.state.name) for i in hudi.timeline.instants()]


def test_failed_rounds_are_rolled_back_and_retried(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    for key, value in fault_env(FaultPoint.BEFORE_COMMIT, FaultAction.FAIL,
                                tmp_path / "fail-count", times=2).items():
        monkeypatch.setenv(key, value)
    reports: list[RoundReport] = []
    with Pipeline(_config(table, stream), SparkEngine(spark)) as p:
        summary = p.run(once=True, on_round=reports.append)
    committed = [r for r in reports if r.committed]
    assert committed[0].retries == 2  # two failed attempts of round 1, then success
    assert [r.round_id for r in committed] == [1, 2]
    assert summary.records_read == 600
    assert table_rows(table) == stream.model
    actions = _actions(table)
    assert actions.count(("rollback", "COMPLETED")) == 2  # both failed instants rolled back
    assert all(state == State.COMPLETED.name for _, state in actions)
    assert len(hudi_completed_commits(table)) == 2


def test_a_rollback_that_fails_too_is_done_before_the_next_round(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage is out when a round fails: its rollback fails too. The instant stayed
    pending for the rest of the run (``hoodline table show``: inflight), until the next start."""
    from hoodline.errors import StorageError
    from hoodline.table.write.client import WriteClient

    table = tmp_path / "t"
    for key, value in fault_env(FaultPoint.BEFORE_COMMIT, FaultAction.FAIL,
                                tmp_path / "fail-count", times=1).items():
        monkeypatch.setenv(key, value)
    real = WriteClient.rollback
    calls: list[str] = []

    def flaky(self: WriteClient, ts: str) -> None:
        calls.append(ts)
        if len(calls) == 1:
            raise StorageError(f"s3://lake/t: connection refused (rolling back {ts})")
        real(self, ts)

    monkeypatch.setattr(WriteClient, "rollback", flaky)
    with Pipeline(_config(table, stream), SparkEngine(spark)) as p:
        p.run(once=True)
    assert len(calls) == 2 and calls[0] == calls[1]  # failed, then done before the retry
    actions = _actions(table)
    assert actions.count(("rollback", "COMPLETED")) == 1
    assert all(state == State.COMPLETED.name for _, state in actions), actions
    assert table_rows(table) == stream.model


def test_failure_after_the_commit_landed_does_not_commit_twice(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    for key, value in fault_env(FaultPoint.AFTER_COMMIT, FaultAction.FAIL,
                                tmp_path / "fail-count", times=1).items():
        monkeypatch.setenv(key, value)
    reports: list[RoundReport] = []
    with Pipeline(_config(table, stream), SparkEngine(spark)) as p:
        p.run(once=True, on_round=reports.append)
    assert [r.round_id for r in reports if r.committed] == [1, 2]
    assert len(hudi_completed_commits(table)) == 2
    assert ("rollback", "COMPLETED") not in _actions(table)
    assert table_rows(table) == stream.model


def test_too_many_failures_stop_with_the_cause(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    for key, value in fault_env(FaultPoint.BEFORE_COMMIT, FaultAction.FAIL,
                                tmp_path / "fail-count", times=100).items():
        monkeypatch.setenv(key, value)
    cfg = _config(table, stream, **{"max-consecutive-failures": 3})
    with Pipeline(cfg, SparkEngine(spark)) as p:
        with pytest.raises(RoundFailedError, match=r"round 1 failed 3 times.*injected failure"):
            p.run(once=True)
    assert hudi_completed_commits(table) == []
    assert all(a == ("rollback", "COMPLETED") for a in _actions(table))


def test_restart_after_a_crash_mid_round_recovers_exactly(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    with Pipeline(_config(table, stream), SparkEngine(spark)) as p:  # rounds 1, 2 commit
        p.run(once=True)
    stream.produce(500, 150, deletes=0.1, tombstones=0.05)
    # the "crashed" run: files of round 3 written, commit never made, nothing rolled back
    monkeypatch.setattr(RoundDriver, "_rollback", staticmethod(lambda run, ts: None))
    for key, value in fault_env(FaultPoint.BEFORE_COMMIT, FaultAction.FAIL,
                                tmp_path / "fail-count", times=1).items():
        monkeypatch.setenv(key, value)
    cfg = _config(table, stream, **{"max-consecutive-failures": 1})
    with Pipeline(cfg, SparkEngine(spark)) as p:
        with pytest.raises(RoundFailedError):
            p.run(once=True)
    pending = [i.timestamp for i in HudiTable.open(table).timeline.pending()]
    assert len(pending) == 1
    stray = [f for f in table.rglob("*.parquet") if f.stem.endswith(pending[0])]
    assert stray, "the crashed round left no data files; the test does not test recovery"
    monkeypatch.undo()
    reports: list[RoundReport] = []
    with Pipeline(_config(table, stream), SparkEngine(spark)) as p:
        p.run(once=True, on_round=reports.append)
    assert [r.round_id for r in reports if r.committed] == [3, 4]
    assert ("commit", "INFLIGHT") not in _actions(table)
    assert ("rollback", "COMPLETED") in _actions(table)
    assert not any(f.exists() for f in stray)  # the crashed round's files were rolled back
    assert table_rows(table) == stream.model


def test_broker_metadata_failure_while_planning_is_retried(
    spark: HoodlineSpark, stream: Stream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hoodline.connectors.kafka.plugin import KafkaPlugin
    from hoodline.errors import FetchError

    real = KafkaPlugin._ends
    calls = {"n": 0}

    def flaky(self: KafkaPlugin, tps: list[object]) -> object:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise FetchError("test: brokers did not answer while planning")
        return real(self, tps)  # type: ignore[arg-type]

    monkeypatch.setattr(KafkaPlugin, "_ends", flaky)
    reports: list[RoundReport] = []
    with Pipeline(_config(tmp_path / "t", stream), SparkEngine(spark)) as p:
        p.run(once=True, on_round=reports.append)
    committed = [r for r in reports if r.committed]
    assert committed[0].retries == 2 and [r.round_id for r in committed] == [1, 2]
    assert table_rows(tmp_path / "t") == stream.model
