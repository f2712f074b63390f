"""The BUCKET index refuses a partition whose file groups do not fit its buckets, naming the
files and the likely cause: a file copied into the table by hand (day-two review: the messages
named file ids only)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hoodline.errors import TableError
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.table.write.helpers import make_config, rows


def _table_with_a_copied_file(tmp_path: Path, new_id: str) -> tuple[HudiTable, str]:
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", bucket_count=2))
    with WriteClient(table) as client:
        ts = client.upsert(rows(list(range(10))))
    original = next(Path(str(table.base_path), "region=eu").glob("00000000-*.parquet"))
    copy = original.with_name(f"{new_id}_0-0-0_{ts}.parquet")
    shutil.copy(original, copy)
    return table, copy.name


@pytest.mark.parametrize(("new_id", "problem"), [
    ("00000000-aaaa-bbbb-cccc-555555555555-0", "has two file groups for bucket 0"),
    ("00000007-aaaa-bbbb-cccc-555555555555-0", "is not a bucket of this 2-bucket table"),
])
def test_a_file_copied_into_a_bucket_table_is_named_with_what_to_do(
        tmp_path: Path, new_id: str, problem: str) -> None:
    table, copied = _table_with_a_copied_file(tmp_path, new_id)
    with pytest.raises(TableError) as err, WriteClient(table) as client:
        client.upsert(rows([1], ts=2))
    message = str(err.value)
    assert problem in message and f"region=eu/{copied}" in message
    assert "if 'hoodline table commits' shows no commit that wrote it, move it out" in message
