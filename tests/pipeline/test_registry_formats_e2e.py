"""JSON Schema and Protobuf topics end to end on the real broker and the test registry: the
table follows the subject (a new JSON Schema property becomes a column), hudi-rs equals the
model. Producers are confluent-kafka's own serializers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from hoodline.broker import EmbeddedBroker, ExactEndProducer
from hoodline.pipeline.api import Pipeline
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.testing.engine import InProcessEngine
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.formats.test_registry_formats import _order_message
from tests.helpers.pipeline_stream import create_topic, unique
from tests.helpers.schema_registry import SchemaRegistry

pytestmark = [pytest.mark.kafka]

V1: dict[str, Any] = {"type": "object", "title": "Event",
                      "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                     "ts": {"type": "integer"}}, "required": ["id", "ts"]}
V2: dict[str, Any] = {**V1, "properties": {**V1["properties"],
                                           "score": {"type": ["number", "null"]}}}


def _config(table: Path, topic: str, broker: EmbeddedBroker, registry: SchemaRegistry,
            fmt: str, ordering: str | None = "ts", **source: Any) -> PipelineConfig:
    table_doc: dict[str, Any] = {"path": str(table), "record-key": ["id"]}
    if ordering:
        table_doc["precombine-field"] = ordering
    return config_from_dict({
        "source": {"type": "kafka", "format": fmt, **source,
                   "options": {"topic": topic, "scan.fetch.timeout": 0.05,
                               "properties": {"bootstrap.servers": broker.bootstrap_servers,
                                              "group.id": "reg-test"},
                               "schema.registry.url": registry.url}},
        "table": table_doc,
        "runtime": {"round": {"min-interval": 0, "max-records": 250}},
        "errors": {"tolerance": "all"},
    })


def _rows(table: Path) -> dict[int, dict[str, Any]]:
    return {int(r["id"]): {k: v for k, v in r.items() if not k.startswith("_hoodie")}
            for r in hudi_snapshot(table).to_pylist()}


def _run(cfg: PipelineConfig) -> Any:
    with Pipeline(cfg, InProcessEngine()) as p:
        return p.run(once=True)


def test_json_schema_topic_follows_the_subject(schema_registry: SchemaRegistry,
                                               broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("js"), 2)
    client = SchemaRegistryClient({"url": schema_registry.url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    model: dict[int, dict[str, Any]] = {}
    ts = 0

    def send(schema: dict[str, Any], n: int) -> None:
        nonlocal ts
        ser = JSONSerializer(json.dumps(schema), client)
        with ExactEndProducer(broker.bootstrap_servers) as p:
            for j in range(n):
                ts += 1
                rec: dict[str, Any] = {"id": j % 90, "name": f"n{ts}", "ts": ts}
                if "score" in schema["properties"]:
                    rec["score"] = j / 8
                p.produce(topic, j % 2, ser(rec, ctx))
                model[rec["id"]] = rec

    send(V1, 300)
    table = tmp_path / "events"
    cfg = _config(table, topic, broker, schema_registry, "json-schema")
    assert _run(cfg).error_records == 0
    assert _rows(table) == model
    send(V2, 120)
    _run(cfg)
    rows = _rows(table)
    assert "score" in rows[0]
    assert rows == {k: {**{"score": None}, **r} for k, r in model.items()}


def test_protobuf_topic_equals_the_model(schema_registry: SchemaRegistry,
                                         broker: EmbeddedBroker, tmp_path: Path) -> None:
    order_cls, _ = _order_message()
    topic = create_topic(broker.bootstrap_servers, unique("pb"), 2)
    ser = ProtobufSerializer(order_cls, SchemaRegistryClient({"url": schema_registry.url}),
                             conf={"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    model: dict[int, dict[str, Any]] = {}
    with ExactEndProducer(broker.bootstrap_servers) as p:
        for j in range(400):
            m = order_cls(id=j % 70, qty=j, price=j / 2, status=j % 2, tags=["x"] * (j % 2))
            m.name = f"n{j}"
            p.produce(topic, j % 2, ser(m, ctx))
            model[j % 70] = {"id": j % 70, "name": f"n{j}", "qty": j, "price": j / 2,
                             "status": "PAID" if j % 2 else "NEW", "tags": ["x"] * (j % 2),
                             "other": None}
    table = tmp_path / "orders"
    cfg = _config(table, topic, broker, schema_registry, "protobuf", ordering=None,
                  **{"schema-message": "shop.Order"})  # no ordering field: the last read wins
    assert _run(cfg).error_records == 0
    assert _rows(table) == model

