"""A table moves between Java Hudi's Kafka writers (Hudi Streamer, the Kafka Connect sink) and a
hoodline pipeline on the real broker: each commit of the pipeline stores where it stopped as
they store it (``deltastreamer.checkpoint.key``, ``kafka.commit.offsets``), and a pipeline
taking over a table they wrote -- or wrote last -- reads on from there: no record read twice,
none skipped.

A table "written by" one of them is a pipeline's table whose commits were then stripped of
hoodline's keys (and the other writer's), leaving what that writer's commits carry: data and
its positions."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.errors import ConfigError
from hoodline.pipeline.api import Pipeline, RunSummary
from hoodline.pipeline.checkpoint import CHECKPOINT_KEY
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.table.commit_metadata import (
    CONNECT_OFFSETS_KEY,
    STREAMER_CHECKPOINT_KEY,
    STREAMER_FLAG_KEYS,
)
from hoodline.testing.engine import InProcessEngine
from hoodline.testing.hudi_oracle import hudi_latest_extra_metadata
from tests.helpers.pipeline_stream import SCHEMA, Stream, create_topic, table_rows, unique

pytestmark = [pytest.mark.kafka]


def _config(broker: EmbeddedBroker, table: Path, topic: str,
            **options: object) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "kafka", "format": "json", "options": {
            "topic": topic, "properties": {"bootstrap.servers": broker.bootstrap_servers},
            "scan.fetch.timeout": 0.05, **options}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "delete-field": "deleted"},
        "schema": SCHEMA, "runtime": {"round": {"min-interval": 0}},
    })


def _run(cfg: PipelineConfig) -> RunSummary:
    with Pipeline(cfg, InProcessEngine()) as p:
        return p.run(once=True)


def _fed(broker: EmbeddedBroker, tmp_path: Path, name: str, seed: int,
         waves: list[int]) -> tuple[str, Stream, Path, PipelineConfig]:
    """A two-partition topic and a pipeline's table: each wave of records produced, then read
    by a run of the pipeline."""
    topic = create_topic(broker.bootstrap_servers, unique(name), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=seed)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    for n in waves:
        stream.produce(n, 40)
        _run(cfg)
    return topic, stream, table, cfg


def _commits(table: Path) -> list[Path]:
    return sorted(p for p in (table / ".hoodie").iterdir()
                  if p.suffix in (".commit", ".deltacommit"))


def _as_written_by(writer: str, table: Path, *, newest_only: bool = False,
                   **extra: str) -> None:
    """Make the completed commits (all, or the newest) what Hudi Streamer's (``writer`` =
    "streamer") or the Kafka Connect sink's ("sink") hold: hoodline's keys and the other
    writer's go; ``extra`` entries are set."""
    other = "kafka." if writer == "streamer" else "deltastreamer."
    for path in _commits(table)[-1:] if newest_only else _commits(table):
        body = json.loads(path.read_text())
        metadata = body["extraMetadata"]
        for key in [k for k in metadata if k.startswith(("hoodline.", other))]:
            del metadata[key]
        metadata.update(extra)
        path.write_text(json.dumps(body))


def test_every_commit_stores_where_it_stopped_as_the_java_writers_do(
    broker: EmbeddedBroker, tmp_path: Path,
) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("hs-write"), 3)
    stream = Stream(broker.bootstrap_servers, topic, 3, seed=31)
    stream.produce(300, 100)
    table = tmp_path / "t"
    _run(_config(broker, table, topic))
    expected = f"{topic}," + ",".join(f"{p}:{stream.ends[p]}" for p in range(3))
    # read by hudi-rs: the newest commit's extra metadata
    assert hudi_latest_extra_metadata(table, STREAMER_CHECKPOINT_KEY) == expected
    # and as Hudi's Kafka Connect sink keeps them (it resumes from the newest commit's)
    connect = ",".join(f"{p}={stream.ends[p]}" for p in range(3))
    assert hudi_latest_extra_metadata(table, CONNECT_OFFSETS_KEY) == connect


def test_a_table_hudi_streamer_wrote_is_read_on_from_its_checkpoint(
    broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, a table with no checkpoint of hoodline's was read from 'scan.startup.mode'
    (earliest): every record Hudi Streamer had written was read and written again. Hudi
    Streamer ran with --checkpoint: its commits say so, and a writer taking over passes the
    mark on (else Hudi Streamer, started with the flag again, goes back to that checkpoint)."""
    topic, stream, table, cfg = _fed(broker, tmp_path, "hs-takeover", 32, [200])
    _as_written_by("streamer", table, **{STREAMER_FLAG_KEYS[0]: f"{topic},0:0,1:0"})
    stream.produce(120, 40)
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 120  # only what came after Hudi Streamer's checkpoint
    assert "carries Hudi Streamer's checkpoint" in caplog.text
    assert "going on from there" in caplog.text
    assert table_rows(table) == stream.model
    newest = json.loads(_commits(table)[-1].read_text())["extraMetadata"]  # the pipeline's
    assert newest[STREAMER_FLAG_KEYS[0]] == f"{topic},0:0,1:0"


def test_a_hudi_streamer_commit_after_the_pipelines_is_where_the_pipeline_goes_on(
    broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Hudi Streamer wrote the table after the pipeline had (its commit carries its checkpoint
    and none of hoodline's): the pipeline goes on from there, not from its own older one."""
    topic, stream, table, cfg = _fed(broker, tmp_path, "hs-between", 33, [150, 90])
    _as_written_by("streamer", table, newest_only=True)  # the second run was Hudi Streamer's
    stream.produce(40, 40)
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 40
    assert "carries Hudi Streamer's checkpoint" in caplog.text
    assert "going on from there" in caplog.text
    assert table_rows(table) == stream.model
    # and the pipeline's checkpoint is back on top, with Hudi Streamer's beside it
    expected = f"{topic}," + ",".join(f"{p}:{stream.ends[p]}" for p in range(2))
    assert hudi_latest_extra_metadata(table, STREAMER_CHECKPOINT_KEY) == expected
    assert hudi_latest_extra_metadata(table, CHECKPOINT_KEY) is not None
    summary = _run(cfg)  # resumes from its own again: nothing new
    assert summary.records_read == 0


def test_a_newer_hudi_streamer_checkpoint_of_another_topic_leaves_the_pipelines_own(
    broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    _topic, stream, table, cfg = _fed(broker, tmp_path, "hs-other", 34, [100, 60])
    _as_written_by("streamer", table, newest_only=True,
                   **{STREAMER_CHECKPOINT_KEY: "another-topic,0:3,1:4"})
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 60  # from the pipeline's own checkpoint, before that commit
    assert "of topic 'another-topic', which is not this pipeline's subscription" in caplog.text
    assert "not taken: the pipeline resumes from its own checkpoint" in caplog.text
    assert table_rows(table) == stream.model


def test_a_table_the_kafka_connect_sink_wrote_needs_a_stated_start_and_its_options_work(
    broker: EmbeddedBroker, tmp_path: Path,
) -> None:
    """Hudi's Kafka Connect sink keeps its offsets without the topic: a new pipeline on its
    table is refused until it says where to start (the default, the topic's start, would write
    again what the sink wrote), and the 'specific-offsets' options the refusal gives read on
    from where the sink stopped."""
    topic, stream, table, cfg = _fed(broker, tmp_path, "hs-connect", 35, [100])
    stopped = dict(stream.ends)
    _as_written_by("sink", table)
    stream.produce(30, 40)
    with pytest.raises(ConfigError) as refused:
        _run(cfg)
    options = re.search(r"scan.startup.specific-offsets = (\[.*?\])", str(refused.value))
    assert options is not None, refused.value
    stated = json.loads(options.group(1))
    assert stated == [f"{topic}:{p}:{stopped[p]}" for p in range(2)]  # where the sink stopped
    summary = _run(_config(broker, table, topic, **{
        "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": stated}))
    assert summary.records_read == 30
    assert table_rows(table) == stream.model


def test_a_kafka_connect_sink_that_took_over_from_the_pipeline_is_where_the_pipeline_goes_on(
    broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """hoodline -> Hudi's Kafka Connect sink -> hoodline: the sink started from the offsets the
    pipeline stored, so its newer ones are of the pipeline's topic. The resumed pipeline went
    on from its own older checkpoint and wrote again everything the sink wrote (code review:
    50 records read, 40 of them the sink's)."""
    _topic, stream, table, cfg = _fed(broker, tmp_path, "hs-connect-back", 36, [80, 40])
    _as_written_by("sink", table, newest_only=True)  # the second run was the sink's
    stream.produce(10, 40)
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 10
    assert "after this pipeline's commits: going on from there" in caplog.text
    assert table_rows(table) == stream.model


def test_hoodline_run_on_the_sinks_table_is_refused_before_spark_starts(
    broker: EmbeddedBroker, tmp_path: Path,
) -> None:
    """The refusal came after Spark's start (~10 s); the table is read before it now."""
    import os
    import subprocess
    import sys

    from hoodline.pipeline.driver import check_start
    from hoodline.table.table import HudiTable
    from tests.helpers.paths import REPO

    topic, _stream, table, cfg = _fed(broker, tmp_path, "hs-connect-cli", 37, [30])
    _as_written_by("sink", table)
    with pytest.raises(ConfigError, match="was written by Hudi's Kafka Connect sink"):
        check_start(cfg, HudiTable.open(table))
    check_start(_config(broker, table, topic, **{"scan.startup.mode": "earliest-offset"}),
                HudiTable.open(table))  # a stated start is taken
    config = tmp_path / "p.toml"
    config.write_text(f"""
[source]
type = "kafka"
format = "json"
[source.options]
topic = "{topic}"
properties.bootstrap.servers = "{broker.bootstrap_servers}"
[table]
path = "{table}"
record-key = ["id"]
partition-fields = ["region"]
precombine-field = "ts"
delete-field = "deleted"
[schema]
id = "int64"
name = "string"
region = "string"
ts = "int64"
deleted = "bool"
[runtime]
master = "local[1]"
""")
    done = subprocess.run([sys.executable, "-m", "hoodline", "run", str(config), "--once"],
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "error: table commit" in done.stderr and "Kafka Connect sink" in done.stderr
    assert "jdk.incubator" not in done.stderr, "Spark's JVM started before the refusal"
