"""Merging a merge-on-read file slice: its base file, then its log blocks, oldest first.

Blocks are read in log file order (Java's ``LogFileComparator``), then in file order. A block
counts when its instant is a completed write visible to the query (blocks of failed or later
writes are skipped, as Java's and hudi-rs's scanners do); a rollback command block drops the
blocks of its target instant read before it. Then, block by block:

* a data block's records replace the stored records of their keys. With
  ``DefaultHoodieRecordPayload`` a stored record whose ordering value is greater stays (the
  incoming one is dropped); within one block the last record of a key wins;
* a delete block removes its keys (hoodline and Spark SQL write ``IntWrapper(0)`` orderings,
  which delete whatever the payload).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.log.content import read_data_block, read_delete_block

RECORD_KEY = "_hoodie_record_key"

#: payload class names (``hoodie.compaction.payload.class``)
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def committed_blocks(
    paths: Sequence[Path], is_visible: Callable[[str], bool]
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


def _last_per_key(table: pa.Table) -> pa.Table:
    """The last row of each key (stable)."""
    keys = table.column(RECORD_KEY)
    if pc.count_distinct(keys).as_py() == table.num_rows:
        return table
    n = table.num_rows
    idx = pa.table({"k": keys, "i": pa.array(np.arange(n, dtype=np.int64))})
    last = idx.group_by("k", use_threads=False).aggregate([("i", "max")])
    rows = np.sort(last.column("i_max").to_numpy())
    return table.take(pa.array(rows))


def merge_slice(
    base: pa.Table | None,
    blocks: Sequence[LogBlock],
    schema: pa.Schema,
    conform: Callable[[pa.Table, str], pa.Table],
    ordering_field: str | None = None,
    source: str = "",
) -> pa.Table:
    """The rows of a slice: ``base`` (already conformed to ``schema``) with ``blocks`` applied.

    ``conform(records, source)`` brings a block's records to ``schema``; ``ordering_field`` set
    means DefaultHoodieRecordPayload (greater ordering value wins over a later record)."""
    state = base if base is not None else schema.empty_table()
    for block in blocks:
        where = f"{source} (block at offset {block.offset})"
        if block.type is LogBlockType.DELETE:
            keys, _parts = read_delete_block(block)
            if keys and state.num_rows:
                gone = pc.is_in(state.column(RECORD_KEY), value_set=pa.array(keys, pa.string()))
                state = state.filter(pc.invert(gone))
            continue
        incoming = _last_per_key(conform(read_data_block(block), where))
        if incoming.num_rows == 0:
            continue
        if state.num_rows == 0:
            state = incoming
            continue
        new_keys = incoming.column(RECORD_KEY).combine_chunks()
        if ordering_field is not None and ordering_field in schema.names:
            incoming = _drop_older(state, incoming, ordering_field)
            new_keys = incoming.column(RECORD_KEY).combine_chunks()
        replaced = pc.is_in(state.column(RECORD_KEY), value_set=new_keys)
        state = pa.concat_tables([state.filter(pc.invert(replaced)), incoming])
    return state


def _drop_older(state: pa.Table, incoming: pa.Table, field: str) -> pa.Table:
    """Incoming records whose stored version has a greater ordering value are dropped."""
    pos = pc.index_in(incoming.column(RECORD_KEY), value_set=state.column(RECORD_KEY))
    stored = pc.take(state.column(field), pos)
    stored_wins = pc.fill_null(pc.greater(stored, incoming.column(field)), False)
    if not pc.any(stored_wins).as_py():
        return incoming
    return incoming.filter(pc.invert(stored_wins))
