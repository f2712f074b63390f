"""Hudi log block framing (log format version 1), as Java's ``HoodieLogFormatWriter`` writes it.

Every integer is big-endian. One block on disk::

    "#HUDI#"                     6 bytes magic
    int64  block size            bytes after this field, the trailing length included
    int32  log format version    1
    int32  block type            LogBlockType
    header                       int32 count, then per entry int32 key, int32 length, UTF-8 value
    int64  content length
    content
    footer                       the same map layout; always empty (4 zero bytes)
    int64  total block length    magic through footer (= block size + 6)

A file is blocks back to back. A reader that meets bytes that do not frame a block (a write cut
short) treats them as corrupt and resumes at the next magic, as Java and hudi-rs do.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from hoodline.errors import TableError

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class LogBlockType(enum.IntEnum):
    """``HoodieLogBlock.HoodieLogBlockType`` ordinals."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """``HoodieLogBlock.HeaderMetadataType`` ordinals valid in table version 6."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6


#: ``HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK``
ROLLBACK_COMMAND = "0"


@dataclass(frozen=True)
class LogBlock:
    """One block: its type, header entries and content bytes."""

    type: LogBlockType
    header: Mapping[HeaderKey, str]
    content: bytes | memoryview = b""
    #: where the block starts in its file (0 for blocks not read from a file)
    offset: int = field(default=0, compare=False)
    #: the file it was read from, for error messages (empty: not known)
    source: str = field(default="", compare=False)

    @property
    def instant(self) -> str:
        value = self.header.get(HeaderKey.INSTANT_TIME)
        if value is None:
            raise TableError(f"log block at offset {self.offset} has no INSTANT_TIME header")
        return value

    def serialize(self) -> bytes:
        return b"".join(self.parts())

    def parts(self) -> list[bytes | memoryview]:
        """The block's bytes in pieces (the content not copied): write them in order."""
        header = _metadata_bytes(self.header)
        footer = _metadata_bytes({})
        content = self.content
        size = len(content) if isinstance(content, bytes) else content.nbytes
        block_size = 4 + 4 + len(header) + 8 + size + len(footer) + 8
        lead = b"".join(
            (
                MAGIC,
                _I64.pack(block_size),
                _I32.pack(LOG_FORMAT_VERSION),
                _I32.pack(int(self.type)),
                header,
                _I64.pack(size),
            )
        )
        return [lead, content, footer + _I64.pack(block_size + len(MAGIC))]


def _metadata_bytes(entries: Mapping[HeaderKey, str]) -> bytes:
    parts = [_I32.pack(len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        parts += [_I32.pack(int(key)), _I32.pack(len(raw)), raw]
    return b"".join(parts)


class _Short(Exception):
    """The bytes end inside a block."""


def _read_metadata(view: memoryview, pos: int) -> tuple[dict[HeaderKey, str], int]:
    if pos + 4 > len(view):
        raise _Short
    (count,) = _I32.unpack_from(view, pos)
    pos += 4
    if count < 0 or count > 64:
        raise _Short
    out: dict[HeaderKey, str] = {}
    for _ in range(count):
        if pos + 8 > len(view):
            raise _Short
        key, length = struct.unpack_from(">ii", view, pos)
        pos += 8
        if length < 0 or pos + length > len(view):
            raise _Short
        raw = bytes(view[pos : pos + length])
        pos += length
        try:
            out[HeaderKey(key)] = raw.decode("utf-8")
        except ValueError:
            raise _Short from None
    return out, pos


def _parse_block(view: memoryview, start: int) -> tuple[LogBlock, int]:
    """The block at ``start`` and the offset after it; :class:`_Short` if it is not whole."""
    pos = start + len(MAGIC)
    if pos + 8 + 8 > len(view):
        raise _Short
    (size,) = _I64.unpack_from(view, pos)
    pos += 8
    end = pos + size
    if size < 4 + 4 + 4 + 8 + 4 + 8 or end > len(view):
        raise _Short
    (version,) = _I32.unpack_from(view, pos)
    if version != LOG_FORMAT_VERSION:
        raise _Short
    (btype,) = _I32.unpack_from(view, pos + 4)
    try:
        block_type = LogBlockType(btype)
    except ValueError:
        raise _Short from None
    header, pos = _read_metadata(view, pos + 8)
    if pos + 8 > end:
        raise _Short
    (content_len,) = _I64.unpack_from(view, pos)
    pos += 8
    if content_len < 0 or pos + content_len > end:
        raise _Short
    content = view[pos : pos + content_len]
    pos += content_len
    _footer, pos = _read_metadata(view, pos)
    if pos + 8 != end:
        raise _Short
    (total,) = _I64.unpack_from(view, pos)
    if total != size + len(MAGIC):
        raise _Short
    return LogBlock(block_type, header, content, start), end


def read_blocks(data: bytes | memoryview) -> Iterator[LogBlock]:
    """The whole blocks of a log file in order; torn or foreign bytes are skipped up to the
    next magic (a crash cut the last write short, or a later append follows)."""
    view = memoryview(data)
    raw = bytes(view) if isinstance(data, memoryview) else data
    pos = 0
    while pos < len(view):
        if view[pos : pos + len(MAGIC)] == MAGIC:
            try:
                block, pos = _parse_block(view, pos)
            except _Short:
                pass
            else:
                yield block
                continue
        nxt = raw.find(MAGIC, pos + 1)
        if nxt < 0:
            return
        pos = nxt


def first_block_instant(data: bytes) -> str | None:
    """INSTANT_TIME of the first whole block (None when there is none)."""
    for block in read_blocks(data):
        return block.header.get(HeaderKey.INSTANT_TIME)
    return None
