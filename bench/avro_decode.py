"""Decoding Confluent-framed Avro values of a 12-field record, one core (issue 14's target:
>= 300k records/s). Not a test.

    PYTHONPATH=src:. .venv/bin/python -m bench.avro_decode [--records 1000000] [--runs 5] [--record]
        [--schema order|debezium]

``--schema debezium``: Debezium change events (an envelope with optional ``before``/``after``
records of a 6-column row, a ``source`` record, ``op``, ``ts_ms``: nested records).

The values are written by confluent-kafka's own ``AvroSerializer`` (schema registered in the
test registry, tests/helpers/schema_registry.py, on 127.0.0.1). Measured in the same run, each
over the same values in blocks of 65,536 (the block size of a Kafka reader task):

* hoodline: :class:`hoodline.formats.registry_decoder.RegistryDecoder` (columnar; writer
  schema fetched once, as in a task), output an Arrow table;
* peer ``confluent``: confluent-kafka's ``AvroDeserializer`` (fastavro, one record at a time),
  its dicts turned into an Arrow table with ``pa.Table.from_pylist`` -- what a hand-written
  consumer does;
* peer ``fastavro``: the bare minimum of that loop: ``fastavro.schemaless_reader`` per value
  (frame header skipped, parsed schema reused), then ``pa.Table.from_pylist``.

Reports the median CPU time (process, one thread) and wall time of ``--runs`` runs, records/s
from the CPU median, and the ratio. Both outputs are checked equal.
"""

from __future__ import annotations

import argparse
import io
import json
import random
from typing import Any

import fastavro
import pyarrow as pa

from bench import common
from hoodline.formats.registry import RegistrySettings, fetch_subject_schema
from hoodline.formats.registry_decoder import RegistryFormat

BLOCK = 65_536
SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "region", "type": "string"},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "discount", "type": ["null", "double"], "default": None},
        {"name": "paid", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "version", "type": "long"},
    ],
}


_VALUE: dict[str, Any] = {
    "type": "record", "name": "Value", "namespace": "shop.public.orders",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]},
               {"name": "email", "type": ["null", "string"]},
               {"name": "qty", "type": ["null", "int"]},
               {"name": "price", "type": ["null", "double"]},
               {"name": "updated", "type": ["null", "long"]}],
}
DEBEZIUM: dict[str, Any] = {
    "type": "record", "name": "Envelope", "namespace": "shop.public.orders",
    "fields": [
        {"name": "before", "type": ["null", _VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "version", "type": "string"}, {"name": "connector", "type": "string"},
            {"name": "ts_ms", "type": "long"}, {"name": "db", "type": "string"},
            {"name": "lsn", "type": ["null", "long"]}]}},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}


def _debezium_event(i: int) -> dict[str, Any]:
    row = {"id": i, "name": f"name{i}", "email": f"u{i}@example.org", "qty": i % 50,
           "price": i / 3, "updated": 1_700_000_000_000 + i}
    return {"before": row if i % 3 == 1 else None, "after": None if i % 7 == 0 else row,
            "source": {"version": "2.7.0", "connector": "postgresql", "ts_ms": i, "db": "shop",
                       "lsn": i * 8},
            "op": "d" if i % 7 == 0 else ("u" if i % 3 == 1 else "c"), "ts_ms": i}


def make_values(url: str, n: int, schema: dict[str, Any] | None = None) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema or SCHEMA))
    ctx = SerializationContext("orders", MessageField.VALUE)
    if schema is DEBEZIUM:
        distinct = [ser(_debezium_event(i), ctx) for i in range(min(n, 200_000))]
        return [distinct[i % len(distinct)] for i in range(n)]
    rng = random.Random(5)
    distinct = [ser({
        "id": i, "customer": f"customer-{rng.randrange(100_000):06d}",
        "region": rng.choice(["eu-west", "us-east", "ap-south"]),
        "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
        "note": rng.choice([None, "gift wrap", "leave at the door, please"]),
        "qty": rng.randrange(1, 50), "amount": round(rng.random() * 1000, 2),
        "discount": rng.choice([None, 0.1, 0.25]), "paid": rng.random() < 0.7,
        "ts": 1_700_000_000_000 + i * 17, "day": 19_700 + i % 400, "version": i % 7,
    }, ctx) for i in range(min(n, 200_000))]
    return [distinct[i % len(distinct)] for i in range(n)]



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--record", action="store_true", help="append the result to BENCHMARKS.md")
    ap.add_argument("--schema", choices=("order", "debezium"), default="order",
                    help="12-field order record, or Debezium change events (nested records)")
    args = ap.parse_args(argv)

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.helpers.schema_registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        schema = DEBEZIUM if args.schema == "debezium" else SCHEMA
        values = make_values(registry.url, args.records, schema)
        blocks = [pa.array(values[i:i + BLOCK], pa.binary())
                  for i in range(0, len(values), BLOCK)]
        settings = RegistrySettings((("url", registry.url),), "orders-value")
        reader = fetch_subject_schema(settings)
        decoder = RegistryFormat(settings, reader.schema_id).decoder(
            reader.arrow, [] if schema is DEBEZIUM else ["id"])
        deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
        ctx = SerializationContext("orders", MessageField.VALUE)

        def hoodline() -> pa.Table:
            return pa.concat_tables([decoder.decode(b).records for b in blocks])

        parsed = fastavro.parse_schema(schema)

        def bare() -> pa.Table:
            return pa.concat_tables([
                pa.Table.from_pylist([fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None)
                                      for v in values[i:i + BLOCK]], schema=reader.arrow)
                for i in range(0, len(values), BLOCK)])

        def peer() -> pa.Table:
            return pa.concat_tables([
                pa.Table.from_pylist([deser(v, ctx) for v in values[i:i + BLOCK]],
                                     schema=reader.arrow)
                for i in range(0, len(values), BLOCK)])

        hoodline()  # warm: writer schema fetched, code paths loaded
        peer_sample = min(len(values), 200_000)
        results: dict[str, list[tuple[float, float]]] = {"hoodline": [], "confluent": [],
                                                         "fastavro": []}
        check: dict[str, pa.Table] = {}
        for _ in range(args.runs):
            cpu, wall, out = common.timed(hoodline)
            results["hoodline"].append((cpu, wall))
            check["hoodline"] = out
            for name, fn in (("confluent", peer), ("fastavro", bare)):
                cpu, wall, out = common.timed(fn)
                results[name].append((cpu, wall))
                check[name] = out
        for name in ("confluent", "fastavro"):
            assert check["hoodline"].slice(0, peer_sample).equals(
                check[name].slice(0, peer_sample)), f"outputs of hoodline and {name} differ"
    finally:
        registry.stop()

    n = len(values)
    table, ratios = common.cpu_table(results, n, ("confluent", "fastavro"))
    what = ("Debezium change events (nested records)" if args.schema == "debezium"
            else "a 12-field record")
    body = (f"{n:,} values of {what} ({sum(len(v) for v in values) / n:.0f} bytes "
            f"each), {args.runs} runs, blocks of {BLOCK:,}; target >= 300,000 records/s on one "
            f"core.\n\n{table}\n\nhoodline's speed (CPU): {ratios}.")
    print(body)
    if args.record:
        title = "Avro decode (Confluent wire format)" + (
            ", Debezium envelopes" if args.schema == "debezium" else "")
        common.append_block(title, body, common.machine())
    return 0


if __name__ == "__main__":
    main()
