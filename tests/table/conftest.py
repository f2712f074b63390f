from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from tests.table.handwriter import HandWriter


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
