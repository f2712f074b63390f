"""An object store may apply a request and the client never learn it (a 5xx after the fact, a
dropped connection): the client sends it again. A conditional create retried so finds its own
object and must not take it for another writer's (S3 review: an instant file "already existed"
and the pipeline stopped; a writer refused its own lock). Through a proxy in front of moto."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from hoodline.storage.paths import ObjectPath, parse_location
from hoodline.table.properties import TableConfig
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.helpers.moto_s3 import MotoS3
from tests.helpers.s3_fault_proxy import FaultProxy

pytestmark = pytest.mark.s3


@pytest.fixture
def proxy(moto_s3: MotoS3) -> Iterator[FaultProxy]:
    p = FaultProxy(int(moto_s3.endpoint.rsplit(":", 1)[1]))
    yield p
    p.stop()


def _options(moto_s3: MotoS3, proxy: FaultProxy) -> dict[str, str]:
    return {**moto_s3.options, "endpoint": proxy.endpoint}


def test_a_create_whose_answer_was_lost_is_the_callers_own(
    moto_s3: MotoS3, proxy: FaultProxy
) -> None:
    root = parse_location(f"s3://{moto_s3.new_bucket()}/t", _options(moto_s3, proxy))
    assert isinstance(root, ObjectPath)
    mine = root / "a.commit.requested"
    proxy.fail_after_applying("PUT", "a.commit.requested")
    assert mine.create_exclusive(b"mine")
    assert proxy.replaced and mine.read_bytes() == b"mine"
    # an object another call created stays someone else's
    assert not mine.create_exclusive(b"other")
    assert mine.read_bytes() == b"mine"


@pytest.mark.parametrize("lost", [".commit.requested", ".commit", "writer.lock.0000000001"])
def test_a_write_goes_on_when_the_answer_to_its_instant_or_lock_is_lost(
    moto_s3: MotoS3, proxy: FaultProxy, lost: str
) -> None:
    url = f"s3://{moto_s3.new_bucket()}/t"
    options = _options(moto_s3, proxy)
    table = HudiTable.create(url, TableConfig("t", ("id",), (), "ts"), storage_options=options)
    proxy.fail_after_applying("PUT", lost)
    with WriteClient(table) as client:
        client.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    assert proxy.replaced, f"no {lost} was written"
    rows = read_snapshot(HudiTable.open(url, storage_options=options), columns=["id", "v"])
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
