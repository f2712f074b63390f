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

import mmap
import struct
from dataclasses import dataclass

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

#: bytes of a file, or a view of them
Buffer = bytes | memoryview | mmap.mmap

#: the writer whose files are copied from (``created_by`` prefix)
ARROW_WRITER = b"parquet-cpp-arrow"


def footer_of(data: Buffer) -> Struct:
    """The decoded ``FileMetaData`` of a whole Parquet file's bytes."""
    if len(data) < 12 or bytes(data[:4]) != MAGIC or bytes(data[-4:]) != MAGIC:
        raise thrift.ThriftError("not a parquet file (magic bytes missing)")
    (length,) = struct.unpack("<i", data[-8:-4])
    if length <= 0 or length > len(data) - 12:
        raise thrift.ThriftError(f"parquet footer length {length} is out of range")
    return thrift.decode_struct(memoryview(data)[len(data) - 8 - length : len(data) - 8])


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


#: a column chunk to copy: its file's bytes, its metadata there, where its bytes are
_Copy = tuple[Buffer, Struct, _Chunk]
#: a row group to write: its column chunks and its row count
_Group = tuple[list[_Copy], int]


@dataclass(frozen=True)
class CopyPlan:
    """The old file's row groups to copy (indexes into its footer), and the footer."""

    data: Buffer
    footer: Struct
    groups: tuple[int, ...]
    #: position of the ``_hoodie_file_name`` column among the leaf columns
    file_name_column: int

    def rows(self) -> int:
        return sum(self.group_rows(i) for i in self.groups)

    def group_rows(self, index: int) -> int:
        group = thrift.get_list(self.footer, _FMD_ROW_GROUPS)[index]
        assert isinstance(group, list)
        return thrift.get_int(group, _RG_NUM_ROWS) or 0


def copy_plan(
    data: Buffer, schema: pa.Schema, file_name_column: str, min_rows: int
) -> CopyPlan | None:
    """Which row groups of the old file ``data`` can be copied into a new file of Arrow
    ``schema`` (as :func:`write_with_copied_groups` writes it): those of at least ``min_rows``
    rows, if the file qualifies at all (see the module notes). None: encode every row."""
    try:
        footer = footer_of(data)
    except thrift.ThriftError:
        return None
    created = thrift.field(footer, _FMD_CREATED_BY)
    if (
        created is None
        or not isinstance(created.value, bytes)
        or not created.value.startswith(ARROW_WRITER)
        or thrift.field(footer, _FMD_ENCRYPTION) is not None
        or thrift.encode_struct(_schema_only(footer)) != thrift.encode_struct(
            _schema_only(footer_of(_empty_file(schema))))
    ):
        return None
    names = [f.name for f in schema]
    if file_name_column not in names or any(pa.types.is_nested(f.type) for f in schema):
        return None
    limit = len(data) - 8 - struct.unpack("<i", data[-8:-4])[0]
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
    return CopyPlan(data, footer, tuple(groups), names.index(file_name_column))


def _schema_only(footer: Struct) -> Struct:
    f = thrift.field(footer, _FMD_SCHEMA)
    return [f] if f is not None else []


def _empty_file(schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, schema).close()
    return bytes(sink.getvalue())


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


def _assemble(parts: list[_Group], footer: Struct) -> list[Buffer]:
    """The pieces of a file (to be written one after the other) of row groups, each a list of
    (source bytes, chunk metadata, where in the source) and its row count; ``footer`` gives
    everything but the row groups. The chunks' pieces are views of their sources."""
    out: list[Buffer] = [MAGIC]
    size = len(MAGIC)
    groups: list[thrift.Value] = []
    total_rows = 0
    for ordinal, (chunks, rows) in enumerate(parts):
        metas: list[thrift.Value] = []
        first = size
        uncompressed = compressed = 0
        for source, chunk, span in chunks:
            start = size
            out.append(memoryview(source)[span.start : span.start + span.length])
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
    out += [encoded, struct.pack("<i", len(encoded)), MAGIC]
    return out


def _groups_of(data: Buffer, footer: Struct
               ) -> list[_Group]:
    limit = len(data) - 8 - struct.unpack("<i", data[-8:-4])[0]
    out = []
    for group in thrift.get_list(footer, _FMD_ROW_GROUPS):
        assert isinstance(group, list)
        if not thrift.get_int(group, _RG_NUM_ROWS):
            continue  # an empty table's row group: nothing to copy
        chunks = []
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
    new_rows: bytes,
) -> list[Buffer]:
    """The pieces of a file (to be written in order) holding ``plan``'s row groups, their
    file-name column taken from ``file_name_chunks`` (a one-column file with one row group per
    copied group, as
    :func:`file_name_file` writes it), followed by the row groups of ``new_rows`` (a file of
    the same schema, whose footer -- key-value metadata included -- the result keeps)."""
    names_footer = footer_of(file_name_chunks)
    names = _groups_of(file_name_chunks, names_footer)
    if len(names) != len(plan.groups):
        raise thrift.ThriftError("one file-name row group per copied row group is needed")
    limit = len(plan.data) - 8 - struct.unpack("<i", plan.data[-8:-4])[0]
    old_groups = thrift.get_list(plan.footer, _FMD_ROW_GROUPS)
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
            chunks.append((plan.data, chunk, span))
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
            column = pa.array([value], field.type).take(pa.array([0] * n, pa.int32()))
            writer.write_table(pa.Table.from_arrays([column], schema=one), row_group_size=n)
    finally:
        writer.close()
    return bytes(sink.getvalue())


def read_old(path: TablePath) -> Buffer:
    """The whole old base file, whose row groups are copied from memory: a local file mapped
    (no copy), an object read."""
    if isinstance(path, ObjectPath):
        return path.read_bytes()
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def write_pieces(path: TablePath, pieces: list[Buffer]) -> None:
    """Write a file made of ``pieces`` (an object in one upload, never partly)."""
    if isinstance(path, ObjectPath):
        path.write_bytes(b"".join(pieces))
        return
    with open(path, "wb") as f:
        for piece in pieces:
            f.write(piece)
