"""Where source files live: local paths, or object store URLs (``s3://bucket/prefix``, ``gs://``,
``abfs://``) through :mod:`hoodline.storage`, configured by the provider's standard environment
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...). A file's identity is its path, size and
modification time either way (an object's ``last_modified``)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import BinaryIO

from hoodline.storage.paths import ObjectPath, parse_location


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def object_path(url: str) -> ObjectPath:
    location = parse_location(url)
    assert isinstance(location, ObjectPath)
    return location


def stat(path: str) -> tuple[int, int]:
    """(size, modification time in ns); FileNotFoundError when absent."""
    if is_url(path):
        info = object_path(path).stat()
        return info.st_size, int(info.st_mtime * 1e9)
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def exists(path: str) -> bool:
    return object_path(path).is_file() if is_url(path) else os.path.exists(path)


def open_binary(path: str) -> BinaryIO:
    """A seekable binary reader (ranged GETs for an object)."""
    if not is_url(path):
        return open(path, "rb")
    import obstore

    obj = object_path(path)
    return io.BufferedReader(_ObjectRaw(obstore.open_reader(obj.store, obj.key)),
                             buffer_size=1 << 20)


class _ObjectRaw(io.RawIOBase):
    def __init__(self, reader: object) -> None:
        super().__init__()
        self._r = reader

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = bytes(self._r.read(len(buffer)))  # type: ignore[attr-defined]
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._r.seek(offset, whence))  # type: ignore[attr-defined]

    def tell(self) -> int:
        return int(self._r.tell())  # type: ignore[attr-defined]

    def close(self) -> None:
        if not self.closed:
            self._r.close()  # type: ignore[attr-defined]
        super().close()


def list_objects(root: str) -> Iterator[tuple[str, str, int, int]]:
    """(path relative to ``root``, full URL, size, mtime ns) of every object under ``root``."""
    import obstore

    base = object_path(root)
    prefix = f"{base.key}/" if base.key else ""
    for chunk in obstore.list(base.store, prefix or None):
        for o in chunk:
            rel = o["path"][len(prefix):]
            yield (rel, f"{base.root.url}/{o['path']}", int(o["size"]),
                   int(o["last_modified"].timestamp() * 1e9))
