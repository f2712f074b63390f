"""Reads returning Arrow: snapshot, time travel, incremental, file slices, plain file lists.

Semantics follow hudi-rs:

* the schema of the newest completed commit decides the columns and types of every read (also
  time travel); base files written before a nullable column was added read it as nulls;
* snapshot / time travel read the newest committed file slice of each file group at the time:
  its base file, merged with its log files' committed blocks on merge-on-read tables
  (:mod:`hoodline.table.log.merge`);
* incremental ``(start, end]`` reads, for each file group written by a commit in the range, its
  newest slice at ``end`` and keeps rows whose ``_hoodie_commit_time`` is in the range (log
  blocks of the range merge with base rows of the range only, as Hudi's incremental query);
* :func:`latest_base_files` lists base files only (a merge-on-read table's read-optimized view).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodline.errors import TableError
from hoodline.storage.ops import parquet_file
from hoodline.storage.paths import TablePath
from hoodline.table.archive import has_archived_instants
from hoodline.table.clean import CLEANER_COMMITS_RETAINED, earliest_retained_commit
from hoodline.table.fs_view import FileSlice
from hoodline.table.instant import query_instant
from hoodline.table.log.merge import (
    DEFAULT_PAYLOAD,
    LogRecords,
    MergedSlice,
    apply_logs,
    committed_blocks,
    replay_logs,
)
from hoodline.table.parquet import by_row_group
from hoodline.table.schema import META_SCHEMA, avro_schema_json_to_arrow
from hoodline.table.table import CREATE_SCHEMA_KEY, HudiTable

__all__ = [
    "file_slices",
    "latest_base_files",
    "read_incremental",
    "read_optimized",
    "read_snapshot",
    "table_schema",
]

COMMIT_TIME = "_hoodie_commit_time"


def table_schema(table: HudiTable, with_meta: bool = True) -> pa.Schema:
    """Columns every read returns: meta columns + the latest commit's Avro schema."""
    table.timeline.reload()
    avro = table.timeline.latest_schema() or table.config.extra.get(CREATE_SCHEMA_KEY)
    data = avro_schema_json_to_arrow(avro) if avro else pa.schema([])
    if not with_meta:
        return data
    return pa.schema([pa.field(f.name, f.type, nullable=False) for f in META_SCHEMA] + list(data))


def _conform(data: pa.Table, schema: pa.Schema, source: str) -> pa.Table:
    arrays = []
    for field in schema:
        if field.name in data.column_names:
            col = data.column(field.name)
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise TableError(
                        f"column '{field.name}' in '{source}' has type {col.type}, which cannot be "
                        f"read as the table type {field.type}: {exc}"
                    ) from None
            arrays.append(col)
        else:
            arrays.append(pa.nulls(data.num_rows, type=field.type))
    fields = [pa.field(f.name, f.type, nullable=True) for f in schema]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _select(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise TableError(
            f"column '{missing[0]}' is not in the table; columns: {', '.join(schema.names)}"
        )
    return pa.schema([schema.field(c) for c in columns])


def merge_ordering_field(table: HudiTable) -> str | None:
    """The ordering field log merges compare (DefaultHoodieRecordPayload tables), else None."""
    if table.config.payload_class == DEFAULT_PAYLOAD:
        return table.config.precombine_field
    return None


def read_merged_slice(
    table: HudiTable,
    s: FileSlice,
    schema: pa.Schema,
    is_visible: Callable[[str], bool],
    base_filter: pc.Expression | None = None,
    threads: bool = True,
) -> MergedSlice:
    """Every column of ``schema`` for the rows of a slice: base file merged with the log blocks
    of the instants ``is_visible`` accepts (``base_filter``: base rows merged at all).
    ``threads``: decode the base file on pyarrow's thread pool (off when the caller already
    reads several slices side by side)."""
    base = None
    if s.base_file is not None:
        base = read_slice_base(table, s, schema, threads=threads)
        if base_filter is not None:
            base = _apply_filter(base, base_filter)
    logs = read_slice_logs(table, s, schema, is_visible)
    return apply_logs(base, logs, schema, merge_ordering_field(table))


def read_slice_base(
    table: HudiTable,
    s: FileSlice,
    schema: pa.Schema,
    threads: bool = True,
    row_groups: Sequence[int] | None = None,
) -> pa.Table:
    """The base file of a slice (``row_groups``: only those) conformed to ``schema``."""
    assert s.base_file is not None
    path = table.absolute(s.base_file)
    pf = open_base_file(path, s)
    wanted = _stored_columns(pf, schema.names)
    if row_groups is None:
        data = pf.read(columns=wanted, use_threads=threads)
    else:
        data = pf.read_row_groups(row_groups, columns=wanted, use_threads=threads)
    return _conform(data, schema, str(path))


def slice_base_row_groups(
    table: HudiTable,
    s: FileSlice,
    schema: pa.Schema,
    have: Mapping[str, pa.Array | pa.ChunkedArray],
    opened: pq.ParquetFile | None = None,
) -> Iterator[pa.Table]:
    """The base file of a slice one row group after the other, each conformed to ``schema``
    (what a merge that holds one row group at a time reads). ``have``: columns of the whole
    file the caller already holds (read before, or values it is about to replace), each row
    group taking its rows of them instead of reading them; ``opened``: the base file, if the
    caller has it open already."""
    assert s.base_file is not None
    path = table.absolute(s.base_file)
    pf = opened if opened is not None else open_base_file(path, s)
    wanted = _stored_columns(pf, schema.names)
    for data in by_row_group.row_groups(pf, wanted, have):
        yield _conform(data, schema, str(path))


def read_slice_logs(
    table: HudiTable, s: FileSlice, schema: pa.Schema, is_visible: Callable[[str], bool]
) -> LogRecords | None:
    """What the log blocks of a slice (of the instants ``is_visible`` accepts) do to it."""
    blocks = committed_blocks([table.absolute(f) for f in s.log_files], is_visible)
    return replay_logs(
        blocks,
        schema,
        lambda records, where: _conform(records, schema, where),
        merge_ordering_field(table),
        source=f"file group '{s.file_id}' of partition '{s.partition_path}'",
    )


def read_file_slices(
    table: HudiTable,
    slices: Sequence[FileSlice],
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
    schema: pa.Schema | None = None,
    is_visible: Callable[[str], bool] | None = None,
    filter_before_merge: bool = False,
) -> pa.Table:
    """Read ``slices``, conformed to the table schema (or ``schema``).

    ``row_filter`` may reference any table column (also ones not in ``columns``, and ones
    missing from old files, which read as null). ``is_visible`` says which instants' log blocks
    count (default: every completed write); ``filter_before_merge`` applies ``row_filter`` to
    base rows before log records merge with them (incremental reads: only what the range wrote
    takes part, as in Hudi)."""
    full = schema if schema is not None else table_schema(table)
    target = _select(full, columns)
    parts: list[pa.Table] = []
    for s in slices:
        if s.log_files or s.base_file is None:
            if is_visible is None:
                is_visible = table.fs_view().is_visible
            base_filter = row_filter if filter_before_merge else None
            merged = read_merged_slice(table, s, full, is_visible, base_filter).rows
            if row_filter is not None:
                merged = _apply_filter(merged, row_filter)
            parts.append(merged.select(target.names))
            continue
        path = table.absolute(s.base_file)
        pf = open_base_file(path, s)
        if row_filter is None:
            wanted = _stored_columns(pf, target.names)
            parts.append(_conform(pf.read(columns=wanted), target, str(path)))
            continue
        data = _conform(pf.read(columns=_stored_columns(pf, full.names)), full, str(path))
        parts.append(_apply_filter(data, row_filter).select(target.names))
    if not parts:
        return target.empty_table()
    return pa.concat_tables(parts)


def open_base_file(
    path: TablePath, s: FileSlice, read_dictionary: Sequence[str] = ()
) -> pq.ParquetFile:
    """The base file of slice ``s`` at ``path`` (``read_dictionary``: see
    :func:`~hoodline.storage.ops.parquet_file`); a missing one is an error naming it."""
    try:
        return parquet_file(path, read_dictionary)
    except FileNotFoundError:
        raise TableError(
            f"base file '{path}' of committed instant {s.base_instant} is missing "
            "(cleaned or deleted outside hoodline)"
        ) from None


def _stored_columns(pf: pq.ParquetFile, names: Sequence[str]) -> list[str]:
    """The ``names`` the file stores, in their order (``schema_arrow`` is converted anew on
    every access: once per name, that cost a compaction ~4 ms per file of 18 columns)."""
    stored = set(pf.schema_arrow.names)
    return [n for n in names if n in stored]


def _apply_filter(data: pa.Table, row_filter: pc.Expression) -> pa.Table:
    try:
        return data.filter(row_filter)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TableError(f"row filter {row_filter} cannot be applied: {exc}") from None


def _as_of(as_of: str | None) -> str | None:
    """A time-travel bound as an instant time (see :func:`query_instant`)."""
    return None if as_of is None else query_instant(as_of, "as-of time")


def _check_not_cleaned(table: HudiTable, ts: str, what: str) -> None:
    earliest = earliest_retained_commit(table)
    if earliest is None:
        return
    # cleaning keeps, per file group, the newest version before the earliest retained commit,
    # so the state at the last commit before it is still complete
    commits = table.timeline.completed_commits()
    older = [i.timestamp for i in commits if i.timestamp < earliest]
    oldest_readable = older[-1] if older else earliest
    if ts < oldest_readable and commits and ts < commits[0].timestamp and (
            not has_archived_instants(table)):
        # not "deleted by cleaning": nothing was there (walkthrough review)
        raise TableError(
            f"{what} {ts} is before the table's first commit ({commits[0].timestamp}): the "
            "table held nothing then. Query that commit or a later instant"
        )
    if ts < oldest_readable:
        raise TableError(
            f"{what} {ts} is older than the oldest instant kept by cleaning "
            f"({oldest_readable}); file versions of that time were deleted. Query a later "
            "instant, or retain more commits "
            f"('{CLEANER_COMMITS_RETAINED.key}')"
        )


def _opened(table: HudiTable | str | os.PathLike[str]) -> HudiTable:
    """``table`` itself, or the table at that path."""
    return table if isinstance(table, HudiTable) else HudiTable.open(table)


def read_snapshot(
    table: HudiTable | str | os.PathLike[str],
    as_of: str | None = None,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
) -> pa.Table:
    """Rows of the table at ``as_of`` (None = latest completed commit; an instant time, or a
    time as Java Hudi's ``as.of.instant`` takes it: ``2024-03-01``, ``2024-03-01 12:00:00``,
    see :func:`~hoodline.table.instant.query_instant`), optionally filtered by a
    pyarrow compute expression (e.g. ``pc.field("region") == "us"``).

    Raises :class:`TableError` for an ``as_of`` older than what cleaning retained. ``table``:
    a :class:`HudiTable` or its path (local, or an object store location whose credentials
    the environment gives)."""
    table = _opened(table)
    as_of = _as_of(as_of)
    view = table.fs_view(as_of=as_of)
    if as_of is not None:
        _check_not_cleaned(table, as_of, "time-travel instant")
    return read_file_slices(
        table, view.latest_file_slices(), columns, row_filter, is_visible=view.is_visible
    )


def read_optimized(
    table: HudiTable | str | os.PathLike[str],
    as_of: str | None = None,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
) -> pa.Table:
    """The read-optimized view: the base files of the latest slices only (on a merge-on-read
    table, the state of each file group at its last compaction, without what logs added since;
    log-only file groups are left out). The same as :func:`read_snapshot` on copy-on-write.
    ``table``: a :class:`HudiTable` or its path."""
    table = _opened(table)
    as_of = _as_of(as_of)
    view = table.fs_view(as_of=as_of)
    if as_of is not None:
        _check_not_cleaned(table, as_of, "time-travel instant")
    bases = [
        dataclasses.replace(s, log_files=())
        for s in view.latest_file_slices()
        if s.base_file is not None
    ]
    return read_file_slices(table, bases, columns, row_filter, is_visible=view.is_visible)


def file_slices(table: HudiTable, as_of: str | None = None) -> list[FileSlice]:
    """Latest committed file slice of every file group at ``as_of`` (None = latest);
    :class:`TableError` for an instant whose file versions cleaning deleted (the list would be
    empty or partial)."""
    as_of = _as_of(as_of)
    if as_of is not None:
        _check_not_cleaned(table, as_of, "time-travel instant")
    return table.fs_view(as_of=as_of).latest_file_slices()


def read_incremental(
    table: HudiTable | str | os.PathLike[str],
    start: str,
    end: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Rows written by commits in ``(start, end]`` (``end`` None = latest), newest version each.
    ``start`` and ``end`` are instant times or times :func:`query_instant` reads (a ``start``
    after ``end`` is refused). ``table``: a :class:`HudiTable` or its path."""
    table = _opened(table)
    start = query_instant(start, "incremental start")
    end = None if end is None else query_instant(end, "incremental end")
    if end is not None and start > end:
        raise TableError(f"incremental start {start} is after its end {end}: a range (start, "
                         "end] needs start <= end")
    table.timeline.reload()
    commits = [
        i
        for i in table.timeline.completed_commits()
        if i.timestamp > start and (end is None or i.timestamp <= end)
    ]
    schema = table_schema(table)
    timeline_start = table.timeline.start()
    archived = (end is not None and timeline_start is not None and start < timeline_start
                and end < timeline_start and has_archived_instants(table))
    if not commits and not archived:
        return _select(schema, columns).empty_table()
    # a range of archived commits only (a consumer catching up in windows) is read like any
    # other, or refused when cleaning took its versions: it silently gave no rows
    end_ts = end if end is not None else commits[-1].timestamp
    _check_not_cleaned(table, end_ts, "incremental end")
    view = table.fs_view(as_of=end_ts)
    slices = view.latest_file_slices()
    if timeline_start is None or start >= timeline_start or not has_archived_instants(table):
        # the commits' write stats name every file group they touched
        touched: set[tuple[str, str]] = set()
        for inst in commits:
            md = table.timeline.read_commit_metadata(inst)
            touched.update((s.partition_path, s.file_id) for s in md.write_stats())
        slices = [s for s in slices if (s.partition_path, s.file_id) in touched]
    # else commits after ``start`` may have been archived: every file group, filtered by
    # commit time (Java's full-table-scan fallback)
    ct = pc.field(COMMIT_TIME)
    row_filter = (ct > pa.scalar(start)) & (ct <= pa.scalar(end_ts))

    def in_range(ts: str) -> bool:
        return start < ts <= end_ts and view.is_visible(ts)

    return read_file_slices(
        table, slices, columns, row_filter, schema, is_visible=in_range, filter_before_merge=True
    )


def latest_base_files(table: HudiTable, as_of: str | None = None) -> list[str]:
    """Absolute paths of the committed base files a plain parquet reader (DuckDB, Spark) should
    read to see the table's snapshot (on a merge-on-read table: the read-optimized view, without
    what the log files add since the last compaction)."""
    return [
        str(table.absolute(s.base_file))
        for s in file_slices(table, as_of)
        if s.base_file is not None
    ]
