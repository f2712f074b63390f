"""Marker files: every data file an instant writes is recorded *before* the file is created.

Layout (Hudi "direct" markers): ``.hoodie/.temp/<ts>/<partition>/<file name>.marker.<IOType>``.
Rollback deletes exactly the marked files of a failed instant, so nothing it wrote survives.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import TYPE_CHECKING

from hoodline.errors import TableError, UnsharedTableError
from hoodline.storage import ops
from hoodline.storage.paths import ObjectPath, TablePath

if TYPE_CHECKING:
    from hoodline.table.table import HudiTable

MARKER_ROOT = ".temp"
MARKER_SUFFIX = ".marker."
IO_TYPES = ("CREATE", "MERGE", "APPEND")
#: Java's record of a marker folder's kind (``MarkerType``), written when an instant starts
MARKER_TYPE_FILE = "MARKERS.type"


class Markers:
    """Markers of one instant of one table."""

    def __init__(self, table: HudiTable, instant_ts: str) -> None:
        self.base_path = table.base_path
        self.instant_ts = instant_ts
        self.dir = table.meta_path / MARKER_ROOT / instant_ts

    def begin(self) -> None:
        """Make the instant's marker folder before its first file: ``MARKERS.type`` saying
        ``DIRECT`` (Java reads that kind from it). A rollback that finds no folder then knows it
        was deleted and lists the table for the instant's files, which costs a listing of every
        partition and a read of log files; an instant killed before its first file (most of a
        pipeline round is reading) had no folder, and was rolled back that way."""
        ops.replace(self.dir / MARKER_TYPE_FILE, b"DIRECT")

    def create(self, partition_path: str, file_name: str, io_type: str = "CREATE") -> TablePath:
        """Record that ``<partition>/<file_name>`` is about to be written. Idempotent."""
        if io_type not in IO_TYPES:
            raise TableError(f"marker IO type '{io_type}' is invalid; use one of {IO_TYPES}")
        if "/" in file_name or not file_name:
            raise TableError(f"marker file name '{file_name}' must be a plain file name")
        folder = self.dir / partition_path if partition_path else self.dir
        marker = folder / f"{file_name}{MARKER_SUFFIX}{io_type}"
        if isinstance(marker, ObjectPath):
            marker.write_bytes(b"")  # one PUT: durable when it returns; idempotent
            return marker
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return marker
        os.fsync(fd)
        os.close(fd)
        return marker

    def marked_files(self) -> list[str]:
        """Data file paths (relative to the base path) marked for this instant, sorted."""
        out: list[str] = []
        for rel in ops.walk_files(self.dir):
            folder, _, name = rel.rpartition("/")
            idx = name.rfind(MARKER_SUFFIX)
            if idx <= 0:
                continue
            out.append(f"{folder}/{name[:idx]}" if folder else name[:idx])
        return sorted(set(out))

    def require(self, written: Collection[str]) -> list[str]:
        """:meth:`marked_files`, once every file of ``written`` (paths relative to the base
        path, as write stats name them) is among them. Every writer marks its file before
        writing it, so a file whose marker is not seen here was written where this process
        cannot see either: :class:`UnsharedTableError` (on a cluster, a node's own disk)."""
        marked = self.marked_files()
        unseen = sorted(set(written) - set(marked))
        if unseen:
            raise UnsharedTableError(
                f"{len(unseen)} of the {len(set(written))} files instant {self.instant_ts} "
                f"wrote are not visible here, e.g. '{unseen[0]}' (no marker under "
                f"'{self.dir}'): table '{self.base_path}' is not on storage the executors and "
                "the driver share. On a cluster put the table on an object store or on a file "
                "system every node mounts at the same path; nothing was committed"
            )
        return marked

    def exists(self) -> bool:
        return self.dir.is_dir()

    def delete_all(self) -> None:
        """Remove this instant's marker folder (after commit or rollback)."""
        ops.remove_tree(self.dir)


def instants_with_markers(meta_path: TablePath) -> list[str]:
    """Timestamps that still have a marker folder."""
    root = meta_path / MARKER_ROOT
    return sorted(e.name for e in ops.list_dir(root) if e.is_dir and e.name.isdigit())
