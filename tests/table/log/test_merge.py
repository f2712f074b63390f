"""Merging a slice in one vectorised pass gives what applying its blocks one by one gives."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.table.log import merge
from hoodline.table.log.avro_codec import encode_datum
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.log.content import (
    CONTENT_VERSION,
    DELETE_RECORD_LIST_SCHEMA,
    avro_data_block,
    delete_block,
)
from hoodline.table.log.merge import LogApplication, MergedSlice, apply_logs, replay_logs
from hoodline.table.schema import META_COLUMNS, arrow_to_avro

SCHEMA = pa.schema(
    [pa.field(c, pa.string()) for c in META_COLUMNS]
    + [pa.field("id", pa.string()), pa.field("ts", pa.int64()), pa.field("v", pa.int64())]
)
AVRO = arrow_to_avro(pa.schema([f for f in SCHEMA if f.name not in META_COLUMNS]), "t")
AVRO = {**AVRO, "fields": [{"name": c, "type": ["null", "string"], "default": None}
                           for c in META_COLUMNS] + AVRO["fields"]}

#: ("data", [(key, ts, v)]), or a delete block of those keys: "delete" (hoodline's and Spark
#: SQL's IntWrapper(0)), "delete-long" / "delete-int" (LongWrapper(ts) / IntWrapper(ts), as Java
#: writes for records an upsert deletes)
Event = tuple[str, list[tuple[str, int, int]]]
_WRAPPER = {"delete-long": "LongWrapper", "delete-int": "IntWrapper"}


def merge_slice(
    base: pa.Table | None,
    blocks: Sequence[LogBlock],
    schema: pa.Schema,
    conform: Callable[[pa.Table, str], pa.Table],
    ordering_field: str | None = None,
) -> MergedSlice:
    """A slice's base with its blocks applied, as readers and compaction merge them (the
    caller's ``blocks`` stay: replay_logs empties the list it gets)."""
    return apply_logs(base, replay_logs(list(blocks), schema, conform, ordering_field), schema,
                      ordering_field)


def test_replaying_drops_each_block_once_decoded() -> None:
    """replay_logs empties the list of blocks it replays: a decoded run of blocks (views of a
    log file's bytes) is not kept while later runs decode, so a compaction does not hold a
    slice's raw logs beside all of its decoded records."""
    conform = lambda t, _where: t.select(SCHEMA.names).cast(  # noqa: E731
        pa.schema([f.with_nullable(True) for f in SCHEMA]))
    blocks = _blocks([("data", [("a", 1, 1)]), ("delete", [("a", 0, 0)]),
                      ("data", [("b", 1, 2)])])
    logs = replay_logs(blocks, SCHEMA, conform)
    assert blocks == []
    assert logs is not None
    assert logs.winners.column("id").to_pylist() == ["b"]
    assert logs.deleted.to_pylist() == ["a"]


def _rows(recs: list[tuple[str, int, int]]) -> pa.Table:
    n = len(recs)
    cols: dict[str, list[object]] = {c: ["x"] * n for c in META_COLUMNS}
    cols["_hoodie_record_key"] = [k for k, _, _ in recs]
    cols["id"] = [k for k, _, _ in recs]
    cols["ts"] = [t for _, t, _ in recs]
    cols["v"] = [v for _, _, v in recs]
    return pa.Table.from_pydict(cols, schema=pa.schema([f.with_nullable(True) for f in SCHEMA]))


def _blocks(events: list[Event]) -> list[LogBlock]:
    out = []
    for kind, recs in events:
        if kind == "delete":
            block = delete_block(pa.array([k for k, _, _ in recs]), "", "20260101000000000",
                                 json.dumps(AVRO))
        elif kind in _WRAPPER:
            block = _java_delete_block([(k, _WRAPPER[kind], t) for k, t, _ in recs])
        else:
            block = avro_data_block(_rows(recs), AVRO, "20260101000000000")
        out.extend(read_blocks(block.serialize()))
    return out


def _java_delete_block(deletes: list[tuple[str, str, int]]) -> LogBlock:
    """A delete block as Java writes it for records an upsert deletes: each key with its
    record's ordering value in the wrapper of its Java class."""
    items = [{"recordKey": k, "partitionPath": "",
              "orderingVal": (f"org.apache.hudi.avro.model.{wrapper}", {"value": value})}
             for k, wrapper, value in deletes]
    body = encode_datum({"deleteRecordList": items}, DELETE_RECORD_LIST_SCHEMA)
    content = CONTENT_VERSION.to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
    header = {HeaderKey.INSTANT_TIME: "20260101000000000", HeaderKey.SCHEMA: json.dumps(AVRO)}
    return LogBlock(LogBlockType.DELETE, header, content)


def _reference(base: list[tuple[str, int, int]], events: list[Event], ordered: bool
               ) -> dict[str, tuple[int, int]]:
    """The merge one event at a time. ``ordered`` (DefaultHoodieRecordPayload), as Java 0.14's
    log scanner and hudi-rs do: a key's log records pre-combined by ordering value; a delete
    skipped when its ordering value is of the stored value's class and smaller, unless it is the
    Integer 0 (HoodieMergedLogRecordScanner); then each stored log record against the base row,
    the greater ordering value staying; a stored delete removes it. Not ordered: the last
    write wins, every delete deletes."""
    log: dict[str, tuple[str, int, int]] = {}  # key -> ("rec", ts, v) | (class, ordering, 0)
    for kind, recs in events:
        for k, t, v in recs:
            prev = log.get(k)
            if kind == "data":
                if not (prev and prev[0] == "rec" and ordered and prev[1] > t):
                    log[k] = ("rec", t, v)
                continue
            cls, value = {"delete": ("Integer", 0), "delete-long": ("Long", t),
                          "delete-int": ("Integer", t)}[kind]
            if ordered and prev is not None and (cls, value) != ("Integer", 0):
                held = ("Long", prev[1]) if prev[0] == "rec" else (prev[0], prev[1])  # ts: Long
                if held[0] == cls and held[1] > value:
                    continue
            log[k] = (cls, value, 0)
    state = {k: (t, v) for k, t, v in base}
    for k, (what, t, v) in log.items():
        if what != "rec":
            state.pop(k, None)
        elif not (ordered and k in state and state[k][0] > t):
            state[k] = (t, v)
    return state


record = st.tuples(st.sampled_from("abcdef"), st.integers(0, 4), st.integers(0, 10**6))
events_strategy = st.lists(
    st.tuples(st.sampled_from(["data", "data", "data", "delete", "delete-long", "delete-int"]),
              st.lists(record, max_size=6)),
    max_size=6,
)
@settings(max_examples=300, deadline=None)
@given(
    base=st.lists(record, max_size=6, unique_by=lambda r: r[0]),
    events=events_strategy,
    ordered=st.booleans(),
)
def test_vectorised_merge_equals_applying_blocks_in_order(
    base: list[tuple[str, int, int]], events: list[Event], ordered: bool
) -> None:
    merged = merge_slice(
        _rows(base) if base else None,
        _blocks(events),
        SCHEMA,
        lambda t, _where: t.select(SCHEMA.names).cast(
            pa.schema([f.with_nullable(True) for f in SCHEMA])
        ),
        "ts" if ordered else None,
    )
    got = {r["id"]: (r["ts"], r["v"]) for r in merged.rows.to_pylist()}
    assert len(got) == merged.rows.num_rows  # one row per key
    assert got == _reference(base, events, ordered)
    # the keys a new base file's bloom filter lacks when it starts from the base file's
    added = merged.added_keys().to_pylist()
    assert len(added) == len(set(added))
    assert set(added) == set(got) - {r[0] for r in base}


def test_a_key_with_two_base_rows_is_decided_by_its_first_row() -> None:
    """Base files written without combining may hold a key twice: with an ordering field the
    first base row decides whether the log record replaces the key's rows."""
    base = _rows([("a", 5, 1), ("a", 1, 2), ("b", 0, 3)])
    conform = lambda t, _where: t.select(SCHEMA.names).cast(  # noqa: E731
        pa.schema([f.with_nullable(True) for f in SCHEMA]))
    kept = merge_slice(base, _blocks([("data", [("a", 3, 9), ("b", 1, 4)])]), SCHEMA,
                       conform, "ts")
    assert sorted((r["id"], r["ts"], r["v"]) for r in kept.rows.to_pylist()) == [
        ("a", 1, 2), ("a", 5, 1), ("b", 1, 4)]
    replaced = merge_slice(_rows([("a", 1, 2), ("a", 5, 1)]), _blocks([("data", [("a", 3, 9)])]),
                           SCHEMA, conform, "ts")
    assert [(r["id"], r["ts"], r["v"]) for r in replaced.rows.to_pylist()] == [("a", 3, 9)]


def test_consecutive_data_blocks_are_read_together_up_to_the_byte_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocks = _blocks([("data", [("a", 1, 1)]), ("data", [("b", 1, 2)]), ("delete", [("a", 0, 0)]),
                      ("data", [("c", 1, 3)]), ("data", [("d", 1, 4)]), ("data", [("e", 1, 5)])])
    runs: list[int] = []
    real = merge.read_data_blocks

    def spy(run: Sequence[LogBlock], wanted: pa.Schema | None = None) -> pa.Table:
        runs.append(len(run))
        return real(run, wanted)

    monkeypatch.setattr(merge, "read_data_blocks", spy)
    conform = lambda t, _where: t.select(SCHEMA.names).cast(  # noqa: E731
        pa.schema([f.with_nullable(True) for f in SCHEMA]))
    whole = merge_slice(None, blocks, SCHEMA, conform)
    assert runs == [2, 3]  # the delete block ends a run
    runs.clear()
    monkeypatch.setattr(merge, "JOINED_READ_BYTES", 2 * len(blocks[3].content))
    bounded = merge_slice(None, blocks, SCHEMA, conform)
    assert runs == [2, 2, 1]
    assert sorted(r["id"] for r in whole.rows.to_pylist()) == ["b", "c", "d", "e"]
    assert bounded.rows.to_pylist() == whole.rows.to_pylist()


@settings(max_examples=150, deadline=None)
@given(
    base=st.lists(record, min_size=1, max_size=8),
    events=events_strategy,
    ordered=st.booleans(),
    cuts=st.lists(st.integers(0, 8), max_size=4),
    announced=st.booleans(),
)
def test_logs_applied_piece_by_piece_equal_logs_applied_at_once(
    base: list[tuple[str, int, int]], events: list[Event], ordered: bool, cuts: list[int],
    announced: bool,
) -> None:
    """A compaction merges its base file row group by row group: over any split of the base
    rows (a key's base rows may fall in different pieces, the first still decides), with the
    base keys looked up piece by piece or all at once up front, the rows that stay, the log
    records and whether a base row had their keys are those of one merge of the whole base."""
    conform = lambda t, _where: t.select(SCHEMA.names).cast(  # noqa: E731
        pa.schema([f.with_nullable(True) for f in SCHEMA]))
    ordering = "ts" if ordered else None
    logs = replay_logs(_blocks(events), SCHEMA, conform, ordering)
    whole = apply_logs(_rows(base), logs, SCHEMA, ordering)
    application = LogApplication(logs, SCHEMA, ordering)
    if announced:  # every base key up front (looked up once), as a compaction does
        application.expect(_rows(base).column("_hoodie_record_key"))
    bounds = [0, *sorted(c for c in cuts if c < len(base)), len(base)]
    kept = [application.base_rows(_rows(base[a:b])) for a, b in itertools.pairwise(bounds)]
    log_rows, in_base = application.log_rows()
    pieces = pa.concat_tables([*kept, log_rows.cast(kept[0].schema)])
    assert pieces.to_pylist() == whole.rows.to_pylist()
    assert log_rows.to_pylist() == whole.log_rows.to_pylist()
    assert whole.added_keys().to_pylist() == MergedSlice(pieces, log_rows, in_base).added_keys(
        ).to_pylist()


def test_a_key_whose_base_rows_fall_in_two_pieces_is_decided_by_the_first() -> None:
    conform = lambda t, _where: t.select(SCHEMA.names).cast(  # noqa: E731
        pa.schema([f.with_nullable(True) for f in SCHEMA]))
    logs = replay_logs(_blocks([("data", [("a", 3, 9)])]), SCHEMA, conform, "ts")
    application = LogApplication(logs, SCHEMA, "ts")
    # the first base row of "a" (ts 5) beats the log record (ts 3): both base rows stay,
    # also the second one (ts 1), met in a later piece
    first = application.base_rows(_rows([("a", 5, 1), ("b", 0, 3)]))
    second = application.base_rows(_rows([("a", 1, 2)]))
    log_rows, in_base = application.log_rows()
    assert [r["v"] for r in first.to_pylist()] == [1, 3]
    assert [r["v"] for r in second.to_pylist()] == [2]
    assert log_rows.num_rows == 0 and len(in_base) == 0
