"""A table moves between Java's Hudi Streamer and a hoodline pipeline on the real broker: each
commit of the pipeline stores Hudi Streamer's checkpoint (``deltastreamer.checkpoint.key``) of
where it stopped, and a pipeline taking over a table Hudi Streamer wrote -- or wrote last --
reads on from Hudi Streamer's checkpoint: no record read twice, none skipped.

A table "written by Hudi Streamer" is a pipeline's table whose commits were then stripped of
hoodline's own keys, leaving what Hudi Streamer's commits carry: data and its checkpoint."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
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


def _as_hudi_streamer_wrote(table: Path, *, newest_only: bool = False) -> None:
    """Strip hoodline's keys from the completed commits (all, or the newest): what is left is
    what Hudi Streamer's commits hold."""
    meta = table / ".hoodie"
    commits = sorted(p for p in meta.iterdir() if p.suffix in (".commit", ".deltacommit"))
    for path in commits[-1:] if newest_only else commits:
        body = json.loads(path.read_text())
        extra = body["extraMetadata"]
        assert STREAMER_CHECKPOINT_KEY in extra
        for key in [k for k in extra if k.startswith("hoodline.") or k == CONNECT_OFFSETS_KEY]:
            del extra[key]
        path.write_text(json.dumps(body))


def test_every_commit_stores_where_it_stopped_as_hudi_streamer_does(
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
    (earliest): every record Hudi Streamer had written was read and written again."""
    topic = create_topic(broker.bootstrap_servers, unique("hs-takeover"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=32)
    stream.produce(200, 80)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    _run(cfg)
    _as_hudi_streamer_wrote(table)
    # Hudi Streamer ran with --checkpoint: its commits say so, and a writer taking over passes
    # the mark on (else Hudi Streamer, started with the flag again, goes back to that checkpoint)
    newest = sorted((table / ".hoodie").glob("*.commit"))[-1]
    body = json.loads(newest.read_text())
    body["extraMetadata"][STREAMER_FLAG_KEYS[0]] = f"{topic},0:0,1:0"
    newest.write_text(json.dumps(body))
    stream.produce(120, 80)
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 120  # only what came after Hudi Streamer's checkpoint
    assert "carries Hudi Streamer's checkpoint" in caplog.text
    assert "going on from there" in caplog.text
    assert table_rows(table) == stream.model
    newest = sorted((table / ".hoodie").glob("*.commit"))[-1]  # the pipeline's
    assert json.loads(newest.read_text())["extraMetadata"][STREAMER_FLAG_KEYS[0]] == \
        f"{topic},0:0,1:0"


def test_a_hudi_streamer_commit_after_the_pipelines_is_where_the_pipeline_goes_on(
    broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Hudi Streamer wrote the table after the pipeline had (its commit carries its checkpoint
    and none of hoodline's): the pipeline goes on from there, not from its own older one."""
    topic = create_topic(broker.bootstrap_servers, unique("hs-between"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=33)
    stream.produce(150, 60)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    _run(cfg)
    stream.produce(90, 60)
    _run(cfg)
    _as_hudi_streamer_wrote(table, newest_only=True)  # the second run was Hudi Streamer's
    stream.produce(40, 60)
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
    topic = create_topic(broker.bootstrap_servers, unique("hs-other"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=34)
    stream.produce(100, 50)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    _run(cfg)
    stream.produce(60, 50)
    _run(cfg)
    _as_hudi_streamer_wrote(table, newest_only=True)
    newest = sorted((table / ".hoodie").glob("*.commit"))[-1]
    body = json.loads(newest.read_text())
    body["extraMetadata"][STREAMER_CHECKPOINT_KEY] = "another-topic,0:3,1:4"
    newest.write_text(json.dumps(body))
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
    from hoodline.errors import ConfigError

    topic = create_topic(broker.bootstrap_servers, unique("hs-connect"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=35)
    stream.produce(100, 40)
    stopped = dict(stream.ends)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    _run(cfg)
    for path in (table / ".hoodie").glob("*.commit"):  # what the sink's commits carry
        body = json.loads(path.read_text())
        extra = body["extraMetadata"]
        for key in [k for k in extra if k.startswith("hoodline.") or k.startswith("delta")]:
            del extra[key]
        path.write_text(json.dumps(body))
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
    topic = create_topic(broker.bootstrap_servers, unique("hs-connect-back"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=36)
    stream.produce(80, 40)
    table = tmp_path / "t"
    cfg = _config(broker, table, topic)
    _run(cfg)
    stream.produce(40, 40)
    _run(cfg)
    newest = sorted((table / ".hoodie").glob("*.commit"))[-1]  # the sink's, as it writes it
    body = json.loads(newest.read_text())
    extra = body["extraMetadata"]
    for key in [k for k in extra if k.startswith("hoodline.") or k.startswith("delta")]:
        del extra[key]
    newest.write_text(json.dumps(body))
    stream.produce(10, 40)
    with caplog.at_level(logging.WARNING):
        summary = _run(cfg)
    assert summary.records_read == 10
    assert "after this pipeline's commits: going on from there" in caplog.text
    assert table_rows(table) == stream.model
