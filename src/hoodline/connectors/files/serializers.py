"""Versioned serializers of file splits and of the file enumerator state.

Split format, version 1 (big-endian): path (str), size (long), mtime_ns (long), kind (int),
start (long), end (long), records_to_skip (long).

Enumerator state, version 1: zlib-compressed (directory listings compress ~10x) sequence of
processed files (count int; path str, size long, mtime_ns long), pending splits (count int; each
in split format 1), assignment (count int; split id str, subtask int), rejected files (count int;
path str, split id str, reason str, rows emitted long), discovery_done (bool).

When a format changes, bump ``version`` and keep reading every older version (tests restore
pinned bytes of each older version).
"""

from __future__ import annotations

import zlib

from hoodline.connectors.files.rejections import RejectedFile
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.connectors.files.state import FileEnumeratorState
from hoodline.errors import SplitSerializationError
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    unsupported_version,
)


def _write_split(w: BinaryWriter, split: FileSourceSplit) -> None:
    w.write_str(split.path).write_long(split.size).write_long(split.mtime_ns)
    w.write_int(split.kind.value).write_long(split.start).write_long(split.end)
    w.write_long(split.records_to_skip)


def _read_split(r: BinaryReader) -> FileSourceSplit:
    path, size, mtime = r.read_str(), r.read_long(), r.read_long()
    kind_value = r.read_int()
    try:
        kind = SplitKind(kind_value)
    except ValueError:
        raise SplitSerializationError(
            f"file split of '{path}' has unknown kind {kind_value}; corrupt or newer data"
        ) from None
    start, end, skip = r.read_long(), r.read_long(), r.read_long()
    try:
        return FileSourceSplit(path, size, mtime, kind, start, end, skip)
    except ValueError as exc:
        raise SplitSerializationError(f"invalid file split in checkpoint: {exc}") from None


class FileSplitSerializer(VersionedSerializer[FileSourceSplit]):
    """Serializer of :class:`FileSourceSplit` (see module docs for the format)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: FileSourceSplit) -> bytes:
        w = BinaryWriter()
        _write_split(w, obj)
        return w.to_bytes()

    def deserialize(self, version: int, data: bytes) -> FileSourceSplit:
        if version != 1:
            raise unsupported_version(self, version)
        r = BinaryReader(data, "file split")
        split = _read_split(r)
        r.expect_end()
        return split


class FileEnumeratorStateSerializer(VersionedSerializer[FileEnumeratorState]):
    """Serializer of :class:`FileEnumeratorState` (see module docs for the format)."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: FileEnumeratorState) -> bytes:
        w = BinaryWriter()
        w.write_int(len(obj.processed))
        for path, (size, mtime) in obj.processed.items():
            w.write_str(path).write_long(size).write_long(mtime)
        w.write_int(len(obj.pending))
        for split in obj.pending:
            _write_split(w, split)
        w.write_int(len(obj.assignment))
        for split_id, subtask in obj.assignment.items():
            w.write_str(split_id).write_int(subtask)
        w.write_int(len(obj.rejected))
        for rej in obj.rejected:
            w.write_str(rej.path).write_str(rej.split_id).write_str(rej.reason)
            w.write_long(rej.rows_emitted)
        w.write_bool(obj.discovery_done)
        return zlib.compress(w.to_bytes(), 6)

    def deserialize(self, version: int, data: bytes) -> FileEnumeratorState:
        if version != 1:
            raise unsupported_version(self, version)
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise SplitSerializationError(
                f"file enumerator state is not valid compressed data ({exc}); the checkpoint "
                "is corrupt: restore from another one"
            ) from None
        r = BinaryReader(raw, "file enumerator state")
        state = FileEnumeratorState()
        for _ in range(r.read_int()):
            path = r.read_str()
            state.processed[path] = (r.read_long(), r.read_long())
        state.pending = [_read_split(r) for _ in range(r.read_int())]
        for _ in range(r.read_int()):
            split_id = r.read_str()
            state.assignment[split_id] = r.read_int()
        for _ in range(r.read_int()):
            path, split_id, reason = r.read_str(), r.read_str(), r.read_str()
            state.rejected.append(RejectedFile(path, split_id, reason, r.read_long()))
        state.discovery_done = r.read_bool()
        r.expect_end()
        return state
