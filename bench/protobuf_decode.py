"""Decoding Confluent-framed Protobuf values of a 12-field message, one core. Not a test.

    PYTHONPATH=src:. .venv/bin/python -m bench.protobuf_decode [--records 1000000] [--runs 3]
        [--record]

The values are written by confluent-kafka's own ``ProtobufSerializer`` (schema registered in
the test registry, tests/helpers/schema_registry.py, on 127.0.0.1): a flat ``bench.Order``
(int64, strings, an enum, proto3 ``optional`` string and double, int32, double, bool,
sint32, fixed64). Measured in the same run over the same values in blocks of 65,536 (a Kafka
reader task's block):

* hoodline: :class:`hoodline.formats.registry_decoder.RegistryDecoder` (columnar path of
  :mod:`hoodline.formats.protobuf_wire`), output an Arrow table;
* peer ``runtime``: the ``protobuf`` runtime message by message (``FromString``, each field
  read into a row, ``pa.Table.from_pylist``) -- hoodline's path before the columnar one, and
  what a hand-written consumer does;
* peer ``confluent``: confluent-kafka's ``ProtobufDeserializer`` per value, then the same rows.

Reports the median CPU time (process, one thread) and wall time of ``--runs`` runs, records/s
from the CPU median, and the ratios. All outputs are checked equal.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from bench import common
from hoodline.formats.registry import RegistrySettings, SchemaKind, fetch_subject_schema
from hoodline.formats.registry_decoder import RegistryFormat

BLOCK = 65_536


def order_class() -> Any:
    """``bench.Order`` in the default descriptor pool (what the serializer needs)."""
    pool = descriptor_pool.Default()
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))
    except KeyError:
        pass
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="bench_order.proto", package="bench",
                                             syntax="proto3")
    status = fdp.enum_type.add(name="Status")
    for i, name in enumerate(["NEW", "PAID", "SHIPPED"]):
        status.value.add(name=name, number=i)
    msg = fdp.message_type.add(name="Order")
    fields = [("id", f.TYPE_INT64), ("customer", f.TYPE_STRING), ("region", f.TYPE_STRING),
              ("status", f.TYPE_ENUM), ("note", f.TYPE_STRING), ("qty", f.TYPE_INT32),
              ("amount", f.TYPE_DOUBLE), ("discount", f.TYPE_DOUBLE), ("paid", f.TYPE_BOOL),
              ("ts", f.TYPE_INT64), ("day", f.TYPE_SINT32), ("version", f.TYPE_FIXED64)]
    for number, (name, typ) in enumerate(fields, start=1):
        extra: dict[str, Any] = {"type_name": ".bench.Status"} if typ == f.TYPE_ENUM else {}
        if name in ("note", "discount"):
            msg.oneof_decl.add(name=f"_{name}")
            extra.update(proto3_optional=True, oneof_index=len(msg.oneof_decl) - 1)
        msg.field.add(name=name, number=number, type=typ, label=f.LABEL_OPTIONAL, **extra)
    pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))


def make_values(url: str, n: int) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    cls = order_class()
    ser = ProtobufSerializer(cls, SchemaRegistryClient({"url": url}),
                             conf={"use.deprecated.format": False})
    ctx = SerializationContext("orders", MessageField.VALUE)
    rng = random.Random(5)
    distinct = []
    for i in range(min(n, 200_000)):
        m = cls(id=i, customer=f"customer-{rng.randrange(100_000):06d}",
                region=rng.choice(["eu-west", "us-east", "ap-south"]), status=rng.randrange(3),
                qty=rng.randrange(1, 50), amount=round(rng.random() * 1000, 2),
                paid=rng.random() < 0.7, ts=1_700_000_000_000 + i * 17,
                day=19_700 - i % 400, version=i % 7)
        note = rng.choice([None, "gift wrap", "leave at the door, please"])
        if note is not None:
            m.note = note
        if rng.random() < 0.5:
            m.discount = rng.choice([0.1, 0.25])
        distinct.append(ser(m, ctx))
    return [distinct[i % len(distinct)] for i in range(n)]


def _timed(fn: Any) -> tuple[float, float, Any]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the result to BENCHMARKS.md")
    args = ap.parse_args(argv)

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from hoodline.formats.protobuf import ProtobufCodec, _row
    from tests.helpers.schema_registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        values = make_values(registry.url, args.records)
        blocks = [pa.array(values[i:i + BLOCK], pa.binary())
                  for i in range(0, len(values), BLOCK)]
        settings = RegistrySettings((("url", registry.url),), "orders-value",
                                    message_path="bench.Order")
        subject = fetch_subject_schema(settings, SchemaKind.PROTOBUF)
        decoder = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.PROTOBUF).decoder(
            subject.arrow, ["id"])
        codec = ProtobufCodec(subject.parsed, "bench.Order")
        deser = ProtobufDeserializer(order_class(), {"use.deprecated.format": False},
                                     SchemaRegistryClient({"url": registry.url}))
        ctx = SerializationContext("orders", MessageField.VALUE)

        def hoodline() -> pa.Table:
            return pa.concat_tables([decoder.decode(b).records for b in blocks])

        def runtime() -> pa.Table:
            out = []
            for b in blocks:
                offsets = np.frombuffer(b.buffers()[1], dtype=np.int32)[: len(b) + 1]
                data = np.frombuffer(b.buffers()[2], dtype=np.uint8)
                out.append(codec._decode_each(data, offsets[:-1].astype(np.int64) + 5,
                                              offsets[1:].astype(np.int64)).table)
            return pa.concat_tables(out)

        def peer() -> pa.Table:
            return pa.concat_tables([
                pa.Table.from_pylist([_row(deser(v, ctx)) for v in values[i:i + BLOCK]],
                                     schema=codec.arrow)
                for i in range(0, len(values), BLOCK)])

        hoodline()  # warm: writer schema fetched, code paths loaded
        results: dict[str, list[tuple[float, float]]] = {"hoodline": [], "runtime": [],
                                                         "confluent": []}
        check: dict[str, pa.Table] = {}
        for _ in range(args.runs):
            for name, fn in (("hoodline", hoodline), ("runtime", runtime), ("confluent", peer)):
                cpu, wall, out = _timed(fn)
                results[name].append((cpu, wall))
                check[name] = out
        for name in ("runtime", "confluent"):
            assert check["hoodline"].equals(check[name].cast(check["hoodline"].schema)), \
                f"outputs of hoodline and {name} differ"
    finally:
        registry.stop()

    n = len(values)
    rows = []
    med: dict[str, float] = {}
    for name, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        med[name] = cpu
        rows.append([name, f"{cpu:.3f} s", f"{wall:.3f} s", f"{n / cpu:,.0f}"])
    ratios = ", ".join(f"{med[p] / med['hoodline']:.1f}x {p}" for p in ("runtime", "confluent"))
    table = common.markdown_table(["system", "CPU (median)", "wall (median)", "records/s (CPU)"],
                                  rows)
    body = (f"{n:,} values of a 12-field Protobuf message "
            f"({sum(len(v) for v in values) / n:.0f} bytes each), {args.runs} runs, blocks of "
            f"{BLOCK:,}.\n\n{table}\n\nhoodline's speed (CPU): {ratios}.")
    print(body)
    if args.record:
        common.append_block("Protobuf decode (Confluent wire format)", body, common.machine())
    return 0


if __name__ == "__main__":
    main()
