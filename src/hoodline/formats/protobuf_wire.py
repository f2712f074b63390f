"""Columnar decoding of Protobuf messages: the wire format of a whole block of messages read
field by field with numpy, all messages at once.

A message is a sequence of fields, each a tag (varint: field number << 3 | wire type) and a
value: a varint (wire type 0), 8 bytes (1), a length-delimited span (2) or 4 bytes (5). Each
step of :func:`decode_block` reads one field of every message that has fields left, so a block
takes as many vectorised steps as its longest message has fields, whatever its row count.

The messages that take this path (:func:`columnar_fields`) have no maps: every field is a
scalar, string, bytes or enum -- singular, or repeated (a list column; packed runs and single
elements, in message order) -- or a message of such fields, singular (a struct column) or
repeated (a list of structs), decoded the same way from the spans that hold it; Google's
Timestamp, Duration and wrapper messages become plain values. Within that, a message is left to the
``protobuf`` runtime (returned in ``fallback``) when anything is unusual for this path: a
truncated or over-long value, a known field carrying another wire type than its type's (the
runtime keeps it as an unknown field), a group or an invalid wire type, a string that is not
UTF-8, a message field given twice (the runtime merges the two), a malformed packed run. The
runtime then decodes it or says why it cannot, so both paths give the same rows and the same
errors. Unknown field
numbers are skipped, as every Protobuf parser does; a scalar field seen twice keeps its last
value.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hoodline.spans import byte_spans, span_bytes

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

_T = FieldDescriptor
#: wire type of each scalar type (a singular field; packed encodings are for repeated ones)
_WIRE: dict[int, int] = {
    _T.TYPE_INT64: _VARINT, _T.TYPE_UINT64: _VARINT, _T.TYPE_INT32: _VARINT,
    _T.TYPE_UINT32: _VARINT, _T.TYPE_SINT32: _VARINT, _T.TYPE_SINT64: _VARINT,
    _T.TYPE_BOOL: _VARINT, _T.TYPE_ENUM: _VARINT,
    _T.TYPE_FIXED64: _I64, _T.TYPE_SFIXED64: _I64, _T.TYPE_DOUBLE: _I64,
    _T.TYPE_FIXED32: _I32, _T.TYPE_SFIXED32: _I32, _T.TYPE_FLOAT: _I32,
    _T.TYPE_STRING: _LEN, _T.TYPE_BYTES: _LEN,
}


@dataclass(frozen=True)
class WireField:
    """One field of a message on the columnar path: where its values go and how they read."""

    name: str
    number: int
    type: int
    wire: int
    presence: bool
    default: Any  # the field's default (proto3: zero, empty, the enum's 0 value)
    enum_names: dict[int, str] | None
    #: a closed (proto2) enum: a number it does not name is an unknown field to the runtime
    closed_enum: bool = False
    #: a singular message field: its own fields (None for scalars)
    children: tuple[WireField, ...] | None = None
    #: Google's well-known message it is (read as a plain value), or ""
    well_known: str = ""
    #: a repeated scalar / string / bytes / enum field: a list column
    repeated: bool = False


#: well-known messages read as plain values (their Arrow types: protobuf.py's _WELL_KNOWN)
_TIME_LIKE = ("google.protobuf.Timestamp", "google.protobuf.Duration")
_WRAPPERS = tuple(f"google.protobuf.{n}Value" for n in
                  ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String",
                   "Bytes"))


def columnar_fields(desc: Descriptor, depth: int = 0) -> tuple[WireField, ...] | None:
    """The message's fields when every one is a singular scalar / string / bytes / enum or a
    singular message of such fields (None otherwise: repeated fields and maps take the
    runtime's path)."""
    if depth > 32:  # deeper than any schema the column types allow (recursion is refused)
        return None
    # a oneof of two or more members keeps only the last one set: the runtime's business (a
    # proto3 `optional` field is a oneof of one, which behaves as any field with presence)
    if any(len(o.fields) > 1 for o in desc.oneofs):
        return None
    out = []
    for f in desc.fields:
        if f.type == _T.TYPE_MESSAGE:  # a struct, or a list of them (maps: the runtime's)
            sub = f.message_type
            children = columnar_fields(sub, depth + 1)
            if children is None or sub.GetOptions().map_entry:
                return None
            known = sub.full_name if sub.full_name in (*_TIME_LIKE, *_WRAPPERS) else ""
            out.append(WireField(f.name, f.number, f.type, _LEN, not f.is_repeated, None, None,
                                 children=children, well_known=known,
                                 repeated=bool(f.is_repeated)))
            continue
        if f.type not in _WIRE:
            return None
        names: dict[int, str] | None = None
        closed = False
        if f.type == _T.TYPE_ENUM:
            names = {}
            for v in f.enum_type.values:  # aliases: the first name of a number, as the runtime
                names.setdefault(v.number, v.name)
            closed = bool(f.enum_type.is_closed)
        repeated = bool(f.is_repeated)
        out.append(WireField(f.name, f.number, f.type, _WIRE[f.type],
                             f.has_presence and not repeated,
                             None if repeated else f.default_value, names, closed,
                             repeated=repeated))
    return tuple(out)


#: zero bytes after the block: a cursor never passes its message's end by more than a value's
#: width before its row is broken, so reads need no bounds checks
_PAD = 16
#: wire types a message on this path never carries: groups (3, 4) and the undefined 6, 7
_BAD_WIRE = np.asarray([False, False, False, True, True, False, True, True])


#: steps (fields read) after which the messages still going are left to the runtime: one very
#: long message must not cost a vectorised step per field for the whole block
_STEPS_PER_FIELD = 4
_MIN_STEPS = 1024
#: Timestamp / Duration seconds whose microseconds (plus any nanos // 1000, |nanos| < 2^31)
#: surely fit 64 bits; beyond, the runtime decides
_MAX_SECONDS = 9_223_372_036_850


class _Block:
    """The bytes of a block (``buf`` ends with :data:`_PAD` zero bytes) and a cursor per
    message; ``broken`` marks messages the fast path hands back to the runtime."""

    def __init__(self, buf: U8, starts: I64, ends: I64) -> None:
        self.buf = buf
        self.pos = starts.copy()
        self.end = ends
        self.broken = np.zeros(len(starts), dtype=np.bool_)

    def varint(self, rows: I64, width: int) -> U64:
        """Varints of at most ``width`` bytes at the cursors of ``rows`` (advanced past them);
        a longer or truncated one breaks its row."""
        pos = self.pos[rows]
        past = pos >= self.end[rows]
        b = self.buf[np.where(past, 0, pos)]
        value = (b & 0x7F).astype(np.uint64)
        pos += 1
        self.broken[rows[past]] = True
        open_ = np.nonzero((b >= 0x80) & ~past)[0]  # most varints (tags, lengths) are 1 byte
        for k in range(1, width):
            if not open_.size:
                break
            at = pos[open_]
            past = at >= self.end[rows[open_]]
            b = self.buf[np.where(past, 0, at)]
            value[open_] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            pos[open_] = at + 1
            self.broken[rows[open_[past]]] = True
            open_ = open_[(b >= 0x80) & ~past]
        self.broken[rows[open_]] = True  # still continuing after ``width`` bytes
        self.pos[rows] = pos
        return value

    def fixed(self, rows: I64, width: int) -> U64:
        """Little-endian ``width``-byte values at the cursors of ``rows`` (advanced)."""
        pos = self.pos[rows]
        over = pos + width > self.end[rows]
        self.broken[rows[over]] = True
        at = np.where(over, 0, pos)
        raw = self.buf[at[:, None] + np.arange(width)]
        value = raw.view("<u8" if width == 8 else "<u4").reshape(-1).astype(np.uint64)
        self.pos[rows] = pos + width
        return value


@dataclass
class _Column:
    field: WireField
    present: npt.NDArray[np.bool_]
    value: U64  # varint / fixed values; for spans: the start
    length: I64  # spans only
    # a repeated field: each step's occurrences (rows, values, lengths, packed or not)
    occurrences: list[tuple[I64, U64, I64, bool]] = dc_field(default_factory=list)


def decode_block(
    fields: tuple[WireField, ...], buf: U8, starts: I64, ends: I64, schema: pa.Schema | None
) -> tuple[pa.Table | None, npt.NDArray[np.bool_]]:
    """The messages at ``[starts[i], ends[i])`` of ``buf`` as a table of ``schema`` (the
    fields' columns, see :func:`hoodline.formats.protobuf.protobuf_to_arrow`), and
    ``fallback``: the rows the table leaves out, for the ``protobuf`` runtime."""
    padded = np.concatenate([buf, np.zeros(_PAD, dtype=np.uint8)])
    return _decode(fields, padded, starts, ends, schema)


def _decode(
    fields: tuple[WireField, ...], buf: U8, starts: I64, ends: I64, schema: pa.Schema | None
) -> tuple[pa.Table | None, npt.NDArray[np.bool_]]:
    """:func:`decode_block` on a padded ``buf``; ``schema`` None: each field's natural type
    (a well-known message's parts)."""
    n = len(starts)
    block = _Block(buf, starts.astype(np.int64), ends.astype(np.int64))
    cols = [_Column(f, np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.uint64),
                    np.zeros(n, dtype=np.int64)) for f in fields]
    find = _field_index(fields)
    active = np.nonzero(block.pos < block.end)[0]
    steps = max(_MIN_STEPS, _STEPS_PER_FIELD * len(fields))
    while active.size:
        steps -= 1
        if steps < 0:  # a message with very many fields (repeats, unknowns): the runtime's
            block.broken[active] = True
            break
        tag = block.varint(active, 5)
        wire = (tag & np.uint64(7)).astype(np.intp)
        number = tag >> np.uint64(3)
        # field number 0, groups, undefined wire types, tags beyond 32 bits: the runtime's
        invalid = _BAD_WIRE[wire] | (number == 0) | (tag > np.uint64(0xFFFFFFFF))
        block.broken[active[invalid]] = True
        index = find(number)
        for w in (_VARINT, _I64, _LEN, _I32):
            pick = (wire == w) & ~invalid
            if not pick.any():
                continue
            rows = active[pick]
            if w == _VARINT:
                value = block.varint(rows, 10)
                length = None
            elif w == _I64:
                value = block.fixed(rows, 8)
                length = None
            elif w == _I32:
                value = block.fixed(rows, 4)
                length = None
            else:
                size = block.varint(rows, 5)
                value = block.pos[rows].astype(np.uint64)
                length = size.astype(np.int64)
                over = (length < 0) | (block.pos[rows] + length > block.end[rows])
                block.broken[rows[over]] = True
                block.pos[rows] = np.minimum(block.pos[rows] + np.maximum(length, 0),
                                             block.end[rows])
            where = index[pick]
            seen = np.bincount(where[where >= 0], minlength=len(fields))
            for j in np.nonzero(seen)[0].tolist():
                col = cols[j]
                mine = where == j
                if col.field.repeated:  # one element, or a packed run of them
                    packed = w == _LEN and col.field.wire != _LEN
                    if w == col.field.wire or packed:
                        whole = ~block.broken[rows[mine]]  # not a run past its message's end
                        col.occurrences.append((
                            rows[mine][whole], value[mine][whole],
                            length[mine][whole] if length is not None
                            else np.zeros(0, np.int64),
                            packed))
                    else:  # the runtime keeps it as an unknown field
                        block.broken[rows[mine]] = True
                    continue
                if col.field.wire != w:  # the runtime keeps it as an unknown field
                    block.broken[rows[mine]] = True
                    continue
                target = rows[mine]
                if col.field.children is not None:  # a message seen twice is merged: runtime
                    twice = col.present[target]
                    block.broken[target[twice]] = True
                col.present[target] = True
                col.value[target] = value[mine]
                if length is not None:
                    col.length[target] = length[mine]
        active = active[(block.pos[active] < block.end[active]) & ~block.broken[active]]
    block.broken |= block.pos != block.end
    lists = {j: _elements(col, buf, block.broken) for j, col in enumerate(cols)
             if col.field.repeated}
    for j, col in enumerate(cols):  # closed enums: a number not named is an unknown field
        if j in lists and col.field.closed_enum and col.field.enum_names is not None:
            named = np.asarray(sorted(col.field.enum_names), dtype=np.int64)
            e_rows, e_value, _ = lists[j]
            block.broken[e_rows[~np.isin(_enum_numbers(e_value), named)]] = True
        elif col.field.closed_enum and col.field.enum_names is not None:
            named = np.asarray(sorted(col.field.enum_names), dtype=np.int64)
            number = (col.value & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
            block.broken[col.present & ~np.isin(number, named)] = True
    # nested messages, decoded from their spans; a row whose nested message the columnar path
    # cannot read goes to the runtime whole
    nested: dict[int, tuple[pa.Table | None, I64]] = {}
    for j, col in enumerate(cols):
        if col.field.children is None:
            continue
        # a struct column: the rows that hold the message; a list of structs: the elements
        if col.field.repeated:
            rows, span_start, span_size = lists[j]
            n_items = len(rows)
        else:
            rows = np.nonzero(col.present & ~block.broken)[0]
            span_start, span_size = col.value[rows], col.length[rows]
            n_items = n
        begin = span_start.astype(np.int64)
        struct = None if schema is None else schema.field(j).type
        if struct is not None and col.field.repeated:
            struct = struct.value_type
        sub_schema = (pa.schema(list(struct))
                      if struct is not None and not col.field.well_known else None)
        sub, sub_fallback = _decode(col.field.children, buf, begin, begin + span_size,
                                    sub_schema)
        block.broken[rows[sub_fallback]] = True
        if sub is not None and col.field.well_known in _TIME_LIKE:
            # seconds whose microseconds overflow 64 bits: the runtime reports them
            secs = sub.column("seconds").to_numpy()
            beyond = (secs > _MAX_SECONDS) | (secs < -_MAX_SECONDS)  # no abs: -2^63 stays < 0
            block.broken[rows[~sub_fallback][beyond]] = True
        where_sub = np.full(n_items, -1, dtype=np.int64)
        placed = np.nonzero(~sub_fallback)[0] if col.field.repeated else rows[~sub_fallback]
        where_sub[placed] = np.arange(len(placed))
        nested[j] = (sub, where_sub)
    arrays: list[pa.Array] = []
    while len(arrays) < len(cols):
        keep = np.nonzero(~block.broken)[0]
        if not keep.size:
            return None, block.broken
        arrays = []
        for j, col in enumerate(cols):
            target = schema.field(j).type if schema is not None else None
            if j in nested and col.field.repeated:
                arr = _message_list(col.field, lists[j][0], *nested[j], keep, target)
            elif j in nested:
                arr = _message(col.field, *nested[j], keep, target)
            elif j in lists:
                arr = _list(col.field, *lists[j], keep, buf)
            else:
                arr = _arrow(col, keep, buf)
            if isinstance(arr, np.ndarray):  # strings that are not UTF-8: those rows to the
                block.broken[keep[arr]] = True  # runtime, and the columns again without them
                break
            arrays.append(arr.cast(target) if target is not None and arr.type != target
                          else arr)
    fallback = block.broken
    names = [f.name for f in fields]
    table = (pa.Table.from_arrays(arrays, schema=schema) if schema is not None
             else pa.Table.from_arrays(arrays, names=names))
    return table, fallback


def _message(f: WireField, sub: pa.Table | None, where_sub: I64, keep: I64,
             target: pa.DataType | None) -> pa.Array:
    """A message field's column for the rows ``keep``: a struct, or a well-known message's
    value; null where the message is absent."""
    idx = where_sub[keep]
    absent = idx < 0
    if target is None:
        raise ValueError(f"field '{f.name}': a nested message needs its column type")
    if sub is None or absent.all():
        return pa.nulls(len(keep), target)
    taken = sub.take(pa.array(idx, mask=absent))
    if f.well_known in _TIME_LIKE:  # seconds and nanos -> microseconds, as protobuf.py
        # (seconds too large for 64-bit microseconds were sent to the runtime, see _decode)
        secs = taken.column("seconds").to_numpy(zero_copy_only=False)
        nanos = taken.column("nanos").to_numpy(zero_copy_only=False)
        secs = np.nan_to_num(secs).astype(np.int64)
        nanos = np.nan_to_num(nanos).astype(np.int64)
        # toward zero, as protobuf's own Durations.toMicros (a Duration's nanos have its
        # seconds' sign; a Timestamp's are never negative)
        micros = secs * 1_000_000 + (nanos - np.fmod(nanos, 1_000)) // 1_000
        return pa.array(micros, pa.int64(), mask=absent).cast(target)
    if f.well_known:
        return taken.column("value").combine_chunks().cast(target)
    return pa.StructArray.from_arrays(
        [taken.column(k).combine_chunks() for k in range(taken.num_columns)],
        fields=list(target), mask=pa.array(absent))


def _field_index(fields: tuple[WireField, ...]) -> Any:
    """A function from field numbers (uint64 array) to field indexes (-1: unknown): a direct
    table for the usual small numbers, a sorted search when one is large (up to 2^29 - 1)."""
    top = max((f.number for f in fields), default=0) + 1
    if top <= 1 << 16:
        table = np.full(top + 1, -1, dtype=np.int64)  # the last entry: every larger number
        for j, f in enumerate(fields):
            table[f.number] = j
        return lambda number: table[np.minimum(number, top).astype(np.intp)]
    numbers = np.asarray([f.number for f in fields], dtype=np.uint64)
    order = np.argsort(numbers)
    ordered = numbers[order]

    def find(number: U64) -> I64:
        slot = np.minimum(np.searchsorted(ordered, number), len(ordered) - 1)
        return np.where(ordered[slot] == number, order[slot], -1)

    return find


def _arrow(col: _Column, keep: I64, buf: U8) -> pa.Array | npt.NDArray[np.bool_]:
    """The column for the rows ``keep``; for a string column holding values that are not
    UTF-8, which of the rows hold them instead."""
    f = col.field
    present = col.present[keep]
    raw = col.value[keep]
    mask = None if not f.presence else pa.array(~present)
    t = f.type
    if f.wire == _LEN:
        length = np.where(present, col.length[keep], 0)
        offsets = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(length, out=offsets[1:])
        data = span_bytes(byte_spans(buf, raw.astype(np.int64), length))
        typ = pa.large_string() if t == _T.TYPE_STRING else pa.large_binary()
        validity = None if mask is None else pa.array(present).buffers()[1]
        arr = pa.Array.from_buffers(typ, len(keep), [validity, pa.py_buffer(offsets),
                                                     pa.py_buffer(data)],
                                    null_count=-1 if mask is not None else 0)
        if t == _T.TYPE_STRING:
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:  # rare: find the rows, one by one
                return np.asarray([not _utf8(data[offsets[i]:offsets[i + 1]])
                                   for i in range(len(keep))], dtype=np.bool_)
        if mask is None and f.default:  # a default that is not empty (proto2)
            arr = pa.array(np.where(present, arr.to_numpy(zero_copy_only=False), f.default),
                           typ)
        return arr
    default = f.default
    if t == _T.TYPE_ENUM:
        number = np.where(present, _enum_numbers(raw), int(default))
        out = _enum_texts(f, number)
        return out if mask is None else pa.array(out.to_numpy(zero_copy_only=False),
                                                 pa.string(), mask=~present)
    values = _numbers(t, raw)
    if mask is None:
        if default:  # proto2 explicit defaults; proto3 defaults are zero
            values = np.where(present, values, np.asarray(default, dtype=values.dtype))
        return pa.array(values)
    return pa.array(values, mask=~present)


def _utf8(data: U8) -> bool:
    try:
        data.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _numbers(t: int, raw: U64) -> np.ndarray:
    """Raw varint / fixed values of a scalar type as its numpy values (not enums)."""
    if t in (_T.TYPE_INT64, _T.TYPE_SFIXED64):
        return raw.view(np.int64)
    if t in (_T.TYPE_UINT64, _T.TYPE_FIXED64):
        return raw
    if t in (_T.TYPE_INT32, _T.TYPE_SFIXED32):
        return (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    if t in (_T.TYPE_UINT32, _T.TYPE_FIXED32):
        return (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if t == _T.TYPE_SINT32:
        u = (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return ((u >> np.uint32(1)) ^ (np.uint32(0) - (u & np.uint32(1)))).view(np.int32)
    if t == _T.TYPE_SINT64:
        return ((raw >> np.uint64(1)) ^ (np.uint64(0) - (raw & np.uint64(1)))).view(np.int64)
    if t == _T.TYPE_BOOL:
        return np.not_equal(raw, 0)
    if t == _T.TYPE_DOUBLE:
        return raw.view(np.float64)
    if t == _T.TYPE_FLOAT:
        return (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    raise ValueError(f"Protobuf type {t} has no numeric value")


def _enum_numbers(raw: U64) -> npt.NDArray[np.int32]:
    return (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)


def _enum_texts(f: WireField, number: npt.NDArray[np.int32]) -> pa.Array:
    """Enum numbers as their names, or as text when the schema does not name them."""
    names = f.enum_names or {}
    uniq = np.unique(number)
    texts = [names.get(v) or str(v) for v in uniq.tolist()]
    codes = np.searchsorted(uniq, number).astype(np.int32)
    arr = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(texts, pa.string()))
    return arr.cast(pa.string())


def _elements(col: _Column, buf: U8, broken: npt.NDArray[np.bool_]) -> tuple[I64, U64, I64]:
    """A repeated field's elements in message order: (row, raw value or span start, span
    length), packed runs expanded; rows whose runs are malformed are marked ``broken``."""
    f = col.field
    empty = (np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64))
    if not col.occurrences:
        return empty
    rows = np.concatenate([o[0] for o in col.occurrences])
    value = np.concatenate([o[1] for o in col.occurrences])
    length = np.concatenate([o[2] if len(o[2]) else np.zeros(len(o[0]), np.int64)
                             for o in col.occurrences])
    packed = np.concatenate([np.full(len(o[0]), o[3]) for o in col.occurrences])
    seq = np.arange(len(rows))  # occurrences in the order they were read
    # rows already left to the runtime, and empty runs, contribute nothing
    live = ~broken[rows] & ~(packed & (length == 0))
    rows, value, length, packed, seq = rows[live], value[live], length[live], packed[live], \
        seq[live]
    single = ~packed
    parts = [(rows[single], seq[single], np.zeros(int(single.sum()), np.int64), value[single],
              length[single])]
    if packed.any():
        p_rows, p_seq = rows[packed], seq[packed]
        p_start, p_len = value[packed].astype(np.int64), length[packed]
        if f.wire == _VARINT:
            offsets = np.zeros(len(p_rows) + 1, dtype=np.int64)
            np.cumsum(p_len, out=offsets[1:])
            data = span_bytes(byte_spans(buf, p_start, p_len))
            term = data < 0x80
            last = offsets[1:] - 1
            full = p_len > 0
            unended = np.zeros(len(p_rows), dtype=np.bool_)
            unended[full] = ~term[last[full]]
            broken[p_rows[unended]] = True
            term[last[full]] = True  # no element runs on into the next run
            ends = np.nonzero(term)[0]
            starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
            width = ends - starts + 1
            owner = np.repeat(np.arange(len(p_rows)), p_len)[ends] if len(ends) else ends
            broken[p_rows[owner[width > 10]]] = True
            shift = np.minimum((np.arange(len(data)) - np.repeat(starts, width)) * 7, 63)
            bits = (data & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
            vals = (np.bitwise_or.reduceat(bits, starts) if len(starts)
                    else np.zeros(0, np.uint64))
        else:
            size = 8 if f.wire == _I64 else 4
            ragged = p_len % size != 0
            broken[p_rows[ragged]] = True
            p_len = np.where(ragged, 0, p_len)
            offsets = np.zeros(len(p_rows) + 1, dtype=np.int64)
            np.cumsum(p_len, out=offsets[1:])
            data = span_bytes(byte_spans(buf, p_start, p_len))
            vals = data.view("<u8" if size == 8 else "<u4").astype(np.uint64)
            owner = np.repeat(np.arange(len(p_rows)), p_len // size)
        parts.append((p_rows[owner], p_seq[owner], np.arange(len(owner), dtype=np.int64),
                      vals, np.zeros(len(owner), np.int64)))
    e_rows, e_seq, e_sub, e_value, e_len = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.lexsort((e_sub, e_seq, e_rows))
    return e_rows[order], e_value[order].astype(np.uint64), e_len[order]


def _list_offsets(keep: I64, e_rows: I64) -> tuple[npt.NDArray[np.bool_], I64]:
    """Which elements belong to the rows ``keep`` (sorted), and the list offsets of those
    rows (elements are in row order)."""
    slot = np.searchsorted(keep, e_rows)
    mine = (slot < len(keep)) & (keep[np.minimum(slot, max(len(keep) - 1, 0))] == e_rows)
    offsets = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(np.bincount(slot[mine], minlength=len(keep)), out=offsets[1:])
    return mine, offsets


def _list(f: WireField, e_rows: I64, e_value: U64, e_len: I64, keep: I64,
          buf: U8) -> pa.Array | npt.NDArray[np.bool_]:
    """A repeated field's list column for the rows ``keep`` (empty lists where it is absent);
    for strings that are not UTF-8, which of the rows hold them instead."""
    mine, offsets = _list_offsets(keep, e_rows)
    e_value, e_len = e_value[mine], e_len[mine]
    if f.wire == _LEN:
        v_offsets = np.zeros(len(e_len) + 1, dtype=np.int64)
        np.cumsum(e_len, out=v_offsets[1:])
        data = span_bytes(byte_spans(buf, e_value.astype(np.int64), e_len))
        typ = pa.large_string() if f.type == _T.TYPE_STRING else pa.large_binary()
        values = pa.Array.from_buffers(typ, len(e_len), [None, pa.py_buffer(v_offsets),
                                                         pa.py_buffer(data)])
        if f.type == _T.TYPE_STRING:
            try:
                values.validate(full=True)
            except pa.ArrowInvalid:
                bad = np.asarray([not _utf8(data[v_offsets[i]:v_offsets[i + 1]])
                                  for i in range(len(e_len))], dtype=np.bool_)
                out = np.zeros(len(keep), dtype=np.bool_)
                out[np.repeat(np.arange(len(keep)), np.diff(offsets))[bad]] = True
                return out
        values = values.cast(pa.string() if f.type == _T.TYPE_STRING else pa.binary())
    elif f.type == _T.TYPE_ENUM:
        values = _enum_texts(f, _enum_numbers(e_value))
    else:
        values = pa.array(_numbers(f.type, e_value))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


def _message_list(f: WireField, e_rows: I64, sub: pa.Table | None, where_sub: I64, keep: I64,
                  target: pa.DataType | None) -> pa.Array:
    """A repeated message field's list column for the rows ``keep`` (its elements, decoded
    into ``sub``, belong to ``e_rows``; every element of a kept row was decoded)."""
    if target is None:
        raise ValueError(f"field '{f.name}': a list of messages needs its column type")
    mine, offsets = _list_offsets(keep, e_rows)
    values = _message(f, sub, where_sub, np.nonzero(mine)[0], target.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
