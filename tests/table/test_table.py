"""HudiTable.create where the table cannot be: one TableError naming the path and what to do,
never an OSError from deep inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.errors import TableError
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable


def test_create_under_a_file_names_the_path_and_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(TableError) as info:
        HudiTable.create(blocker / "t", TableConfig(name="t", record_key_fields=("id",)))
    message = str(info.value)
    assert f"cannot create a Hudi table at '{blocker / 't'}'" in message
    assert "choose a path where this user can create directories" in message
    assert isinstance(info.value.__cause__, OSError)
    assert not info.value.retryable
