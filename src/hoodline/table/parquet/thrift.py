"""Thrift compact protocol, decoded into a tree that encodes back to the same bytes.

Parquet's footer (``FileMetaData``) is a Thrift struct in the compact protocol. Copying row
groups from one file into another (:mod:`.row_groups`) needs to change a few integer fields of
it (byte offsets) and keep everything else exactly as the writer put it, including fields this
module knows nothing about. So the decoder is generic: a struct is a list of :class:`Field`
(field id, wire type, value) in wire order, and :func:`encode_struct` writes any such tree back
byte for byte.

Wire format (Apache Thrift's compact protocol): integers are zigzag varints (i16, i32, i64) or
one byte (i8); a field header is one byte ``delta << 4 | type`` when the field id is 1-15 above
the previous one, else the type byte and the id as a zigzag varint; booleans live in the
header's type (1 true, 2 false); binaries are a varint length and the bytes; lists and sets
start with ``size << 4 | element type`` (size < 15) or ``0xF0 | element type`` and a varint
size; maps with a varint size and, when not empty, ``key type << 4 | value type``; structs end
with a 0 byte. Booleans inside lists are one byte each.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

from hoodline.errors import TableError

BOOL_TRUE = 1
BOOL_FALSE = 2
I8 = 3
I16 = 4
I32 = 5
I64 = 6
DOUBLE = 7
BINARY = 8
LIST = 9
SET = 10
MAP = 11
STRUCT = 12

Value = Union[bool, int, float, bytes, "Struct", "Sequence", "Mapping"]


@dataclass
class Field:
    """One field of a struct as it was on the wire."""

    id: int
    type: int
    value: Value


Struct = list[Field]


@dataclass
class Sequence:
    """A list or set: its element type and elements."""

    element_type: int
    items: list[Value]


@dataclass
class Mapping:
    """A map: key and value types and its pairs in wire order."""

    key_type: int
    value_type: int
    items: list[tuple[Value, Value]]


class ThriftError(TableError):
    """Bytes that are not a well-formed compact-protocol struct."""


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("thrift struct ends early")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("thrift varint is too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError("thrift binary runs past the end of the struct")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, wire: int) -> Value:
        if wire in (BOOL_TRUE, BOOL_FALSE):  # inside a list: one byte
            return self.byte() == BOOL_TRUE
        if wire == I8:
            b = self.byte()
            return b - 256 if b > 127 else b
        if wire in (I16, I32, I64):
            return self.zigzag()
        if wire == DOUBLE:
            (d,) = struct.unpack("<d", self.take(8))
            return float(d)
        if wire == BINARY:
            return self.take(self.varint())
        if wire in (LIST, SET):
            head = self.byte()
            size = head >> 4
            if size == 15:
                size = self.varint()
            element = head & 0x0F
            return Sequence(element, [self.value(element) for _ in range(size)])
        if wire == MAP:
            size = self.varint()
            if size == 0:
                return Mapping(0, 0, [])
            kinds = self.byte()
            k, v = kinds >> 4, kinds & 0x0F
            return Mapping(k, v, [(self.value(k), self.value(v)) for _ in range(size)])
        if wire == STRUCT:
            return self.struct()
        raise ThriftError(f"unknown thrift wire type {wire}")

    def struct(self) -> Struct:
        fields: Struct = []
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return fields
            wire = head & 0x0F
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            if wire in (BOOL_TRUE, BOOL_FALSE):
                value: Value = wire == BOOL_TRUE
            else:
                value = self.value(wire)
            fields.append(Field(fid, wire, value))
            last = fid


def decode_struct(data: bytes | memoryview) -> Struct:
    """The struct encoded in ``data`` (which must hold exactly one)."""
    reader = _Reader(data)
    out = reader.struct()
    if reader.pos != len(data):
        raise ThriftError(f"{len(data) - reader.pos} bytes follow the thrift struct")
    return out


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n > 0x7F:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63))

    def value(self, wire: int, value: Value) -> None:
        if wire in (BOOL_TRUE, BOOL_FALSE):
            self.out.append(BOOL_TRUE if value else BOOL_FALSE)
        elif wire == I8:
            assert isinstance(value, int)
            self.out.append(value & 0xFF)
        elif wire in (I16, I32, I64):
            assert isinstance(value, int) and not isinstance(value, bool)
            self.zigzag(value)
        elif wire == DOUBLE:
            assert isinstance(value, float)
            self.out += struct.pack("<d", value)
        elif wire == BINARY:
            assert isinstance(value, bytes)
            self.varint(len(value))
            self.out += value
        elif wire in (LIST, SET):
            assert isinstance(value, Sequence)
            size = len(value.items)
            if size < 15:
                self.out.append(size << 4 | value.element_type)
            else:
                self.out.append(0xF0 | value.element_type)
                self.varint(size)
            for item in value.items:
                self.value(value.element_type, item)
        elif wire == MAP:
            assert isinstance(value, Mapping)
            self.varint(len(value.items))
            if value.items:
                self.out.append(value.key_type << 4 | value.value_type)
                for k, v in value.items:
                    self.value(value.key_type, k)
                    self.value(value.value_type, v)
        elif wire == STRUCT:
            assert isinstance(value, list)
            self.struct(value)
        else:
            raise ThriftError(f"unknown thrift wire type {wire}")

    def struct(self, fields: Struct) -> None:
        last = 0
        for f in fields:
            wire = f.type
            if wire in (BOOL_TRUE, BOOL_FALSE):
                wire = BOOL_TRUE if f.value else BOOL_FALSE
            delta = f.id - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | wire)
            else:
                self.out.append(wire)
                self.zigzag(f.id)
            if wire not in (BOOL_TRUE, BOOL_FALSE):
                self.value(wire, f.value)
            last = f.id
        self.out.append(0)


def encode_struct(fields: Struct) -> bytes:
    writer = _Writer()
    writer.struct(fields)
    return bytes(writer.out)


def field(fields: Struct, fid: int) -> Field | None:
    """The field ``fid`` of a struct (None: absent)."""
    for f in fields:
        if f.id == fid:
            return f
    return None


def get_int(fields: Struct, fid: int) -> int | None:
    f = field(fields, fid)
    if f is None:
        return None
    if not isinstance(f.value, int) or isinstance(f.value, bool):
        raise ThriftError(f"thrift field {fid} is not an integer")
    return f.value


def get_struct(fields: Struct, fid: int) -> Struct | None:
    f = field(fields, fid)
    if f is None:
        return None
    if not isinstance(f.value, list):
        raise ThriftError(f"thrift field {fid} is not a struct")
    return f.value


def get_list(fields: Struct, fid: int) -> list[Value]:
    f = field(fields, fid)
    if f is None:
        return []
    if not isinstance(f.value, Sequence):
        raise ThriftError(f"thrift field {fid} is not a list")
    return f.value.items


def set_int(fields: Struct, fid: int, value: int, wire: int = I64) -> None:
    """Set an integer field, keeping the fields in id order when it is new."""
    f = field(fields, fid)
    if f is not None:
        f.value = value
        return
    fields.append(Field(fid, wire, value))
    fields.sort(key=lambda x: x.id)
