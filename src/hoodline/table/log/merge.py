"""Merging a merge-on-read file slice: its base file, then its log blocks, oldest first.

Blocks are read in log file order (Java's ``LogFileComparator``), then in file order. A block
counts when its instant is a completed write visible to the query (blocks of failed or later
writes are skipped, as Java's and hudi-rs's scanners do); a rollback command block drops the
blocks of its target instant read before it. Then, block by block:

* a data block's records replace the stored records of their keys. With
  ``DefaultHoodieRecordPayload`` a stored record whose ordering value is greater stays (the
  incoming one is dropped; between log records, ties go to the later one);
* a delete block removes its keys (hoodline and Spark SQL write ``IntWrapper(0)`` orderings,
  which delete whatever the payload).

:func:`replay_logs` reduces all blocks' events in one vectorised pass and :func:`apply_logs` applies
the result to the base rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError
from hoodline.storage.paths import TablePath
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.log.content import read_data_blocks, read_delete_block, same_records_schema

RECORD_KEY = "_hoodie_record_key"
#: Most content bytes of the data blocks decoded in one pass: a pass costs ~1.5 ms besides its
#: records (amortised long before 16 MiB, ~60k records), and the decoder copies what it reads
JOINED_READ_BYTES = 16 << 20

#: payload class names (``hoodie.compaction.payload.class``)
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def committed_blocks(
    paths: Sequence[TablePath], is_visible: Callable[[str], bool]
) -> list[LogBlock]:
    """Data and delete blocks of visible instants, in replay order, rollbacks applied."""
    kept: list[LogBlock] = []
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise TableError(
                f"log file '{path}' disappeared while it was read (cleaned, or deleted outside "
                "hoodline); retry the read"
            ) from None
        for block in read_blocks(data):
            if block.type is LogBlockType.COMMAND:
                target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
                kept = [b for b in kept if b.header.get(HeaderKey.INSTANT_TIME) != target]
                continue
            if block.type not in (
                LogBlockType.AVRO_DATA,
                LogBlockType.PARQUET_DATA,
                LogBlockType.DELETE,
            ):
                raise TableError(
                    f"log file '{path}' holds a {block.type.name} block at offset "
                    f"{block.offset}, which hoodline cannot read"
                )
            if is_visible(block.instant):
                kept.append(block)
    return kept


@dataclass(frozen=True)
class MergedSlice:
    """The rows of a merged slice: the base rows that stay, then the log records."""

    rows: pa.Table
    #: the log records among ``rows``
    log_rows: pa.Table
    #: per log record, whether a base row had its key (None: none had)
    in_base: npt.NDArray[np.bool_] | None = None

    def added_keys(self) -> pa.Array:
        """Record keys of the log records whose key no base row had: with the base file's
        keys, every key of ``rows`` (what a new base file's bloom filter must hold)."""
        return added_keys(self.log_rows, self.in_base)


def added_keys(log_rows: pa.Table, in_base: npt.NDArray[np.bool_] | None) -> pa.Array:
    """Record keys of ``log_rows`` whose key no base row had (``in_base``: per log record,
    whether one had; None: none had)."""
    keys = log_rows.column(RECORD_KEY).combine_chunks()
    if in_base is None or not in_base.any():
        return keys
    return keys.filter(pa.array(~in_base))


@dataclass(frozen=True)
class LogRecords:
    """What a slice's log blocks do to it: the records they leave per key (replay order) and
    the keys they delete (whose base rows go)."""

    winners: pa.Table
    deleted: pa.Array


def replay_logs(
    blocks: list[LogBlock],
    schema: pa.Schema,
    conform: Callable[[pa.Table, str], pa.Table],
    ordering_field: str | None = None,
    source: str = "",
) -> LogRecords | None:
    """The blocks' records and deletes as one list of events in replay order, reduced per key
    in one vectorised pass; None when the blocks hold neither. The same result as applying the
    blocks one after the other:

    * a key's events after its last delete decide its log record: the last one, or with an
      ordering field (``ordering_field`` set means DefaultHoodieRecordPayload) the one with the
      greatest ordering value (ties: the later one);
    * a key with a delete among its events loses its base row (:func:`apply_logs`).

    ``conform(records, source)`` brings a block's records to ``schema``.

    ``blocks`` is emptied: each run of blocks is dropped once decoded, so the log file bytes
    they view can go while the rest decodes (a compaction holds the raw logs of a file slice
    and its decoded records together no longer than it must)."""
    records: list[pa.Table] = []
    seqs: list[npt.NDArray[np.int64]] = []
    delete_keys: list[pa.Array] = []
    delete_seqs: list[npt.NDArray[np.int64]] = []
    seq = 0
    runs = _runs(blocks)
    blocks.clear()
    runs.reverse()
    while runs:
        run = runs.pop()
        if run[0].type is LogBlockType.DELETE:
            keys, _parts = read_delete_block(run[0])
            delete_keys.append(pa.array(keys, pa.string()))
            delete_seqs.append(np.arange(seq, seq + len(keys), dtype=np.int64))
            seq += len(keys)
            continue
        where = f"{source} (block at offset {run[0].offset})" if len(run) == 1 else (
            f"{source} (blocks at offsets {', '.join(str(b.offset) for b in run)})")
        data = conform(read_data_blocks(run), where)
        records.append(data)
        seqs.append(np.arange(seq, seq + data.num_rows, dtype=np.int64))
        seq += data.num_rows
    run = []  # the last run's file bytes go too
    if not records and not delete_keys:
        return None
    log = pa.concat_tables(records) if records else _nullable(schema.empty_table())
    log_seq = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int64)
    dkeys = pa.concat_arrays(delete_keys) if delete_keys else pa.array([], pa.string())
    dseq = np.concatenate(delete_seqs) if delete_seqs else np.zeros(0, dtype=np.int64)
    # the last delete of every deleted key (no grouping without deletes: Arrow's grouping
    # engine alone costs ~0.3 s to load in a fresh process)
    if len(dkeys):
        grouped = pa.table({"k": dkeys, "s": dseq}).group_by("k", use_threads=False)
        last = grouped.aggregate([("s", "max")])
        last_delete = pa.table({"k": last.column("k"), "s": last.column("s_max")})
    else:
        last_delete = pa.table({"k": dkeys, "s": pa.array(dseq)})
    ordering = ordering_field if ordering_field in schema.names else None
    winners = _winners(log, log_seq, last_delete, ordering)
    return LogRecords(winners, last_delete.column("k").combine_chunks())


def _runs(blocks: Sequence[LogBlock]) -> list[list[LogBlock]]:
    """``blocks`` in order, consecutive data blocks whose records share a schema together (read
    in one pass, up to :data:`JOINED_READ_BYTES` of content a pass); every other block alone."""
    runs: list[list[LogBlock]] = []
    size = 0
    for block in blocks:
        grows = size + len(block.content) <= JOINED_READ_BYTES
        if runs and grows and same_records_schema(runs[-1][-1], block):
            runs[-1].append(block)
            size += len(block.content)
        else:
            runs.append([block])
            size = len(block.content)
    return runs


def apply_logs(
    base: pa.Table | None,
    logs: LogRecords | None,
    schema: pa.Schema,
    ordering_field: str | None = None,
) -> MergedSlice:
    """The rows of a slice: ``base`` (already conformed to ``schema``) with ``logs`` applied:
    a deleted key loses its base row, a log record replaces its key's base row; with an
    ordering field the base row stays when its ordering value is greater than the log
    record's (see :class:`LogApplication`, which does the same over pieces of the base)."""
    state = base if base is not None else _nullable(schema.empty_table())
    if logs is None:
        return MergedSlice(state, _nullable(schema.empty_table()))
    application = LogApplication(logs, schema, ordering_field)
    kept = application.base_rows(state)
    winners, in_base = application.log_rows()
    if winners.num_rows == 0:
        return MergedSlice(kept, winners)
    if kept.num_rows == 0:
        return MergedSlice(winners, winners, in_base)
    return MergedSlice(pa.concat_tables([_nullable(kept), _nullable(winners)]), winners, in_base)


class LogApplication:
    """Logs applied to a slice's base rows taken in pieces, in file order: :meth:`base_rows`
    for every piece, then :meth:`log_rows` once. A compaction merges a base file row group by
    row group this way, holding one at a time besides the log records.

    A base row goes when its key was deleted or a log record replaces it. With an ordering
    field, the log record of a key never deleted whose base row has a greater ordering value is
    dropped and that base row stays (with several base rows of one key, its first decides). One
    lookup of a piece's keys among the winners serves both (its hash is built over the winners,
    usually far fewer than the base rows)."""

    def __init__(
        self, logs: LogRecords | None, schema: pa.Schema, ordering_field: str | None = None
    ) -> None:
        if logs is None:  # no log records: every base row stays
            logs = LogRecords(_nullable(schema.empty_table()), pa.array([], pa.string()))
        self.winners = logs.winners
        self.deleted = logs.deleted
        self.ordering = ordering_field if ordering_field in schema.names else None
        n = self.winners.num_rows
        #: per log record: a base row of its key was met / that row decided it stays
        self._in_base = np.zeros(n, dtype=bool)
        self._dropped = np.zeros(n, dtype=bool)
        #: from :meth:`expect`: per base row still to come, its log record (-1: none) and
        #: whether its key was deleted
        self._ahead: tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None = None

    def expect(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """The keys of every base row the pieces will bring, in order (a caller that read
        them already): they are looked up among the log's keys once, not piece by piece."""
        self._ahead = self._lookup(keys)

    def _lookup(
        self, keys: pa.Array | pa.ChunkedArray
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Per key: its log record (-1: none), whether it was deleted."""
        deleted = np.zeros(len(keys), dtype=bool)
        if len(self.deleted):
            deleted = pc.is_in(keys, value_set=self.deleted).to_numpy(zero_copy_only=False)
        if not self.winners.num_rows:
            return np.full(len(keys), -1, dtype=np.int64), deleted
        pos = pc.index_in(keys, value_set=self.winners.column(RECORD_KEY))
        return pc.fill_null(pos, -1).to_numpy(zero_copy_only=False).astype(np.int64), deleted

    def base_rows(self, piece: pa.Table) -> pa.Table:
        """The rows of ``piece`` (the next rows of the base, conformed) that stay."""
        if piece.num_rows == 0:
            return piece
        if self._ahead is None:
            pos_np, deleted = self._lookup(piece.column(RECORD_KEY))
        else:
            ahead_pos, ahead_deleted = self._ahead
            n = piece.num_rows
            pos_np, deleted = ahead_pos[:n], ahead_deleted[:n]
            self._ahead = (ahead_pos[n:], ahead_deleted[n:])
        gone = deleted.copy()
        if self.winners.num_rows:
            rows = np.flatnonzero(pos_np >= 0)
            hit = pos_np[rows]
            if self.ordering is not None and len(rows):
                # each key's first base row decides, once: the first in this piece of a key
                # no earlier piece had
                firsts, first_row = np.unique(hit, return_index=True)
                new = ~self._in_base[firsts]
                firsts, at = firsts[new], rows[first_row[new]]
                if len(firsts):
                    stored = pc.take(piece.column(self.ordering), pa.array(at))
                    theirs = pc.take(self.winners.column(self.ordering), pa.array(firsts))
                    base_wins = pc.fill_null(pc.greater(stored, theirs), False).to_numpy(
                        zero_copy_only=False)
                    # a deleted key's base row never wins
                    self._dropped[firsts] = base_wins & ~gone[at]
            gone[rows] |= ~self._dropped[hit]
            self._in_base[hit] = True
        return piece.filter(pa.array(~gone)) if gone.any() else piece

    def log_rows(self) -> tuple[pa.Table, npt.NDArray[np.bool_]]:
        """The log records that replace or join the base rows and, per record, whether a base
        row had its key (call after every piece went through :meth:`base_rows`)."""
        if not self._dropped.any():
            return self.winners, self._in_base
        keep = ~self._dropped
        return self.winners.filter(pa.array(keep)), self._in_base[keep]


def _nullable(table: pa.Table) -> pa.Table:
    """``table`` with every field nullable (base rows and log records then concatenate)."""
    schema = pa.schema([f.with_nullable(True) for f in table.schema])
    return table if schema == table.schema else table.cast(schema)


def _winners(
    log: pa.Table, log_seq: npt.NDArray[np.int64], last_delete: pa.Table, ordering: str | None
) -> pa.Table:
    """Per key, the log record its events after its last delete end with (see replay_logs),
    in replay order.

    Keys are hashed once into group numbers (``dictionary_encode``); when every key occurs
    once -- a slice written once since its base, the common case -- every record wins as it
    is. Otherwise the choice runs on the group numbers, not on the key strings."""
    n = log.num_rows
    if n == 0:
        return log
    keys = log.column(RECORD_KEY)
    after: npt.NDArray[np.bool_] | None = None
    if last_delete.num_rows:
        pos = pc.index_in(keys, value_set=last_delete.column("k"))
        cut = pc.take(last_delete.column("s"), pos)  # null: the key was never deleted
        cut_np = pc.fill_null(cut, -1).to_numpy(zero_copy_only=False)
        after = log_seq > cut_np
    encoded = pc.dictionary_encode(keys)  # one dictionary shared by the chunks
    groups = len(encoded.chunk(0).dictionary) if encoded.num_chunks else 0
    if groups == n:
        return log if after is None or after.all() else log.filter(pa.array(after))
    group = np.concatenate(
        [c.indices.to_numpy(zero_copy_only=False) for c in encoded.chunks]).astype(np.int64)
    rows = np.arange(n, dtype=np.int64) if after is None else np.flatnonzero(after)
    if len(rows) == 0:
        return log.schema.empty_table()
    if ordering is None:  # the last event of each key (records are in replay order)
        last = np.full(groups, -1, dtype=np.int64)
        np.maximum.at(last, group[rows], rows)
        return log.take(pa.array(np.sort(last[last >= 0])))
    # the greatest ordering value of each key, ties to the later record; a null ordering
    # value sorts first: any value beats it
    idx = pa.table({
        "g": pa.array(group[rows]),
        "o": log.column(ordering).take(pa.array(rows)),
        "s": pa.array(log_seq[rows]),
    })
    order = pc.sort_indices(idx, sort_keys=[
        ("g", "ascending", "at_start"), ("o", "ascending", "at_start"),
        ("s", "ascending", "at_start")]).to_numpy(zero_copy_only=False)
    ordered_groups = group[rows][order]
    last_of_run = np.ones(len(order), dtype=bool)
    last_of_run[:-1] = ordered_groups[1:] != ordered_groups[:-1]
    return log.take(pa.array(np.sort(rows[order[last_of_run]])))


