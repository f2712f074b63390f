"""Error records: what a bad record looks like in the error table, and how it is built.

Design
------
With ``errors.tolerance = all`` every record the decoder (or key extraction) refuses is written
to an *error table* next to the target (default ``<table path>_errors``) instead of the target.
With ``none`` (default) the first bad record stops the job with :class:`BadRecordError` naming
its position. Either way nothing is dropped silently.

* The error table is an ordinary Hudi copy-on-write table written through the table layer, in the
  **same round** as the data: the round's write coordinator commits the error instant first and
  the target instant (which carries the source checkpoint) last. A crash in between replays the
  round; because the error table's record key is the record's *source position* (``error_id``,
  e.g. ``kafka/events/3/1234`` or ``file/<path>/17``) and it is upserted, a replay rewrites the
  same rows and never duplicates them. The error table never stores a checkpoint of its own;
  each of its commits names the target instant whose round it belongs to
  (:data:`ROUND_INSTANT_KEY`), and when that instant is rolled back (a failed round, or by the
  next start after a crash) so is the error commit (:func:`drop_orphaned_errors`): the replay may
  find different records bad (a changed ``[schema]``), and rows of records it writes to the
  target must not stay in the error table.
* Keyed with the BLOOM index and small files of :data:`ERROR_SMALL_FILE_LIMIT`: a round's rows
  fill the day's newest small file or start a new one, so a day of many bad records is not one
  file rewritten by every round (a table made before kept its single bucket per day).
* Partitioned by ``day`` so it can be cleaned by age: the UTC date of the record's own timestamp
  (a Kafka message's timestamp, a file's modification time) when it has one, else the date of
  detection, so a round replayed on a later day rewrites the same rows.
* Columns: where the record came from (``source``, Kafka ``topic``/``partition``/``offset`` and
  ``key``, or ``file``/``row``), the raw ``value`` bytes exactly as read, the ``reason`` code
  (see :mod:`hoodline.formats.json_decoder`) and a human ``detail``, plus the ``round_id`` and
  ``detected_at`` time. Secrets never appear: only message key/value bytes are stored.

This module builds the Arrow batch (vectorised: one ``take`` per column) and opens the table;
the round driver writes it through the table layer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import BadRecordError, TableNotFoundError
from hoodline.formats.json_decoder import BadRecords
from hoodline.pipeline.target import refuse_foreign_folder
from hoodline.table.instant import Instant
from hoodline.table.properties import IndexType, TableConfig
from hoodline.table.rollback import rolled_back
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient

log = logging.getLogger(__name__)

ERROR_RECORD_KEY = "error_id"
#: Extra metadata of an error-table commit: the target table and the instant of the round whose
#: bad records it holds.
ROUND_TABLE_KEY = "hoodline.errors.target.table"
ROUND_INSTANT_KEY = "hoodline.errors.target.instant"
#: Base files of the error table smaller than this take a later round's rows (rewritten with
#: them); larger ones are left alone (a flood of bad records rewrites at most this much a round).
ERROR_SMALL_FILE_LIMIT = 32 * 1024 * 1024
ERROR_PARTITION_FIELD = "day"

ERROR_SCHEMA = pa.schema(
    [
        pa.field("error_id", pa.string(), nullable=False),
        pa.field("day", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # the source type, e.g. "kafka"
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("file", pa.string()),
        pa.field("row", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
        pa.field("round_id", pa.int64(), nullable=False),
        pa.field("detected_at", pa.timestamp("ms", tz="UTC"), nullable=False),
    ]
)

#: Where a bad record came from; a source fills the ones it has (Kafka: topic, partition,
#: offset; files: file, row) and leaves the others null.
POSITION_COLUMNS = ("topic", "partition", "offset", "file", "row")


def _taken(positions: pa.Table, name: str, take: pa.Array) -> pa.Array:
    col = pc.take(positions.column(name), take)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _column(positions: pa.Table, name: str, take: pa.Array, n: int) -> pa.Array:
    target = ERROR_SCHEMA.field(name).type
    if name in positions.column_names:
        return _taken(positions, name, take).cast(target)
    return pa.nulls(n, target)


def build_error_batch(
    errors: BadRecords,
    values: pa.Array | pa.ChunkedArray,
    positions: pa.Table | pa.RecordBatch,
    *,
    source: str,
    id_columns: Sequence[str],
    id_prefix: str,
    round_id: int,
    detected_at: datetime | None = None,
) -> pa.RecordBatch:
    """Error records for ``errors`` (indexes into ``values``/``positions`` rows).

    ``positions`` holds the source position of every input row in some of
    :data:`POSITION_COLUMNS` (optionally also ``key``, ``timestamp`` and columns that only
    name the record); ``source`` is the source type stored with each error; the ``error_id`` is
    ``id_prefix`` and the ``id_columns`` joined with ``/`` (e.g. ``kafka/events/3/1234``), so a
    replayed record gets the same id.
    """
    if isinstance(positions, pa.RecordBatch):
        positions = pa.Table.from_batches([positions])
    missing = [c for c in id_columns if c not in positions.column_names]
    if missing:
        raise ValueError(f"positions lack id column(s) {', '.join(missing)} for source {source!r}")
    if positions.num_rows != len(values):
        raise ValueError(
            f"positions have {positions.num_rows} rows but there are {len(values)} values"
        )
    when = (detected_at or datetime.now(UTC)).astimezone(UTC)
    n = len(errors)
    take = errors.index
    cols: dict[str, pa.Array] = {
        name: _column(positions, name, take, n) for name in (*POSITION_COLUMNS, "key")
    }
    raw = pc.take(values, take)
    if isinstance(raw, pa.ChunkedArray):
        raw = raw.combine_chunks()
    cols["value"] = raw.cast(pa.binary())
    parts = [pa.scalar(id_prefix),
             *((cols[c] if c in cols else _taken(positions, c, take)).cast(pa.string())
               for c in id_columns)]
    error_id = pc.binary_join_element_wise(*parts, "/")
    day: pa.Array = pa.array([when.strftime("%Y-%m-%d")] * n, pa.string())
    if "timestamp" in positions.column_names and n:
        # the record's own time (a Kafka message's, a file's) decides the day, so a replay
        # of the same record on another day upserts the same row instead of adding one
        stamps = pc.take(positions.column("timestamp"), take)
        if isinstance(stamps, pa.ChunkedArray):
            stamps = stamps.combine_chunks()
        own = pc.strftime(pc.cast(stamps, pa.timestamp("ms", tz="UTC")), format="%Y-%m-%d")
        day = pc.coalesce(own, day)
    arrays = [
        error_id,
        day,
        pa.array([source] * n, pa.string()),
        cols["topic"], cols["partition"], cols["offset"], cols["file"], cols["row"],
        cols["key"], cols["value"],
        errors.reason, errors.detail,
        pa.array([round_id] * n, pa.int64()),
        pa.array([when] * n, pa.timestamp("ms", tz="UTC")),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ERROR_SCHEMA)


def describe_position(row: Mapping[str, object]) -> str:
    """'topic 'events' partition 3 offset 1234' or 'file '/x.json' row 17' for an error row."""
    parts = []
    for name in POSITION_COLUMNS:
        value = row.get(name)
        if value is not None:
            parts.append(f"{name} {value!r}" if isinstance(value, str) else f"{name} {value}")
    return " ".join(parts) or f"an unknown position of source {row.get('source')!r}"


def sort_errors(errors: pa.Table) -> pa.Table:
    """Error rows in source order (by their position columns)."""
    if errors.num_rows < 2:
        return errors
    return errors.sort_by([(c, "ascending") for c in POSITION_COLUMNS])


def raise_for_bad_records(errors: pa.Table, error_table_path: str) -> None:
    """``errors.tolerance = none``: raise for the first bad record, naming where it is."""
    if errors.num_rows == 0:
        return
    first = errors.slice(0, 1).to_pylist()[0]
    more = f" (and {errors.num_rows - 1} more in this round)" if errors.num_rows > 1 else ""
    raise BadRecordError(
        f"bad record at {describe_position(first)}: {first['reason']}: {first['detail']}{more}. "
        f"Fix the producer or the [schema], or set errors.tolerance = 'all' to write bad "
        f"records to the error table {error_table_path!r} and go on"
    )


def open_error_table(
    path: str, name: str, storage_options: Mapping[str, str] | None = None
) -> HudiTable:
    """The error table at ``path``, created on first use (keyed by ``error_id``, by ``day``);
    ``storage_options`` open an object store location."""
    try:
        return HudiTable.open(path, storage_options=storage_options)
    except TableNotFoundError:
        refuse_foreign_folder(path, storage_options or {},
                              "errors.table-path (by default table.path + '_errors')")
        return HudiTable.create(
            path,
            TableConfig(
                name=name,
                record_key_fields=(ERROR_RECORD_KEY,),
                partition_fields=(ERROR_PARTITION_FIELD,),
                # one bucket a day: every round with bad records rewrote the day's whole file
                index_type=IndexType.BLOOM,
            ),
            exist_ok=True,
            storage_options=storage_options,
        )


def round_metadata(target: HudiTable, instant_ts: str) -> dict[str, str]:
    """The extra metadata of the error-table commit of the round writing ``instant_ts``."""
    return {ROUND_TABLE_KEY: str(target.base_path), ROUND_INSTANT_KEY: instant_ts}


def orphaned_error_commit(
    errors: HudiTable, target: HudiTable, instant_ts: str | None = None
) -> Instant | None:
    """The error table's newest commit when it holds the bad records of a round of ``target``
    (of its instant ``instant_ts``, when given) that failed: the instant is still pending or a
    rollback on the target's timeline names it; else None. An instant that is merely absent
    (archived, or the target made anew at its path) is never taken for one that failed."""
    errors.timeline.reload()
    newest = errors.timeline.last_completed_commit()
    if newest is None:
        return None
    extra = errors.timeline.read_commit_metadata(newest).extra_metadata
    named = extra.get(ROUND_INSTANT_KEY)
    if named is None or extra.get(ROUND_TABLE_KEY) != str(target.base_path):
        return None  # written before hoodline named the round, or for another table
    if instant_ts is not None and named != instant_ts:
        return None  # another round's (another writer's, after a takeover of the lock)
    target.timeline.reload()
    pending = any(i.timestamp == named for i in target.timeline.pending())
    return newest if pending or rolled_back(target, named) else None


def drop_orphaned_errors(
    errors: WriteClient, target: HudiTable, instant_ts: str | None = None
) -> Instant | None:
    """Roll back the error table's commit of a round whose target instant failed (see module
    docs; of the instant ``instant_ts`` only, when given); returns the rolled-back commit, or
    None when there was none. First finishes such a rollback an earlier call left half-done."""
    if errors.table.timeline.reload().pending():
        errors.repair()  # between rounds nothing of this writer is in flight
    orphan = orphaned_error_commit(errors.table, target, instant_ts)
    if orphan is None:
        return None
    named = errors.table.timeline.read_commit_metadata(orphan).extra_metadata[ROUND_INSTANT_KEY]
    log.warning("error table '%s': rolling back its commit %s, which holds the bad records of "
                "the failed round of instant %s of '%s' (the round is read again and its bad "
                "records written again)", errors.table.base_path, orphan.timestamp, named,
                target.base_path)
    errors.rollback(orphan.timestamp, completed_because=(
        f"it holds the bad records of instant {named} of '{target.base_path}', which failed"))
    return orphan
