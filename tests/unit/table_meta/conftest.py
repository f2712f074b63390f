from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable


@pytest.fixture
def table(tmp_path: Path) -> HudiTable:
    cfg = TableConfig(
        name="t", record_key_fields=("id",), partition_fields=("region",), precombine_field="ts"
    )
    return HudiTable.create(tmp_path / "t", cfg)
