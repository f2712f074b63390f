"""A new base file that takes the old version's row groups as they are, plus new rows.

Appending records to a file group (a copy-on-write insert, a compaction of logs that only
brought new keys) writes a new version holding every row of the old one. Decoding those rows and
encoding them again is most of such a write's cost, yet their bytes do not change: only
``_hoodie_file_name``, which names the new file (as Java's merge handle rewrites it). So the
column chunks of the old row groups are copied byte for byte, the file-name chunk of each is
encoded anew (one repeated value: a few bytes), the new rows are encoded by pyarrow as usual, and
the footer is the new rows' footer with the copied row groups first, their byte offsets moved to
where the chunks now are (:mod:`.thrift` keeps every other field as pyarrow wrote it).

Only files written by Arrow's Parquet writer with the new rows' exact Parquet schema are copied
from, and only row groups without page indexes, Parquet bloom filters or encryption (none of
which hoodline writes); anything else makes :func:`copy_plan` return None and the caller encodes
every row. Row groups smaller than half the configured row-group size are decoded and encoded
again with the new rows, so appends do not leave a file of many small row groups.
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodline.storage.paths import ObjectPath, TablePath
from hoodline.table.parquet import thrift
from hoodline.table.parquet.thrift import Struct

MAGIC = b"PAR1"

# FileMetaData
_FMD_SCHEMA, _FMD_NUM_ROWS, _FMD_ROW_GROUPS, _FMD_CREATED_BY, _FMD_ENCRYPTION = 2, 3, 4, 6, 8
# RowGroup
_RG_COLUMNS, _RG_TOTAL_BYTES, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_COMPRESSED, _RG_ORDINAL = (
    1, 2, 3, 5, 6, 7)
# ColumnChunk
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3
_CC_INDEXES = (4, 5, 6, 7, 8, 9)  # page index offsets/lengths, encryption
# ColumnMetaData
_CMD_UNCOMPRESSED, _CMD_COMPRESSED = 6, 7
_CMD_DATA_PAGE, _CMD_INDEX_PAGE, _CMD_DICT_PAGE, _CMD_BLOOM = 9, 10, 11, 14
_CMD_OFFSETS = (_CMD_DATA_PAGE, _CMD_INDEX_PAGE, _CMD_DICT_PAGE)


#: the writer whose files are copied from (``created_by`` prefix)
ARROW_WRITER = b"parquet-cpp-arrow"


def _footer_start(tail: bytes | memoryview, size: int) -> int:
    """Where the footer of a file of ``size`` bytes starts, from its last bytes ``tail``."""
    if size < 12 or len(tail) < 8 or tail[-4:] != MAGIC:
        raise thrift.ThriftError("not a parquet file (magic bytes missing)")
    length: int = struct.unpack("<i", tail[-8:-4])[0]
    if length <= 0 or length > size - 12:
        raise thrift.ThriftError(f"parquet footer length {length} is out of range")
    return size - 8 - length


def footer_of(data: bytes | memoryview) -> Struct:
    """The decoded ``FileMetaData`` of a whole Parquet file's bytes."""
    start = _footer_start(data[-8:], len(data))
    if data[:4] != MAGIC:
        raise thrift.ThriftError("not a parquet file (magic bytes missing)")
    return thrift.decode_struct(memoryview(data)[start : len(data) - 8])


class OldFile:
    """The base file row groups are copied from: in memory (an object store's, read whole), or
    a local file whose byte ranges the kernel copies into the new file (no user-space copy, no
    resident pages)."""

    def __init__(self, path: Path | None, data: bytes | None, size: int,
                 footer_start: int, footer: Struct) -> None:
        self.path = path
        self.data = data
        self.size = size
        #: where the footer starts: every column chunk lies before
        self.footer_start = footer_start
        self.footer = footer

    @classmethod
    def of_bytes(cls, data: bytes) -> OldFile:
        return cls(None, data, len(data), _footer_start(data[-8:], len(data)), footer_of(data))

    @classmethod
    def open(cls, path: TablePath) -> OldFile:
        """Read ``path``'s footer (a local file) or all of it (an object)."""
        if isinstance(path, ObjectPath):
            return cls.of_bytes(path.read_bytes())
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 8))
            start = _footer_start(f.read(8), size)
            f.seek(start)
            footer = thrift.decode_struct(f.read(size - 8 - start))
        return cls(path, None, size, start, footer)

    def read(self, start: int, length: int) -> bytes:
        if self.data is not None:
            return self.data[start : start + length]
        assert self.path is not None
        with open(self.path, "rb") as f:
            f.seek(start)
            out: bytes = f.read(length)
            return out

    def copy_to(self, fd: int, start: int, length: int) -> None:
        """Append bytes ``start:start+length`` to the file open at ``fd``."""
        if self.data is not None:
            _write_all(fd, memoryview(self.data)[start : start + length])
            return
        assert self.path is not None
        src = os.open(self.path, os.O_RDONLY)
        try:
            while length > 0:
                try:
                    done = os.copy_file_range(src, fd, length, start)
                except OSError:  # no in-kernel copy between these files: through memory
                    done = 0
                if done <= 0:
                    chunk = os.pread(src, min(length, 1 << 24), start)
                    if not chunk:
                        raise thrift.ThriftError(f"'{self.path}' ended before byte {start}")
                    _write_all(fd, chunk)
                    done = len(chunk)
                start += done
                length -= done
        finally:
            os.close(src)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@dataclass(frozen=True)
class _Chunk:
    """Where one column chunk's bytes are in its file."""

    start: int
    length: int


def _chunk_span(chunk: Struct, limit: int) -> _Chunk | None:
    """The byte range of a column chunk (None: it cannot be copied as it is)."""
    if thrift.field(chunk, _CC_FILE_PATH) is not None or any(
        thrift.field(chunk, i) is not None for i in _CC_INDEXES
    ):
        return None
    meta = thrift.get_struct(chunk, _CC_META)
    if meta is None or thrift.field(meta, _CMD_BLOOM) is not None:
        return None
    data_page = thrift.get_int(meta, _CMD_DATA_PAGE)
    dict_page = thrift.get_int(meta, _CMD_DICT_PAGE)
    length = thrift.get_int(meta, _CMD_COMPRESSED)
    if data_page is None or length is None or length <= 0:
        return None
    start = min(data_page, dict_page) if dict_page else data_page
    if start < len(MAGIC) or start + length > limit:
        return None
    return _Chunk(start, length)


#: where a piece of the new file comes from: the old file, or a file encoded in memory
Source = OldFile | bytes | memoryview
#: a column chunk to copy: its file, its metadata there, where its bytes are
_Copy = tuple[Source, Struct, _Chunk]
#: a piece of the new file: (source, start, length)
Piece = tuple[Source, int, int]
#: a row group to write: its column chunks and its row count
_Group = tuple[list[_Copy], int]


@dataclass(frozen=True)
class CopyPlan:
    """The old file's row groups to copy (indexes into its footer), and the footer."""

    old: OldFile
    groups: tuple[int, ...]
    #: position of the ``_hoodie_file_name`` column among the leaf columns
    file_name_column: int

    def rows(self) -> int:
        return sum(self.group_rows(i) for i in self.groups)

    def left_over(self) -> list[int]:
        """The old file's row groups not copied: their rows are to be encoded again."""
        count = len(thrift.get_list(self.old.footer, _FMD_ROW_GROUPS))
        return [i for i in range(count) if i not in self.groups]

    def group_rows(self, index: int) -> int:
        group = thrift.get_list(self.old.footer, _FMD_ROW_GROUPS)[index]
        assert isinstance(group, list)
        return thrift.get_int(group, _RG_NUM_ROWS) or 0


def copy_plan(
    old: TablePath | bytes, schema: pa.Schema, file_name_column: str, min_rows: int
) -> CopyPlan | None:
    """Which row groups of the old file (its path, or its bytes) can be copied into a new file
    of Arrow ``schema`` (as :func:`spliced_file` lays it out): those of at least ``min_rows``
    rows, if the file qualifies at all (see the module notes). None: encode every row."""
    try:
        source = OldFile.of_bytes(old) if isinstance(old, bytes) else OldFile.open(old)
    except thrift.ThriftError:
        return None
    footer = source.footer
    created = thrift.field(footer, _FMD_CREATED_BY)
    if (
        created is None
        or not isinstance(created.value, bytes)
        or not created.value.startswith(ARROW_WRITER)
        or thrift.field(footer, _FMD_ENCRYPTION) is not None
        or thrift.encode_struct(_schema_only(footer)) != _parquet_schema(schema)
    ):
        return None
    names = [f.name for f in schema]
    if file_name_column not in names or any(pa.types.is_nested(f.type) for f in schema):
        return None
    limit = source.footer_start
    groups: list[int] = []
    for i, group in enumerate(thrift.get_list(footer, _FMD_ROW_GROUPS)):
        assert isinstance(group, list)
        rows = thrift.get_int(group, _RG_NUM_ROWS) or 0
        chunks = thrift.get_list(group, _RG_COLUMNS)
        if rows < max(1, min_rows) or len(chunks) != len(names):
            continue
        if all(isinstance(c, list) and _chunk_span(c, limit) is not None for c in chunks):
            groups.append(i)
    if not groups:
        return None
    return CopyPlan(source, tuple(groups), names.index(file_name_column))


def _schema_only(footer: Struct) -> Struct:
    f = thrift.field(footer, _FMD_SCHEMA)
    return [f] if f is not None else []


@functools.lru_cache(maxsize=16)
def _parquet_schema(schema: pa.Schema) -> bytes:
    """The encoded Parquet schema pyarrow writes for ``schema`` (that of an empty file; a
    table's writes ask for the same few schemas over and over)."""
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, schema).close()
    return thrift.encode_struct(_schema_only(footer_of(bytes(sink.getvalue()))))


def _moved(chunk: Struct, old_start: int, new_start: int) -> Struct:
    """A copy of a column chunk's metadata whose offsets point ``new_start - old_start`` on."""
    delta = new_start - old_start
    out = [thrift.Field(f.id, f.type, f.value) for f in chunk]
    offset = thrift.get_int(out, _CC_FILE_OFFSET)
    if offset:
        thrift.set_int(out, _CC_FILE_OFFSET, offset + delta)
    meta = thrift.get_struct(out, _CC_META)
    assert meta is not None
    meta = [thrift.Field(f.id, f.type, f.value) for f in meta]
    for fid in _CMD_OFFSETS:
        value = thrift.get_int(meta, fid)
        if value:
            thrift.set_int(meta, fid, value + delta)
    thrift.field(out, _CC_META).value = meta  # type: ignore[union-attr]
    return out


def _assemble(parts: list[_Group], footer: Struct) -> list[Piece]:
    """The pieces of a file (to be written one after the other) of row groups, each a list of
    (source, chunk metadata, where in the source) and its row count; ``footer`` gives
    everything but the row groups."""
    out: list[Piece] = [(MAGIC, 0, len(MAGIC))]
    size = len(MAGIC)
    groups: list[thrift.Value] = []
    total_rows = 0
    for ordinal, (chunks, rows) in enumerate(parts):
        metas: list[thrift.Value] = []
        first = size
        uncompressed = compressed = 0
        for source, chunk, span in chunks:
            start = size
            out.append((source, span.start, span.length))
            size += span.length
            moved = _moved(chunk, span.start, start)
            meta = thrift.get_struct(moved, _CC_META)
            assert meta is not None
            uncompressed += thrift.get_int(meta, _CMD_UNCOMPRESSED) or 0
            compressed += span.length
            metas.append(moved)
        group: Struct = [
            thrift.Field(_RG_COLUMNS, thrift.LIST, thrift.Sequence(thrift.STRUCT, metas)),
            thrift.Field(_RG_TOTAL_BYTES, thrift.I64, uncompressed),
            thrift.Field(_RG_NUM_ROWS, thrift.I64, rows),
            thrift.Field(_RG_FILE_OFFSET, thrift.I64, first),
            thrift.Field(_RG_COMPRESSED, thrift.I64, compressed),
            thrift.Field(_RG_ORDINAL, thrift.I16, ordinal),
        ]
        groups.append(group)
        total_rows += rows
    meta_out = [thrift.Field(f.id, f.type, f.value) for f in footer]
    thrift.set_int(meta_out, _FMD_NUM_ROWS, total_rows)
    rg_field = thrift.field(meta_out, _FMD_ROW_GROUPS)
    new_list = thrift.Sequence(thrift.STRUCT, groups)
    if rg_field is None:
        meta_out.append(thrift.Field(_FMD_ROW_GROUPS, thrift.LIST, new_list))
        meta_out.sort(key=lambda f: f.id)
    else:
        rg_field.value = new_list
    encoded = thrift.encode_struct(meta_out)
    tail = encoded + struct.pack("<i", len(encoded)) + MAGIC
    out.append((tail, 0, len(tail)))
    return out


def _groups_of(data: bytes | memoryview, footer: Struct) -> list[_Group]:
    """The row groups of a file encoded in memory, to copy whole."""
    limit = _footer_start(data[-8:], len(data))
    out: list[_Group] = []
    for group in thrift.get_list(footer, _FMD_ROW_GROUPS):
        assert isinstance(group, list)
        if not thrift.get_int(group, _RG_NUM_ROWS):
            continue  # an empty table's row group: nothing to copy
        chunks: list[_Copy] = []
        for chunk in thrift.get_list(group, _RG_COLUMNS):
            assert isinstance(chunk, list)
            span = _chunk_span(chunk, limit)
            if span is None:
                raise thrift.ThriftError("pyarrow wrote a column chunk that cannot be copied")
            chunks.append((data, chunk, span))
        out.append((chunks, thrift.get_int(group, _RG_NUM_ROWS) or 0))
    return out


def spliced_file(
    plan: CopyPlan,
    file_name_chunks: bytes,
    new_rows: bytes | memoryview,
) -> list[Piece]:
    """The pieces of a file (to be written in order, :func:`write_pieces`) holding ``plan``'s
    row groups, their file-name column taken from ``file_name_chunks`` (a one-column file with
    one row group per copied group, as :func:`file_name_file` writes it), followed by the row
    groups of ``new_rows`` (a file of the same schema, whose footer -- key-value metadata
    included -- the result keeps)."""
    names_footer = footer_of(file_name_chunks)
    names = _groups_of(file_name_chunks, names_footer)
    if len(names) != len(plan.groups):
        raise thrift.ThriftError("one file-name row group per copied row group is needed")
    limit = plan.old.footer_start
    old_groups = thrift.get_list(plan.old.footer, _FMD_ROW_GROUPS)
    parts: list[_Group] = []
    for index, (name_chunks, name_rows) in zip(plan.groups, names, strict=True):
        group = old_groups[index]
        assert isinstance(group, list)
        rows = thrift.get_int(group, _RG_NUM_ROWS) or 0
        if rows != name_rows:
            raise thrift.ThriftError(f"file-name row group of {name_rows} rows for {rows}")
        chunks: list[_Copy] = []
        for j, chunk in enumerate(thrift.get_list(group, _RG_COLUMNS)):
            assert isinstance(chunk, list)
            if j == plan.file_name_column:
                chunks.append(name_chunks[0])
                continue
            span = _chunk_span(chunk, limit)
            assert span is not None  # checked by copy_plan
            chunks.append((plan.old, chunk, span))
        parts.append((chunks, rows))
    new_footer = footer_of(new_rows)
    parts += _groups_of(new_rows, new_footer)
    return _assemble(parts, new_footer)


def file_name_file(plan: CopyPlan, schema: pa.Schema, value: str, compression: str | None
                   ) -> bytes:
    """A one-column file of ``value`` with one row group per row group ``plan`` copies, each
    of that group's rows (the copied groups' new ``_hoodie_file_name`` chunks)."""
    field = schema.field(plan.file_name_column)
    one = pa.schema([field])
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, one, compression=compression, use_dictionary=True)
    try:
        for index in plan.groups:
            n = plan.group_rows(index)
            column = pa.array([value], field.type).take(pa.array(np.zeros(n, dtype=np.int32)))
            writer.write_table(pa.Table.from_arrays([column], schema=one), row_group_size=n)
    finally:
        writer.close()
    return bytes(sink.getvalue())


def _merged(pieces: list[Piece]) -> list[Piece]:
    """Adjacent ranges of one source as one piece (the chunks of a copied row group)."""
    out: list[Piece] = []
    for src, start, length in pieces:
        if out and out[-1][0] is src and out[-1][1] + out[-1][2] == start:
            out[-1] = (src, out[-1][1], out[-1][2] + length)
        else:
            out.append((src, start, length))
    return out


def join_pieces(pieces: list[Piece]) -> bytes:
    """The file's bytes in memory."""
    return b"".join(
        src[start : start + length] if isinstance(src, bytes | memoryview)
        else src.read(start, length)
        for src, start, length in _merged(pieces)
    )


def write_pieces(path: TablePath, pieces: list[Piece]) -> None:
    """Write a file made of ``pieces``: an object in one upload (never partly), a local file
    piece by piece, the old file's ranges copied by the kernel."""
    if isinstance(path, ObjectPath):
        path.write_bytes(join_pieces(pieces))
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for src, start, length in _merged(pieces):
            if isinstance(src, bytes | memoryview):
                _write_all(fd, memoryview(src)[start : start + length])
            else:
                src.copy_to(fd, start, length)
    finally:
        os.close(fd)
