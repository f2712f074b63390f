"""The per-process cache of base files' footer indexes (key range and bloom filter) that the
BLOOM index reads: bounded by the bytes of its filters, not only by its number of entries."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from hoodline.table.index.bloom_index import _footprint, _PathCache, read_footer_index
from hoodline.table.properties import IndexType, TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient


def test_the_footer_cache_holds_at_most_its_bytes_of_filters(tmp_path: Path) -> None:
    """Copy-on-write rewrites give files new names each round: every round added the filters of
    the files it looked at, and a worker of a long-running BLOOM pipeline grew by ~13 MiB a
    round until the machine ran out (large-table review). The least recently used entries go
    once the filters' bytes pass the cap."""
    table = HudiTable.create(tmp_path / "t", TableConfig(
        "t", ("id",), ("p",), index_type=IndexType.BLOOM))
    with WriteClient(table) as client:
        client.insert(pa.table({"id": [f"k{i:05d}" for i in range(6000)],
                                "p": [f"p{i % 6}" for i in range(6000)]}))
    paths = sorted(table.base_path / s.partition_path / s.file_name
                   for s in table.fs_view().latest_file_slices())
    assert len(paths) == 6
    each = _footprint(read_footer_index(paths[0]))
    assert each > 1000  # the filter's bits are counted
    cache = _PathCache(read_footer_index, _footprint, max_bytes=int(each * 2.5))
    for path in paths:
        assert cache.get(path).num_rows == 1000
    assert len(cache) == 2 and cache.nbytes <= each * 2.5
    cache.get(paths[-2])  # a hit keeps it: the oldest entry goes next
    cache.get(paths[0])
    assert cache.get(paths[-2]) is cache.get(paths[-2]) and len(cache) == 2
