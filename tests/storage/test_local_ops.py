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
