"""Merging a merge-on-read file slice: its base file, then its log blocks, oldest first.

Blocks are read in log file order (Java's ``LogFileComparator``), then in file order. A block
counts when its instant is a completed write visible to the query (blocks of failed or later
writes are skipped, as Java's and hudi-rs's scanners do); a rollback command block drops the
blocks of its target instant read before it. Then, block by block:

* a data block's records replace the stored log records of their keys. With
  ``DefaultHoodieRecordPayload`` a stored record whose ordering value is greater stays (ties go
  to the later record);
* a delete block removes the stored records of its keys (``IntWrapper(0)`` orderings, which
  Spark SQL and hoodline write for tombstones and with the default payload, always delete).
  With ``DefaultHoodieRecordPayload`` a delete carrying an ordering value of its own, as Java
  and hoodline write for upserts that delete, can rank below the stored record and is then
  dropped (:mod:`hoodline.table.log.ordering`).

Then the stored log records meet the base rows: a log record replaces its key's base row, but
with ``DefaultHoodieRecordPayload`` a base row whose ordering value is greater stays; a key
whose last effective event is a delete loses its base row. A key deleted and then written
again meets its base row like any other log record (the delete is forgotten, as in Java).

With ``OverwriteWithLatestAvroPayload`` (the default) the last write wins throughout, as in
copy-on-write tables and hudi-rs 0.5.0. Java Hudi 0.14/0.15 readers differ in one case:
their log scanner pre-combines a key's log records by the precombine field with this payload
too, so until a compaction they show the record with the greatest ordering value among the
log records written since the slice's base (docs/hudi-mor-format.md, 9.1).

:func:`replay_logs` reduces all blocks' events in one vectorised pass and :func:`apply_logs` applies
the result to the base rows.
"""

from __future__ import annotations

import dataclasses
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
from hoodline.table.log.ordering import (
    OrderingValue,
    delete_is_outranked,
    raw_values,
    record_class,
)

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
            block = dataclasses.replace(block, source=str(path))
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
    the keys they delete and leave without a record (whose base rows go)."""

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
    in one vectorised pass; None when the blocks hold neither. The same result as Java's log
    scanner applying the blocks one after the other (``HoodieMergedLogRecordScanner``):

    * a record meets the key's earlier log record: with an ordering field (set means
      DefaultHoodieRecordPayload) the one with the greater ordering value stays, ties to the
      later one; without, the later one;
    * a delete removes the key's earlier log record; with an ordering field, not when its
      ordering value ranks below that record's
      (:func:`~hoodline.table.log.ordering.delete_is_outranked`: never for hoodline's and
      Spark SQL's ``IntWrapper(0)``);
    * so a key's log record is decided by its records after its last delete that took effect;
      a key whose last event is such a delete loses its base row (:func:`apply_logs`).

    ``conform(records, source)`` brings a block's records to ``schema``; Avro blocks decode
    only the fields ``schema`` has (its ``dictionary<int32, string>`` ones as dictionaries).

    ``blocks`` is emptied: each run of blocks is dropped once decoded, so the log file bytes
    they view can go while the rest decodes (a compaction holds the raw logs of a file slice
    and its decoded records together no longer than it must)."""
    records: list[pa.Table] = []
    seqs: list[npt.NDArray[np.int64]] = []
    delete_keys: list[pa.Array] = []
    delete_seqs: list[npt.NDArray[np.int64]] = []
    delete_orderings: list[OrderingValue | None] = []
    seq = 0
    runs = _runs(blocks)
    blocks.clear()
    runs.reverse()
    while runs:
        run = runs.pop()
        where = f"{source} ({_located(run)})" if source else _located(run)
        if run[0].type is LogBlockType.DELETE:
            try:
                deletes = read_delete_block(run[0])
            except TableError as exc:
                raise TableError(f"{where}: {exc}") from None
            delete_keys.append(pa.array(deletes.keys, pa.string()))
            delete_seqs.append(np.arange(seq, seq + len(deletes.keys), dtype=np.int64))
            delete_orderings.extend(deletes.orderings)
            seq += len(deletes.keys)
            continue
        try:
            decoded = read_data_blocks(run, schema)
        except TableError as exc:
            raise TableError(f"{where}: {exc}") from None
        data = conform(decoded, where)
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
    ordering = ordering_field if ordering_field in schema.names else None
    if ordering is not None and any(o is not None and not o.natural for o in delete_orderings):
        effective = _effective_deletes(log, log_seq, dkeys, dseq, delete_orderings, ordering)
        dkeys, dseq = dkeys.filter(pa.array(effective)), dseq[effective]
    # the last delete of every deleted key (no grouping without deletes: Arrow's grouping
    # engine alone costs ~0.3 s to load in a fresh process)
    if len(dkeys):
        grouped = pa.table({"k": dkeys, "s": dseq}).group_by("k", use_threads=False)
        last = grouped.aggregate([("s", "max")])
        last_delete = pa.table({"k": last.column("k"), "s": last.column("s_max")})
    else:
        last_delete = pa.table({"k": dkeys, "s": pa.array(dseq)})
    winners = _winners(log, log_seq, last_delete, ordering)
    deleted = last_delete.column("k").combine_chunks()
    if len(deleted) and winners.num_rows:  # records after the delete: the key has a record
        deleted = deleted.filter(pc.invert(pc.is_in(deleted, value_set=winners.column(
            RECORD_KEY))))
    return LogRecords(winners, deleted)


def _located(run: Sequence[LogBlock]) -> str:
    """Where a run of blocks is: its log file(s) and offsets, for error messages."""
    files = list(dict.fromkeys(b.source or "?" for b in run))
    offsets = ", ".join(str(b.offset) for b in run)
    noun = "block at offset" if len(run) == 1 else "blocks at offsets"
    return f"log file {', '.join(repr(f) for f in files)}, {noun} {offsets}"


def _effective_deletes(
    log: pa.Table,
    log_seq: npt.NDArray[np.int64],
    dkeys: pa.Array,
    dseq: npt.NDArray[np.int64],
    orderings: Sequence[OrderingValue | None],
    ordering: str,
) -> npt.NDArray[np.bool_]:
    """Per delete event, whether it takes effect (:func:`replay_logs`). Only deletes that carry
    an ordering value of their own can fail to; the events of their keys are replayed one by
    one (Java writes such deletes for records an upsert deletes: few, next to a slice's
    records)."""
    effective = np.ones(len(dkeys), dtype=bool)
    ranked = np.flatnonzero([o is not None and not o.natural for o in orderings])
    contested = pc.unique(dkeys.take(pa.array(ranked)))
    keys = log.column(RECORD_KEY)
    rec_rows = np.flatnonzero(
        pc.is_in(keys, value_set=contested).to_numpy(zero_copy_only=False))
    if len(rec_rows) == 0:  # no log record to outrank a delete
        return effective
    del_rows = np.flatnonzero(pc.is_in(dkeys, value_set=contested).to_numpy(
        zero_copy_only=False))
    java_class = record_class(log.schema.field(ordering).type)
    values = raw_values(log.column(ordering).take(pa.array(rec_rows)))
    rec_keys = keys.take(pa.array(rec_rows)).to_pylist()
    del_keys = dkeys.take(pa.array(del_rows)).to_pylist()
    # events of the contested keys in replay order: records (i >= 0) and deletes (~j)
    seq = np.concatenate([log_seq[rec_rows], dseq[del_rows]])
    tag = np.concatenate([np.arange(len(rec_rows)), ~np.arange(len(del_rows))])
    current: dict[str, OrderingValue] = {}  # the key's log record now (absent: none/deleted)
    for i in tag[np.argsort(seq, kind="stable")].tolist():
        if i >= 0:
            key, new = rec_keys[i], OrderingValue(java_class, values[i])
            held = current.get(key)
            if held is None or not _outranks(held.value, new.value):
                current[key] = new
        else:
            key, delete = del_keys[~i], orderings[int(del_rows[~i])]
            held = current.get(key)
            if held is not None and delete_is_outranked(held, delete):
                effective[del_rows[~i]] = False
            else:
                current.pop(key, None)
    return effective


def _outranks(held: object, new: object) -> bool:
    """Whether a stored log record's ordering value ``held`` beats a newer record's ``new``:
    strictly greater; a null value loses to any value (as in :func:`_winners`)."""
    if held is None:
        return False
    return new is None or bool(held > new)  # type: ignore[operator]


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
    field (``DefaultHoodieRecordPayload``), a log record whose key's base row has a greater
    ordering value is dropped and that base row stays (with several base rows of one key, its
    first decides). One lookup of a piece's keys among the winners serves both (its hash is
    built over the winners, usually far fewer than the base rows)."""

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
                    self._dropped[firsts] = base_wins
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


