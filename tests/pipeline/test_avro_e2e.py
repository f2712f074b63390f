"""Avro topics with a Schema Registry, end to end on the real broker and the test registry
(tests/helpers/schema_registry.py, spoken to only through confluent-kafka's client).

The producers are confluent-kafka's own ``AvroSerializer`` (the Confluent wire format as real
producers write it). hudi-rs reads the table back; the error table holds every bad record with
its schema id and reason. The driver-policy scenarios run on the in-process engine (the same
task functions as Spark); tests/pipeline/test_avro_crash.py runs Avro on Spark, killed and
resumed.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from hoodline.broker import EmbeddedBroker, ExactEndProducer
from hoodline.errors import BadRecordError
from hoodline.pipeline.api import Pipeline, RoundReport
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.table.properties import TableType
from hoodline.testing.engine import InProcessEngine
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.pipeline_stream import create_topic, region, unique
from tests.helpers.schema_registry import SchemaRegistry

pytestmark = [pytest.mark.kafka]

V1: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "qty", "type": "int"},
    ],
}
#: v2 adds an optional field and widens qty (int -> long), both BACKWARD compatible
V2: dict[str, Any] = {**V1, "fields": [*V1["fields"][:4], {"name": "qty", "type": "long"},
                                        {"name": "score", "type": ["null", "double"],
                                         "default": None}]}
#: v3 adds a field with a non-null default
V3: dict[str, Any] = {**V2, "fields": [*V2["fields"], {"name": "channel", "type": "string",
                                                       "default": "web"}]}
KEY: dict[str, Any] = {"type": "record", "name": "OrderKey", "namespace": "shop",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "region", "type": "string"}]}


@dataclass
class AvroStream:
    """Produces Avro orders with confluent-kafka's serializer and keeps the model."""

    registry: SchemaRegistry
    bootstrap: str
    topic: str
    partitions: int = 2
    ts: int = 0
    model: dict[int, dict[str, Any]] = field(default_factory=dict)
    bad: int = 0

    def __post_init__(self) -> None:
        self.client = SchemaRegistryClient({"url": self.registry.url})

    def serializer(self, schema: dict[str, Any], *, key: bool = False) -> AvroSerializer:
        return AvroSerializer(self.client, json.dumps(schema),
                              conf={"auto.register.schemas": True})

    def produce(self, schema: dict[str, Any], n: int, keys: int, *, tombstones: int = 0,
                bad: list[bytes] | None = None) -> None:
        value_ser = self.serializer(schema)
        key_ser = self.serializer(KEY, key=True)
        vctx = SerializationContext(self.topic, MessageField.VALUE)
        kctx = SerializationContext(self.topic, MessageField.KEY)
        names = {f["name"] for f in schema["fields"]}
        with ExactEndProducer(self.bootstrap) as p:
            for j in range(n):
                self.ts += 1
                i = (j * 7) % keys
                rec: dict[str, Any] = {"id": i, "name": f"n{i}-{self.ts}" if j % 5 else None,
                                       "region": region(i), "ts": self.ts, "qty": j % 11}
                if "score" in names:
                    rec["score"] = j / 4
                if "channel" in names:
                    rec["channel"] = "app" if j % 2 else "web"
                key = key_ser({"id": i, "region": region(i)}, kctx)
                p.produce(self.topic, i % self.partitions, value_ser(rec, vctx), key)
                self.model[i] = rec
            for j in range(tombstones):
                i = (j * 3) % keys
                key = key_ser({"id": i, "region": region(i)}, kctx)
                p.produce(self.topic, i % self.partitions, None, key)
                self.model.pop(i, None)
            for j, value in enumerate(bad or []):
                p.produce(self.topic, j % self.partitions, value, b"bad")
                self.bad += 1


def _config(table: Path, stream: AvroStream, errors: str = "all", **source: Any) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "kafka", "format": "avro", **source,
                   "options": {"topic": stream.topic, "scan.fetch.timeout": 0.05,
                               "properties": {"bootstrap.servers": stream.bootstrap,
                                              "group.id": "avro-test"},
                               "schema.registry": {"url": stream.registry.url}}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts"},
        "runtime": {"master": "local[2]", "round": {"min-interval": 0, "max-records": 400}},
        "errors": {"tolerance": errors},
    })


def _rows(table: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for r in hudi_snapshot(table).to_pylist():
        assert r["id"] not in out, f"key {r['id']} twice"
        out[int(r["id"])] = {k: v for k, v in r.items() if not k.startswith("_hoodie")}
    return out


def _expected(model: dict[int, dict[str, Any]], columns: list[str],
              defaults: dict[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    return {i: {c: r.get(c, (defaults or {}).get(c)) for c in columns} for i, r in model.items()}


def _stream(schema_registry: SchemaRegistry, broker: EmbeddedBroker) -> AvroStream:
    topic = create_topic(broker.bootstrap_servers, unique("avro"), 2)
    return AvroStream(schema_registry, broker.bootstrap_servers, topic)


def test_evolution_across_runs_bad_records_and_avro_tombstones(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    stream = _stream(schema_registry, broker)
    table = tmp_path / "orders"
    unknown_id = struct.pack(">bI", 0, 99_999) + b"\x02"
    stream.produce(V1, 300, 60, bad=[b'{"id": 1}', unknown_id])
    truncated = stream.serializer(V1)(
        {"id": 1, "name": "x", "region": "r1", "ts": 1, "qty": 1},
        SerializationContext(stream.topic, MessageField.VALUE))[:-3]
    stream.produce(V1, 0, 1, bad=[truncated])
    with Pipeline(_config(table, stream), InProcessEngine()) as p:
        summary = p.run(once=True)
    assert summary.error_records == 3
    rows = _rows(table)
    assert set(next(iter(rows.values()))) == {"id", "name", "region", "ts", "qty"}
    assert rows == _expected(stream.model, ["id", "name", "region", "ts", "qty"])
    assert hudi_snapshot(table).schema.field("qty").type == pa.int32()
    errors = hudi_snapshot(str(table) + "_errors")
    reasons = sorted(errors.column("reason").to_pylist())
    assert reasons == ["not_wire_format", "unknown_schema", "unparseable"]
    detail = pc.filter(errors.column("detail"), pc.equal(errors.column("reason"),
                                                          "unknown_schema"))
    assert detail.to_pylist() == ["schema id 99999 is not in the Schema Registry"]

    # v2 registered (new optional field, qty widened): old and new producers, Avro tombstones
    stream.produce(V2, 200, 80, tombstones=10)
    stream.produce(V1, 50, 80)
    with Pipeline(_config(table, stream), InProcessEngine()) as p:
        summary = p.run(once=True)
    assert summary.records_read == 260
    rows = _rows(table)
    assert set(next(iter(rows.values()))) == {"id", "name", "region", "ts", "qty", "score"}
    assert rows == _expected(stream.model, ["id", "name", "region", "ts", "qty", "score"])
    assert hudi_snapshot(table).schema.field("qty").type == pa.int64()  # widened by v2
    assert any(r["score"] is None for r in rows.values())  # v1 records: no score
    assert any(r["score"] is not None for r in rows.values())


def test_new_version_mid_stream_is_followed_without_losing_fields(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """A version registered while the pipeline runs: the round that meets it is planned again
    with the subject's latest version, so the new field (with its default for older records)
    reaches the table. That is no failed round (it used to count towards
    runtime.max-consecutive-failures, warn, and raise the failure metrics)."""
    stream = _stream(schema_registry, broker)
    table = tmp_path / "orders"
    stream.produce(V2, 100, 40)
    stop = threading.Event()
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        reports.append(report)
        if len(reports) == 1:
            stream.produce(V3, 120, 40)
        if sum(r.records_read for r in reports if r.committed) >= 220:
            stop.set()

    failures: list[BaseException] = []
    cfg = _config(table, stream)
    cfg = dataclasses.replace(cfg, runtime=dataclasses.replace(cfg.runtime,
                                                               max_consecutive_failures=1))
    with Pipeline(cfg, InProcessEngine()) as p:
        p.run(on_round=on_round, stop=stop, on_failure=lambda e, _r: failures.append(e))
    assert sum(r.records_read for r in reports if r.committed) == 220
    assert failures == [] and not any(r.retries for r in reports)
    rows = _rows(table)
    assert set(next(iter(rows.values()))) >= {"channel", "score"}
    assert rows == _expected(stream.model, ["id", "name", "region", "ts", "qty", "score",
                                            "channel"])


def test_a_version_that_only_widens_a_field_is_followed_mid_stream(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """A version with no new field but a wider type (qty int -> long) met by a continuous run:
    its records went to the error table ("field 'qty' is int64, the table has int32") until a
    restart widened the table. Now the round follows it and the column widens."""
    stream = _stream(schema_registry, broker)
    table = tmp_path / "orders"
    widened = {**V1, "fields": [*V1["fields"][:4], {"name": "qty", "type": "long"}]}
    stream.produce(V1, 60, 30)
    stop = threading.Event()
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        reports.append(report)
        if len(reports) == 1:
            stream.produce(widened, 80, 30)
        if sum(r.records_read for r in reports if r.committed) >= 140:
            stop.set()

    with Pipeline(_config(table, stream), InProcessEngine()) as p:
        p.run(on_round=on_round, stop=stop)
    assert sum(r.error_records for r in reports) == 0
    assert _rows(table) == _expected(stream.model, ["id", "name", "region", "ts", "qty"])
    assert hudi_snapshot(table).schema.field("qty").type == pa.int64()


def test_unknown_schema_stops_the_pipeline_with_tolerance_none(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    stream = _stream(schema_registry, broker)
    stream.produce(V1, 20, 10, bad=[struct.pack(">bI", 0, 77_777) + b"\x00"])
    with Pipeline(_config(tmp_path / "t", stream, errors="none"), InProcessEngine()) as p:
        with pytest.raises(BadRecordError, match="schema id 77777"):
            p.run(once=True)


#: a field that is one of several types (as event schemas often have), and an array of such
PAYMENT: dict[str, Any] = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "method", "type": ["null", "string", "long", {
            "type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]}],
         "default": None},
        {"name": "tags", "type": {"type": "array", "items": ["string", "shop.Card"]}},
    ],
}


@pytest.mark.parametrize("table_type", list(TableType))
def test_a_union_of_several_types_becomes_a_struct_of_members(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path,
    table_type: TableType,
) -> None:
    """A version holding ``["null", "string", "long", Card]`` was refused as the table's
    schema. Now it is read as Spark (and so Hudi's Spark writer) reads it: a struct with one
    nullable member per non-null type, ``member<i>`` in the union's order, the value in the
    member of its branch."""
    stream = _stream(schema_registry, broker)
    ser = stream.serializer(PAYMENT)
    ctx = SerializationContext(stream.topic, MessageField.VALUE)
    methods: list[Any] = [None, "cash", 42, ("shop.Card", {"last4": "1234"})]
    with ExactEndProducer(stream.bootstrap) as p:
        for i in range(8):
            rec = {"id": i, "region": region(i), "ts": i, "method": methods[i % 4],
                   "tags": ["a", ("shop.Card", {"last4": str(i)})]}
            p.produce(stream.topic, i % 2, ser(rec, ctx), str(i).encode())
    table = tmp_path / "payments"
    cfg = _config(table, stream, errors="none")
    cfg = dataclasses.replace(cfg, table=dataclasses.replace(cfg.table, table_type=table_type))
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 8
    read = hudi_snapshot(table)
    assert read.schema.field("method").type == pa.struct([
        ("member0", pa.string()), ("member1", pa.int64()),
        ("member2", pa.struct([pa.field("last4", pa.string(), nullable=False)]))])
    rows = _rows(table)
    none = {"member0": None, "member1": None, "member2": None}
    expected = [None, {**none, "member0": "cash"}, {**none, "member1": 42},
                {**none, "member2": {"last4": "1234"}}]
    assert {i: r["method"] for i, r in rows.items()} == {i: expected[i % 4] for i in range(8)}
    assert rows[5]["tags"] == [{"member0": "a", "member1": None},
                               {"member0": None, "member1": {"last4": "5"}}]


#: a nested record, and a version that adds an optional field to it (BACKWARD compatible)
NESTED_V1: dict[str, Any] = {
    "type": "record", "name": "Customer", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"}]}},
    ],
}
NESTED_V2: dict[str, Any] = {**NESTED_V1, "fields": [*NESTED_V1["fields"][:3], {
    "name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "street", "type": "string"},
        {"name": "zip", "type": ["null", "string"], "default": None}]}}]}


def test_a_version_adding_a_field_to_a_nested_record_evolves_the_table(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The most common Avro evolution of nested data was refused ("column 'address' changes
    type ...; type changes are not supported"): a nested record gaining an optional field.
    Now the struct column gains the field; rows written before, and records of producers
    still on the old version, read it as null (hoodline and hudi-rs)."""
    stream = _stream(schema_registry, broker)
    ctx = SerializationContext(stream.topic, MessageField.VALUE)

    def produce(schema: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        ser = stream.serializer(schema)
        with ExactEndProducer(stream.bootstrap) as p:
            for r in rows:
                p.produce(stream.topic, r["id"] % 2, ser(r, ctx), str(r["id"]).encode())

    produce(NESTED_V1, [{"id": i, "region": region(i), "ts": 1, "address": {"street": f"s{i}"}}
                        for i in range(4)])
    table = tmp_path / "customers"
    cfg = _config(table, stream, errors="none")
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 4
    produce(NESTED_V2, [{"id": 1, "region": region(1), "ts": 2,
                         "address": {"street": "new1", "zip": "z1"}}])
    produce(NESTED_V1, [{"id": 2, "region": region(2), "ts": 3, "address": {"street": "old2"}}])
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 2
    assert hudi_snapshot(table).schema.field("address").type == pa.struct([
        pa.field("street", pa.string(), nullable=False), ("zip", pa.string())])
    rows = _rows(table)
    assert {i: r["address"] for i, r in rows.items()} == {
        0: {"street": "s0", "zip": None}, 1: {"street": "new1", "zip": "z1"},
        2: {"street": "old2", "zip": None}, 3: {"street": "s3", "zip": None}}
