"""Prometheus metrics of a pipeline: scraped over HTTP on 127.0.0.1 while the round driver
runs (file source, in-process engine, a real table); the values equal the round reports'."""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from hoodline.errors import EngineJobError
from hoodline.pipeline.config import config_from_dict
from hoodline.pipeline.driver import RoundDriver
from hoodline.pipeline.metrics import METRIC_NAMES, PipelineMetrics
from hoodline.pipeline.report import RoundReport
from hoodline.pipeline.tasks import RoundJob
from hoodline.table.table import HudiTable
from hoodline.testing.engine import InProcessEngine

README = Path(__file__).resolve().parents[2] / "README.md"


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    want = {"table": "t", "source": "files", **labels}
    return samples[(name, tuple(sorted(want.items())))]


def test_metrics_equal_the_round_reports_and_count_failures(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text("".join(json.dumps({"id": i, "v": f"x{i}"}) + "\n"
                                          for i in range(250)) + json.dumps({"v": "no key"}) + "\n")
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64", "v": "string"},
        "runtime": {"retry-backoff": 0.01, "round": {"max-records": 100, "min-interval": 0}},
        "errors": {"tolerance": "all"},
    })
    failed = {"left": 1}

    def fail_once(job: RoundJob) -> None:
        if failed["left"]:
            failed["left"] -= 1
            raise EngineJobError("test: executor lost")

    metrics = PipelineMetrics("t", "files")
    port = metrics.serve(0, "127.0.0.1")
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        reports.append(report)
        metrics.observe_round(report)

    try:
        RoundDriver(cfg, InProcessEngine(before_job=fail_once)).run(
            once=True, on_round=on_round, on_failure=metrics.observe_failure)
        samples = _scrape(port)
    finally:
        metrics.close()
    committed = [r for r in reports if r.committed]
    assert committed
    assert _value(samples, "hoodline_rounds_total", outcome="committed") == len(committed)
    assert _value(samples, "hoodline_records_read_total") == 251
    assert _value(samples, "hoodline_records_written_total") == 250
    # by reason code (error-table review: counts per reason needed Spark or DuckDB)
    assert _value(samples, "hoodline_error_records_total", reason="missing_key") == 1
    assert sum(v for (name, _), v in samples.items()
               if name == "hoodline_error_records_total") == 1
    assert _value(samples, "hoodline_bytes_read_total") == sum(r.bytes_read for r in committed)
    assert _value(samples, "hoodline_bytes_written_total") == sum(
        r.bytes_written for r in committed) > 0
    assert _value(samples, "hoodline_round_failures_total", retried="true") == 1
    assert _value(samples, "hoodline_round_failures_total", retried="false") == 0
    assert _value(samples, "hoodline_round_retries_total") == 1
    assert _value(samples, "hoodline_round_duration_seconds_count") == len(committed)
    assert _value(samples, "hoodline_round_phase_seconds_count", phase="commit") == len(
        committed)
    assert _value(samples, "hoodline_last_commit_timestamp_seconds") > 1.7e9

    # a restart reports the table's last commit before it commits anything itself
    table = HudiTable.open(tmp_path / "t")
    last = table.timeline.last_completed_commit()
    assert last is not None
    restarted = PipelineMetrics("t", "files", clock=lambda: 0.0)
    try:
        port = restarted.serve(0, "127.0.0.1")
        assert ("hoodline_last_commit_timestamp_seconds", (("source", "files"), ("table", "t"))
                ) not in _scrape(port)
        restarted.start_from(table)
        written = table.timeline.path_of(last).stat().st_mtime
        assert _value(_scrape(port), "hoodline_last_commit_timestamp_seconds") == written
    finally:
        restarted.close()


def test_every_metric_is_exposed_and_documented() -> None:
    metrics = PipelineMetrics("t", "kafka")
    metrics.observe_round(RoundReport(1, "1", True, 6, 5, 0, 1, 1, 0.1, 0.1, 0.1, 0.3, 16.0,
                                      {"orders-0": 7}, 0, 100, 2000,
                                      error_reasons={"wrong_type": 1}))
    port = metrics.serve(0, "127.0.0.1")
    try:
        samples = _scrape(port)
    finally:
        metrics.close()
    files = PipelineMetrics("t", "files")  # the file source's backlog gauge is its own
    port = files.serve(0, "127.0.0.1")
    try:
        samples_of_files = _scrape(port)
    finally:
        files.close()
    assert "hoodline_files_waiting" not in {name for name, _ in samples}
    scraped = {name for name, _ in samples} | {name for name, _ in samples_of_files}
    readme = README.read_text()
    for name in METRIC_NAMES:
        assert any(s == name or s.startswith(name + "_") for s in scraped), name
        assert re.search(rf"`{name}`", readme), f"{name} is not in the README"
    assert samples[("hoodline_lag_records", (("partition", "orders-0"), ("source", "kafka"),
                                             ("table", "t")))] == 7


def test_compactions_their_backlog_and_failed_services_are_counted() -> None:
    """Merge-on-read had no metric of compactions: their time was inside the round's duration
    and no phase, and a backlog or failing services could not be alerted on."""
    metrics = PipelineMetrics("t", "kafka")
    base = RoundReport(1, "1", True, 5, 5, 0, 0, 1, 0.1, 0.1, 0.1, 2.3, 2.0, {}, 0, 100, 2000)
    metrics.observe_round(replace(base, compaction="2", services_seconds=2.0,
                                  pending_compactions=0))
    metrics.observe_round(replace(base, round_id=2, services_failed=True,
                                  services_seconds=0.5, pending_compactions=2))
    reg, labels = metrics.registry, {"table": "t", "source": "kafka"}
    assert reg.get_sample_value("hoodline_compactions_total", labels) == 1
    assert reg.get_sample_value("hoodline_table_service_failures_total", labels) == 1
    assert reg.get_sample_value("hoodline_pending_compactions", labels) == 2
    assert reg.get_sample_value("hoodline_round_phase_seconds_sum",
                                {**labels, "phase": "services"}) == 2.5


def test_a_partition_no_longer_read_loses_its_lag_series_and_every_round_is_timed() -> None:
    """Metrics review: a deleted topic's lag stayed at its last value until the process ended
    (an alert on lag would page forever); a run waiting for an unreachable broker moved no
    metric at all (no round ends), so the time of the last round is a gauge of its own."""
    now = {"t": 1000.0}
    metrics = PipelineMetrics("t", "kafka", clock=lambda: now["t"])
    labels = {"table": "t", "source": "kafka"}
    reg = metrics.registry
    assert reg.get_sample_value("hoodline_last_round_timestamp_seconds", labels) == 1000.0
    base = RoundReport(1, "1", True, 5, 5, 0, 0, 1, 0.1, 0.1, 0.1, 0.3, 16.0,
                       {"a-0": 7, "b-0": 85}, 0, 100, 2000)
    now["t"] = 1010.0
    metrics.observe_round(base)
    assert reg.get_sample_value("hoodline_lag_records", {**labels, "partition": "b-0"}) == 85
    now["t"] = 1020.0
    metrics.observe_round(replace(base, round_id=2, committed=False, lag={"a-0": 0}))
    assert reg.get_sample_value("hoodline_lag_records", {**labels, "partition": "b-0"}) is None
    assert reg.get_sample_value("hoodline_lag_records", {**labels, "partition": "a-0"}) == 0
    assert reg.get_sample_value("hoodline_last_round_timestamp_seconds", labels) == 1020.0
    # only committed rounds are commits
    assert reg.get_sample_value("hoodline_last_commit_timestamp_seconds", labels) == 1010.0
    metrics.observe_round(replace(base, round_id=3, lag={"a-0": 1, "b-0": 2}))
    assert reg.get_sample_value("hoodline_lag_records", {**labels, "partition": "b-0"}) == 2
    # a failed attempt retried by a round that found nothing to read is a retry too
    metrics.observe_round(replace(base, round_id=4, committed=False, retries=1))
    assert reg.get_sample_value("hoodline_round_retries_total", labels) == 1
