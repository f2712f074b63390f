"""Where source files live: local paths, or object store URLs (``s3://bucket/prefix``, ``gs://``,
``abfs://``) through :mod:`hoodline.storage`, configured by the provider's standard environment
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...). A file's identity is its path, size and
modification time either way (an object's ``last_modified``, to the second)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO

from hoodline.storage import ops
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
        return info.st_size, _object_mtime_ns(info.st_mtime)
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def exists(path: str) -> bool:
    return object_path(path).is_file() if is_url(path) else os.path.exists(path)


def open_binary(path: str) -> BinaryIO:
    """A seekable binary reader (ranged GETs for an object)."""
    if not is_url(path):
        return open(path, "rb")
    return ops.open_binary(object_path(path))


def list_objects(root: str) -> Iterator[tuple[str, str, int, int]]:
    """(path relative to ``root``, full URL, size, mtime ns) of every object under ``root``."""
    base = object_path(root)
    for rel, size, mtime in base.walk_objects():
        yield rel, str(base / rel), size, _object_mtime_ns(mtime)


def _object_mtime_ns(mtime: float) -> int:
    """An object's modification time in whole seconds (as ns): S3 lists it in milliseconds but
    its HEAD response says only seconds, and the file version must compare equal either way."""
    return int(mtime) * 1_000_000_000
