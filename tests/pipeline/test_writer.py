"""The writer task without Spark: records of several readers for the same keys, a buffer so
small that every batch spills to disk, file groups written one at a time -- the committed
table (read by hudi-rs) holds one row per key, the round's winner."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from hoodline.connectors.kafka.plugin import KafkaRecords
from hoodline.pipeline.tasks import RoundJob
from hoodline.pipeline.transform import SEQ, RecordSpec, keyed_schema
from hoodline.pipeline.write_buffer import WriteBuffer
from hoodline.table.commit_metadata import WriteStat
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import PreparedBatch, WriteClient, tag_and_assign
from hoodline.table.write.records import FILE_ID, IS_DELETE, PARTITION_PATH, RECORD_KEY
from hoodline.testing.hudi_oracle import hudi_snapshot

DECLARED = pa.schema([("id", pa.int64()), ("region", pa.string()), ("ts", pa.int64())])


def _batch(spec: RecordSpec, ids: list[int], ts: list[int], seq0: int) -> pa.RecordBatch:
    n = len(ids)
    data = pa.table({"id": pa.array(ids, pa.int64()), "region": ["r"] * n,
                     "ts": pa.array(ts, pa.int64()),
                     RECORD_KEY: [str(i) for i in ids], PARTITION_PATH: ["region=r"] * n,
                     IS_DELETE: [False] * n, SEQ: pa.array(range(seq0, seq0 + n), pa.int64())})
    tagged = tag_and_assign(spec.ctx, data)
    return tagged.select(keyed_schema(DECLARED).names).cast(keyed_schema(DECLARED)).to_batches()[0]


def test_spilling_writer_reduces_per_key_across_readers(tmp_path: Path) -> None:
    table = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("region",), "ts",
                                                         bucket_count=2))
    with WriteClient(table) as client:
        schema = client.plan_schema(DECLARED, "UPSERT")
        ts = client.start_instant()
        ctx = client.context(ts, PreparedBatch("UPSERT", schema.empty_table(), schema))
        spec = RecordSpec(ctx, DECLARED, None, 1, writer_buffer_bytes=1)
        job = RoundJob(1, {}, spec, KafkaRecords(raw=False), writers=1)
        # two "readers" saw the same keys; the highest ts must win wherever it came from
        batches = [_batch(spec, list(range(50)), [1] * 50, 0),
                   _batch(spec, list(range(25, 75)), [2] * 50, 1000),
                   _batch(spec, list(range(0, 10)), [0] * 10, 2000)]
        assert len({b.column(FILE_ID)[0].as_py() for b in batches}) >= 1
        stats = [WriteStat.from_dict(json.loads(s))
                 for s in job.write(iter(batches), 0, 0)]
        assert len(stats) == 2  # two buckets, each written once
        client.commit(ctx, stats)
    rows = {r["id"]: r["ts"] for r in hudi_snapshot(tmp_path / "t").to_pylist()}
    assert rows == {i: (2 if i >= 25 else 1) for i in range(75)}


def test_write_buffer_spills_and_reads_back_in_order() -> None:
    schema = pa.schema([("x", pa.int64())])
    with WriteBuffer(schema, limit_bytes=100) as buf:
        for i in range(10):
            buf.append(pa.RecordBatch.from_pydict({"x": list(range(i * 20, i * 20 + 20))},
                                                  schema=schema))
        assert buf.spilled_batches == 10  # 160 bytes per batch > limit: every batch spilled
        assert buf.table().column("x").to_pylist() == list(range(200))
