"""Local-disk storage operations: what a failure says."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from hoodline.storage import ops


def test_a_full_disk_names_the_file_it_could_not_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk made every table command end in "[Errno 28] No space left on device",
    naming no file, so no disk (large-table review). The file it was creating is named."""
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ops.os, "fsync", no_space)
    target = tmp_path / "t" / ".hoodie" / "20240101000000000.commit.requested"
    target.parent.mkdir(parents=True)
    with pytest.raises(OSError, match=rf"No space left on device: '{target}'") as info:
        ops.create_exclusive(target, b"x", tmp_path / "t" / ".hoodie" / ".temp")
    assert info.value.errno == errno.ENOSPC and not target.exists()
    assert list((tmp_path / "t" / ".hoodie" / ".temp").iterdir()) == []  # nothing left over


def test_a_truncated_parquet_file_is_named_and_not_retried(tmp_path: Path) -> None:
    """A base file truncated outside hoodline ended a pipeline with pyarrow's "Parquet magic
    bytes not found in footer", retried first and naming no file, also with --log-level debug
    (damaged-table review). (A file the active timeline recorded is caught before, by its
    size; one of an archived commit is read.) Opening it names it, and is not retried."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hoodline.errors import DamagedFileError

    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": list(range(1000))}), path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DamagedFileError, match=rf"'{path}' is not a readable Parquet file "
                                               r".*restore it") as info:
        ops.parquet_file(path)
    assert not info.value.retryable


def test_a_file_deleted_while_its_folder_is_listed_is_left_out_not_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file deleted between reading the folder and its stat (a clean beside a reader) made
    the whole folder list as empty: a snapshot read lost that partition's rows without a word,
    11 of 28 reads beside a deleting thread (chaos review)."""
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(b"x")
    real = os.scandir

    class Gone:
        name = "b"

        def is_dir(self) -> bool:
            return False

        def stat(self) -> os.stat_result:
            raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "b"))

    class Listing:
        def __init__(self, path: Path) -> None:
            self.entries = [e if e.name != "b" else Gone() for e in real(path)]

        def __iter__(self) -> object:
            return iter(self.entries)

        def __enter__(self) -> Listing:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(ops.os, "scandir", Listing)
    assert sorted(e.name for e in ops.list_dir(tmp_path)) == ["a", "c"]
