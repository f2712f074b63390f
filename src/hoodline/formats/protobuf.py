"""Protobuf schemas from the Schema Registry: Arrow columns and message decoding.

The registry hands out a Protobuf schema serialized (``format=serialized``: a base64
``FileDescriptorProto``, what confluent-kafka's serializer registers). The table follows one
message of that file: ``source.schema-message`` (full name, e.g. ``shop.Order``), else the
file's first message. In the Confluent wire format the payload is preceded by the *message
indexes* (which message of the file: zig-zag varints, a count then the path; a lone ``0`` byte
means the first message); values of another message than the table's are incompatible.

Types: int32/sint32/sfixed32 -> int32, int64/sint64/sfixed64 -> int64, uint32/fixed32 ->
uint32, uint64/fixed64 -> uint64, float -> float32, double -> float64, bool, string, bytes ->
binary, enums -> string (the value's name), messages -> struct, repeated -> list, maps -> map.
Fields without presence (proto3 scalars not marked ``optional``) read as their default when
absent, as every Protobuf reader does; fields with presence read as null when unset. Imports:
files the registry lists as schema references are fetched and added first; Google's own files
(``google/protobuf/*.proto``, and ``google/type/*`` when googleapis-common-protos is installed)
come from the installed modules. ``google.protobuf.Timestamp`` reads as timestamp[us, UTC],
``Duration`` as duration[us], the wrapper types (``Int64Value`` ...) as nullable values;
recursive messages (``google.protobuf.Struct``) are refused. The table stores what Avro has no
type for as what holds it (:func:`table_columns`): uint64 as decimal(20, 0), durations as their
microseconds, maps with other than string keys as lists of key/value records.

Decoding: values of the file's first message, when it has no map fields (at any depth), are
read column by column, a whole block at once (:mod:`hoodline.formats.protobuf_wire`); every
other value -- maps, another message index path, anything unusual the columnar path hands back
-- is parsed message by message with the ``protobuf`` runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from hoodline.formats.codec import GroupResult
from hoodline.formats.json_decoder import UNPARSEABLE
from hoodline.formats.protobuf_wire import columnar_fields, decode_block

__all__ = [
    "WRONG_MESSAGE", "ProtobufCodec", "message_type", "protobuf_to_arrow", "table_columns",
    "table_type",
]

#: Bad-record reason: the value is another message of the schema file than the table's.
WRONG_MESSAGE = "incompatible_schema"

_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.uint64(),
    FieldDescriptor.TYPE_FIXED64: pa.uint64(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_UINT32: pa.uint32(),
    FieldDescriptor.TYPE_FIXED32: pa.uint32(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}


def _index_path(desc: Descriptor) -> list[int]:
    path: list[int] = []
    node: Descriptor | None = desc
    while node is not None:
        parent = node.containing_type
        siblings = parent.nested_types if parent is not None else list(
            node.file.message_types_by_name.values())
        path.append([s.full_name for s in siblings].index(node.full_name))
        node = parent
    return path[::-1]


def _builtin(name: str) -> bytes | None:
    """The serialized file of a Google-provided import (``google/protobuf/timestamp.proto``
    ...) from the installed Python modules, None if not installed."""
    if not name.startswith("google/") or not name.endswith(".proto"):
        return None
    try:
        module = importlib.import_module(name[: -len(".proto")].replace("/", ".") + "_pb2")
    except ImportError:
        return None
    return bytes(module.DESCRIPTOR.serialized_pb)


def message_type(files: bytes | tuple[bytes, ...], name: str = "") -> Descriptor:
    """The message ``name`` (full name; "" = the first) of a serialized schema file (given
    last, after the files it references)."""
    if isinstance(files, bytes):
        files = (files,)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    proto = descriptor_pb2.FileDescriptorProto()
    for data in files:
        proto = descriptor_pb2.FileDescriptorProto.FromString(data)
        if proto.name in added:
            continue
        for dep in proto.dependency:
            if dep in added:
                continue
            builtin = _builtin(dep)
            if builtin is None:
                raise ValueError(f"the Protobuf schema imports '{dep}', which the registry "
                                 "did not provide as a schema reference")
            pool.AddSerializedFile(builtin)
            added.add(dep)
        pool.AddSerializedFile(data)
        added.add(proto.name)
    file = pool.FindFileByName(proto.name)
    messages = list(file.message_types_by_name.values())
    if not messages:
        raise ValueError("the Protobuf schema has no message")
    if not name:
        return messages[0]
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        known = ", ".join(m.full_name for m in messages)
        raise ValueError(f"the Protobuf schema has no message '{name}' (top-level: {known}); "
                         "check source.schema-message") from None


#: Google's well-known messages read as plain values: full name -> Arrow type
_WELL_KNOWN: dict[str, pa.DataType] = {
    "google.protobuf.Timestamp": pa.timestamp("us", tz="UTC"),
    "google.protobuf.Duration": pa.duration("us"),
    "google.protobuf.DoubleValue": pa.float64(),
    "google.protobuf.FloatValue": pa.float32(),
    "google.protobuf.Int64Value": pa.int64(),
    "google.protobuf.UInt64Value": pa.uint64(),
    "google.protobuf.Int32Value": pa.int32(),
    "google.protobuf.UInt32Value": pa.uint32(),
    "google.protobuf.BoolValue": pa.bool_(),
    "google.protobuf.StringValue": pa.string(),
    "google.protobuf.BytesValue": pa.binary(),
}


def _field_type(field: FieldDescriptor, where: str,
                seen: tuple[str, ...] = ()) -> pa.DataType:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        sub = field.message_type
        if sub.GetOptions().map_entry:
            key, value = sub.fields_by_name["key"], sub.fields_by_name["value"]
            return pa.map_(_field_type(key, where, seen), _field_type(value, where, seen))
        if sub.full_name in _WELL_KNOWN:
            t: pa.DataType = _WELL_KNOWN[sub.full_name]
        elif sub.full_name in seen:
            raise ValueError(f"field '{where}': message {sub.full_name} contains itself "
                             "(recursive messages have no column type)")
        else:
            t = pa.struct([
                pa.field(f.name, _field_type(f, f"{where}.{f.name}", (*seen, sub.full_name)))
                for f in sub.fields])
    elif field.type in _SCALARS:
        t = _SCALARS[field.type]
    else:
        raise ValueError(f"field '{where}' has the Protobuf type {field.type} (groups are not "
                         "supported)")
    if field.is_repeated and not (field.type == FieldDescriptor.TYPE_MESSAGE
                                  and field.message_type.GetOptions().map_entry):
        return pa.list_(t)
    return t


def protobuf_to_arrow(desc: Descriptor) -> pa.Schema:
    """The columns of a message: one nullable column per field, in field order."""
    return pa.schema([pa.field(f.name, _field_type(f, f.name)) for f in desc.fields])


def table_columns(decoded: pa.Schema) -> pa.Schema:
    """The table's columns for a message's decoded columns (:func:`protobuf_to_arrow`): what
    Hudi (Avro) has no type for is stored as what holds it. A ``uint64``/``fixed64`` (and
    ``UInt64Value``) is a ``decimal(20, 0)`` (Java's Hudi Streamer writes ``uint64`` as a
    decimal too), a ``Duration`` its microseconds (``int64``), a map whose keys are not
    strings a list of key/value records (Avro maps take string keys; Java writes every
    Protobuf map so). Without this a run stopped before its first commit saying to cast a
    column it could not cast (Protobuf review)."""
    return pa.schema([f.with_type(table_type(f.type)) for f in decoded])


def table_type(t: pa.DataType) -> pa.DataType:
    """The table's type for one decoded type (see :func:`table_columns`)."""
    if pa.types.is_uint64(t):
        return pa.decimal128(20, 0)
    if pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_map(t):
        key, item = table_type(t.key_type), table_type(t.item_type)
        if pa.types.is_string(key) or pa.types.is_large_string(key):
            return pa.map_(key, item)
        return pa.list_(pa.struct([pa.field("key", key, nullable=False),
                                   pa.field("value", item)]))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(table_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(table_type(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(table_type(t.value_type)))
    return t


def _value(field: FieldDescriptor, v: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        name = field.message_type.full_name
        if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            # toward zero, as protobuf's own Durations.toMicros (nanos have the seconds' sign)
            micros = v.seconds * 1_000_000 + int(v.nanos / 1_000)
            if not -(2**63) <= micros < 2**63:
                raise ValueError(f"{name.rsplit('.', 1)[1]} of {v.seconds} seconds is beyond "
                                 "what a microsecond column holds")
            return micros
        if name in _WELL_KNOWN:
            return v.value
        return _row(v)
    if field.type == FieldDescriptor.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(v)
        return found.name if found is not None else str(v)
    if field.type == FieldDescriptor.TYPE_STRING and isinstance(v, bytes):
        # proto2 strings are not checked by the runtime: a string column needs UTF-8
        raise ValueError(f"string field '{field.name}' holds bytes that are not UTF-8")
    return v


def _row(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        v = getattr(msg, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions(
        ).map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = [(k, _value(value_field, x)) for k, x in v.items()]
        elif field.is_repeated:
            out[field.name] = [_value(field, x) for x in v]
        elif field.has_presence and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _value(field, v)
    return out


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise DecodeError("truncated message indexes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


class ProtobufCodec:
    """Protobuf payloads (message indexes, then the message) of one writer schema."""

    def __init__(self, serialized: bytes | tuple[bytes, ...], message: str = "") -> None:
        self.desc = message_type(serialized, message)
        self.arrow = protobuf_to_arrow(self.desc)
        self._cls = message_factory.GetMessageClass(self.desc)
        self._path = _index_path(self.desc)
        #: the columnar path: the file's first message, without map fields
        self._columnar = columnar_fields(self.desc) if self._path == [0] else None

    def decode(self, data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
               ends: npt.NDArray[np.int64]) -> GroupResult:
        if self._columnar is None or not len(starts) or not len(data):
            return self._decode_each(data, starts, ends)
        # message indexes [0] as Confluent's serializers write them: one zero byte
        lone = (starts < ends) & (data[np.clip(starts, 0, len(data) - 1)] == 0)
        fast = np.nonzero(lone)[0]
        table, fallback = decode_block(self._columnar, data, starts[fast] + 1, ends[fast],
                                       self.arrow)
        slow = np.sort(np.concatenate([np.nonzero(~lone)[0], fast[fallback]]))
        if not slow.size:
            return GroupResult(table, fast)
        each = self._decode_each(data, starts[slow], ends[slow])
        tables = [t for t in (table, each.table) if t is not None]
        return GroupResult(
            pa.concat_tables(tables) if tables else None,
            np.concatenate([fast[~fallback], slow[each.good]]),
            slow[each.bad], each.reasons, each.details,
        )

    def _decode_each(self, data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
                     ends: npt.NDArray[np.int64]) -> GroupResult:
        """Message by message with the ``protobuf`` runtime."""
        view = data.data
        rows: list[dict[str, Any]] = []
        good: list[int] = []
        bad: list[int] = []
        reasons: list[str] = []
        details: list[str] = []
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            try:
                count, pos = _varint(view, s)
                path = [0]
                if count:
                    path = []
                    for _ in range(count):
                        index, pos = _varint(view, pos)
                        path.append(index)
                if path != self._path:
                    bad.append(i)
                    reasons.append(WRONG_MESSAGE)
                    details.append(f"message index path {path} is not the table's message "
                                   f"{self.desc.full_name} ({self._path})")
                    continue
                rows.append(_row(self._cls.FromString(bytes(view[pos:e]))))
                good.append(i)
            except (DecodeError, RuntimeError, ValueError) as exc:
                bad.append(i)
                reasons.append(UNPARSEABLE)
                details.append(f"Protobuf message does not match its writer schema: {exc}"[:300])
        table = pa.Table.from_pylist(rows, schema=self.arrow) if rows else None
        return GroupResult(table, np.asarray(good, dtype=np.int64),
                           np.asarray(bad, dtype=np.int64), reasons, details)
