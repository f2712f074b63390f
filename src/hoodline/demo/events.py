"""A known stream of JSON events (inserts, updates, deletes, malformed records) and its model.

Used by ``hoodline demo`` and by the crash tests: the generator decides every message that goes
to Kafka and remembers, per Kafka partition, what each message does to the table. From that it
can say what a correct table holds after *all* messages (:meth:`EventStream.expected_rows`) and
whether a table is a correct state after *some* per-partition prefix of them
(:func:`find_committed_prefixes`): a table written exactly once from a checkpointed prefix of every
partition must equal the model at that prefix; a lost or duplicated record makes that impossible.

Every record of key ``id`` goes to Kafka partition ``id % partitions`` and carries a globally
increasing ``seq`` (the precombine field), so the newest version of a key is both the last one read
and the one with the highest ordering value, whatever the round boundaries are.

Two stream kinds:

* ``upsert`` -- inserts of new keys, updates and deletes (``_deleted = true`` records and,
  optionally, Kafka tombstones) of live keys, plus a few malformed records;
* ``unique`` -- every record is an insert of a new key (for ``operation = "insert"`` tables: a
  record written twice shows up as two rows, so duplicates cannot hide behind an upsert).

Generating messages is a per-record loop by nature (each one is handed to the Kafka producer);
the model checks are dictionary updates, not on any pipeline hot path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa

REGIONS = ("americas", "asia", "europe")

#: The declared [schema] of the event table (TOML ``name = "type"`` entries, in column order).
EVENT_SCHEMA: dict[str, str] = {
    "id": "int64",
    "seq": "int64",
    "region": "string",
    "customer": "string",
    "amount_cents": "int64",
    "_deleted": "bool",
}
RECORD_KEY = "id"
PRECOMBINE_FIELD = "seq"
DELETE_FIELD = "_deleted"
PARTITION_FIELD = "region"
#: The columns the model predicts (the delete flag is not part of a live row's contract).
MODEL_COLUMNS = ("id", "seq", "region", "customer", "amount_cents")
MODEL_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("seq", pa.int64()),
        pa.field("region", pa.string()),
        pa.field("customer", pa.string()),
        pa.field("amount_cents", pa.int64()),
    ]
)

Row = dict[str, Any]
StreamKind = Literal["upsert", "unique"]

#: What a message does to the table: ("put", id, row) | ("delete", id, None) | ("bad", None, None)
Effect = tuple[str, int | None, Row | None]


@dataclass(frozen=True)
class Message:
    """One Kafka message: explicit partition, key bytes, value bytes (None = tombstone)."""

    partition: int
    key: bytes | None
    value: bytes | None
    kind: str  # insert | update | delete | tombstone | malformed


@dataclass
class StreamTotals:
    """How many messages of each kind were generated."""

    insert: int = 0
    update: int = 0
    delete: int = 0
    tombstone: int = 0
    malformed: int = 0

    @property
    def messages(self) -> int:
        return self.insert + self.update + self.delete + self.tombstone + self.malformed


def _region(key: int) -> str:
    return REGIONS[key % len(REGIONS)]


def key_bytes(key: int) -> bytes:
    """The Kafka message key of record key ``key``: a JSON object with the record key and the
    partition field (what a tombstone needs to find its row in a partitioned table)."""
    return json.dumps({"id": key, "region": _region(key)}, separators=(",", ":")).encode()


@dataclass
class EventStream:
    """Generates waves of messages for ``partitions`` Kafka partitions and keeps the model."""

    partitions: int
    kind: StreamKind = "upsert"
    seed: int = 7
    #: delete some keys with Kafka tombstones (null value, key = the record key) too
    tombstones: bool = False
    _rng: np.random.Generator = field(init=False, repr=False)
    _next_id: int = field(init=False, default=0)
    _seq: int = field(init=False, default=0)
    _live: dict[int, Row] = field(init=False, default_factory=dict)
    _effects: list[list[Effect]] = field(init=False, default_factory=list)
    _malformed: list[tuple[int, bytes]] = field(init=False, default_factory=list)
    totals: StreamTotals = field(init=False, default_factory=StreamTotals)

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        if self.kind not in ("upsert", "unique"):
            raise ValueError(f"kind must be 'upsert' or 'unique', not {self.kind!r}")
        self._rng = np.random.default_rng(self.seed)
        self._effects = [[] for _ in range(self.partitions)]

    # -- generation -------------------------------------------------------------------------
    def wave(
        self,
        n: int,
        *,
        update_share: float = 0.3,
        delete_share: float = 0.08,
        malformed: int = 0,
    ) -> list[Message]:
        """``n`` valid messages (plus ``malformed`` bad ones spread through the wave).

        ``unique`` streams ignore the shares: every message inserts a new key.
        """
        out: list[Message] = []
        total = n + malformed
        bad_at = set(self._rng.choice(total, size=malformed, replace=False).tolist()) \
            if malformed else set()
        draws = iter(self._rng.random(n).tolist())
        for i in range(total):
            if i in bad_at:
                out.append(self._bad())
                continue
            r = next(draws)
            if self.kind == "unique" or not self._live:
                out.append(self._insert())
            elif r < delete_share:
                out.append(self._delete())
            elif r < delete_share + update_share:
                out.append(self._update())
            else:
                out.append(self._insert())
        return out

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _row(self, key: int) -> Row:
        return {
            "id": key,
            "seq": self._next_seq(),
            "region": _region(key),
            "customer": f"c{int(self._rng.integers(0, 500)):03d}",
            "amount_cents": int(self._rng.integers(100, 100_000)),
        }

    def _put(self, row: Row, kind: str) -> Message:
        key = int(row["id"])
        p = key % self.partitions
        self._live[key] = row
        self._effects[p].append(("put", key, row))
        value = json.dumps({**row, DELETE_FIELD: False}, separators=(",", ":")).encode()
        return Message(p, key_bytes(key), value, kind)

    def _insert(self) -> Message:
        key = self._next_id
        self._next_id += 1
        self.totals.insert += 1
        return self._put(self._row(key), "insert")

    def _pick_live(self) -> int:
        keys = list(self._live)
        return int(keys[int(self._rng.integers(0, len(keys)))])

    def _update(self) -> Message:
        self.totals.update += 1
        return self._put(self._row(self._pick_live()), "update")

    def _delete(self) -> Message:
        key = self._pick_live()
        p = key % self.partitions
        del self._live[key]
        self._effects[p].append(("delete", key, None))
        if self.tombstones and self._rng.random() < 0.5:
            self.totals.tombstone += 1
            return Message(p, key_bytes(key), None, "tombstone")
        self.totals.delete += 1
        value = {"id": key, "seq": self._next_seq(), "region": _region(key), DELETE_FIELD: True}
        return Message(p, key_bytes(key), json.dumps(value, separators=(",", ":")).encode(),
                       "delete")

    def _bad(self) -> Message:
        n = self.totals.malformed
        self.totals.malformed += 1
        p = n % self.partitions
        variants = (
            f'{{"id": {10**9 + n}, "seq": 1, "region": "asia", "customer": "broken-{n}"',  # cut
            f'{{"id": "not-a-number-{n}", "seq": 1, "region": "asia"}}',  # wrong type
            f'{{"seq": {n}, "region": "europe", "customer": "no key {n}"}}',  # missing key
            f"[\"not an object\", {n}]",  # not an object
        )
        value = variants[n % len(variants)].encode()
        self._malformed.append((p, value))
        self._effects[p].append(("bad", None, None))
        return Message(p, f"bad-{n}".encode(), value, "malformed")

    # -- model ------------------------------------------------------------------------------
    def expected_rows(self) -> dict[int, Row]:
        """Record key -> the row a correct table holds after every generated message."""
        return dict(self._live)

    def expected_table(self) -> pa.Table:
        """:meth:`expected_rows` as an Arrow table of :data:`MODEL_COLUMNS`, sorted by id."""
        return rows_to_table(self._live.values())

    def malformed_values(self) -> list[tuple[int, bytes]]:
        """(Kafka partition, raw value) of every malformed message, in production order."""
        return list(self._malformed)

    def effects(self, partition: int) -> list[Effect]:
        """What each message of ``partition`` does, in offset order."""
        return list(self._effects[partition])

    def messages_per_partition(self) -> list[int]:
        return [len(e) for e in self._effects]


def rows_to_table(rows: Iterable[Row]) -> pa.Table:
    ordered = sorted(rows, key=lambda r: int(r["id"]))
    return pa.Table.from_pylist([{c: r[c] for c in MODEL_COLUMNS} for r in ordered],
                                schema=MODEL_SCHEMA)


def find_committed_prefixes(
    stream: EventStream, table_rows: Mapping[int, Row]
) -> dict[int, list[int]] | None:
    """For every partition, the message counts ``k`` whose model equals the table's rows.

    ``table_rows`` maps record key -> row (the table as read, :data:`MODEL_COLUMNS`). A table
    written exactly once from a checkpointed prefix of each partition matches the model for at
    least one ``k`` per partition (several when the prefix ends in records that change nothing
    visible). Returns None when some partition has no such ``k``: a record was lost, duplicated
    (in an insert-only table: a key seen twice cannot be represented here -- check uniqueness
    first) or a row is wrong. Runs in O(messages + rows) with a running mismatch count.
    """
    result: dict[int, list[int]] = {}
    for p in range(stream.partitions):
        mine = {k: {c: v.get(c) for c in MODEL_COLUMNS} for k, v in table_rows.items()
                if k % stream.partitions == p}
        state: dict[int, Row] = {}
        mismatched = len(mine)  # keys where state and table disagree
        matches = [0] if mismatched == 0 else []
        for k, (what, key, row) in enumerate(stream.effects(p), start=1):
            if what != "bad" and key is not None:
                before_ok = state.get(key) == mine.get(key)
                if what == "put" and row is not None:
                    state[key] = {c: row[c] for c in MODEL_COLUMNS}
                else:
                    state.pop(key, None)
                after_ok = state.get(key) == mine.get(key)
                mismatched += int(before_ok) - int(after_ok)
            if mismatched == 0:
                matches.append(k)
        if not matches:
            return None
        result[p] = matches
    return result


def describe_mismatch(
    expected: Mapping[int, Row], actual: Mapping[int, Row], limit: int = 5
) -> str:
    """A short human description of how two key -> row maps differ ('' when equal)."""
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    differ = sorted(k for k in set(expected) & set(actual)
                    if {c: expected[k].get(c) for c in MODEL_COLUMNS}
                    != {c: actual[k].get(c) for c in MODEL_COLUMNS})
    parts = []
    if missing:
        parts.append(f"{len(missing)} expected key(s) missing, e.g. {missing[:limit]}")
    if extra:
        parts.append(f"{len(extra)} unexpected key(s), e.g. {extra[:limit]}")
    if differ:
        k = differ[0]
        parts.append(
            f"{len(differ)} key(s) with wrong values, e.g. id {k}: expected "
            f"{ {c: expected[k].get(c) for c in MODEL_COLUMNS} }, table "
            f"{ {c: actual[k].get(c) for c in MODEL_COLUMNS} }"
        )
    return "; ".join(parts)
