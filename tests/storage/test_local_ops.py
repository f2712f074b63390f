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


def test_a_truncated_base_file_is_named_and_not_retried(tmp_path: Path) -> None:
    """A base file truncated outside hoodline ended a pipeline with pyarrow's "Parquet magic
    bytes not found in footer", retried first and naming no file, also with --log-level debug
    (damaged-table review). The write stops at once with the file's path."""
    from hoodline.errors import DamagedFileError
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import WriteClient
    from tests.table.write.helpers import make_config, rows

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", bucket_count=1))
    with WriteClient(table) as client:
        client.upsert(rows([1, 2, 3]))
    (base,) = sorted((tmp_path / "t" / "region=eu").glob("*.parquet"))
    base.write_bytes(base.read_bytes()[:200])
    with WriteClient(HudiTable.open(tmp_path / "t")) as client, pytest.raises(
        DamagedFileError, match=rf"'{base}' is not a readable Parquet file .*restore it"
    ) as info:
        client.upsert(rows([1], ts=2))
    assert not info.value.retryable
