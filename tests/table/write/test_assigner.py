"""Bucket assigner logic on plain data: small files first, then new groups; task ownership;
the key order inserts are cut in."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodline.table.write import records
from hoodline.table.write.assigner import BucketAssigner, new_file_id, owns_small_file
from hoodline.table.write.profile import SmallFile
from hoodline.table.write.records import FILE_ID, PARTITION_PATH, RECORD_KEY, string_sort_order


class FakeProfile:
    """Duck-typed WriteProfile: fixed small files, 10 records per new file."""

    def __init__(self, smalls: dict[str, list[SmallFile]], room: dict[str, int],
                 ranked: bool = False) -> None:
        self._smalls = smalls
        self._room = room
        self.ranked = ranked

    def small_files(self, partition: str, tasks: int = 1) -> list[SmallFile]:
        found = self._smalls.get(partition, [])
        return found[:tasks] if self.ranked else found

    def room_in(self, small: SmallFile) -> int:
        return self._room[small.file_id]

    def records_per_new_file(self) -> int:
        return 10


def _records(n: int, partition: str = "p", tagged: dict[int, str] | None = None) -> pa.Table:
    tagged = tagged or {}
    return pa.table(
        {
            RECORD_KEY: [f"k{i:03d}" for i in range(n)],
            PARTITION_PATH: [partition] * n,
            FILE_ID: pa.array([tagged.get(i) for i in range(n)], pa.string()),
        }
    )


def test_inserts_fill_small_files_smallest_first_then_new_groups() -> None:
    smalls = {"p": [SmallFile("p", "big-0", 900), SmallFile("p", "tiny-0", 100)]}
    profile = FakeProfile(smalls, {"big-0": 3, "tiny-0": 5})
    out = BucketAssigner(profile, "20240101000000000").assign(_records(30))  # type: ignore[arg-type]
    counts = Counter(out[FILE_ID].to_pylist())
    assert counts["tiny-0"] == 5 and counts["big-0"] == 3
    new = {k: v for k, v in counts.items() if k not in ("tiny-0", "big-0")}
    assert sorted(new.values()) == [2, 10, 10]
    # inserts sorted by key: the smallest file got the smallest keys
    tiny_keys = [
        k
        for k, f in zip(out[RECORD_KEY].to_pylist(), out[FILE_ID].to_pylist(), strict=True)
        if f == "tiny-0"
    ]
    assert tiny_keys == ["k000", "k001", "k002", "k003", "k004"]


def test_updates_keep_their_file_group() -> None:
    profile = FakeProfile({}, {})
    recs = _records(4, tagged={1: "existing-0", 3: "other-0"})
    out = BucketAssigner(profile, "20240101000000000").assign(recs)  # type: ignore[arg-type]
    ids = out[FILE_ID].to_pylist()
    assert ids[1] == "existing-0" and ids[3] == "other-0"
    assert ids[0] == ids[2] and ids[0] not in ("existing-0", "other-0")


def test_partitions_get_their_own_groups() -> None:
    profile = FakeProfile({}, {})
    recs = pa.concat_tables([_records(3, "a"), _records(3, "b")])
    out = BucketAssigner(profile, "20240101000000000").assign(recs)  # type: ignore[arg-type]
    by_part: dict[str, set[str]] = {}
    for p, f in zip(out[PARTITION_PATH].to_pylist(), out[FILE_ID].to_pylist(), strict=True):
        by_part.setdefault(p, set()).add(f)
    assert len(by_part["a"]) == 1 and len(by_part["b"]) == 1 and by_part["a"] != by_part["b"]


def test_tasks_never_share_a_small_file_or_a_new_file_id() -> None:
    smalls = {"p": [SmallFile("p", f"s{i}-0", 10) for i in range(20)]}
    room = {f"s{i}-0": 2 for i in range(20)}
    used: list[set[str]] = []
    for task in range(3):
        profile = FakeProfile(smalls, room)
        out = BucketAssigner(  # type: ignore[arg-type]
            profile, "20240101000000000", task_id=task, num_tasks=3
        ).assign(_records(60))
        ids = set(out[FILE_ID].to_pylist())
        for fid in ids:
            if fid.startswith("s"):
                assert owns_small_file(fid, task, 3)
        used.append(ids)
    assert not (used[0] & used[1]) and not (used[0] & used[2]) and not (used[1] & used[2])


def test_merge_on_read_gives_each_task_its_own_small_file() -> None:
    """Ranked candidates (merge-on-read): task i fills the i-th smallest, so a second task
    does not open a new file group for a handful of inserts every round; one task fills only
    the smallest, as Java's single candidate."""
    smalls = {"p": [SmallFile("p", f"s{i}-0", 10 + i) for i in range(3)]}
    room = {f"s{i}-0": 100 for i in range(3)}
    got = []
    for task in range(2):
        out = BucketAssigner(  # type: ignore[arg-type]
            FakeProfile(smalls, room, ranked=True), "20240101000000000", task_id=task,
            num_tasks=2,
        ).assign(_records(5))
        got.append(set(out[FILE_ID].to_pylist()))
    assert got == [{"s0-0"}, {"s1-0"}]
    one = BucketAssigner(FakeProfile(smalls, room, ranked=True),  # type: ignore[arg-type]
                         "20240101000000000").assign(_records(5))
    assert set(one[FILE_ID].to_pylist()) == {"s0-0"}


def test_new_file_ids_are_deterministic_and_hudi_shaped() -> None:
    a = new_file_id("20240101000000000", "p", 0, 0)
    assert a == new_file_id("20240101000000000", "p", 0, 0)
    assert a != new_file_id("20240101000000000", "p", 1, 0)
    assert a.endswith("-0") and len(a) == 38 and "_" not in a


def test_string_sort_order_is_arrows_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2)
    vals = ["".join(rng.choice("ab\x00Z9~") for _ in range(rng.randint(0, 8))) for _ in range(5000)]
    arrow = pc.sort_indices
    cases = {
        "duplicates (ties: Arrow decides)": vals,
        "short, distinct": [v for v in dict.fromkeys(vals) if not v.endswith("\x00")],
        "trailing NUL variants": list(dict.fromkeys(vals)),
        "longer than 8 bytes": [v * 3 for v in dict.fromkeys(vals)],
    }
    for label, values in cases.items():
        arr = pa.chunked_array([pa.array(values[:700]), pa.array(values[700:])])
        assert np.array_equal(string_sort_order(arr), arrow(arr).to_numpy()), label
    # distinct short keys never reach Arrow's sort, also from a slice of a longer array
    short = pa.array(cases["short, distinct"])
    sliced = short.slice(37, len(short) - 80)
    expected = arrow(short).to_numpy()
    expected_sliced = arrow(sliced).to_numpy()
    monkeypatch.setattr(records.pc, "sort_indices", None)
    assert np.array_equal(string_sort_order(short), expected)
    assert np.array_equal(string_sort_order(sliced), expected_sliced)


def test_partitions_sorted_on_threads_get_the_same_file_groups() -> None:
    parts = pa.concat_tables([_records(35, "p"), _records(27, "q"), _records(4, "r")])
    shuffled = parts.take(pa.array(random.Random(4).sample(range(parts.num_rows), parts.num_rows)))
    profile = FakeProfile({}, {})
    one = BucketAssigner(profile, "20240101000000000", threads=1).assign(shuffled)  # type: ignore[arg-type]
    two = BucketAssigner(profile, "20240101000000000", threads=2).assign(shuffled)  # type: ignore[arg-type]
    assert one.equals(two)
    assert len(set(two[FILE_ID].to_pylist())) == 4 + 3 + 1
