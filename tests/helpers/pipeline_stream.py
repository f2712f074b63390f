"""Helpers of the pipeline, CLI and local-cluster tests: event stream, its model, hudi-rs reads."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic

from hoodline.broker import ExactEndProducer
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.testing.hudi_oracle import hudi_snapshot

SCHEMA = {"id": "int64", "name": "string", "region": "string", "ts": "int64",
          "deleted": "bool"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(timeout=10)
    return name


def region(i: int) -> str:
    return f"r{i % 3}"


@dataclass
class Stream:
    """Produces JSON events (insert/update/delete-flag/tombstone) and keeps the model."""

    bootstrap: str
    topic: str
    partitions: int
    seed: int = 7
    ts: int = 0
    model: dict[int, dict[str, object]] = field(default_factory=dict)
    produced: int = 0
    #: next offset per partition (what was produced so far)
    ends: dict[int, int] = field(default_factory=dict)
    #: (partition, offset) of every bad record produced
    bad_positions: list[tuple[int, int]] = field(default_factory=list)

    def _sent(self, partition: int) -> int:
        offset = self.ends.get(partition, 0)
        self.ends[partition] = offset + 1
        self.produced += 1
        return offset

    def produce(self, n: int, keys: int, *, deletes: float = 0.1, tombstones: float = 0.0,
                bad: list[bytes] | None = None) -> None:
        rng = random.Random(self.seed + self.ts)
        with ExactEndProducer(self.bootstrap) as p:
            for _ in range(n):
                self.ts += 1
                i = rng.randrange(keys)
                part = i % self.partitions
                r = rng.random()
                key = json.dumps({"id": i, "region": region(i)}).encode()
                if r < tombstones:
                    p.produce(self.topic, part, None, key)
                    self.model.pop(i, None)
                elif r < tombstones + deletes:
                    rec = {"id": i, "name": f"gone{self.ts}", "region": region(i),
                           "ts": self.ts, "deleted": True}
                    p.produce(self.topic, part, json.dumps(rec).encode(), key)
                    self.model.pop(i, None)
                else:
                    rec = {"id": i, "name": f"n{i}-{self.ts}", "region": region(i),
                           "ts": self.ts, "deleted": False}
                    p.produce(self.topic, part, json.dumps(rec).encode(), key)
                    self.model[i] = rec
                self._sent(part)
            for j, value in enumerate(bad or []):
                p.produce(self.topic, j % self.partitions, value, b"bad")
                self.bad_positions.append((j % self.partitions, self._sent(j % self.partitions)))


def kafka_config(
    table: Path, bootstrap: str, topic: str, errors: str = "none",
    table_extra: dict[str, object] | None = None, **runtime: object
) -> PipelineConfig:
    doc = {
        "source": {"type": "kafka", "format": "json",
                   "options": {"topic": topic,
                               "properties": {"bootstrap.servers": bootstrap,
                                              "group.id": "pc-test"},
                               "scan.fetch.timeout": 0.05}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "delete-field": "deleted", **(table_extra or {})},
        "schema": SCHEMA,
        "runtime": {"master": "local[2]", "round": {"min-interval": 0}, **runtime},
        "errors": {"tolerance": errors},
    }
    return config_from_dict(doc)


def table_rows(path: Path) -> dict[int, dict[str, object]]:
    """The table read by hudi-rs, keyed by id (duplicates fail the test)."""
    t: pa.Table = hudi_snapshot(path)
    rows = t.select(["id", "name", "region", "ts", "deleted"]).to_pylist()
    out: dict[int, dict[str, object]] = {}
    for r in rows:
        assert r["id"] not in out, f"key {r['id']} is in the table twice"
        out[int(r["id"])] = r
    return out
