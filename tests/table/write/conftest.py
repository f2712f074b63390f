"""Fixtures of the table-write tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.table.write.helpers import make_config


@pytest.fixture(params=["BUCKET", "BLOOM"])
def index_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_table(tmp_path: Path) -> Callable[..., HudiTable]:
    def make(index: str = "BLOOM", name: str = "t", **kw: object) -> HudiTable:
        return HudiTable.create(tmp_path / name, make_config(index, **kw))

    return make


@pytest.fixture
def client_for() -> Iterator[Callable[..., WriteClient]]:
    opened: list[WriteClient] = []

    def make(table: HudiTable, options: dict[str, object] | None = None) -> WriteClient:
        c = WriteClient(table, options).open()
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()
