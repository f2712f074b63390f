"""Bad records on the real broker: tolerance none stops naming the record's position and commits
nothing; tolerance all writes them to the error table (position-keyed, raw bytes, reason) and
the good records to the table; a replay of the same positions does not duplicate error rows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.errors import BadRecordError
from hoodline.pipeline.api import Pipeline
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.testing.hudi_oracle import hudi_completed_commits, hudi_snapshot
from tests.helpers.pipeline_stream import Stream, create_topic, kafka_config, table_rows, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

BAD = [b"not json at all", b'{"id": "abc", "name": "x", "region": "r1", "ts": 1}',
       b'{"name": "no key", "region": "r1", "ts": 2}', b'{"id": 5, "region": "r2"}']


def test_bad_records_both_tolerances(
    spark: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("pc-bad"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=11)
    stream.produce(300, 100, deletes=0.1, bad=BAD)
    table = tmp_path / "t"

    strict = kafka_config(table, broker.bootstrap_servers, topic,
                          **{"reader-parallelism": 2})
    with Pipeline(strict, SparkEngine(spark)) as p:
        first = min(stream.bad_positions)
        expected = rf"bad record at topic '{topic}' partition 0 offset {first[1]}: unparseable"
        with pytest.raises(BadRecordError, match=expected):
            p.run(once=True)
    assert hudi_completed_commits(table) == []

    tolerant = kafka_config(table, broker.bootstrap_servers, topic, errors="all",
                            **{"reader-parallelism": 2})
    with Pipeline(tolerant, SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.error_records == len(BAD)
    assert summary.records_read == 300 + len(BAD)
    assert table_rows(table) == stream.model

    errors = hudi_snapshot(tmp_path / "t_errors").to_pylist()
    assert sorted(e["value"] for e in errors) == sorted(BAD)
    assert {e["reason"] for e in errors} == {"unparseable", "wrong_type", "missing_key"}
    assert all(e["topic"] == topic and e["error_id"] ==
               f"kafka/{topic}/{e['partition']}/{e['offset']}" for e in errors)
    assert all(e["round_id"] == 1 and e["key"] == b"bad" for e in errors)
    assert sorted((e["partition"], e["offset"]) for e in errors) == sorted(stream.bad_positions)

    # a replay of the same positions (a new target, the same error table) does not duplicate
    # error rows: they are keyed by source position and upserted
    replay = kafka_config(tmp_path / "t2", broker.bootstrap_servers, topic, errors="all",
                          **{"reader-parallelism": 1})
    replay = replace(replay, errors=replace(replay.errors, table_path=str(tmp_path / "t_errors")))
    with Pipeline(replay, SparkEngine(spark)) as p:
        assert p.run(once=True).error_records == len(BAD)
    again = hudi_snapshot(tmp_path / "t_errors").to_pylist()
    assert sorted(e["error_id"] for e in again) == sorted(e["error_id"] for e in errors)
