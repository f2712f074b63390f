"""Decoding Confluent-framed Protobuf values of a 12-field message, one core. Not a test.

    PYTHONPATH=src:. .venv/bin/python -m bench.protobuf_decode [--records 1000000] [--runs 3]
        [--message order|event] [--record]

The values are written by confluent-kafka's own ``ProtobufSerializer`` (schema registered in
the test registry, tests/helpers/schema_registry.py, on 127.0.0.1): a flat ``bench.Order``
(int64, strings, an enum, proto3 ``optional`` string and double, int32, double, bool,
sint32, fixed64); with ``--message event`` a ``bench.Event`` of nested messages (a struct
holding an enum and another struct) and Google's Timestamp and wrapper types. Measured in the
same run over the same values in blocks of 65,536 (a Kafka
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
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from bench import common
from hoodline.formats.registry import RegistrySettings, SchemaKind, fetch_subject_schema
from hoodline.formats.registry_decoder import RegistryFormat

BLOCK = 65_536


def _defined(full_name: str) -> Any:
    """The message class of ``full_name`` in the default descriptor pool (what the serializer
    needs), or None before its file was added."""
    try:
        pool = descriptor_pool.Default()
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    except KeyError:
        return None


def order_class() -> Any:
    """``bench.Order`` in the default descriptor pool."""
    if (cls := _defined("bench.Order")) is not None:
        return cls
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
    descriptor_pool.Default().AddSerializedFile(fdp.SerializeToString())
    return _defined("bench.Order")


def event_class() -> Any:
    """``bench.Event`` (nested messages, Google's well-known types) in the default pool."""
    from google.protobuf import timestamp_pb2, wrappers_pb2  # noqa: F401 - in the pool

    if (cls := _defined("bench.Event")) is not None:
        return cls
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="bench_event.proto", package="bench", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])
    kind = fdp.enum_type.add(name="Kind")
    for i, name in enumerate(["CLICK", "VIEW", "BUY"]):
        kind.value.add(name=name, number=i)
    event = fdp.message_type.add(name="Event")
    point = fdp.message_type.add(name="Point")
    point.field.add(name="x", number=1, type=f.TYPE_SINT64, label=f.LABEL_OPTIONAL)
    point.field.add(name="label", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    box = fdp.message_type.add(name="Box")
    box.field.add(name="kind", number=1, type=f.TYPE_ENUM, type_name=".bench.Kind",
                  label=f.LABEL_OPTIONAL)
    box.field.add(name="corner", number=2, type=f.TYPE_MESSAGE, type_name=".bench.Point",
                  label=f.LABEL_OPTIONAL)
    fields = [("id", f.TYPE_INT64, ""), ("user", f.TYPE_STRING, ""),
              ("box", f.TYPE_MESSAGE, ".bench.Box"),
              ("at", f.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
              ("count", f.TYPE_MESSAGE, ".google.protobuf.Int64Value"),
              ("note", f.TYPE_MESSAGE, ".google.protobuf.StringValue"),
              ("amount", f.TYPE_DOUBLE, "")]
    for number, (name, typ, type_name) in enumerate(fields, start=1):
        extra: dict[str, Any] = {"type_name": type_name} if type_name else {}
        event.field.add(name=name, number=number, type=typ, label=f.LABEL_OPTIONAL, **extra)
    descriptor_pool.Default().AddSerializedFile(fdp.SerializeToString())
    return _defined("bench.Event")


def _event(cls: Any, i: int, rng: random.Random) -> Any:
    m = cls(id=i, user=f"user-{rng.randrange(100_000):06d}", amount=round(rng.random() * 100, 2))
    m.box.kind = rng.randrange(3)
    if rng.random() < 0.8:
        m.box.corner.x = rng.randrange(-1000, 1000)
        m.box.corner.label = rng.choice(["top", "left", "bottom-right"])
    m.at.seconds = 1_700_000_000 + i
    m.at.nanos = rng.randrange(1_000_000_000)
    if rng.random() < 0.6:
        m.count.value = rng.randrange(10_000)
    if rng.random() < 0.3:
        m.note.value = rng.choice(["gift", "promo code applied"])
    return m


def make_values(url: str, n: int, message: str = "order") -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    cls = event_class() if message == "event" else order_class()
    ser = ProtobufSerializer(cls, SchemaRegistryClient({"url": url}),
                             conf={"use.deprecated.format": False})
    ctx = SerializationContext("orders", MessageField.VALUE)
    rng = random.Random(5)
    distinct = []
    for i in range(min(n, 200_000)):
        if message == "event":
            distinct.append(ser(_event(cls, i, rng), ctx))
            continue
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



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the result to BENCHMARKS.md")
    ap.add_argument("--message", choices=("order", "event"), default="order",
                    help="flat 12-field order, or an event of nested and well-known messages")
    args = ap.parse_args(argv)
    full_name = "bench.Event" if args.message == "event" else "bench.Order"

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from hoodline.formats.protobuf import ProtobufCodec, _row
    from tests.helpers.schema_registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        values = make_values(registry.url, args.records, args.message)
        blocks = [pa.array(values[i:i + BLOCK], pa.binary())
                  for i in range(0, len(values), BLOCK)]
        settings = RegistrySettings((("url", registry.url),), "orders-value",
                                    message_path=full_name)
        subject = fetch_subject_schema(settings, SchemaKind.PROTOBUF)
        decoder = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.PROTOBUF).decoder(
            subject.arrow, ["id"])
        codec = ProtobufCodec(subject.parsed, full_name)
        cls = event_class() if args.message == "event" else order_class()
        deser = ProtobufDeserializer(cls, {"use.deprecated.format": False},
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
                cpu, wall, out = common.timed(fn)
                results[name].append((cpu, wall))
                check[name] = out
        for name in ("runtime", "confluent"):
            assert check["hoodline"].equals(check[name].cast(check["hoodline"].schema)), \
                f"outputs of hoodline and {name} differ"
    finally:
        registry.stop()

    n = len(values)
    table, ratios = common.cpu_table(results, n, ("runtime", "confluent"))
    what = ("an event Protobuf message (nested messages, Timestamp, wrappers)"
            if args.message == "event" else "a 12-field Protobuf message")
    body = (f"{n:,} values of {what} "
            f"({sum(len(v) for v in values) / n:.0f} bytes each), {args.runs} runs, blocks of "
            f"{BLOCK:,}.\n\n{table}\n\nhoodline's speed (CPU): {ratios}.")
    print(body)
    if args.record:
        title = "Protobuf decode (Confluent wire format)" + (
            ", nested messages" if args.message == "event" else "")
        common.append_block(title, body, common.machine())
    return 0


if __name__ == "__main__":
    main()
