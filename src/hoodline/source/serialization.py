"""Versioned serializers for splits and enumerator state.

Every serializer has a :attr:`VersionedSerializer.version`: the version it *writes*. Bytes are
always read back together with the version they were written with
(``deserialize(version, data)``), so a serializer keeps reading every earlier version after the
format changes. Store the version next to the bytes (:func:`write_versioned` /
:func:`read_versioned` put both into one byte string) and add a test that restores bytes written by
each earlier version.

:func:`frame` / :func:`unframe` are the one framing of every versioned byte string hoodline stores
(a 4-byte magic marker naming what the bytes are, a big-endian int32 format version, the body):
versioned split/enumerator records, the source checkpoint and the pipeline checkpoint.

:class:`BinaryWriter` / :class:`BinaryReader` are small helpers for compact big-endian formats.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from typing import Generic, TypeVar

from hoodline.errors import SplitSerializationError

__all__ = [
    "BinaryReader",
    "BinaryWriter",
    "VersionedSerializer",
    "frame",
    "read_versioned",
    "unframe",
    "unsupported_version",
    "write_versioned",
]

T = TypeVar("T")

_MAGIC = b"HLV1"
_HEADER = struct.Struct(">4si")


class VersionedSerializer(ABC, Generic[T]):
    """Serializes values of one type; knows which format version it writes."""

    @property
    @abstractmethod
    def version(self) -> int:
        """The format version :meth:`serialize` writes (a positive integer)."""

    @abstractmethod
    def serialize(self, obj: T) -> bytes:
        """Bytes of ``obj`` in the format of :attr:`version`."""

    @abstractmethod
    def deserialize(self, version: int, data: bytes) -> T:
        """Read ``data`` written in format ``version`` (any version this serializer ever wrote).

        Raise :class:`~hoodline.errors.SplitSerializationError` (see
        :func:`unsupported_version`) for versions it does not know.
        """

    def supported_versions(self) -> tuple[int, ...]:
        """Versions :meth:`deserialize` reads; by default 1 up to :attr:`version`."""
        return tuple(range(1, self.version + 1))


def unsupported_version(
    serializer: VersionedSerializer[object] | VersionedSerializer[T], version: int
) -> SplitSerializationError:
    """The error to raise for bytes of an unknown ``version`` (names serializer and versions)."""
    known = ", ".join(str(v) for v in serializer.supported_versions())
    return SplitSerializationError(
        f"{type(serializer).__name__} cannot read format version {version}; it reads versions "
        f"{known}. The bytes were written by a newer hoodline or are corrupt: upgrade hoodline "
        f"or restore from another checkpoint."
    )


def frame(magic: bytes, version: int, body: bytes) -> bytes:
    """``magic`` (4 bytes) + int32 ``version`` + ``body``: the framing of every versioned record."""
    if len(magic) != 4:
        raise ValueError(f"a frame marker has 4 bytes, not {len(magic)}: {magic!r}")
    return _HEADER.pack(magic, version) + body


def unframe(
    data: bytes, magic: bytes, versions: Collection[int] | None, what: str
) -> tuple[int, bytes]:
    """The version and body of a :func:`frame`; errors name ``what`` and the versions known
    (``versions`` None: the caller checks the version itself)."""
    if len(data) < _HEADER.size:
        raise SplitSerializationError(
            f"{what}: {len(data)} bytes are too short for a versioned record (need at least "
            f"{_HEADER.size}); the bytes are truncated or corrupt."
        )
    found, version = _HEADER.unpack_from(data)
    if found != magic:
        raise SplitSerializationError(
            f"{what}: bytes start with {found!r}, not the marker {magic!r}; they were written by "
            f"something else or are corrupt."
        )
    if versions is not None and version not in versions:
        known = ", ".join(str(v) for v in sorted(versions))
        raise SplitSerializationError(
            f"{what}: format version {version} is not supported (this hoodline reads versions "
            f"{known}); the bytes were written by a newer hoodline or are corrupt: upgrade "
            f"hoodline or restore from another checkpoint."
        )
    return version, data[_HEADER.size :]


def write_versioned(serializer: VersionedSerializer[T], obj: T) -> bytes:
    """Serialize ``obj`` and prefix the bytes with a magic marker and the format version."""
    return frame(_MAGIC, serializer.version, serializer.serialize(obj))


def read_versioned(serializer: VersionedSerializer[T], data: bytes) -> T:
    """Read bytes produced by :func:`write_versioned` with any version the serializer knows."""
    version, body = unframe(data, _MAGIC, None, type(serializer).__name__)
    if version not in serializer.supported_versions():
        raise unsupported_version(serializer, version)
    return serializer.deserialize(version, body)


class BinaryWriter:
    """Appends big-endian primitives to a buffer."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write_bool(self, value: bool) -> BinaryWriter:
        self._parts.append(b"\x01" if value else b"\x00")
        return self

    def write_int(self, value: int) -> BinaryWriter:
        """A signed 32-bit integer."""
        self._parts.append(struct.pack(">i", value))
        return self

    def write_long(self, value: int) -> BinaryWriter:
        """A signed 64-bit integer."""
        self._parts.append(struct.pack(">q", value))
        return self

    def write_optional_long(self, value: int | None) -> BinaryWriter:
        self.write_bool(value is not None)
        if value is not None:
            self.write_long(value)
        return self

    def write_bytes(self, value: bytes) -> BinaryWriter:
        """Length-prefixed bytes."""
        self._parts.append(struct.pack(">i", len(value)))
        self._parts.append(value)
        return self

    def write_str(self, value: str) -> BinaryWriter:
        """Length-prefixed UTF-8 text."""
        return self.write_bytes(value.encode("utf-8"))

    def write_str_list(self, values: Iterable[str]) -> BinaryWriter:
        items = list(values)
        self.write_int(len(items))
        for item in items:
            self.write_str(item)
        return self

    def to_bytes(self) -> bytes:
        return b"".join(self._parts)


class BinaryReader:
    """Reads what :class:`BinaryWriter` wrote; errors name the position and what was expected."""

    def __init__(self, data: bytes, what: str = "record") -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def _take(self, n: int, kind: str) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise SplitSerializationError(
                f"truncated {self._what}: expected {kind} of {n} bytes at offset {self._pos}, "
                f"only {len(self._data) - self._pos} left"
            )
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def read_bool(self) -> bool:
        return self._take(1, "bool") != b"\x00"

    def read_int(self) -> int:
        value: int = struct.unpack(">i", self._take(4, "int"))[0]
        return value

    def read_long(self) -> int:
        value: int = struct.unpack(">q", self._take(8, "long"))[0]
        return value

    def read_optional_long(self) -> int | None:
        return self.read_long() if self.read_bool() else None

    def read_bytes(self) -> bytes:
        n = self.read_int()
        return self._take(n, "bytes")

    def read_str(self) -> str:
        raw = self.read_bytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SplitSerializationError(
                f"invalid UTF-8 text in {self._what} before offset {self._pos}: {exc}"
            ) from None

    def read_str_list(self) -> list[str]:
        return [self.read_str() for _ in range(self.read_int())]

    def at_end(self) -> bool:
        return self._pos == len(self._data)

    def expect_end(self) -> None:
        """Fail if bytes are left over (a sign of a wrong version or corrupt data)."""
        if not self.at_end():
            raise SplitSerializationError(
                f"{len(self._data) - self._pos} unexpected trailing bytes in {self._what} "
                f"at offset {self._pos}; wrong format version or corrupt data"
            )
