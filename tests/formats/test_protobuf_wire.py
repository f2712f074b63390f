"""The columnar Protobuf path against the ``protobuf`` runtime: the same rows, the same bad
records, for every scalar type and for the wire format's odd corners (fields out of order or
repeated, unknown fields, padded varints, truncation, wrong wire types, invalid UTF-8)."""

from __future__ import annotations

import datetime
import functools
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.formats.protobuf import ProtobufCodec
from hoodline.formats.protobuf_wire import columnar_fields, decode_block

F = descriptor_pb2.FieldDescriptorProto
#: (name, type) of the test message's fields, numbered from 1
SCALARS = [
    ("i64", F.TYPE_INT64), ("u64", F.TYPE_UINT64), ("i32", F.TYPE_INT32),
    ("u32", F.TYPE_UINT32), ("s32", F.TYPE_SINT32), ("s64", F.TYPE_SINT64),
    ("b", F.TYPE_BOOL), ("e", F.TYPE_ENUM), ("f64", F.TYPE_FIXED64), ("sf64", F.TYPE_SFIXED64),
    ("d", F.TYPE_DOUBLE), ("f32", F.TYPE_FIXED32), ("sf32", F.TYPE_SFIXED32), ("fl", F.TYPE_FLOAT),
    ("s", F.TYPE_STRING), ("by", F.TYPE_BYTES),
]
OPTIONAL = ("opt_s", "opt_i")  # proto3 `optional`: null when unset


@functools.cache
def _schema() -> bytes:
    fdp = descriptor_pb2.FileDescriptorProto(name="hoodline_test_wire.proto", package="wire",
                                             syntax="proto3")
    enum = fdp.enum_type.add(name="Color")
    for i, n in enumerate(["RED", "GREEN", "BLUE"]):
        enum.value.add(name=n, number=i)
    msg = fdp.message_type.add(name="All")
    for number, (name, typ) in enumerate(SCALARS, start=1):
        extra = {"type_name": ".wire.Color"} if typ == F.TYPE_ENUM else {}
        msg.field.add(name=name, number=number, type=typ, label=F.LABEL_OPTIONAL, **extra)
    for k, (name, typ) in enumerate(zip(OPTIONAL, (F.TYPE_STRING, F.TYPE_INT64), strict=True)):
        msg.oneof_decl.add(name=f"_{name}")
        msg.field.add(name=name, number=100 + k, type=typ, label=F.LABEL_OPTIONAL,
                      proto3_optional=True, oneof_index=k)
    return fdp.SerializeToString()


@functools.cache
def _codec() -> ProtobufCodec:
    return ProtobufCodec(_schema(), "wire.All")


def _block(payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arr = pa.array(payloads, pa.binary())
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] else \
        np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[: len(payloads) + 1]
    return data, offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)


def _paths(codec: ProtobufCodec, payloads: list[bytes]) -> tuple[Any, Any]:
    """(columnar, runtime) results, each as {row: values} and {row: reason}."""
    out = []
    for result in (codec.decode(*_block(payloads)), codec._decode_each(*_block(payloads))):
        rows = result.table.to_pylist() if result.table is not None else []
        out.append((dict(zip(result.good.tolist(), rows, strict=True)),
                    dict(zip(result.bad.tolist(), result.reasons, strict=True))))
    return out[0], out[1]


def _both(payloads: list[bytes]) -> tuple[Any, Any]:
    return _paths(_codec(), payloads)


def _fallback(codec: ProtobufCodec, payloads: list[bytes]) -> np.ndarray:
    """Which payloads the columnar path hands to the runtime."""
    fields = columnar_fields(codec.desc)
    assert fields is not None
    data, starts, ends = _block(payloads)
    return decode_block(fields, data, starts + 1, ends, codec.arrow)[1]


def _message(values: dict[str, Any]) -> bytes:
    return b"\x00" + _codec()._cls(**values).SerializeToString()


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


values_st = st.fixed_dictionaries({}, optional={
    "i64": st.integers(-2**63, 2**63 - 1), "u64": st.integers(0, 2**64 - 1),
    "i32": st.integers(-2**31, 2**31 - 1), "u32": st.integers(0, 2**32 - 1),
    "s32": st.integers(-2**31, 2**31 - 1), "s64": st.integers(-2**63, 2**63 - 1),
    "b": st.booleans(), "e": st.integers(0, 2), "f64": st.integers(0, 2**64 - 1),
    "sf64": st.integers(-2**63, 2**63 - 1), "d": st.floats(allow_nan=False),
    "f32": st.integers(0, 2**32 - 1), "sf32": st.integers(-2**31, 2**31 - 1),
    "fl": st.floats(width=32, allow_nan=False), "s": st.text(max_size=12),
    "by": st.binary(max_size=12), "opt_s": st.text(max_size=5),
    "opt_i": st.integers(-2**63, 2**63 - 1),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(values_st, min_size=1, max_size=40))
def test_serialized_messages_decode_as_the_runtime_decodes_them(rows: list[dict[str, Any]]) -> None:
    payloads = [_message(r) for r in rows]
    fast, runtime = _both(payloads)
    assert fast == runtime
    assert not runtime[1]  # all valid
    # and they took the columnar path (nothing handed back to the runtime)
    fallback = _fallback(_codec(), payloads)
    assert not fallback.any()


def test_wire_format_corners_match_the_runtime() -> None:
    base = _message({"i64": 5, "s": "x", "e": 1})
    payloads = [
        base,
        b"\x00",  # empty message: every field its default, optional ones null
        b"\x00" + b"\x08" + _varint(1) + b"\x08" + _varint(2),  # repeated: the last wins
        b"\x00" + bytes([0x7A]) + b"\x02hi" + bytes([0x08]) + _varint(3),  # out of order
        b"\x00" + bytes([0x08, 0x85, 0x80, 0x80, 0x00]),  # padded varint (valid) i64 = 5
        b"\x00" + _varint(999 << 3) + _varint(7) + b"\x08\x01",  # an unknown varint field
        b"\x00" + _varint((998 << 3) | 2) + b"\x03abc" + _varint((997 << 3) | 5) + b"abcd"
        + _varint((996 << 3) | 1) + b"12345678",  # unknown LEN, I32, I64 fields
        b"\x00" + b"\x0d\x01\x02\x03\x04",  # i64 (field 1) as fixed32: an unknown field
        b"\x00" + bytes([0x08]),  # truncated: tag without its value
        b"\x00" + bytes([0x7A, 0x05]) + b"ab",  # string longer than the message
        b"\x00" + bytes([0x7A, 0x02]) + b"\xff\xfe",  # string not UTF-8
        b"\x00" + b"\x0b\x0c",  # an empty group: valid, an unknown field for the runtime
        b"\x00" + bytes([0x08]) + b"\xff" * 11,  # varint longer than 10 bytes
        b"\x02\x02" + base[1:],  # message indexes [1]: another message of the file
        b"\x00" + bytes([0x40]) + _varint(7),  # enum number the schema does not name
        b"\x00" + _varint(101 << 3) + _varint(0),  # optional int64 set to 0: not null
    ]
    fast, runtime = _both(payloads)
    assert fast == runtime
    assert fast[0][0]["i64"] == 5 and fast[0][4]["i64"] == 5 and fast[0][2]["i64"] == 2
    assert fast[0][1]["opt_s"] is None and fast[0][1]["s"] == "" and fast[0][1]["e"] == "RED"
    assert fast[0][14]["e"] == "7" and fast[0][15]["opt_i"] == 0
    assert set(fast[1]) == {8, 9, 10, 12, 13}  # the broken ones, named by the runtime
    assert fast[0][11]["i64"] == 0  # the group went to the runtime, which skipped it


@functools.cache
def _nested_codec() -> ProtobufCodec:
    """wirenest.Event: a nested message (with an enum and a message inside), Google's
    Timestamp, Duration and wrappers."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="hoodline_test_wire_nested.proto", package="wirenest", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/duration.proto",
                    "google/protobuf/wrappers.proto"])
    enum = fdp.enum_type.add(name="Kind")
    for i, n in enumerate(["A", "B"]):
        enum.value.add(name=n, number=i)
    event = fdp.message_type.add(name="Event")
    point = fdp.message_type.add(name="Point")
    point.field.add(name="x", number=1, type=F.TYPE_SINT64, label=F.LABEL_OPTIONAL)
    point.field.add(name="label", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    box = fdp.message_type.add(name="Box")
    box.field.add(name="kind", number=1, type=F.TYPE_ENUM, type_name=".wirenest.Kind",
                  label=F.LABEL_OPTIONAL)
    box.field.add(name="corner", number=2, type=F.TYPE_MESSAGE, type_name=".wirenest.Point",
                  label=F.LABEL_OPTIONAL)
    fields = [("id", F.TYPE_INT64, ""), ("box", F.TYPE_MESSAGE, ".wirenest.Box"),
              ("at", F.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
              ("took", F.TYPE_MESSAGE, ".google.protobuf.Duration"),
              ("count", F.TYPE_MESSAGE, ".google.protobuf.Int64Value"),
              ("note", F.TYPE_MESSAGE, ".google.protobuf.StringValue"),
              ("flag", F.TYPE_MESSAGE, ".google.protobuf.BoolValue")]
    for number, (name, typ, type_name) in enumerate(fields, start=1):
        extra = {"type_name": type_name} if type_name else {}
        event.field.add(name=name, number=number, type=typ, label=F.LABEL_OPTIONAL, **extra)
    return ProtobufCodec(fdp.SerializeToString(), "wirenest.Event")


def _set(msg: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        if isinstance(value, dict):
            getattr(msg, name).SetInParent()
            _set(getattr(msg, name), value)
        elif isinstance(value, list):
            getattr(msg, name).extend(value)
        else:
            setattr(msg, name, value)


def _nested_payload(values: dict[str, Any]) -> bytes:
    msg = _nested_codec()._cls()
    _set(msg, values)
    return b"\x00" + msg.SerializeToString()


def _both_nested(payloads: list[bytes]) -> tuple[Any, Any]:
    return _paths(_nested_codec(), payloads)


point_st = st.fixed_dictionaries({}, optional={"x": st.integers(-2**63, 2**63 - 1),
                                               "label": st.text(max_size=4)})
event_st = st.fixed_dictionaries({}, optional={
    "id": st.integers(-2**63, 2**63 - 1),
    "box": st.fixed_dictionaries({}, optional={"kind": st.integers(0, 1), "corner": point_st}),
    "at": st.fixed_dictionaries({"seconds": st.integers(-62_135_596_800, 253_402_300_799),
                                 "nanos": st.integers(0, 999_999_999)}),
    "took": st.fixed_dictionaries({"seconds": st.integers(-10**6, 10**6),
                                   "nanos": st.integers(-999_999_999, 999_999_999)}),
    "count": st.fixed_dictionaries({}, optional={"value": st.integers(-2**63, 2**63 - 1)}),
    "note": st.fixed_dictionaries({}, optional={"value": st.text(max_size=4)}),
    "flag": st.fixed_dictionaries({}, optional={"value": st.booleans()}),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(event_st, min_size=1, max_size=30))
def test_nested_messages_and_well_known_types_decode_as_the_runtime_does(
    rows: list[dict[str, Any]]
) -> None:
    # a Duration's seconds and nanos share their sign
    for r in rows:
        if "took" in r and r["took"]["seconds"] * r["took"]["nanos"] < 0:
            r["took"]["nanos"] = -r["took"]["nanos"]
    payloads = [_nested_payload(r) for r in rows]
    fast, runtime = _both_nested(payloads)
    assert fast == runtime and not runtime[1]
    codec = _nested_codec()
    fallback = _fallback(codec, payloads)
    assert not fallback.any()  # all of them on the columnar path


def test_nested_corners_match_the_runtime() -> None:
    box = _nested_payload({"box": {"kind": 1, "corner": {"x": -3}}})[1:]
    inner = _nested_payload({"box": {"corner": {"label": "p"}}})[1:]
    payloads = [
        b"\x00" + box,
        b"\x00" + box + inner,  # the message field twice: the runtime merges the two
        b"\x00" + b"\x12\x02\x12\x05",  # box holding a corner longer than the box
        b"\x00" + b"\x12\x00",  # an empty box: present, every field its default
        # toward zero, as protobuf's Durations.toMicros: -1.500000001 s is -1,500,000 us
        _nested_payload({"took": {"seconds": -1, "nanos": -500_000_001}}),
    ]
    fast, runtime = _both_nested(payloads)
    assert fast == runtime
    assert fast[0][4]["took"] == datetime.timedelta(microseconds=-1_500_000)
    assert fast[0][1]["box"] == {"kind": "B", "corner": {"x": -3, "label": "p"}}
    assert fast[0][3]["box"] == {"kind": "A", "corner": None} and fast[0][3]["at"] is None
    assert set(fast[1]) == {2}


def test_maps_take_the_runtime_path() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="hoodline_test_wire_map.proto",
                                             package="wiremap", syntax="proto3")
    outer = fdp.message_type.add(name="Outer")
    entry = outer.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    outer.field.add(name="labels", number=1, type=F.TYPE_MESSAGE,
                    type_name=".wiremap.Outer.LabelsEntry", label=F.LABEL_REPEATED)
    codec = ProtobufCodec(fdp.SerializeToString(), "wiremap.Outer")
    assert columnar_fields(codec.desc) is None
    msg = codec._cls()
    msg.labels["a"] = 1
    msg.labels["b"] = 2
    good = codec.decode(*_block([b"\x00" + msg.SerializeToString()]))
    assert good.table is not None
    assert sorted(good.table.column("labels").to_pylist()[0]) == [("a", 1), ("b", 2)]


@functools.cache
def _list_codec() -> ProtobufCodec:
    """wirelist.Order: repeated messages (holding a repeated field), repeated Timestamps."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="hoodline_test_wire_lists.proto", package="wirelist", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"])
    item = fdp.message_type.add(name="Item")
    item.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    item.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    item.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="items", number=2, type=F.TYPE_MESSAGE, type_name=".wirelist.Item",
                    label=F.LABEL_REPEATED)
    order.field.add(name="times", number=3, type=F.TYPE_MESSAGE,
                    type_name=".google.protobuf.Timestamp", label=F.LABEL_REPEATED)
    fdp.message_type.insert(0, fdp.message_type.pop())  # Order first: the table's message
    return ProtobufCodec(fdp.SerializeToString(), "wirelist.Order")


item_st = st.fixed_dictionaries({}, optional={
    "sku": st.text(max_size=4), "qty": st.integers(-2**31, 2**31 - 1),
    "tags": st.lists(st.text(max_size=3), max_size=3)})
order_st = st.fixed_dictionaries({}, optional={
    "id": st.integers(0, 2**40), "items": st.lists(item_st, max_size=4),
    "times": st.lists(st.integers(-62_135_596_800, 253_402_300_799), max_size=3)})


@settings(max_examples=60, deadline=None)
@given(st.lists(order_st, min_size=1, max_size=25))
def test_lists_of_messages_decode_as_the_runtime_does(rows: list[dict[str, Any]]) -> None:
    codec = _list_codec()
    payloads = []
    for r in rows:
        msg = codec._cls(id=r.get("id", 0))
        for it in r.get("items", []):
            _set(msg.items.add(), it)
        for s in r.get("times", []):
            msg.times.add(seconds=s, nanos=s % 1000)
        payloads.append(b"\x00" + msg.SerializeToString())
    good, bad = _same(codec, payloads)
    assert not bad and len(good) == len(rows)
    fallback = _fallback(codec, payloads)
    assert not fallback.any()


def test_list_of_messages_corners_match_the_runtime() -> None:
    codec = _list_codec()
    item = b"\x0a\x01a\x10\x02"  # sku "a", qty 2
    payloads = [
        b"\x00\x12" + bytes([len(item)]) + item + b"\x08\x07\x12\x00",  # items, id, an empty item
        b"\x00\x12\x03\x0a\x05a",  # an item whose string runs past it
        b"\x00\x12\x02\xff\xfe",  # an item that is not a valid message
        b"\x00\x08\x01",  # no items: an empty list
    ]
    good, bad = _same(codec, payloads)
    assert good[0]["items"] == [{"sku": "a", "qty": 2, "tags": []},
                                {"sku": "", "qty": 0, "tags": []}] and good[0]["id"] == 7
    assert good[3]["items"] == [] and set(bad) == {1, 2}


def _codec_of(fields: list[dict[str, Any]], syntax: str = "proto3",
              enum: list[tuple[str, int]] | None = None, allow_alias: bool = False,
              oneof: str = "", imports: tuple[str, ...] = ()) -> ProtobufCodec:
    """A one-message schema file ``edge.M`` (a fresh file name per shape)."""
    name = f"hoodline_test_edge_{abs(hash((repr(fields), syntax, repr(enum), oneof)))}.proto"
    fdp = descriptor_pb2.FileDescriptorProto(name=name, package="edge", syntax=syntax,
                                             dependency=list(imports))
    if enum:
        e = fdp.enum_type.add(name="E")
        e.options.allow_alias = allow_alias
        for n, v in enum:
            e.value.add(name=n, number=v)
    msg = fdp.message_type.add(name="M")
    if oneof:
        msg.oneof_decl.add(name=oneof)
    for f in fields:
        msg.field.add(label=F.LABEL_OPTIONAL, **f)
    return ProtobufCodec(fdp.SerializeToString(), "edge.M")


def _same(codec: ProtobufCodec, payloads: list[bytes]) -> tuple[dict[int, Any], dict[int, str]]:
    fast, runtime = _paths(codec, payloads)
    assert fast == runtime
    return fast


def test_review_corners_match_the_runtime() -> None:
    # a oneof of two members keeps the last one set: left to the runtime
    one = _codec_of([dict(name="a", number=1, type=F.TYPE_INT64, oneof_index=0),
                     dict(name="b", number=2, type=F.TYPE_STRING, oneof_index=0)], oneof="k")
    assert columnar_fields(one.desc) is None
    good, _ = _same(one, [b"\x00\x08\x05\x12\x01x"])
    assert good[0] == {"a": None, "b": "x"}
    # a closed (proto2) enum: a number it does not name is an unknown field
    closed = _codec_of([dict(name="e", number=1, type=F.TYPE_ENUM, type_name=".edge.E")],
                       syntax="proto2", enum=[("A", 1), ("B", 2)])
    good, _ = _same(closed, [b"\x00\x08\x07", b"\x00\x08\x01\x08\x07", b"\x00\x08\x02"])
    assert (good[0]["e"], good[1]["e"], good[2]["e"]) == (None, "A", "B")
    # aliases: a number's first name
    alias = _codec_of([dict(name="e", number=1, type=F.TYPE_ENUM, type_name=".edge.E")],
                      enum=[("IDLE", 0), ("STARTED", 1), ("RUNNING", 1)], allow_alias=True)
    assert _same(alias, [b"\x00\x08\x01"])[0][0]["e"] == "STARTED"
    # a tag beyond 32 bits, and the largest field number
    big = _codec_of([dict(name="a", number=1, type=F.TYPE_INT64),
                     dict(name="z", number=2**29 - 1, type=F.TYPE_INT64)])
    good, bad = _same(big, [b"\x00\x08\x05" + b"\x80\x80\x80\x80\x7f" + b"\x01",
                            b"\x00" + _varint((2**29 - 1) << 3) + b"\x09"])
    assert set(bad) == {0} and good[1]["z"] == 9
    # Timestamp seconds whose microseconds overflow: a bad record on both paths
    ts = _codec_of([dict(name="at", number=1, type=F.TYPE_MESSAGE,
                         type_name=".google.protobuf.Timestamp")],
                   imports=("google/protobuf/timestamp.proto",))
    huge = b"\x08" + _varint(2**62)  # seconds = 2^62
    good, bad = _same(ts, [b"\x00\x0a" + bytes([len(huge)]) + huge, b"\x00\x0a\x02\x08\x01"])
    assert set(bad) == {0} and good[1]["at"].timestamp() == 1
    assert "beyond what a microsecond column holds" in ts._decode_each(
        *_block([b"\x00\x0a" + bytes([len(huge)]) + huge])).details[0]


def test_one_bad_string_leaves_only_its_row_to_the_runtime() -> None:
    codec = _codec()
    payloads = [_message({"s": f"v{i}", "i64": i}) for i in range(50)]
    payloads[7] = b"\x00" + bytes([0x7A, 0x02]) + b"\xff\xfe"
    flat = columnar_fields(codec.desc)
    assert flat is not None
    data, starts, ends = _block(payloads)
    table, fallback = decode_block(flat, data, starts + 1, ends, codec.arrow)
    assert fallback.nonzero()[0].tolist() == [7] and table is not None and table.num_rows == 49
    _, bad = _both(payloads)
    assert set(bad[1]) == {7}


def test_a_message_with_very_many_fields_goes_to_the_runtime_alone() -> None:
    codec = _codec()
    payloads = [_message({"i64": i}) for i in range(20)]
    payloads.append(b"\x00" + b"\x08\x01" * 5000)  # one field repeated 5000 times: last wins
    fallback = _fallback(codec, payloads)
    assert fallback.nonzero()[0].tolist() == [20]
    fast, runtime = _both(payloads)
    assert fast == runtime and fast[0][20]["i64"] == 1


REPEATED = [("ri32", F.TYPE_INT32), ("rs64", F.TYPE_SINT64), ("ru64", F.TYPE_UINT64),
            ("rf32", F.TYPE_FIXED32), ("rsf64", F.TYPE_SFIXED64), ("rd", F.TYPE_DOUBLE),
            ("rfl", F.TYPE_FLOAT), ("rb", F.TYPE_BOOL), ("re", F.TYPE_ENUM),
            ("rs", F.TYPE_STRING), ("rby", F.TYPE_BYTES)]


@functools.cache
def _repeated_codec(syntax: str) -> ProtobufCodec:
    """edge.M of repeated fields: proto3 packs scalars by default, proto2 does not."""
    fields = [dict(name=name, number=k, type=typ, label=F.LABEL_REPEATED,
                   **({"type_name": ".edge.E"} if typ == F.TYPE_ENUM else {}))
              for k, (name, typ) in enumerate(REPEATED, start=1)]
    fields.append(dict(name="id", number=20, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL))
    name = f"hoodline_test_repeated_{syntax}.proto"
    fdp = descriptor_pb2.FileDescriptorProto(name=name, package="edge", syntax=syntax)
    e = fdp.enum_type.add(name="E")
    for n, v in (("ZERO", 0), ("ONE", 1), ("TWO", 2)):
        e.value.add(name=n, number=v)
    msg = fdp.message_type.add(name="M")
    for f in fields:
        msg.field.add(**f)
    return ProtobufCodec(fdp.SerializeToString(), "edge.M")


repeated_st = st.fixed_dictionaries({}, optional={
    "ri32": st.lists(st.integers(-2**31, 2**31 - 1), max_size=4),
    "rs64": st.lists(st.integers(-2**63, 2**63 - 1), max_size=4),
    "ru64": st.lists(st.integers(0, 2**64 - 1), max_size=4),
    "rf32": st.lists(st.integers(0, 2**32 - 1), max_size=4),
    "rsf64": st.lists(st.integers(-2**63, 2**63 - 1), max_size=4),
    "rd": st.lists(st.floats(allow_nan=False), max_size=4),
    "rfl": st.lists(st.floats(width=32, allow_nan=False), max_size=4),
    "rb": st.lists(st.booleans(), max_size=4), "re": st.lists(st.integers(0, 2), max_size=4),
    "rs": st.lists(st.text(max_size=5), max_size=4),
    "rby": st.lists(st.binary(max_size=5), max_size=4), "id": st.integers(0, 2**40),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(repeated_st, min_size=1, max_size=25), st.sampled_from(["proto3", "proto2"]))
def test_repeated_fields_decode_as_the_runtime_does(rows: list[dict[str, Any]],
                                                    syntax: str) -> None:
    codec = _repeated_codec(syntax)
    payloads = [b"\x00" + codec._cls(**r).SerializeToString() for r in rows]
    good, bad = _same(codec, payloads)
    assert not bad and len(good) == len(rows)
    fallback = _fallback(codec, payloads)
    assert not fallback.any()


def test_repeated_corners_match_the_runtime() -> None:
    codec = _repeated_codec("proto3")
    payloads = [
        # ri32 unpacked 1, packed [2, 300], unpacked -1: one list in that order
        b"\x00\x08\x01" + b"\x0a\x03\x02\xac\x02" + b"\x08" + _varint(2**64 - 1),
        b"\x00\x0a\x02\x05\x85",  # a packed run ending inside a varint
        b"\x00\x22\x03abc",  # packed fixed32 of 3 bytes
        b"\x00\x52\x02\xff\xfe",  # a string element that is not UTF-8
        b"\x00\x4a\x02\x01\x07",  # enum numbers 1 and 7 (open enum: "7")
        b"\x00\x0a\x00",  # an empty packed run
        b"\x00\x1a\x0b" + b"\xff" * 10 + b"\x01",  # a packed varint of 11 bytes
    ]
    good, bad = _same(codec, payloads)
    assert good[0]["ri32"] == [1, 2, 300, -1] and good[0]["rs"] == []
    assert good[4]["re"] == ["ONE", "7"] and good[5]["ri32"] == []
    assert set(bad) == {1, 2, 3, 6}
    # a closed (proto2) enum list: a number it does not name is dropped by the runtime
    good, _ = _same(_repeated_codec("proto2"), [b"\x00\x48\x01\x48\x07\x48\x02"])
    assert good[0]["re"] == ["ONE", "TWO"]


def test_packed_runs_that_are_empty_cut_or_too_long_match_the_runtime() -> None:
    codec = _repeated_codec("proto3")
    ident = b"\xa0\x01\x05"  # id = 5
    run = b"\x0a\x64" + b"\x01" * 100  # ri32: a packed run of 100 elements
    cases = [
        [b"\x00\x0a\x00"],  # the block's only packed run is empty
        [b"\x00" + ident + b"\x0a"],  # cut right after a packed field's tag
        [b"\x00" + ident, b"\x00" + run[:40]],  # the last run cut: longer than its message
        [b"\x00\x0a\xff\xff\xff\xff\x7f" + b"\x01", b"\x00" + ident],  # a 34 GB run
        [b"\x00" + run, b"\x00\x0a\x00" + ident],
    ]
    for payloads in cases:
        _same(codec, payloads)
    good, bad = _same(codec, cases[2])
    assert good[0]["id"] == 5 and set(bad) == {1}
    assert _same(codec, cases[4])[0][0]["ri32"] == [1] * 100


def test_a_proto2_string_that_is_not_utf8_is_a_bad_record_on_both_paths() -> None:
    codec = _repeated_codec("proto2")
    good, bad = _same(codec, [b"\x00\x52\x02\xff\xfe", b"\x00\x52\x02ok"])
    assert set(bad) == {0} and good[1]["rs"] == ["ok"]


def test_timestamps_at_the_edge_of_64_bit_microseconds_match_the_runtime() -> None:
    codec = _list_codec()
    edges = [(-(2**63), 0), (9_223_372_036_853, 2**31 - 1), (-9_223_372_036_853, -(2**31)),
             (253_402_300_799, 999_999_999), (1, 0)]
    payloads = []
    for seconds, nanos in edges:
        ts = _varint(seconds) if seconds >= 0 else _varint(seconds + 2**64)
        inner = b"\x08" + ts + b"\x10" + (_varint(nanos) if nanos >= 0
                                          else _varint(nanos + 2**64))
        payloads.append(b"\x00\x1a" + bytes([len(inner)]) + inner)
    good, bad = _same(codec, payloads)
    assert set(bad) == {0, 1, 2} and good[4]["times"][0].timestamp() == 1


def test_long_lists_of_messages_stay_columnar() -> None:
    codec = _list_codec()
    msg = codec._cls(id=1)
    for k in range(300):
        msg.items.add(sku=f"s{k}", qty=k)
    payloads = [b"\x00" + msg.SerializeToString()] * 3
    fallback = _fallback(codec, payloads)
    assert not fallback.any()
    good, _ = _same(codec, payloads)
    assert len(good[2]["items"]) == 300 and good[2]["items"][299]["qty"] == 299
