"""The demo/crash-test event stream and its model: what a correct table holds, and prefix checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hoodline.demo.events import (
    MODEL_COLUMNS,
    EventStream,
    describe_mismatch,
    find_committed_prefixes,
)


def _apply(stream: EventStream, messages: list[Any]) -> dict[int, dict[str, Any]]:
    """Replay messages the way a correct upsert table with a delete flag would (independent of
    the generator's own bookkeeping): per key, the highest seq wins; deletes remove the key."""
    table: dict[int, dict[str, Any]] = {}
    for m in messages:
        if m.kind == "malformed":
            continue
        if m.value is None:  # tombstone
            table.pop(json.loads(m.key)["id"], None)
            continue
        doc = json.loads(m.value)
        assert m.partition == doc["id"] % stream.partitions
        if doc["_deleted"]:
            table.pop(doc["id"], None)
        else:
            prev = table.get(doc["id"])
            assert prev is None or prev["seq"] < doc["seq"]
            table[doc["id"]] = {c: doc[c] for c in MODEL_COLUMNS}
    return table


@pytest.mark.parametrize("tombstones", [False, True])
def test_model_equals_an_independent_replay(tombstones: bool) -> None:
    stream = EventStream(partitions=3, seed=11, tombstones=tombstones)
    messages = []
    for _ in range(4):
        messages += stream.wave(500, malformed=3)
    assert len(messages) == 2012 == stream.totals.messages
    t = stream.totals
    assert t.update > 300 and t.insert > 1000 and t.malformed == 12
    assert (t.tombstone > 0) == tombstones and t.delete > 0
    replay = _apply(stream, messages)
    assert stream.expected_rows() == replay
    table = stream.expected_table()
    assert table.column_names == list(MODEL_COLUMNS)
    assert table.column("id").to_pylist() == sorted(replay)
    assert sum(stream.messages_per_partition()) == len(messages)


def test_malformed_values_are_unique_and_never_valid_records() -> None:
    stream = EventStream(partitions=2, seed=3)
    messages = stream.wave(50, malformed=8)
    bad = [m for m in messages if m.kind == "malformed"]
    assert [(m.partition, m.value) for m in bad] == stream.malformed_values()
    assert len({m.value for m in bad}) == 8
    for m in bad:
        try:
            doc = json.loads(m.value)
        except json.JSONDecodeError:
            continue
        assert not (isinstance(doc, dict) and isinstance(doc.get("id"), int))


def test_unique_stream_only_inserts_new_keys() -> None:
    stream = EventStream(partitions=2, kind="unique", seed=5)
    messages = stream.wave(300) + stream.wave(300)
    assert {m.kind for m in messages} == {"insert"}
    ids = [json.loads(m.value)["id"] for m in messages]
    assert len(set(ids)) == 600
    assert stream.expected_table().num_rows == 600


def _prefix_table(stream: EventStream, counts: dict[int, int]) -> dict[int, dict[str, Any]]:
    table: dict[int, dict[str, Any]] = {}
    for p, k in counts.items():
        for what, key, row in stream.effects(p)[:k]:
            if what == "put":
                assert key is not None and row is not None
                table[key] = {c: row[c] for c in MODEL_COLUMNS}
            elif what == "delete":
                assert key is not None
                table.pop(key, None)
    return table


def test_prefix_check_finds_committed_prefixes_and_rejects_lost_or_stale_rows() -> None:
    stream = EventStream(partitions=2, seed=9)
    for _ in range(3):
        stream.wave(200, malformed=2)
    sizes = stream.messages_per_partition()
    counts = {0: sizes[0] // 2, 1: sizes[1]}
    table = _prefix_table(stream, counts)
    found = find_committed_prefixes(stream, table)
    assert found is not None and counts[0] in found[0] and counts[1] in found[1]
    # the full table matches only the full prefix (plus trailing no-ops)
    full = find_committed_prefixes(stream, stream.expected_rows())
    assert full is not None and all(sizes[p] in full[p] for p in (0, 1))
    # a lost row: the oldest live key of partition 1 missing while newer rows are there is no
    # state of any prefix (a lost record), unlike the newest one (that is just an earlier prefix)
    victim = min(k for k in table if k % 2 == 1)
    lost = {k: v for k, v in table.items() if k != victim}
    assert find_committed_prefixes(stream, lost) is None
    assert "missing" in describe_mismatch(table, lost)
    # a stale version of a key that was updated inside the prefix
    updated = next(key for what, key, row in stream.effects(1)[: counts[1]]
                   if what == "put" and key is not None and key in table
                   and row is not None and row["seq"] != table[key]["seq"])
    stale = dict(table)
    stale[updated] = {**table[updated], "seq": -1}
    assert find_committed_prefixes(stream, stale) is None
    assert "wrong values" in describe_mismatch(table, stale)
    assert describe_mismatch(table, table) == ""


def test_a_row_duplicated_into_another_key_is_detected() -> None:
    stream = EventStream(partitions=1, kind="unique", seed=1)
    stream.wave(20)
    rows = stream.expected_rows()
    rows[999] = {**rows[0], "id": 999}
    assert find_committed_prefixes(stream, rows) is None
