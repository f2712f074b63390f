"""Property-based: random sequences of commits, failed writes (+ repair) and cleans on a table
built with the timeline APIs; after every step hudi-rs and hoodline reads agree with a dict model.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodline.table import read
from hoodline.table.clean import clean
from hoodline.table.properties import TableConfig
from hoodline.table.rollback import rollback_pending
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline, hudi_snapshot
from tests.table.handwriter import HandWriter, rows

REGIONS = ("us", "eu")
KEYS = tuple("abcdefgh")

upsert_op = st.tuples(
    st.just("upsert"),
    st.sampled_from(REGIONS),
    st.integers(0, 1),  # file group within the region
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.integers(0, 99)),
        min_size=1,
        max_size=4,
        unique_by=lambda kv: kv[0],
    ),
)
delete_op = st.tuples(
    st.just("delete"),
    st.sampled_from(REGIONS),
    st.integers(0, 1),
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
)
failed_op = st.tuples(
    st.just("failed"),
    st.sampled_from(REGIONS),
    st.integers(0, 1),
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.integers(0, 99)),
        min_size=1,
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
)
clean_op = st.tuples(st.just("clean"), st.integers(1, 3))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(st.one_of(upsert_op, delete_op, failed_op, clean_op), min_size=1, max_size=8))
def test_random_timeline_histories_match_model(ops: list[tuple[object, ...]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="tm_prop_"))
    try:
        cfg = TableConfig(name="prop", record_key_fields=("id",), partition_fields=("region",))
        table = HudiTable.create(root / "prop", cfg)
        w = HandWriter(table)
        # model: (region, key) -> (file group, value); a key lives in one group per region
        model: dict[tuple[str, str], tuple[str, int]] = {}
        retain = None
        for op in ops:
            kind = op[0]
            if kind in ("upsert", "failed"):
                _, region, g, kvs = op
                assert isinstance(region, str) and isinstance(g, int) and isinstance(kvs, list)
                groups: dict[tuple[str, str], list[tuple[str, int]]] = {}
                for k, v in kvs:
                    fg = model.get((region, k), (f"fg-{region}-{g}", 0))[0]
                    groups.setdefault((f"region={region}", fg), []).append((k, v))
                if kind == "upsert":
                    w.upsert(
                        {
                            grp: rows([k for k, _ in kv], region, [v for _, v in kv])
                            for grp, kv in groups.items()
                        }
                    )
                    for (_, fg), kv in groups.items():
                        for k, v in kv:
                            model[(region, k)] = (fg, v)
                else:
                    p = w.start()
                    for grp, kv in groups.items():
                        w.write_group(p, grp, rows([k for k, _ in kv], region, [v for _, v in kv]))
                    # inflight files are invisible to both readers
                    if table.timeline.completed_commits():
                        assert_hudi_matches_hoodline(table, max_commits=retain)
                    rollback_pending(table)
            elif kind == "delete":
                _, region, _g, keys = op
                assert isinstance(region, str) and isinstance(keys, list)
                by_group: dict[tuple[str, str], list[str]] = {}
                for k in keys:
                    if (region, k) in model:
                        fg = model[(region, k)][0]
                        by_group.setdefault((f"region={region}", fg), []).append(k)
                if by_group:
                    w.upsert({}, deletes=by_group)
                    for (_, _fg), ks in by_group.items():
                        for k in ks:
                            del model[(region, k)]
            else:
                _, n = op
                assert isinstance(n, int)
                clean(table, retain_commits=n)
                retain = n if retain is None else min(retain, n)
            expected = {(r, k): v for (r, k), (_fg, v) in model.items()}
            snap = hudi_snapshot(table.base_path)
            got = {
                (r, k): v
                for r, k, v in zip(
                    snap.column("region").to_pylist() if snap.num_rows else [],
                    snap.column("id").to_pylist() if snap.num_rows else [],
                    snap.column("val").to_pylist() if snap.num_rows else [],
                    strict=True,
                )
            }
            assert got == expected, f"after {op}"
            if table.timeline.completed_commits():
                assert_hudi_matches_hoodline(table, max_commits=retain)
            else:
                assert read.read_snapshot(table).num_rows == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
