"""File operations whose local and object-store forms differ, on a table path of either kind
(:data:`~hoodline.storage.paths.TablePath`). Local paths keep the exact system calls the table
layer always used (hard links for exclusive creation, rename for replacement, ``fsync``);
object paths use single PUTs, conditional PUTs and listings.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from hoodline.errors import DamagedFileError
from hoodline.storage.paths import ObjectPath, TablePath, storage_errors


@dataclass(frozen=True)
class Entry:
    """One child of a folder."""

    name: str
    is_dir: bool
    size: int = 0
    mtime: float = 0.0


def list_dir(folder: TablePath) -> list[Entry]:
    """The folder's files and sub-folders (empty when it does not exist)."""
    if isinstance(folder, ObjectPath):
        objects, folders = folder.listing()
        return [Entry(n, False, s, m) for n, s, m in objects] + [Entry(n, True) for n in folders]
    try:
        it = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    with it:
        out = []
        for e in it:
            try:
                if e.is_dir():
                    out.append(Entry(e.name, True))
                else:
                    st = e.stat()
                    out.append(Entry(e.name, False, st.st_size, st.st_mtime))
            except FileNotFoundError:
                # deleted since the folder was read (a clean beside this listing): it is
                # gone, the rest is not -- the whole folder was listed empty, and a reader
                # lost a partition's rows without a word (chaos review)
                continue
        return out


def list_names(folder: TablePath) -> list[str]:
    """Names of the folder's children (files and folders); empty when it does not exist."""
    if isinstance(folder, ObjectPath):
        objects, folders = folder.listing()
        return [n for n, _s, _m in objects] + folders
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def walk_files(folder: TablePath) -> Iterator[str]:
    """Paths (relative to ``folder``, ``/``-separated) of every file under it."""
    if isinstance(folder, ObjectPath):
        for rel, _size, _mtime in folder.walk_objects():
            yield rel
        return
    for root, _dirs, files in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        for name in files:
            yield name if rel_root == "." else f"{rel_root}/{name}".replace(os.sep, "/")


def remove_tree(folder: TablePath) -> None:
    """Delete the folder and everything under it (nothing if absent)."""
    if isinstance(folder, ObjectPath):
        for rel in list(walk_files(folder)):
            (folder / rel).unlink(missing_ok=True)
        return
    shutil.rmtree(folder, ignore_errors=True)


def create_exclusive(target: TablePath, data: bytes, staging_dir: TablePath) -> None:
    """Create ``target`` with ``data`` atomically; :class:`FileExistsError` if it exists, even
    when another writer races for it. Readers never see it partly written: locally the bytes
    are written and synced to a file in ``staging_dir`` that is hard-linked into place
    (``os.link`` fails if the target exists; where hard links are not supported, ``O_EXCL``);
    on an object store one conditional PUT (S3 ``If-None-Match: *``)."""
    if isinstance(target, ObjectPath):
        if not target.create_exclusive(data):
            raise FileExistsError(str(target))
        return
    assert isinstance(staging_dir, Path)
    try:
        _create_local(target, data, staging_dir)
    except OSError as exc:
        if exc.filename is None and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            # "[Errno 28] No space left on device" named no file (nor so the disk)
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise


def _create_local(target: Path, data: bytes, staging_dir: Path) -> None:
    staging_dir.mkdir(parents=True, exist_ok=True)
    tmp = staging_dir / f"{target.name}.{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise
        except OSError as exc:  # file systems without hard links: exclusive create instead
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            fd2 = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd2, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    sync_dir(target.parent)


def sync_dir(path: TablePath) -> None:
    """fsync a local folder (its new or removed entries survive a crash); nothing on an object
    store, whose writes are durable when they return."""
    if isinstance(path, ObjectPath):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace(path: TablePath, data: bytes) -> None:
    """Write ``path`` whole, replacing what was there; readers see the old or the new bytes."""
    if isinstance(path, ObjectPath):
        path.write_bytes(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)


def open_binary(path: TablePath) -> BinaryIO:
    """A seekable binary reader of the file (ranged GETs on an object store)."""
    if isinstance(path, ObjectPath):
        import obstore

        with storage_errors(path, "open"):
            raw = _ObjectReader(obstore.open_reader(path.store, path.key), path)
        return io.BufferedReader(raw, buffer_size=1 << 20)
    return open(path, "rb")


def open_input(path: TablePath) -> Any:
    """A random-access file for pyarrow (memory-mapped locally; ranged GETs on an object
    store)."""
    if isinstance(path, ObjectPath):
        return pa.PythonFile(open_binary(path), mode="r")
    return pa.memory_map(str(path), "r")


class _ObjectReader(io.RawIOBase):
    """obstore's reader as a raw binary stream (store errors as
    :class:`~hoodline.errors.StorageError`)."""

    def __init__(self, reader: Any, path: ObjectPath) -> None:
        super().__init__()
        self._r = reader
        self._path = path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with storage_errors(self._path, "read"):
            data = bytes(self._r.read(len(buffer)))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        with storage_errors(self._path, "read"):
            return int(self._r.seek(offset, whence))

    def tell(self) -> int:
        return int(self._r.tell())

    def close(self) -> None:
        if not self.closed:
            self._r.close()
        super().close()


def parquet_file(path: TablePath, read_dictionary: Sequence[str] = ()) -> pq.ParquetFile:
    """A Parquet file to read; the columns ``read_dictionary`` read as dictionary arrays (a
    dictionary-encoded column then comes as its dictionary and indices, no value per row)."""
    dictionary = list(read_dictionary) or None
    try:
        if isinstance(path, ObjectPath):
            return pq.ParquetFile(open_input(path), read_dictionary=dictionary)
        return pq.ParquetFile(path, memory_map=True, read_dictionary=dictionary)
    except pa.ArrowInvalid as exc:  # no footer: truncated, or not Parquet at all
        raise DamagedFileError(
            f"'{path}' is not a readable Parquet file ({exc}): it was truncated or overwritten "
            "outside hoodline; restore it from a backup (`hoodline table files` names the "
            "commit it belongs to)"
        ) from exc


def read_parquet(path: TablePath, columns: list[str] | None = None) -> pa.Table:
    return parquet_file(path).read(columns=columns, use_threads=False)


def read_parquet_metadata(path: TablePath) -> pq.FileMetaData:
    return parquet_file(path).metadata


class ObjectOutput:
    """A Parquet sink for an object store: buffered, uploaded in one PUT on close (never
    visible half written)."""

    def __init__(self, path: ObjectPath) -> None:
        self.path = path
        self.buffer = pa.BufferOutputStream()

    def close(self) -> None:
        self.path.write_bytes(self.buffer.getvalue().to_pybytes())


def output_sink(path: TablePath) -> tuple[Any, ObjectOutput | None]:
    """Where a Parquet writer writes ``path``: the local path itself, or a buffer uploaded by
    :meth:`ObjectOutput.close` once the writer is closed."""
    if isinstance(path, ObjectPath):
        out = ObjectOutput(path)
        return out.buffer, out
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path), None
