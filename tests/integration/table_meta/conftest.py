from __future__ import annotations

from pathlib import Path

import pytest
from tm_handwriter import HandWriter

from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable


@pytest.fixture
def table(tmp_path: Path) -> HudiTable:
    cfg = TableConfig(
        name="trips",
        record_key_fields=("id",),
        partition_fields=("region",),
        precombine_field="val",
    )
    return HudiTable.create(tmp_path / "trips", cfg)


@pytest.fixture
def writer(table: HudiTable) -> HandWriter:
    return HandWriter(table)
