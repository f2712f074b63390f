"""JSON Schema and Protobuf values in the Confluent wire format, as confluent-kafka's own
serializers write them (through the test registry): decoded into the subject's columns, bad
values accounted for; the JSON Schema -> Arrow mapping."""

from __future__ import annotations

import functools
import json
import struct
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from hoodline.errors import ConfigError
from hoodline.formats.json_schema import JsonSchemaError, json_schema_to_arrow
from hoodline.formats.registry import RegistrySettings, SchemaKind, fetch_subject_schema
from hoodline.formats.registry_decoder import INCOMPATIBLE_SCHEMA, RegistryFormat
from tests.helpers.pipeline_stream import unique
from tests.helpers.schema_registry import SchemaRegistry

ORDER_JSON: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/definitions/Address"},
    },
    "required": ["id"],
    "definitions": {"Address": {"type": "object", "properties": {
        "city": {"type": "string"}, "zip": {"anyOf": [{"type": "null"}, {"type": "string"}]}}}},
}


def test_json_schema_maps_to_columns_and_refuses_what_has_no_column_type() -> None:
    arrow = json_schema_to_arrow(ORDER_JSON)
    assert arrow == pa.schema([
        ("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
        ("paid", pa.bool_()), ("at", pa.timestamp("us", tz="UTC")), ("day", pa.date32()),
        ("tags", pa.list_(pa.string())),
        ("address", pa.struct([("city", pa.string()), ("zip", pa.string())])),
    ])
    with pytest.raises(JsonSchemaError, match=r"^x: type .* \(several types\)"):
        json_schema_to_arrow({"type": "object", "properties": {"x": {"type": ["string",
                                                                            "integer"]}}})
    with pytest.raises(JsonSchemaError, match="not local"):
        json_schema_to_arrow({"type": "object", "properties": {
            "x": {"$ref": "http://example.com/other.json"}}})
    with pytest.raises(JsonSchemaError, match="a table needs named fields"):
        json_schema_to_arrow({"type": "string"})


def _settings(registry: SchemaRegistry, subject: str, message: str = "") -> RegistrySettings:
    return RegistrySettings((("url", registry.url),), subject, None, message)


def test_json_schema_values_from_confluents_serializer(schema_registry: SchemaRegistry) -> None:
    topic = unique("orders-json")
    client = SchemaRegistryClient({"url": schema_registry.url})
    ser = JSONSerializer(json.dumps(ORDER_JSON), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [{"id": i, "name": None if i % 3 == 0 else f"n{i}", "amount": i / 2,
                "paid": i % 2 == 0, "at": f"2024-03-0{1 + i % 9}T10:00:00Z",
                "day": f"2024-03-1{i % 10}", "tags": ["a"] * (i % 3),
                "address": {"city": "Lyon", "zip": None}} for i in range(200)]
    values = [ser(r, ctx) for r in records]
    values += [b"{\"id\": 1}", struct.pack(">bI", 0, 4242) + b"{}",
               values[0][:5] + b"{not json", values[0][:5] + b'{"name": "no id"}']
    settings = _settings(schema_registry, f"{topic}-value")
    subject = fetch_subject_schema(settings, SchemaKind.JSON)
    assert subject.arrow.names == list(ORDER_JSON["properties"])
    fmt = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.JSON)
    result = fmt.decoder(subject.arrow, ["id"]).decode(pa.array(values, pa.binary()))
    assert result.row_index.to_pylist() == list(range(200))
    got = result.records.to_pylist()
    assert [r["id"] for r in got] == list(range(200))
    assert got[4]["name"] == "n4" and got[3]["name"] is None
    assert str(got[1]["at"]) == "2024-03-02 10:00:00+00:00"
    assert got[2]["tags"] == ["a", "a"] and got[5]["address"] == {"city": "Lyon", "zip": None}
    reasons = dict(zip(result.errors.index.to_pylist(), result.errors.reason.to_pylist(),
                       strict=True))
    assert reasons == {200: "not_wire_format", 201: "unknown_schema", 202: "unparseable",
                       203: "missing_key"}
    # a JSON Schema subject is not read as Avro
    with pytest.raises(ConfigError, match="is a JSON schema"):
        fetch_subject_schema(settings, SchemaKind.AVRO)


@functools.cache
def _order_message() -> Any:
    """shop.Order (and shop.Other) built at run time, once per process (the default descriptor
    pool refuses a second file defining the same symbols)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="hoodline_test_order.proto", package="shop",
                                             syntax="proto3")
    status = fdp.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    other = fdp.message_type.add(name="Other")
    other.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    msg = fdp.message_type.add(name="Order")
    f = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    msg.field.add(name="name", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL,
                  proto3_optional=True, oneof_index=0)
    msg.oneof_decl.add(name="_name")
    msg.field.add(name="qty", number=3, type=f.TYPE_UINT32, label=f.LABEL_OPTIONAL)
    msg.field.add(name="price", number=4, type=f.TYPE_DOUBLE, label=f.LABEL_OPTIONAL)
    msg.field.add(name="status", number=5, type=f.TYPE_ENUM, type_name=".shop.Status",
                  label=f.LABEL_OPTIONAL)
    msg.field.add(name="tags", number=6, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    msg.field.add(name="other", number=7, type=f.TYPE_MESSAGE, type_name=".shop.Other",
                  label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(fdp.SerializeToString())
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Other")))


def test_protobuf_values_from_confluents_serializer(schema_registry: SchemaRegistry) -> None:
    order_cls, other_cls = _order_message()
    topic = unique("orders-pb")
    client = SchemaRegistryClient({"url": schema_registry.url})
    ser = ProtobufSerializer(order_cls, client, conf={"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = []
    for i in range(50):
        m = order_cls(id=i, qty=i * 3, price=i / 4, status=i % 2, tags=["t"] * (i % 3))
        if i % 4:
            m.name = f"n{i}"
        if i % 5 == 0:
            m.other.x = i
        values.append(ser(m, ctx))
    # the file's other message (index path [0]) under the same schema id, and a corrupt one
    values.append(values[0][:5] + b"\x02\x00" + other_cls(x=1).SerializeToString())
    values.append(values[1][:-2] + b"\xff")
    settings = _settings(schema_registry, f"{topic}-value", "shop.Order")
    subject = fetch_subject_schema(settings, SchemaKind.PROTOBUF)
    assert subject.arrow == pa.schema([
        ("id", pa.int64()), ("name", pa.string()), ("qty", pa.uint32()), ("price", pa.float64()),
        ("status", pa.string()), ("tags", pa.list_(pa.string())),
        ("other", pa.struct([("x", pa.int32())]))])
    fmt = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.PROTOBUF)
    result = fmt.decoder(subject.arrow, ["id"]).decode(pa.array(values, pa.binary()))
    got = result.records.to_pylist()
    assert [r["id"] for r in got] == list(range(50))
    assert got[0] == {"id": 0, "name": None, "qty": 0, "price": 0.0, "status": "NEW",
                      "tags": [], "other": {"x": 0}}
    assert got[3] == {"id": 3, "name": "n3", "qty": 9, "price": 0.75, "status": "PAID",
                      "tags": [], "other": None}
    reasons = dict(zip(result.errors.index.to_pylist(), result.errors.reason.to_pylist(),
                       strict=True))
    assert reasons == {50: INCOMPATIBLE_SCHEMA, 51: "unparseable"}
    assert "shop.Order" in result.errors.detail[0].as_py()


@functools.cache
def _invoice_message() -> Any:
    """shop.Invoice importing a user file (a schema reference) and Google's well-known types."""
    f = descriptor_pb2.FieldDescriptorProto
    common = descriptor_pb2.FileDescriptorProto(name="hoodline_test_money.proto",
                                                package="shop", syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    money.field.add(name="currency", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    main = descriptor_pb2.FileDescriptorProto(
        name="hoodline_test_invoice.proto", package="shop", syntax="proto3",
        dependency=["hoodline_test_money.proto", "google/protobuf/timestamp.proto",
                    "google/protobuf/wrappers.proto"])
    inv = main.message_type.add(name="Invoice")
    inv.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    inv.field.add(name="at", number=2, type=f.TYPE_MESSAGE,
                  type_name=".google.protobuf.Timestamp", label=f.LABEL_OPTIONAL)
    inv.field.add(name="discount", number=3, type=f.TYPE_MESSAGE,
                  type_name=".google.protobuf.Int64Value", label=f.LABEL_OPTIONAL)
    inv.field.add(name="total", number=4, type=f.TYPE_MESSAGE, type_name=".shop.Money",
                  label=f.LABEL_OPTIONAL)
    from google.protobuf import timestamp_pb2, wrappers_pb2  # noqa: F401 - in the pool

    pool = descriptor_pool.Default()
    pool.AddSerializedFile(common.SerializeToString())
    pool.AddSerializedFile(main.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Invoice"))


def test_protobuf_imports_references_and_well_known_types(
        schema_registry: SchemaRegistry) -> None:
    invoice_cls = _invoice_message()
    topic = unique("invoices")
    client = SchemaRegistryClient({"url": schema_registry.url})
    ser = ProtobufSerializer(invoice_cls, client, conf={"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = []
    for i in range(5):
        m = invoice_cls(id=i)
        m.at.seconds, m.at.nanos = 1_700_000_000 + i, 250_000_000
        if i % 2:
            m.discount.value = i * 10
        m.total.cents, m.total.currency = i * 100, "EUR"
        values.append(ser(m, ctx))
    settings = _settings(schema_registry, f"{topic}-value")
    subject = fetch_subject_schema(settings, SchemaKind.PROTOBUF)
    assert subject.arrow == pa.schema([
        ("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")), ("discount", pa.int64()),
        ("total", pa.struct([("cents", pa.int64()), ("currency", pa.string())]))])
    fmt = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.PROTOBUF)
    result = fmt.decoder(subject.arrow, ["id"]).decode(pa.array(values, pa.binary()))
    assert len(result.errors) == 0
    got = result.records.to_pylist()
    assert got[1]["discount"] == 10 and got[2]["discount"] is None
    assert got[3]["at"].timestamp() == 1_700_000_003.25
    assert got[4]["total"] == {"cents": 400, "currency": "EUR"}


def test_avro_schema_references_are_resolved(schema_registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaReference
    from confluent_kafka.schema_registry.avro import AvroSerializer

    client = SchemaRegistryClient({"url": schema_registry.url})
    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}
    money_subject = unique("money")
    client.register_schema(money_subject, Schema(json.dumps(money), "AVRO"))
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "id", "type": "long"}, {"name": "total", "type": "shop.Money"},
                        {"name": "refund", "type": ["null", "shop.Money"], "default": None}]}
    topic = unique("orders-ref")
    refs = [SchemaReference("shop.Money", money_subject, 1)]
    client.register_schema(f"{topic}-value", Schema(json.dumps(order), "AVRO", refs))
    ser = AvroSerializer(client, Schema(json.dumps(order), "AVRO", refs),
                         conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [ser({"id": i, "total": {"cents": i, "currency": "EUR"},
                   "refund": None if i % 2 else {"cents": 1, "currency": "USD"}}, ctx)
              for i in range(4)]
    settings = _settings(schema_registry, f"{topic}-value")
    subject = fetch_subject_schema(settings, SchemaKind.AVRO)
    fmt = RegistryFormat(settings, subject.schema_id)
    result = fmt.decoder(subject.arrow, ["id"]).decode(pa.array(values, pa.binary()))
    assert len(result.errors) == 0
    got = result.records.to_pylist()
    assert got[2] == {"id": 2, "total": {"cents": 2, "currency": "EUR"},
                      "refund": {"cents": 1, "currency": "USD"}}
    assert got[1]["refund"] is None


def test_a_recursive_json_schema_is_refused_naming_the_definition() -> None:
    """A definition inside itself (a tree) ended in RecursionError; a definition used twice
    side by side is not recursive and still reads."""
    tree = {"type": "object", "properties": {
        "id": {"type": "integer"}, "tree": {"$ref": "#/definitions/N"}},
        "definitions": {"N": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array",
                                              "items": {"$ref": "#/definitions/N"}}}}}}
    with pytest.raises(JsonSchemaError, match=r"^tree.kids\[\]: '#/definitions/N' contains "
                       r"itself"):
        json_schema_to_arrow(tree)
    twice = {"type": "object", "properties": {
        "a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}},
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
    assert json_schema_to_arrow(twice).names == ["a", "b"]


@functools.cache
def _meter_message() -> Any:
    """shop.Meter: the Protobuf types Hudi (Avro) has no column type for."""
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="hoodline_test_meter.proto", package="shop", syntax="proto3",
        dependency=["google/protobuf/duration.proto", "google/protobuf/wrappers.proto"])
    msg = fdp.message_type.add(name="Meter")
    for name, number, kind in (("id", 1, f.TYPE_INT64), ("count", 2, f.TYPE_UINT64),
                               ("serial", 3, f.TYPE_FIXED64)):
        msg.field.add(name=name, number=number, type=kind, label=f.LABEL_OPTIONAL)
    msg.field.add(name="big", number=4, type=f.TYPE_MESSAGE,
                  type_name=".google.protobuf.UInt64Value", label=f.LABEL_OPTIONAL)
    msg.field.add(name="took", number=5, type=f.TYPE_MESSAGE,
                  type_name=".google.protobuf.Duration", label=f.LABEL_OPTIONAL)
    entry = msg.nested_type.add(name="ByCodeEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_UINT64, label=f.LABEL_OPTIONAL)
    msg.field.add(name="by_code", number=6, type=f.TYPE_MESSAGE,
                  type_name=".shop.Meter.ByCodeEntry", label=f.LABEL_REPEATED)
    from google.protobuf import duration_pb2, wrappers_pb2  # noqa: F401 - in the pool

    pool = descriptor_pool.Default()
    pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Meter"))


def test_protobuf_types_without_an_avro_type_are_stored_as_what_holds_them(
        schema_registry: SchemaRegistry) -> None:
    """uint64/fixed64, Duration and maps with other than string keys stopped a run before its
    first commit ("no Avro (Hudi) equivalent; cast it"), which a pipeline cannot do (Protobuf
    review): they are decimal(20, 0), int64 microseconds and lists of key/value records,
    every value exact."""
    meter_cls = _meter_message()
    topic = unique("meters")
    client = SchemaRegistryClient({"url": schema_registry.url})
    ser = ProtobufSerializer(meter_cls, client, conf={"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    top = 2**64 - 1
    m = meter_cls(id=1, count=top, serial=2**63, by_code={7: top, -1: 0})
    m.big.value = 2**63 + 5
    m.took.seconds, m.took.nanos = 90, 500_000_000
    values = [ser(m, ctx), ser(meter_cls(id=2), ctx)]
    settings = _settings(schema_registry, f"{topic}-value")
    subject = fetch_subject_schema(settings, SchemaKind.PROTOBUF)
    entries = pa.list_(pa.struct([pa.field("key", pa.int32(), nullable=False),
                                  ("value", pa.decimal128(20, 0))]))
    assert subject.arrow == pa.schema([
        ("id", pa.int64()), ("count", pa.decimal128(20, 0)), ("serial", pa.decimal128(20, 0)),
        ("big", pa.decimal128(20, 0)), ("took", pa.int64()), ("by_code", entries)])
    fmt = RegistryFormat(settings, subject.schema_id, kind=SchemaKind.PROTOBUF)
    result = fmt.decoder(subject.arrow, ["id"]).decode(pa.array(values, pa.binary()))
    assert len(result.errors) == 0, result.errors.detail.to_pylist()
    one, two = result.records.to_pylist()
    assert (one["count"], one["serial"], one["big"]) == (top, 2**63, 2**63 + 5)
    assert one["took"] == 90_500_000
    assert sorted((e["key"], e["value"]) for e in one["by_code"]) == [(-1, 0), (7, top)]
    assert two == {"id": 2, "count": 0, "serial": 0, "big": None, "took": None, "by_code": []}
    # and the table takes the columns (hudi-rs and Java read decimals and lists of records)
    from hoodline.table.schema import arrow_to_avro

    assert arrow_to_avro(subject.arrow, "meters")["type"] == "record"
