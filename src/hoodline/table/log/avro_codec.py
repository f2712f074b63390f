"""Avro binary datums of Arrow records, column at a time (the records of Hudi Avro log blocks).

A Hudi Avro data block holds each record as a plain Avro binary datum (no container, no schema)
written with the block's SCHEMA header. For the flat schemas hoodline tables mostly have
(primitives, strings, decimals, dates, timestamps, each optionally ``["null", T]``), encoding and
decoding run column by column over all records at once with numpy and pyarrow:

* encode: every column becomes a binary array of per-record pieces (union branch, zig-zag varint,
  little-endian float, length-prefixed bytes ...); ``binary_join_element_wise`` then concatenates
  the pieces of each record in field order, in C++;
* decode: the record start offsets are known (the block prefixes every record with its length),
  so each field is decoded for all records at once, advancing one position per record.

Decoding also reads record fields (optionally ``["null", record]``, as Debezium's row images)
column by column, recursively. Arrays, maps, other unions and ``bytes`` decimals go through
fastavro one record at a time (also every nested field when encoding); that path is correct but
slower.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import functools
import io
import itertools
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError
from hoodline.spans import byte_spans, span_bytes


@functools.cache
def _empty() -> pa.Scalar:
    """An empty large_binary scalar, made on first use: converting a Python value at import
    would make pyarrow import pandas (~0.3 s) in every process that imports this module."""
    return pa.scalar(b"", pa.large_binary())


U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


# -- schema model ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlatField:
    """One field of a flat record schema: its Avro primitive (with logical type) and union."""

    name: str
    #: 'boolean' 'int' 'long' 'float' 'double' 'string' 'bytes' 'fixed' 'enum'
    kind: str
    #: union branch of null / of the value; None when the field is not a union
    null_branch: int | None
    value_branch: int | None
    logical: str | None = None
    size: int = 0  # fixed
    precision: int = 0
    scale: int = 0
    symbols: tuple[str, ...] = ()  # enum
    #: kind 'record': its fields (decoding only; see :func:`flat_fields`)
    children: tuple[FlatField, ...] = ()


_PRIMITIVES = ("boolean", "int", "long", "float", "double", "string", "bytes")


def _flat_type(t: Any, named: dict[str, Any]) -> dict[str, Any] | None:
    """The primitive/fixed/enum schema of ``t`` as a dict, or None when it is nested."""
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return {"type": t}
        target = named.get(t) or named.get(t.rsplit(".", 1)[-1])
        return _flat_type(target, named) if target is not None else None
    if isinstance(t, dict):
        typ = t.get("type")
        if typ in ("fixed", "enum", "record"):
            if "name" in t:
                named[str(t["name"])] = t
                if "namespace" in t:
                    named[f"{t['namespace']}.{t['name']}"] = t
            return t
        if isinstance(typ, str) and typ in _PRIMITIVES:
            return t
    return None


def flat_fields(
    schema: dict[str, Any], *, records: bool = False, named: dict[str, Any] | None = None
) -> list[FlatField] | None:
    """The fields of a record schema when every one is flat; None when some field is nested.
    ``records``: fields that are records (optionally ``["null", record]``) of such fields count
    as flat too (kind ``record``, decoding only)."""
    named = {} if named is None else named
    out: list[FlatField] = []
    for f in schema.get("fields", []):
        t = f["type"]
        null_branch = value_branch = None
        if isinstance(t, list):
            non_null = [i for i, b in enumerate(t) if b != "null"]
            nulls = [i for i, b in enumerate(t) if b == "null"]
            if len(non_null) != 1 or len(nulls) > 1 or len(t) > 2:
                return None
            value_branch = non_null[0]
            null_branch = nulls[0] if nulls else None
            t = t[value_branch]
        ft = _flat_type(t, named)
        if ft is None:
            return None
        children: tuple[FlatField, ...] = ()
        if ft["type"] == "record":
            inner = flat_fields(ft, records=True, named=named) if records else None
            if inner is None:
                return None
            children = tuple(inner)
        out.append(
            FlatField(
                name=str(f["name"]),
                kind=str(ft["type"]),
                null_branch=null_branch,
                value_branch=value_branch,
                logical=ft.get("logicalType"),
                size=int(ft.get("size", 0)),
                precision=int(ft.get("precision", 0)),
                scale=int(ft.get("scale", 0)),
                symbols=tuple(ft.get("symbols", ())),
                children=children,
            )
        )
    return out


# -- varints ---------------------------------------------------------------------------------------
#: (keep, move, shift): a value's 7-bit groups spread into the bytes of a word (56-, 28-, 14-bit
#: lanes halved in turn; the reverse of the decoder's packing steps)
_SPREAD_STEPS = (
    (np.uint64(0x000000000FFFFFFF), np.uint64(0x00FFFFFFF0000000), np.uint64(4)),
    (np.uint64(0x00003FFF00003FFF), np.uint64(0x0FFFC0000FFFC000), np.uint64(2)),
    (np.uint64(0x007F007F007F007F), np.uint64(0x3F803F803F803F80), np.uint64(1)),
)
#: the smallest value that takes k + 2 varint bytes, for each k
_VARINT_LIMITS = tuple(np.uint64(1 << (7 * k)) for k in range(1, 10))


def _varint_matrix(values: npt.NDArray[np.int64]) -> tuple[U8, I64]:
    """Zig-zag varint bytes of ``values``, one row each (padded), and each row's length.

    Up to 8 bytes (values below 2**55 in magnitude: lengths, timestamps, most ids) a row is
    one word: its 7-bit groups spread into bytes with three mask-and-shift steps, the "more"
    bits set below the last byte, and the words viewed as bytes (little-endian: the low group
    first, as Avro writes it). Longer ones are built a byte column at a time."""
    v = values.astype(np.int64, copy=False)
    zz = ((v << 1) ^ (v >> 63)).view(np.uint64)
    nbytes = np.ones(len(zz), dtype=np.int64)
    for limit in _VARINT_LIMITS:
        longer = zz >= limit
        if not longer.any():
            break
        nbytes += longer
    width = int(nbytes.max()) if len(nbytes) else 1
    if width == 1:
        return zz.astype(np.uint8).reshape(-1, 1), nbytes
    if width > 8:
        return _long_varint_matrix(zz, nbytes, width), nbytes
    words = zz
    for keep, move, shift in _SPREAD_STEPS[(1 if width <= 4 else 0) :]:  # <= 28 bits: 2 steps
        words = (words & keep) | ((words & move) << shift)
    more = (_ONE << (np.uint64(8) * (nbytes - 1).astype(np.uint64))) - _ONE
    words |= more & _HIGH_BITS
    return words.astype("<u8", copy=False).view(np.uint8).reshape(len(zz), 8)[:, :width], nbytes


def _long_varint_matrix(zz: npt.NDArray[np.uint64], nbytes: I64, width: int) -> U8:
    mat = np.empty((len(zz), width), dtype=np.uint8)
    for k in range(width):
        chunk = ((zz >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        mat[:, k] = chunk | np.where(nbytes > k + 1, 0x80, 0).astype(np.uint8)
    return mat


def zigzag(n: int) -> bytes:
    """The zig-zag varint of one integer (Avro ``int``/``long``, block counts)."""
    mat, nbytes = _varint_matrix(np.array([n], dtype=np.int64))
    return bytes(mat[0, : int(nbytes[0])])


def concatenated(arr: pa.Array) -> memoryview:
    """The values of a large-binary array back to back, without a copy."""
    if len(arr) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    first, last = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    return memoryview(arr.buffers()[2])[first:last]


def _binary(offsets: I64, data: U8) -> pa.Array:
    return pa.Array.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _rows(mat: U8) -> pa.Array:
    """Binary array whose row ``i`` is ``mat[i]`` (rows of varying length: :func:`_stacked`)."""
    n, width = mat.shape
    offsets = np.arange(n + 1, dtype=np.int64) * width
    return _binary(offsets, np.ascontiguousarray(mat).reshape(-1))


@dataclass(frozen=True)
class _Padded:
    """Encoded bytes of every row as a matrix: row ``i`` is ``mat[i, :lengths[i]]`` (all of it
    without lengths). Consecutive pieces of this kind are joined by stacking their matrices
    (:func:`_join`), so the element-wise join handles far fewer pieces."""

    mat: U8
    lengths: I64 | None = None

    def row_lengths(self) -> I64:
        n, width = self.mat.shape
        return np.full(n, width, dtype=np.int64) if self.lengths is None else self.lengths


def _varint_pieces(
    values: npt.NDArray[np.int64], present: npt.NDArray[np.bool_] | None
) -> _Padded:
    mat, nbytes = _varint_matrix(values)
    if present is not None:
        nbytes = np.where(present, nbytes, 0)
    return _Padded(mat, nbytes)


def _masked_rows(mat: U8, present: npt.NDArray[np.bool_] | None) -> _Padded:
    if present is None:
        return _Padded(mat)
    return _Padded(mat, np.where(present, mat.shape[1], 0).astype(np.int64))


def _stacked(run: list[_Padded | pa.Scalar], n: int) -> pa.Array:
    """One binary array of consecutive padded pieces and constants: row ``i`` holds each
    piece's bytes of row ``i`` in turn (the matrices side by side, the padding masked out)."""
    mats: list[U8] = []
    for piece in run:
        if isinstance(piece, _Padded):
            mats.append(piece.mat)
        else:
            raw = np.frombuffer(piece.as_py(), dtype=np.uint8)
            mats.append(np.broadcast_to(raw, (n, len(raw))))
    mat = np.concatenate(mats, axis=1)
    if all(not isinstance(p, _Padded) or p.lengths is None for p in run):
        return _rows(mat)
    mask = np.ones(mat.shape, dtype=bool)
    lengths = np.zeros(n, dtype=np.int64)
    col = 0
    for piece, part in zip(run, mats, strict=True):
        width = part.shape[1]
        if isinstance(piece, _Padded) and piece.lengths is not None:
            np.less(np.arange(width)[None, :], piece.lengths[:, None],
                    out=mask[:, col : col + width])
            lengths += piece.lengths
        else:
            lengths += width
        col += width
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return _binary(offsets, mat[mask])


# -- encode ----------------------------------------------------------------------------------------
def _as_int64(arr: pa.Array, f: FlatField) -> npt.NDArray[np.int64]:
    t = arr.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        if pa.types.is_date64(t):
            arr = arr.cast(pa.date32())
        want = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns"}
        if pa.types.is_timestamp(t) and f.logical in want and t.unit != want[f.logical]:
            arr = arr.cast(pa.timestamp(want[f.logical], tz=t.tz))
        width = pa.int64() if arr.type.bit_width == 64 else pa.int32()
        arr = arr.view(width)
    filled = pc.fill_null(arr.cast(pa.int64()), 0)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)


Piece: TypeAlias = "pa.Array | pa.Scalar | _Padded"


def _value_pieces(
    arr: pa.Array, f: FlatField, present: npt.NDArray[np.bool_] | None
) -> list[Piece]:
    """Encoded values of one column as pieces joined per record (null slots: empty)."""
    n = len(arr)
    kind = f.kind
    if kind in ("int", "long"):
        return [_varint_pieces(_as_int64(arr, f), present)]
    if kind == "boolean":
        bits = pc.fill_null(arr.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
        return [_masked_rows(bits.astype(np.uint8).reshape(n, 1), present)]
    if kind in ("float", "double"):
        dtype = np.dtype("<f4") if kind == "float" else np.dtype("<f8")
        vals = pc.fill_null(arr.cast(pa.float32() if kind == "float" else pa.float64()), 0)
        raw = np.asarray(vals.to_numpy(zero_copy_only=False), dtype=dtype)
        return [_masked_rows(raw.view(np.uint8).reshape(n, dtype.itemsize), present)]
    if kind == "enum":
        codes = pc.index_in(arr.cast(pa.string()), value_set=pa.array(f.symbols))
        if pc.any(pc.and_(pc.is_null(codes), pc.is_valid(arr))).as_py():
            raise TableError(f"column '{f.name}' holds a value that is not an enum symbol")
        return [_varint_pieces(_as_int64(codes, f), present)]
    if kind in ("string", "bytes"):
        body = pc.fill_null(arr.cast(pa.large_binary()), _empty())
        lengths = pc.binary_length(body).to_numpy(zero_copy_only=False).astype(np.int64)
        return [_varint_pieces(lengths, present), body]
    if kind == "fixed":
        if f.logical == "decimal":
            dec = arr.cast(pa.decimal128(max(f.precision, 1), f.scale))
            filled = pc.fill_null(dec, pa.scalar(decimal.Decimal(0), dec.type))
            words = np.frombuffer(filled.buffers()[1], dtype=np.uint8)
            start = filled.offset * 16
            mat = np.asarray(words[start : start + n * 16].reshape(n, 16)[:, ::-1], np.uint8)
            if f.size > 16:
                sign = np.where(mat[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
                mat = np.concatenate([np.repeat(sign, f.size - 16, axis=1), mat], axis=1).astype(
                    np.uint8
                )
            return [_masked_rows(np.ascontiguousarray(mat[:, mat.shape[1] - f.size :]), present)]
        body = pc.fill_null(arr.cast(pa.large_binary()), _empty())
        lengths = pc.binary_length(body).to_numpy(zero_copy_only=False)
        ok = lengths == f.size if present is None else (lengths == f.size) | ~present
        if n and not ok.all():
            raise TableError(f"column '{f.name}' holds a value that is not {f.size} bytes long")
        return [body]
    raise TableError(f"Avro type '{kind}' of column '{f.name}' cannot be encoded")


def _branch_piece(b: int) -> bytes:
    return bytes([b << 1])  # branches < 64 take one zig-zag byte


def _field_pieces(arr: pa.Array, f: FlatField) -> list[Piece]:
    if f.value_branch is None:
        if arr.null_count:
            raise TableError(
                f"column '{f.name}' has nulls but its Avro type is not nullable; "
                "declare the column nullable"
            )
        return _value_pieces(arr, f, None)
    if arr.null_count == 0:
        branch = pa.scalar(_branch_piece(f.value_branch), pa.large_binary())
        return [branch, *_value_pieces(arr, f, None)]
    if f.null_branch is None:
        raise TableError(f"column '{f.name}' has nulls but its Avro union has no null branch")
    present = pc.is_valid(arr).to_numpy(zero_copy_only=False)
    codes = np.where(present, f.value_branch << 1, f.null_branch << 1).astype(np.uint8)
    return [_Padded(codes.reshape(-1, 1)), *_value_pieces(arr, f, present)]


def _constant_piece(value: str, f: FlatField) -> pa.Scalar:
    """The encoding of a string field that holds ``value`` in every record."""
    if f.kind != "string":
        raise TableError(f"constant field '{f.name}' must be a string field, not '{f.kind}'")
    raw = value.encode("utf-8")
    branch = _branch_piece(f.value_branch) if f.value_branch is not None else b""
    return pa.scalar(branch + zigzag(len(raw)) + raw, pa.large_binary())


def _record_pieces(
    table: pa.Table, fields: list[FlatField], constants: Mapping[str, str] | None
) -> list[Piece]:
    pieces: list[Piece] = []
    for f in fields:
        if constants and f.name in constants:
            pieces.append(_constant_piece(constants[f.name], f))
            continue
        if f.name not in table.column_names:
            raise TableError(f"records lack column '{f.name}' of the Avro schema")
        pieces.extend(_field_pieces(table.column(f.name).combine_chunks(), f))
    return pieces


def _with_constants(table: pa.Table, constants: Mapping[str, str] | None) -> pa.Table:
    if not constants:
        return table
    table = table.drop_columns([c for c in constants if c in table.column_names])
    for name, value in constants.items():
        rows = np.zeros(table.num_rows, np.int64)
        table = table.append_column(name, pa.array([value], pa.string()).take(rows))
    return table


def _join(pieces: list[Piece], n: int) -> pa.Array:
    """Each row's bytes of every piece in turn, as one binary array. Runs of padded pieces and
    constants are stacked first (a branch byte, a length and the fixed-width values between two
    strings become one piece): ``binary_join_element_wise`` copies every piece of every row on
    its own, so its cost grows with the number of pieces."""
    joined: list[pa.Array | pa.Scalar] = []
    run: list[_Padded | pa.Scalar] = []
    for piece in [*pieces, None]:
        if isinstance(piece, (_Padded, pa.Scalar)):
            run.append(piece)
            continue
        if any(isinstance(p, _Padded) for p in run):
            joined.append(_stacked(run, n))
        else:
            joined.extend(run)  # constants alone stay scalars
        run = []
        if piece is not None:
            joined.append(piece)
    if not any(isinstance(p, pa.Array) for p in joined):  # one array gives the row count
        joined = [*joined, pa.array([b""] * n, pa.large_binary())]
    if len(joined) == 1:
        only = joined[0]
        assert isinstance(only, pa.Array)
        return only
    return pc.binary_join_element_wise(*joined, _empty())


def encode_records(
    table: pa.Table, schema: dict[str, Any], constants: Mapping[str, str] | None = None
) -> pa.Array:
    """Avro binary datum of every row of ``table`` under ``schema`` (a record schema whose field
    names are columns of ``table``): a binary array, one datum per row. ``constants`` gives
    string fields that hold the same value in every record (they need no column)."""
    if table.num_rows == 0:
        return pa.array([], pa.large_binary())
    fields = flat_fields(schema)
    if fields is None:
        return _encode_generic(_with_constants(table, constants), schema)
    return _join(_record_pieces(table, fields, constants), table.num_rows)


def _piece_lengths(piece: Piece, n: int) -> npt.NDArray[np.int64]:
    if isinstance(piece, _Padded):
        return piece.row_lengths()
    if isinstance(piece, pa.Scalar):
        return np.full(n, len(piece.as_py()), dtype=np.int64)
    return np.asarray(pc.binary_length(piece).to_numpy(zero_copy_only=False), dtype=np.int64)


def record_list(
    table: pa.Table,
    schema: dict[str, Any],
    constants: Mapping[str, str] | None = None,
    lead: bytes = b"",
) -> memoryview:
    """``lead``, then ``int32 BE length + Avro datum`` of every row (a data block's content):
    one join of every record's pieces, its buffer returned without a copy."""
    n = table.num_rows
    fields = flat_fields(schema)
    if n == 0 or fields is None:
        datums = encode_records(table, schema, constants)
        return memoryview(lead + length_prefixed(datums))
    pieces = _record_pieces(table, fields, constants)
    lengths = np.zeros(n, dtype=np.int64)
    for piece in pieces:
        lengths += _piece_lengths(piece, n)
    if (lengths > np.iinfo(np.int32).max).any():
        raise TableError("an Avro record is larger than 2 GiB; it cannot go into a log block")
    # the first row's prefix also carries ``lead``
    prefix = np.zeros((n, len(lead) + 4), dtype=np.uint8)
    be = lengths.astype(">i4").view(np.uint8).reshape(n, 4)
    prefix[:, :4] = be
    prefix[0, : len(lead)] = np.frombuffer(lead, dtype=np.uint8)
    prefix[0, len(lead) :] = be[0]
    widths = np.full(n, 4, dtype=np.int64)
    widths[0] = len(lead) + 4
    return concatenated(_join([_Padded(prefix, widths), *pieces], n))


def _encode_generic(table: pa.Table, schema: dict[str, Any]) -> pa.Array:
    for field in schema.get("fields", ()):
        kind = field["type"]
        optional = isinstance(kind, list) and "null" in kind
        if not optional and field["name"] in table.column_names \
                and table.column(field["name"]).null_count:
            # fastavro writes a null as false (boolean) where the type takes no null
            raise TableError(
                f"column '{field['name']}' has nulls but its Avro type is not nullable; "
                "declare the column nullable"
            )
    parsed = fastavro.parse_schema(_without_raw_logical(schema))
    rows = table.to_pylist()
    if any(_has_map(f.type) for f in table.schema):
        rows = [_maps_as_dicts(row, table.schema) for row in rows]
    out = []
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(buf.getvalue())
    return pa.array(out, pa.large_binary())


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_map(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_map(t.value_type)
    return False


def _maps_as_dicts(row: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """``row`` (of ``to_pylist``, which gives a map as a list of (key, value) pairs) with every
    map as the dict an Avro writer takes."""
    return {f.name: _map_value(row[f.name], f.type) for f in schema}


def _map_value(value: Any, t: pa.DataType) -> Any:
    if value is None or not _has_map(t):
        return value
    if pa.types.is_map(t):
        return {k: _map_value(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {t.field(i).name: _map_value(value[t.field(i).name], t.field(i).type)
                for i in range(t.num_fields)}
    return [_map_value(v, t.value_type) for v in value]


def length_prefixed(datums: pa.Array) -> bytes:
    """``int32 BE length + datum`` for each datum, concatenated (a data block's record list)."""
    lengths = pc.binary_length(datums).to_numpy(zero_copy_only=False).astype(">i4")
    prefix = _Padded(lengths.view(np.uint8).reshape(len(datums), 4))
    return bytes(concatenated(_join([prefix, datums], len(datums))))


# -- decode ----------------------------------------------------------------------------------------
_I32BE = struct.Struct(">i")

#: bit 7 of every byte of a little-endian 8-byte word (a varint byte's "more follows" bit)
_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW7_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
#: (keep, move, shift): the 7-bit groups of a word packed pairwise into 14-, 28-, 56-bit lanes
_PACK_STEPS = (
    (np.uint64(0x007F007F007F007F), np.uint64(0x7F007F007F007F00), np.uint64(1)),
    (np.uint64(0x00003FFF00003FFF), np.uint64(0x3FFF00003FFF0000), np.uint64(2)),
    (np.uint64(0x000000000FFFFFFF), np.uint64(0x0FFFFFFF00000000), np.uint64(4)),
)
_ONE = np.uint64(1)
_THREE = np.uint64(3)


class _Cursor:
    """Read positions (one per record) into one byte buffer.

    The buffer is copied once with 8 zero bytes after it, so that the 8 bytes at any position
    can be read as one little-endian word (an overlapping strided view): a varint of up to 8
    bytes is decoded from its word with a fixed number of vectorised steps whatever its length,
    and a fixed-width value is one gather."""

    def __init__(self, buf: U8, starts: I64, ends: I64) -> None:
        self.size = len(buf)
        self.buf = np.zeros(self.size + 8, dtype=np.uint8)
        self.buf[: self.size] = buf
        #: ``words[i]``: the bytes ``buf[i:i + 8]`` as a little-endian uint64
        self.words: npt.NDArray[np.uint64] = np.ndarray(
            (self.size + 1,), dtype="<u8", buffer=self.buf, strides=(1,))
        #: ``pairs[i]``: the bytes ``buf[i:i + 2]`` as a little-endian uint16
        self.pairs: npt.NDArray[np.uint16] = np.ndarray(
            (self.size + 7,), dtype="<u2", buffer=self.buf, strides=(1,))
        self.pos = starts.copy()
        self.ends = ends
        #: the byte at every row's position, when a read just fetched it with its own bytes
        #: (a union's branch and the first byte of its value come in one gather); None once
        #: positions move otherwise
        self.peek: U8 | None = None

    def check(self, rows: npt.NDArray[np.bool_] | None = None) -> None:
        over = self.pos > self.ends if rows is None else (self.pos > self.ends) & rows
        if over.any():
            raise TableError("Avro record is shorter than its schema; the log block is corrupt")

    def _at(self, rows: npt.NDArray[np.bool_]) -> tuple[I64, bool]:
        """The positions of ``rows`` (and whether that is every row), checked to lie in the
        buffer."""
        every = bool(rows.all())
        idx = self.pos if every else self.pos[rows]
        if len(idx) and int(idx.max()) >= self.size:
            raise TableError("Avro record runs past its block; the log block is corrupt")
        return idx, every

    def varint(self, rows: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Zig-zag varints at the positions of ``rows`` (others: 0, not advanced)."""
        n = len(self.pos)
        idx, every = self._at(rows)
        peek, self.peek = self.peek, None
        if every and n:  # fast path: every value fits one byte (small lengths, branches)
            first = peek if peek is not None else self.buf[idx]
            if not (first & 0x80).any():
                self.pos += 1
                small = first.astype(np.int64)
                return (small >> 1) ^ -(small & 1)
        words = self.words[idx]
        # the first byte without the "more" bit ends the varint: its bit 7 alone in ``last``
        stop = ~words & _HIGH_BITS
        last = stop & (~stop + _ONE)
        value = words & ((last << _ONE) - _ONE) & _LOW7_BITS  # (last at bit 63: all ones)
        for keep, move, shift in _PACK_STEPS:
            value = (value & keep) | ((value & move) >> shift)
        # bit index of ``last`` is 8 * length - 1
        width = ((np.bitwise_count(last - _ONE).astype(np.uint64) + _ONE) >> _THREE)
        long_rows = stop == 0  # 9 or 10 bytes (or corrupt): byte by byte
        if long_rows.any():
            at = np.flatnonzero(long_rows)
            value[at], width[at] = self._long_varints(idx[at])
        if int((idx + width.astype(np.int64)).max(initial=0)) > self.size:
            raise TableError("Avro record runs past its block; the log block is corrupt")
        decoded = (value >> _ONE).astype(np.int64) ^ -(value & _ONE).astype(np.int64)
        if every:
            self.pos += width.astype(np.int64)
            return decoded
        self.pos[rows] += width.astype(np.int64)
        out = np.zeros(n, dtype=np.int64)
        out[rows] = decoded
        return out

    def union_branch(
        self, rows: npt.NDArray[np.bool_], value: int, null: int | None, name: str
    ) -> npt.NDArray[np.bool_]:
        """The rows of ``rows`` whose union takes branch ``value`` (the others take ``null``),
        reading each row's branch index. The two branches of an optional field are 0 and 1,
        one-byte varints, so the bytes are compared as they are (zig-zag: 2 * branch); any
        other byte is a branch out of range."""
        idx, every = self._at(rows)
        self.peek = None
        if every:  # the branch and the byte after it (where the value starts) in one gather
            pair = self.pairs[idx]
            code = (pair & 0xFF).astype(np.uint8)
        else:
            code = self.buf[idx]
        taken: npt.NDArray[np.bool_] = code == 2 * value
        if not taken.all():
            other = code == 2 * null if null is not None else np.zeros(len(code), dtype=bool)
            bad = ~(taken | other)
            if bad.any():
                raise TableError(
                    f"field '{name}': Avro union branch byte 0x{int(code[bad][0]):02x} is out of "
                    "range; the log block is corrupt")
        if every:
            self.pos += 1
            self.peek = (pair >> 8).astype(np.uint8)
            return taken
        self.pos[rows] += 1
        present = np.zeros(len(rows), dtype=bool)
        present[rows] = taken
        return present

    def _long_varints(self, idx: I64) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """(unsigned value, byte length) of the varints at ``idx``, one byte at a time."""
        result = np.zeros(len(idx), dtype=np.uint64)
        width = np.zeros(len(idx), dtype=np.uint64)
        active = np.ones(len(idx), dtype=bool)
        shift = 0
        while active.any():
            if shift > 63:
                raise TableError("Avro varint longer than 10 bytes; the log block is corrupt")
            at = idx[active] + (shift // 7)
            if (at >= self.size).any():
                raise TableError("Avro record runs past its block; the log block is corrupt")
            b = self.buf[at].astype(np.uint64)
            result[active] |= (b & np.uint64(0x7F)) << np.uint64(shift)
            width[active] += _ONE
            active[active] = (b & np.uint64(0x80)) != 0
            shift += 7
        return result, width

    def fixed(self, rows: npt.NDArray[np.bool_], width: int) -> U8:
        """The ``width`` bytes at the positions of ``rows``, one row each."""
        self.peek = None
        idx, _every = self._at(rows)
        if len(idx) and int(idx.max()) + width > self.size:
            raise TableError("Avro record runs past its block; the log block is corrupt")
        view: U8 = np.ndarray(
            (self.size + 8 - width + 1, width), dtype=np.uint8, buffer=self.buf, strides=(1, 1))
        mat: U8 = view[idx]
        self.pos[rows] += width
        return mat

    def words_at(self, rows: npt.NDArray[np.bool_], width: int) -> npt.NDArray[np.uint64]:
        """The little-endian words at the positions of ``rows`` (``width`` <= 8 bytes of them
        belong to the value; the caller masks or views them), advancing ``width`` bytes."""
        self.peek = None
        idx, _every = self._at(rows)
        if len(idx) and int(idx.max()) + width > self.size:
            raise TableError("Avro record runs past its block; the log block is corrupt")
        words: npt.NDArray[np.uint64] = self.words[idx]
        self.pos[rows] += width
        return words

    def spans(self, rows: npt.NDArray[np.bool_], lengths: npt.NDArray[np.int64]) -> pa.Array:
        """Binary array (see :func:`~hoodline.spans.byte_spans`) of the ``lengths`` bytes at
        each row's position (empty elsewhere), stepping over them."""
        start = self.pos
        lens = self.skip(rows, lengths)
        return byte_spans(self.buf, start, lens)

    def skip(
        self, rows: npt.NDArray[np.bool_], lengths: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """Step over the ``lengths`` bytes at each row's position (none elsewhere), checked to
        lie in the buffer; returns the lengths stepped over, per row."""
        self.peek = None
        if (lengths < 0).any():
            raise TableError("negative Avro length; the log block is corrupt")
        lens = np.where(rows, lengths, 0)
        # compared as room left, not as pos + length: a huge corrupt length must not wrap
        if len(lens) and (lens > len(self.buf) - self.pos).any():
            raise TableError("Avro record runs past its block; the log block is corrupt")
        self.pos = self.pos + lens
        return lens

    def shared(self, lengths: npt.NDArray[np.int64]) -> bytes | None:
        """The bytes at every row's position, when every row holds the same ``lengths[0]``
        bytes there (at most 64; a block's commit time, a partition path), stepping over them;
        None (positions unmoved) otherwise."""
        n = len(self.pos)
        if n == 0:
            return None
        width = int(lengths[0])
        if not 0 <= width <= 64 or (lengths != width).any():
            return None
        if int(self.pos.max()) + width > self.size:
            raise TableError("Avro record runs past its block; the log block is corrupt")
        first, last = int(self.pos[0]), int(self.pos[-1])
        value = self.buf[first:first + width]
        if not np.array_equal(value, self.buf[last:last + width]):  # a quick no, often
            return None
        view: U8 = np.ndarray(
            (self.size + 8 - width + 1, width), dtype=np.uint8, buffer=self.buf, strides=(1, 1))
        if not (view[self.pos] == value).all():
            return None
        self.peek = None
        self.pos = self.pos + width
        return value.tobytes()


class Delivery(enum.Enum):
    """What :func:`decode_records` gives of a top-level field."""

    #: its values, typed as hoodline reads the Avro type
    VALUES = "values"
    #: a string field as ``dictionary<int32, string>``: one value and no copy of it when
    #: every record holds the same (a block's commit time, a file group's partition path)
    DICTIONARY = "dictionary"
    #: nothing: the reader does not want it (strings are stepped over, not copied)
    NOTHING = "nothing"


#: the dictionary type of :attr:`Delivery.DICTIONARY`
STRING_DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def _decode_field(
    cur: _Cursor,
    f: FlatField,
    n: int,
    active: npt.NDArray[np.bool_] | None = None,
    delivery: Delivery = Delivery.VALUES,
) -> pa.Array | None:
    """Field ``f`` of every record (``active``: only of these -- the records whose enclosing
    optional record is present; the others are not advanced and hold a zero value, valid, so
    that a required child has no nulls: the enclosing struct is null there). ``delivery``
    (string fields): see :class:`Delivery`; None when it is NOTHING."""
    act = np.ones(n, dtype=bool) if active is None else active
    present = act
    if f.value_branch is not None:
        present = cur.union_branch(act, f.value_branch, f.null_branch, f.name)
    null_rows = act & ~present  # the union's null branch
    nulls = int(null_rows.sum())
    mask = null_rows if nulls else None
    validity = None if not nulls else pa.array(~null_rows).buffers()[1]
    kind = f.kind
    if kind == "record":
        kids: list[pa.Array] = []
        for c in f.children:
            kid = _decode_field(cur, c, n, present)
            assert kid is not None  # a child's values are always delivered
            kids.append(kid)
        return pa.StructArray.from_arrays(
            kids, fields=[pa.field(c.name, k.type) for c, k in zip(f.children, kids, strict=True)],
            mask=pa.array(null_rows) if nulls else None)
    if kind in ("int", "long", "enum"):
        vals = cur.varint(present)
        if kind == "enum":
            syms = pa.array(f.symbols, pa.string())
            return pc.take(syms, pa.array(vals, mask=mask))
        arr = pa.array(vals, mask=mask)
        if kind == "int":
            arr = arr.cast(pa.int32())
        return _logical(arr, f)
    if kind == "boolean":
        mat = cur.fixed(present, 1)
        vals = np.zeros(n, dtype=bool)
        vals[present] = mat[:, 0] != 0
        return pa.array(vals, mask=mask)
    if kind in ("float", "double"):
        words = cur.words_at(present, 4 if kind == "float" else 8)
        floats: npt.NDArray[np.floating[Any]]
        if kind == "float":  # the IEEE bits as a native uint32, then viewed as float32
            floats = (words & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
        else:
            floats = words.view("<f8")  # the block's own little-endian bytes
        if nulls or not present.all():
            spread = np.zeros(n, dtype=floats.dtype)
            spread[present] = floats
            floats = spread
        return pa.array(floats, mask=mask)
    if kind in ("string", "bytes"):
        lengths = cur.varint(present)
        if delivery is Delivery.NOTHING:
            cur.skip(present, lengths)
            return None
        dictionary = kind == "string" and delivery is Delivery.DICTIONARY
        if dictionary and not nulls:
            shared = cur.shared(lengths)
            if shared is not None:
                one = pa.Array.from_buffers(pa.binary(), 1, [
                    None, pa.py_buffer(np.array([0, len(shared)], np.int32)),
                    pa.py_buffer(shared)])
                return pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(n, dtype=np.int32)), _utf8(one, f.name))
        arr = cur.spans(present, lengths)
        arr = pa.Array.from_buffers(
            arr.type, n, [validity, arr.buffers()[1], arr.buffers()[2]], null_count=nulls
        )
        if kind == "string":
            text = _utf8(arr, f.name)
            return pc.dictionary_encode(text) if dictionary else text
        return arr.cast(pa.binary())
    if kind == "fixed":
        mat = cur.fixed(present, f.size)
        full = np.zeros((n, f.size), dtype=np.uint8)
        full[present] = mat
        if f.logical == "decimal":
            return _decimal(full, f, ~null_rows, nulls)
        arr = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(f.size), n, [validity, pa.py_buffer(full.reshape(-1))], null_count=nulls
        )
        return arr
    raise TableError(f"Avro type '{kind}' of field '{f.name}' cannot be decoded")


def _utf8(arr: pa.Array, name: str) -> pa.Array:
    """The binary values of string field ``name`` as a ``string`` array, checked to be UTF-8:
    values of ASCII bytes alone (one numpy pass) are viewed as they are; others go through
    Arrow's cast, which checks every value (the check cost as much as copying the values)."""
    if pa.types.is_binary(arr.type) and int(span_bytes(arr).max(initial=0)) < 0x80:
        return arr.view(pa.string())
    try:
        return arr.cast(pa.large_string() if pa.types.is_large_binary(arr.type)
                        else pa.string()).cast(pa.string())
    except pa.ArrowInvalid:
        raise TableError(
            f"field '{name}' holds a value that is not UTF-8; the log block is corrupt") from None


def _logical(arr: pa.Array, f: FlatField) -> pa.Array:
    lt = f.logical
    if lt == "date":
        return arr.cast(pa.int32()).view(pa.date32())
    units = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns"}
    if lt in units:
        return arr.cast(pa.int64()).view(pa.timestamp(units[lt], tz="UTC"))
    if lt == "time-millis":
        return arr.cast(pa.int32()).view(pa.time32("ms"))
    if lt == "time-micros":
        return arr.cast(pa.int64()).view(pa.time64("us"))
    return arr


def _decimal(full: U8, f: FlatField, present: npt.NDArray[np.bool_], nulls: int) -> pa.Array:
    n, size = full.shape
    if size > 16:
        full = full[:, size - 16 :]
        size = 16
    sign = np.where(full[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
    be = np.concatenate([np.repeat(sign, 16 - size, axis=1), full], axis=1)
    le = np.ascontiguousarray(be[:, ::-1]).reshape(-1)
    validity = None if not nulls else pa.array(present).buffers()[1]
    return pa.Array.from_buffers(
        pa.decimal128(max(f.precision, 1), f.scale),
        n,
        [validity, pa.py_buffer(le)],
        null_count=nulls,
    )


def record_offsets(content: bytes | memoryview, start: int, count: int) -> tuple[I64, I64]:
    """(start, end) of each of ``count`` length-prefixed records from ``start``."""
    size = len(content)
    unpack = _I32BE.unpack_from
    ends: list[int] = []
    add = ends.append
    pos = start
    try:
        # each record's end follows from the one before: a loop, kept to two statements
        # (appending and ``repeat`` are ~15 % faster than assigning by index over ``range``)
        for _ in itertools.repeat(None, count):
            pos += 4 + unpack(content, pos)[0]
            add(pos)
    except struct.error:
        raise TableError(
            f"Avro data block ends inside record {len(ends)} of {count}; it is corrupt"
        ) from None
    last = np.asarray(ends, dtype=np.int64)
    first = np.empty(count, dtype=np.int64)
    if count:
        first[0] = start
        first[1:] = last[:-1]
    first += 4
    if (last < first).any():
        raise TableError("negative Avro record length; the data block is corrupt")
    if pos > size:
        raise TableError(f"Avro data block ends inside record {count - 1}; it is corrupt")
    return first, last


def decode_records(
    content: bytes | memoryview,
    starts: I64,
    ends: I64,
    schema: dict[str, Any],
    wanted: pa.Schema | None = None,
) -> pa.Table:
    """The records at ``[starts[i], ends[i])`` of ``content`` as an Arrow table (column per
    schema field, Arrow types as hoodline reads Avro types).

    ``wanted``: the reader's columns. Flat schemas then give only the fields it names, and a
    string field it types ``dictionary<int32, string>`` as such a dictionary (see
    :class:`Delivery`); other schemas give every field (the reader conforms them)."""
    n = len(starts)
    fields = flat_fields(schema, records=True)
    if fields is None or _has_bytes_decimal(fields):
        return _decode_generic(content, starts, ends, schema)
    buf = np.frombuffer(content, dtype=np.uint8)
    cur = _Cursor(buf, starts, ends)
    cols: list[pa.Array] = []
    names: list[str] = []
    for f in fields:
        delivery = _delivery(f.name, wanted)
        col = _decode_field(cur, f, n, delivery=delivery)
        if col is not None and delivery is not Delivery.NOTHING:
            cols.append(col)
            names.append(f.name)
    if n and (cur.pos != ends).any():
        raise TableError("Avro record longer than its schema; the log block is corrupt")
    table = pa.Table.from_arrays(cols, names=names)
    if any(f.children for f in fields):  # struct fields typed as the schema reads (nullability)
        from hoodline.table.schema import avro_schema_json_to_arrow

        full = avro_schema_json_to_arrow(json.dumps(schema))
        table = table.cast(pa.schema([
            pa.field(name, col.type) if pa.types.is_dictionary(col.type) else full.field(name)
            for name, col in zip(names, cols, strict=True)]))
    return table


def _delivery(name: str, wanted: pa.Schema | None) -> Delivery:
    if wanted is None:
        return Delivery.VALUES
    at = wanted.get_field_index(name)
    if at < 0:
        return Delivery.NOTHING
    return Delivery.DICTIONARY if wanted.field(at).type == STRING_DICTIONARY else Delivery.VALUES


def _has_bytes_decimal(fields: list[FlatField] | tuple[FlatField, ...]) -> bool:
    """A ``bytes`` decimal (variable-length two's complement) is read by fastavro."""
    return any((f.kind == "bytes" and f.logical == "decimal") or _has_bytes_decimal(f.children)
               for f in fields)


#: Logical types the table stores as their Avro type (the columnar path reads them so): fastavro
#: would give ``uuid.UUID`` and naive ``datetime`` objects, which Arrow does not take as strings
#: and integers.
_STORED_RAW = frozenset({"uuid", "local-timestamp-millis", "local-timestamp-micros",
                         "local-timestamp-nanos"})


def _without_raw_logical(node: Any) -> Any:
    """``node`` (a schema) without the logical types of :data:`_STORED_RAW`."""
    if isinstance(node, list):
        return [_without_raw_logical(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_raw_logical(v) for k, v in node.items()}
    if out.get("logicalType") in _STORED_RAW:
        del out["logicalType"]
    return out


def _decode_generic(
    content: bytes | memoryview, starts: I64, ends: I64, schema: dict[str, Any]
) -> pa.Table:
    from hoodline.table.schema import avro_schema_json_to_arrow

    plain = _without_raw_logical(schema)
    parsed = fastavro.parse_schema(plain)
    view = memoryview(content)
    arrow = avro_schema_json_to_arrow(json.dumps(schema))
    named = _named_types(plain)
    if not _has_member_union(plain, named):
        rows = [
            fastavro.schemaless_reader(io.BytesIO(view[int(s) : int(e)]), parsed, None)
            for s, e in zip(starts, ends, strict=True)
        ]
        return pa.Table.from_pylist(rows, schema=arrow)
    # unions of several types: a value's branch (read from named types' names and the value's
    # Python type) becomes the member of that index (see schema.avro_schema_json_to_arrow)
    rows = [
        _union_members(fastavro.schemaless_reader(io.BytesIO(view[int(s) : int(e)]), parsed,
                                                  None, return_named_type=True), plain, named)
        for s, e in zip(starts, ends, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=arrow)


def _named_types(schema: Any, out: dict[str, Any] | None = None,
                 namespace: str = "") -> dict[str, Any]:
    """Every named type the schema defines, by full and by short name."""
    out = {} if out is None else out
    if isinstance(schema, list):
        for branch in schema:
            _named_types(branch, out, namespace)
    elif isinstance(schema, dict):
        typ = schema.get("type")
        if typ in ("record", "enum", "fixed") and "name" in schema:
            name = str(schema["name"])
            space = str(schema.get("namespace", namespace)) if "." not in name else ""
            full = f"{space}.{name}" if space else name
            out[full] = out[full.rsplit(".", 1)[-1]] = schema
            namespace = full.rsplit(".", 1)[0] if "." in full else namespace
        if typ == "record":
            for f in schema.get("fields", []):
                _named_types(f["type"], out, namespace)
        elif typ == "array":
            _named_types(schema["items"], out, namespace)
        elif typ == "map":
            _named_types(schema["values"], out, namespace)
        elif isinstance(typ, (dict, list)):
            _named_types(typ, out, namespace)
    return out


def _resolved(node: Any, named: Mapping[str, Any]) -> Any:
    if isinstance(node, str) and node not in _PRIMITIVES:
        return named.get(node, named.get(node.rsplit(".", 1)[-1], node))
    return node


def _member_union(branches: list[Any], named: Mapping[str, Any]) -> bool:
    """A union read as a struct of members (not ``["null", T]``, ``[int, long]``,
    ``[float, double]``)."""
    from hoodline.table.schema import avro_kind

    kinds = {avro_kind(b, named) for b in branches}
    return len(branches) > 1 and not (
        len(branches) == 2 and kinds in ({"int", "long"}, {"float", "double"}))


def _has_member_union(schema: Any, named: Mapping[str, Any],
                      seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    node = _resolved(schema, named)
    if id(node) in seen:
        return False
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        return _member_union(branches, named) or any(
            _has_member_union(b, named, seen) for b in branches)
    if not isinstance(node, dict):
        return False
    seen.add(id(node))
    typ = node.get("type")
    if typ == "record":
        return any(_has_member_union(f["type"], named, seen) for f in node.get("fields", []))
    if typ == "array":
        return _has_member_union(node["items"], named, seen)
    if typ == "map":
        return _has_member_union(node["values"], named, seen)
    return isinstance(typ, (dict, list)) and _has_member_union(typ, named, seen)


def _fits(value: Any, node: Any, named: Mapping[str, Any]) -> bool:
    """Whether fastavro gives ``value`` for Avro type ``node`` (named types come as
    ``(name, value)`` in unions and are matched by name before)."""
    from hoodline.table.schema import avro_kind

    kind = avro_kind(node, named)
    logical = node.get("logicalType") if isinstance(node, dict) else None
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, datetime.datetime):
        return str(logical).startswith("timestamp")
    if isinstance(value, datetime.date):
        return logical == "date"
    if isinstance(value, datetime.time):
        return str(logical).startswith("time-")
    if isinstance(value, decimal.Decimal):
        return logical == "decimal"
    expected = {int: ("int", "long"), float: ("float", "double"), str: ("string",),
                bytes: ("bytes",), list: ("array",), dict: ("map",)}
    for py, kinds in expected.items():
        if isinstance(value, py):
            return kind in kinds and logical in (None, *_STORED_RAW)
    return False


def _union_members(value: Any, node: Any, named: Mapping[str, Any]) -> Any:
    """A value fastavro read with ``return_named_type`` as the table column of its schema
    holds it: unions of several types as ``{"member<i>": ...}`` of the value's branch."""
    if value is None:
        return None
    node = _resolved(node, named)
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        name, inner = (value if isinstance(value, tuple) else (None, value))
        if not _member_union(branches, named):
            return _union_members(inner, branches[0], named) if len(branches) == 1 else inner
        at = _branch_of(name, inner, branches, named)
        return {f"member{i}": _union_members(inner, b, named) if i == at else None
                for i, b in enumerate(branches)}
    if not isinstance(node, dict):
        return value
    typ = node.get("type")
    if typ == "record":
        return {f["name"]: _union_members(value.get(f["name"]), f["type"], named)
                for f in node.get("fields", [])}
    if typ == "array":
        return [_union_members(v, node["items"], named) for v in value]
    if typ == "map":
        return {k: _union_members(v, node["values"], named) for k, v in value.items()}
    if isinstance(typ, (dict, list)):
        return _union_members(value, typ, named)
    return value


def _branch_of(name: str | None, value: Any, branches: list[Any],
               named: Mapping[str, Any]) -> int:
    if name is not None:
        short = name.rsplit(".", 1)[-1]
        for i, b in enumerate(branches):
            target = _resolved(b, named)
            if isinstance(target, dict) and str(target.get("name", "")).rsplit(".", 1)[-1] == short:
                return i
    for i, b in enumerate(branches):
        if _fits(value, _resolved(b, named), named):
            return i
    raise TableError(f"an Avro value {value!r} matches no branch of union {json.dumps(branches)}")


def encode_datum(value: Any, schema: dict[str, Any] | list[Any]) -> bytes:
    """One Avro binary datum (small metadata records: delete lists, plans)."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def decode_datum(
    data: bytes | memoryview, schema: dict[str, Any] | list[Any], record_names: bool = False
) -> Any:
    """One Avro binary datum; ``record_names``: a union's record value comes as ``(its full
    name, the record)`` (unions of several record types: which one it is)."""
    return fastavro.schemaless_reader(
        io.BytesIO(data), fastavro.parse_schema(schema), None,
        return_record_name=record_names, return_record_name_override=record_names)
