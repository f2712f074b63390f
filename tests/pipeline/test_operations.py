"""Index and operation variants on the real broker: BLOOM index upserts equal the model, the
`delete` operation removes the keys it reads, bulk_insert of new keys, and a restart against a
table written from another source is refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker, ExactEndProducer
from hoodline.errors import CheckpointMismatchError
from hoodline.pipeline.api import Pipeline
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.properties import IndexType
from hoodline.table.write.operation import WriteOperation
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.pipeline_stream import (
    Stream,
    create_topic,
    kafka_config,
    region,
    table_rows,
    unique,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_bloom_index_and_delete_operation(
    spark: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique("pc-bloom"), 3)
    stream = Stream(bs, topic, 3, seed=21)
    stream.produce(900, 200, deletes=0.1, tombstones=0.05)
    table = tmp_path / "t"
    cfg = kafka_config(table, bs, topic, **{"reader-parallelism": 2,
                                            "round": {"max-records": 400, "min-interval": 0}})
    cfg = replace(cfg, table=replace(cfg.table, index=IndexType.BLOOM))
    with Pipeline(cfg, SparkEngine(spark)) as p:
        assert p.run(once=True).commits == 3
    assert table_rows(table) == stream.model

    # the same source, now with operation `delete`: every record read deletes its key
    gone = sorted(stream.model)[::3]
    with ExactEndProducer(bs) as prod:
        for i in gone:
            prod.produce(topic, i % 3, json.dumps({"id": i, "region": region(i), "ts": 0,
                                                   "name": "", "deleted": False}).encode())
    dcfg = replace(cfg, table=replace(cfg.table, operation=WriteOperation.DELETE))
    with Pipeline(dcfg, SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.records_read == len(gone)
    for i in gone:
        del stream.model[i]
    assert table_rows(table) == stream.model

    # another topic cannot resume this table's checkpoint
    other = create_topic(bs, unique("pc-other"), 1)
    ocfg = kafka_config(table, bs, other)
    ocfg = replace(ocfg, table=replace(ocfg.table, index=IndexType.BLOOM))
    with Pipeline(ocfg, SparkEngine(spark)) as p:
        with pytest.raises(CheckpointMismatchError, match=f"now reads 'topics:{other}'"):
            p.run(once=True)
    assert table_rows(table) == stream.model


@pytest.mark.parametrize("combine", [False, True])
def test_bulk_insert_writes_every_record_unless_combining(
    spark: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path, combine: bool
) -> None:
    """bulk_insert writes records as they come, a key produced twice included (Hudi's
    hoodie.combine.before.insert default: off); with combining, the newest record of a key wins."""
    bs = broker.bootstrap_servers
    topic = create_topic(bs, unique("pc-bulk"), 2)
    ids = [*range(300), *range(0, 40, 4)]  # ten keys arrive twice, in a later message
    with ExactEndProducer(bs) as producer:
        for ts, i in enumerate(ids, start=1):
            rec = {"id": i, "name": f"n{i}-{ts}", "region": region(i), "ts": ts,
                   "deleted": False}
            producer.produce(topic, i % 2, json.dumps(rec).encode(), str(i).encode())
    table = tmp_path / "t"
    cfg = kafka_config(table, bs, topic, **{"reader-parallelism": 2})
    options = {"hoodie.combine.before.insert": combine}
    cfg = replace(cfg, table=replace(cfg.table, operation=WriteOperation.BULK_INSERT,
                                     options=options))
    with Pipeline(cfg, SparkEngine(spark)) as p:
        assert p.run(once=True).records_read == len(ids)
    snap = hudi_snapshot(table).select(["id", "ts"]).to_pylist()
    if combine:
        assert sorted(r["id"] for r in snap) == list(range(300))
        latest = {i: ts for ts, i in enumerate(ids, start=1)}
        assert all(r["ts"] == latest[r["id"]] for r in snap)
    else:
        assert sorted(r["id"] for r in snap) == sorted(ids)


def _produce(bs: str, topic: str, ids: range, ts: int,
             model: dict[int, dict[str, object]]) -> None:
    with ExactEndProducer(bs) as prod:
        for i in ids:
            rec = {"id": i, "name": f"{topic}-{ts}", "region": region(i), "ts": ts,
                   "deleted": False}
            prod.produce(topic, i % 2, json.dumps(rec).encode())
            model[i] = rec


def test_a_topic_list_gains_and_loses_topics_and_each_record_is_read_once(
    spark: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Day two: a topic added to a pipeline's list is read from its start into the same table,
    the positions of the topics it kept go on (nothing read twice); a topic taken out is no
    longer read. It was refused: a table could only ever be fed by its first topic list."""
    bs = broker.bootstrap_servers
    a, b = create_topic(bs, unique("sub-a"), 2), create_topic(bs, unique("sub-b"), 2)
    table, model = tmp_path / "t", {}
    _produce(bs, a, range(0, 40), 1, model)
    _produce(bs, b, range(1000, 1030), 1, model)  # before b joins: read all the same
    with Pipeline(kafka_config(table, bs, a), SparkEngine(spark)) as p:
        assert p.run(once=True).records_read == 40
    _produce(bs, a, range(0, 10), 2, model)
    with caplog.at_level("WARNING", logger="hoodline"):
        with Pipeline(kafka_config(table, bs, f"{a},{b}"), SparkEngine(spark)) as p:
            assert p.run(once=True).records_read == 10 + 30  # a's new ones, all of b
    assert f"topic(s) {b} joined it and are read from their earliest offset" in caplog.text
    assert table_rows(table) == model
    caplog.clear()
    _produce(bs, a, range(20, 30), 3, {})  # after a left: never read
    _produce(bs, b, range(1000, 1005), 3, model)
    with caplog.at_level("WARNING", logger="hoodline"):
        with Pipeline(kafka_config(table, bs, b), SparkEngine(spark)) as p:
            assert p.run(once=True).records_read == 5
    assert f"topic(s) {a} left it: their positions are dropped" in caplog.text
    assert table_rows(table) == model
    # a change whose run reads nothing is committed all the same: it was named again at every
    # start, and the positions of a topic that left were kept until a round read something
    c = create_topic(bs, unique("sub-c"), 1)
    caplog.clear()
    with Pipeline(kafka_config(table, bs, f"{b},{c}"), SparkEngine(spark)) as p:
        done = p.run(once=True)
    assert (done.records_read, done.commits) == (0, 1)
    caplog.clear()
    with caplog.at_level("WARNING", logger="hoodline"):
        with Pipeline(kafka_config(table, bs, f"{b},{c}"), SparkEngine(spark)) as p:
            assert p.run(once=True).records_read == 0
    assert "subscription changed" not in caplog.text
    # named again, a topic is read from its start: all its records, those produced while it
    # was out of the list included
    with caplog.at_level("WARNING", logger="hoodline"):
        with Pipeline(kafka_config(table, bs, f"{a},{b},{c}"), SparkEngine(spark)) as p:
            assert p.run(once=True).records_read == 40 + 10 + 10
    assert "one this table read before is read again from its start" in caplog.text
    for i in range(20, 30):  # a's newest values, produced while it was out of the list
        model[i] = {"id": i, "name": f"{a}-3", "region": region(i), "ts": 3, "deleted": False}
    assert table_rows(table) == model
    # a list sharing no topic with the table's is still refused
    d = create_topic(bs, unique("sub-d"), 1)
    with Pipeline(kafka_config(table, bs, d), SparkEngine(spark)) as p:
        with pytest.raises(CheckpointMismatchError, match="keeping at least one"):
            p.run(once=True)
    assert table_rows(table) == model
