"""Marker files: every data file an instant writes is recorded *before* the file is created.

Layout (Hudi "direct" markers): ``.hoodie/.temp/<ts>/<partition>/<file name>.marker.<IOType>``.
Rollback deletes exactly the marked files of a failed instant, so nothing it wrote survives.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from hoodline.errors import TableError

if TYPE_CHECKING:
    from hoodline.table.table import HudiTable

MARKER_ROOT = ".temp"
MARKER_SUFFIX = ".marker."
IO_TYPES = ("CREATE", "MERGE", "APPEND")


class Markers:
    """Markers of one instant of one table."""

    def __init__(self, table: HudiTable, instant_ts: str) -> None:
        self.base_path = Path(table.base_path)
        self.instant_ts = instant_ts
        self.dir = Path(table.meta_path) / MARKER_ROOT / instant_ts

    def create(self, partition_path: str, file_name: str, io_type: str = "CREATE") -> Path:
        """Record that ``<partition>/<file_name>`` is about to be written. Idempotent."""
        if io_type not in IO_TYPES:
            raise TableError(f"marker IO type '{io_type}' is invalid; use one of {IO_TYPES}")
        if "/" in file_name or not file_name:
            raise TableError(f"marker file name '{file_name}' must be a plain file name")
        folder = self.dir / partition_path if partition_path else self.dir
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / f"{file_name}{MARKER_SUFFIX}{io_type}"
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
        if not self.dir.is_dir():
            return out
        for root, _dirs, files in os.walk(self.dir):
            rel_dir = os.path.relpath(root, self.dir)
            for name in files:
                idx = name.rfind(MARKER_SUFFIX)
                if idx <= 0:
                    continue
                data_name = name[:idx]
                rel = data_name if rel_dir == "." else f"{rel_dir}/{data_name}"
                out.append(rel.replace(os.sep, "/"))
        return sorted(set(out))

    def exists(self) -> bool:
        return self.dir.is_dir()

    def delete_all(self) -> None:
        """Remove this instant's marker folder (after commit or rollback)."""
        shutil.rmtree(self.dir, ignore_errors=True)


def instants_with_markers(meta_path: str | os.PathLike[str]) -> list[str]:
    """Timestamps that still have a marker folder."""
    root = Path(meta_path) / MARKER_ROOT
    if not root.is_dir():
        return []
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and e.name.isdigit())
