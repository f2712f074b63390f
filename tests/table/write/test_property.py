"""Property test: random insert/upsert/delete sequences against an in-memory dict model.

Batches contain duplicate keys (reduced by the ordering field: highest wins, ties the last) and
keys that were deleted and come back; tiny file sizes make inserts fill small files and open new
file groups all the time. After every commit hudi-rs must read exactly the model (and agree with
hoodline's own snapshot, time-travel and incremental reads of the newest commit); at the end
every commit is checked.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline, hudi_snapshot
from tests.table.write.helpers import make_config

OPTIONS = {
    "hoodie.parquet.max.file.size": 5000,
    "hoodie.parquet.small.file.limit": 4000,
    "hoodie.copyonwrite.record.size.estimate": 60,
    "hoodline.index.bloom.min.entries": 20,
    "hoodie.index.bloom.fpp": 0.01,
}

record = st.tuples(
    st.integers(0, 40),  # key
    st.sampled_from(["a", "b"]),  # region
    st.integers(0, 2),  # ordering value (small range: many ties)
)
op = st.one_of(
    st.tuples(st.sampled_from(["insert", "upsert"]), st.lists(record, min_size=1, max_size=40)),
    st.tuples(st.just("delete"), st.lists(record, min_size=1, max_size=12)),
)

Model = dict[tuple[str, int], tuple[int, str]]


Rec = tuple[int, str, int, str]


def _with_payloads(step: int, recs: list[tuple[int, str, int]]) -> list[Rec]:
    """Every record gets a unique payload, so the model sees which duplicate won."""
    return [(k, r, ts, f"p{step}.{i}") for i, (k, r, ts) in enumerate(recs)]


def _batch(recs: list[Rec]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in recs], pa.int64()),
            "region": pa.array([r[1] for r in recs], pa.string()),
            "ts": pa.array([r[2] for r in recs], pa.int64()),
            "v": pa.array([r[3] for r in recs], pa.string()),
        }
    )


def _apply(model: Model, kind: str, recs: list[Rec]) -> None:
    if kind == "delete":
        for key, region, _ts, _p in recs:
            model.pop((region, key), None)
        return
    winners: dict[tuple[str, int], tuple[int, str]] = {}
    for key, region, ts, payload in recs:  # highest ordering wins, ties: the later record
        cur = winners.get((region, key))
        if cur is None or ts >= cur[0]:
            winners[(region, key)] = (ts, payload)
    model.update(winners)  # an upsert replaces the stored row (Hudi's default payload)


def _read(path: Path) -> Model:
    snap = hudi_snapshot(path, columns=["region", "id", "ts", "v"]).to_pylist()
    out = {(r["region"], r["id"]): (r["ts"], r["v"]) for r in snap}
    assert len(out) == len(snap), "two live rows for one key"
    return out


@pytest.mark.parametrize("index", ["BUCKET", "BLOOM"])
def test_random_operation_sequences_match_dict_model(index: str) -> None:
    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(ops=st.lists(op, min_size=1, max_size=6))
    def run(ops: list[tuple[str, Any]]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            table = HudiTable.create(Path(tmp) / "t", make_config(index, bucket_count=2))
            model: Model = {}
            with WriteClient(table, OPTIONS) as client:
                for step, (kind, raw) in enumerate(ops):
                    recs = _with_payloads(step, raw)
                    getattr(client, kind)(_batch(recs))
                    _apply(model, kind, recs)
                    assert _read(table.base_path) == model, f"after {kind}"
                    assert_hudi_matches_hoodline(table, max_commits=1)
            assert_hudi_matches_hoodline(table)

    run()


def test_model_forces_small_and_new_file_groups() -> None:
    """The sizes above really make the writer fill small files and open new groups."""
    with tempfile.TemporaryDirectory() as tmp:
        table = HudiTable.create(Path(tmp) / "t", make_config("BLOOM"))
        with WriteClient(table, OPTIONS) as client:
            client.insert(_batch([(i, "a", 0, "x") for i in range(3)]))
            first = {s.file_id for s in table.fs_view().latest_file_slices("region=a")}
            client.insert(_batch([(i, "a", 0, "y") for i in range(3, 120)]))
            md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
            stats = md.write_stats()
            assert any(s.file_id in first and s.num_inserts > 0 for s in stats)
            assert sum(1 for s in stats if s.prev_commit is None) >= 2
