"""Copy-on-write file writer: write one file group for one instant (the RFC-24 bucket writer).

For a file group with a committed base file the new base file holds the old rows whose keys are
neither updated nor deleted — copied unchanged, including their ``_hoodie_commit_time`` and
``_hoodie_commit_seqno`` — followed by the new/updated records. A write that keeps every old row
(only new keys) copies the old file's row groups byte for byte instead of decoding and encoding
them (:mod:`hoodline.table.parquet.row_groups`, ``hoodline.parquet.copy.row.groups``). A write
that replaces or deletes old rows decides which go from the old keys and ordering values, then
reads the old file one row group at a time into the new one. A group without a base file gets
just the new records. The five ``_hoodie_`` meta columns come first; the
footer carries the record-key bloom filter and min/max key under Hudi's keys (unless a table
without the BLOOM index turns them off with ``hoodie.parquet.bloom.filter.enabled``, as in Hudi).

A marker is created before the data file, and the file is written under its final name (readers
ignore files of instants that never completed; rollback deletes the marked files). A file group
whose rows are all deleted gets an empty base file, so the group's latest version is empty.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodline import faults
from hoodline.errors import TableError
from hoodline.faults import FaultPoint
from hoodline.spans import span_bytes
from hoodline.storage.ops import output_sink, parquet_file, read_parquet
from hoodline.storage.paths import TablePath
from hoodline.table.bloom import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    BloomFilterError,
    KeyFilter,
    build_filter,
    deserialize,
)
from hoodline.table.commit_metadata import WriteStat
from hoodline.table.fs_view import (
    FileSlice,
    FileSystemView,
    base_file_name,
)
from hoodline.table.markers import Markers
from hoodline.table.parallel import map_in_threads, resolve_threads
from hoodline.table.parquet import by_row_group
from hoodline.table.parquet.row_groups import (
    CopyPlan,
    copy_plan,
    file_name_file,
    spliced_file,
    write_pieces,
)
from hoodline.table.properties import IndexType
from hoodline.table.write.context import (
    DICTIONARY_META,
    META_DICTIONARY,
    WriteContext,
    dictionary_column,
    ensure_partition_metadata,
    merge_schema,
    new_rows,
    output_schema,
    split_deletes,
    without,
    write_token,
)
from hoodline.table.write.log_writer import append_log_file, appends_to_log
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import Compression, PayloadClass, WriteOptions
from hoodline.table.write.records import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_ID,
    FILE_NAME,
    IS_DELETE,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    FileGroupCodes,
    align_to_schema,
    code_waves,
)


def _old_rows(table: pa.Table, ctx: WriteContext, source: str) -> pa.Table:
    """Rows carried over from the old base file: meta columns kept, except
    ``_hoodie_file_name``, which names the new file (as Java's merge handle rewrites it): it is
    left out, for the writer to give (see :class:`BaseFileWriter`)."""
    if any(c not in table.schema.names for c in META_COLUMNS if c != FILE_NAME):
        raise TableError(f"base file '{source}' lacks Hudi meta columns; it cannot be merged")
    data = align_to_schema(table, ctx.data_schema, f"base file '{source}'")
    # the repeating meta columns as the old file was opened to give them: dictionaries
    cols = [
        pc.cast(table.column(c), META_DICTIONARY if c in DICTIONARY_META else pa.string())
        for c in META_COLUMNS
        if c != FILE_NAME
    ]
    schema = merge_schema(without(output_schema(ctx.data_schema), (FILE_NAME,)))
    return pa.Table.from_arrays([*cols, *data.columns], schema=schema)


def _keep_newer_stored(
    ctx: WriteContext,
    old: pa.Table,
    upserts: pa.Table,
    replaced: pa.ChunkedArray,
    positions: pa.ChunkedArray,
) -> tuple[pa.ChunkedArray, pa.Table]:
    """DefaultHoodieRecordPayload: a stored row whose ordering value is greater than the
    incoming one's stays; that incoming record is dropped. ``positions``: each stored row's
    position among ``upserts`` (null: not among them). Returns (replaced mask, upserts)."""
    ordering = ctx.config.precombine_field
    if ordering is None or ordering not in old.schema.names:
        return replaced, upserts
    want = ctx.data_schema.field(ordering).type
    old_ord = pc.cast(old.column(ordering), want)
    new_ord = pc.cast(upserts.column(ordering), want)
    incoming = pc.take(new_ord, positions)
    stored_wins = pc.fill_null(pc.greater(old_ord, incoming), False)
    if not pc.any(stored_wins).as_py():
        return replaced, upserts
    kept_keys = pc.filter(old.column(RECORD_KEY), stored_wins)
    upserts = upserts.filter(pc.invert(pc.is_in(upserts.column(RECORD_KEY), value_set=kept_keys)))
    return pc.and_(replaced, pc.invert(stored_wins)), upserts


def _deletes_newer_than_stored(
    ctx: WriteContext, old: pa.Table, records: pa.Table, delete_keys: pa.Array
) -> pa.Array:
    """DefaultHoodieRecordPayload: a delete that carries an ordering value smaller than the
    stored row's does not delete it (Java compares a delete record's ordering like an
    update's); deletes without an ordering value (tombstones) always delete."""
    ordering = ctx.config.precombine_field
    if ordering is None or ordering not in old.schema.names or ordering not in records.schema.names:
        return delete_keys
    dels = records.filter(pc.fill_null(records.column(IS_DELETE), False))
    want = ctx.data_schema.field(ordering).type
    pos = pc.index_in(dels.column(RECORD_KEY), value_set=old.column(RECORD_KEY))
    stored = pc.take(pc.cast(old.column(ordering), want), pos)
    stale = pc.fill_null(pc.greater(stored, pc.cast(dels.column(ordering), want)), False)
    if not pc.any(stale).as_py():
        return delete_keys
    return dels.column(RECORD_KEY).filter(pc.invert(stale)).combine_chunks()


def _writes_bloom_filter(ctx: WriteContext) -> bool:
    """Java Hudi writes the footer bloom filter with meta fields populated (always, in
    hoodline) when ``hoodie.parquet.bloom.filter.enabled`` (default) or the index type is
    BLOOM (``HoodieFileWriterFactory.enableBloomFilter``)."""
    return ctx.options.bloom_filter_enabled or ctx.config.index_type is IndexType.BLOOM


def previous_filter(old: pq.ParquetFile) -> KeyFilter | None:
    """The footer bloom filter of the file version being replaced (None if it has none or it
    cannot be read: the new filter is then built from every key)."""
    meta = old.metadata.metadata or {}
    raw = meta.get(BLOOM_FILTER_KEY.encode())
    if raw is None:
        return None
    code = meta.get(BLOOM_FILTER_TYPE_KEY.encode())
    try:
        return deserialize(raw, code.decode() if code is not None else None)
    except BloomFilterError:
        return None


def footer_for(
    keys: pa.ChunkedArray | pa.Array,
    ctx: WriteContext,
    previous: KeyFilter | None = None,
    added: pa.Array | None = None,
) -> dict[str, str]:
    """Bloom filter and min/max record key, where Java Hudi writes them (the min/max keys only
    come with the filter, ``HoodieBloomFilterWriteSupport.finalizeMetadata``). ``previous`` and
    ``added``: see :func:`~hoodline.table.bloom.build_filter`."""
    options = ctx.options
    if not _writes_bloom_filter(ctx):
        return {}
    # the BLOOM index looks keys up in these filters: one SIMPLE filter answers faster
    rows = 0 if ctx.config.index_type is IndexType.BLOOM else options.bloom_row_entries
    flt = build_filter(
        keys, options.bloom_fpp, options.bloom_min_entries, previous, added,
        options.bloom_max_hashes, rows,
    )
    footer = {BLOOM_FILTER_KEY: flt.serialize(), BLOOM_FILTER_TYPE_KEY: flt.type_code}
    if len(keys):  # an empty file (every record deleted) has the filter, no key range
        footer[MIN_RECORD_KEY], footer[MAX_RECORD_KEY] = java_key_range(keys)
    return footer


def java_key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str, str]:
    """The least and greatest of ``keys`` (no nulls, at least one) as Java orders strings
    (``String.compareTo``: UTF-16 code units), the order in which Java's BLOOM index checks a
    key against a file's range. Arrow orders by UTF-8 bytes, the same order unless the keys hold
    both a character of U+E000..U+FFFF (lead byte 0xEE or 0xEF) and one above U+FFFF (lead
    byte 0xF0..0xF4): UTF-16 puts the latter first (surrogates). Only then are the keys
    compared one by one."""
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    texts = [span_bytes(c) for c in chunks if len(c) and _is_text(c.type)]
    if any((b >= 0xF0).any() for b in texts) and any(
            ((b == 0xEE) | (b == 0xEF)).any() for b in texts):
        values = [str(k) for k in keys.to_pylist()]
        return min(values, key=_utf16), max(values, key=_utf16)
    mm = pc.min_max(keys)
    return str(mm["min"].as_py()), str(mm["max"].as_py())


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


#: rows looked at per column to choose its encoding: runs of rows spread evenly over the file
_DICTIONARY_SAMPLE = 2048
_DICTIONARY_SAMPLE_RUNS = 16
#: a column whose sample is at most this share distinct values is dictionary encoded
_DICTIONARY_MAX_DISTINCT = 0.75
#: meta columns whose values repeat within every file / never do
_REPEATED_META = frozenset((COMMIT_TIME, PARTITION_PATH, FILE_NAME))
_UNIQUE_META = frozenset((COMMIT_SEQNO, RECORD_KEY))


def _leaf_paths(name: str, t: pa.DataType) -> list[str]:
    """Parquet column paths of an Arrow field (as pyarrow names nested leaves)."""
    if pa.types.is_struct(t):
        return [p for f in t for p in _leaf_paths(f"{name}.{f.name}", f.type)]
    if pa.types.is_map(t):
        return _leaf_paths(f"{name}.key_value.key", t.key_type) + _leaf_paths(
            f"{name}.key_value.value", t.item_type
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_paths(f"{name}.list.element", t.value_type)
    return [name]


def dictionary_columns(table: pa.Table) -> list[str]:
    """Columns worth dictionary encoding: those whose values repeat.

    Parquet writers try a dictionary on every column and fall back to plain encoding once it
    grows too big; for unique columns (``_hoodie_record_key``, ``_hoodie_commit_seqno``, ids,
    measurements) that attempt costs more than the rest of the encoding. Here each column's
    values at evenly spread rows are counted instead: a column with few distinct values
    (``_hoodie_commit_time``, ``_hoodie_file_name``, partition values, categories) keeps its
    dictionary, the others are written plain. The meta columns need no counting: commit time,
    partition path and file name repeat in every file, record key and sequence number never do.
    Nested columns keep dictionaries on every leaf."""
    n = table.num_rows
    # slices (zero-copy; a take would first concatenate the chunks of a merged file)
    run = _DICTIONARY_SAMPLE // _DICTIONARY_SAMPLE_RUNS
    starts = np.linspace(0, max(0, n - run), _DICTIONARY_SAMPLE_RUNS).astype(np.int64)
    out: list[str] = []
    for field, col in zip(table.schema, table.columns, strict=True):
        t = field.type
        if field.name in _UNIQUE_META:
            continue
        if field.name in _REPEATED_META or pa.types.is_dictionary(t):
            out.append(field.name)
        elif pa.types.is_nested(t):
            out.extend(_leaf_paths(field.name, t))
        elif not pa.types.is_boolean(t) and n:
            if n > _DICTIONARY_SAMPLE:
                parts = [c for s in starts for c in col.slice(int(s), run).chunks]
                sample = pa.chunked_array(parts, type=t)
            else:
                sample = col
            distinct = pc.count_distinct(sample, mode="all").as_py()
            if distinct <= _DICTIONARY_MAX_DISTINCT * len(sample):
                out.append(field.name)
    return out


#: the FILE_PARTIAL fault stops one file at a time (writer threads write several at once)
_FILE_PARTIAL_ONCE = threading.Lock()


def _compression(options: WriteOptions) -> str | None:
    return None if options.compression is Compression.NONE else options.compression.value


def with_constants(rows: pa.Table, schema: pa.Schema, constants: Mapping[str, str]) -> pa.Table:
    """``rows`` (the columns of ``schema`` but ``constants``) with each constant in place as a
    dictionary array of its one value: no string per row is built, and the Parquet writer
    encodes the column from that dictionary instead of hashing every row's string."""
    if rows.schema.names != [f.name for f in schema if f.name not in constants]:
        raise TableError(
            f"rows of columns {rows.schema.names} do not fit a base file of {schema.names} "
            f"whose writer gives {sorted(constants)}"
        )
    cols = [
        dictionary_column(constants[f.name], rows.num_rows) if f.name in constants
        else rows.column(f.name)
        for f in schema
    ]
    # each column of the type it has (a string column may come as a dictionary array)
    fields = [pa.field(f.name, c.type, f.nullable, f.metadata)
              for f, c in zip(schema, cols, strict=True)]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def _like(rows: pa.Table, types: pa.Schema) -> pa.Table:
    """``rows`` with the column types of ``types`` (a string column as a dictionary array, or
    the other way round), so that the pieces of one file concatenate."""
    if rows.schema == types:
        return rows
    cols = [c if c.type == f.type else c.cast(f.type)
            for c, f in zip(rows.columns, types, strict=True)]
    return pa.Table.from_arrays(cols, schema=types)


def _one_dictionary(table: pa.Table) -> pa.Table:
    """``table`` with one dictionary per dictionary column (chunks of several old row groups
    have each their own): pyarrow's Parquet writer encodes a column from its dictionary only
    while that stays the same, else it hashes every value again."""
    split = any(
        pa.types.is_dictionary(f.type) and table.column(i).num_chunks > 1
        for i, f in enumerate(table.schema)
    )
    return table.unify_dictionaries() if split else table


def parquet_writer(
    sink: pa.NativeFile | str, schema: pa.Schema, first: pa.Table, options: WriteOptions
) -> pq.ParquetWriter:
    """The Parquet writer of a base file of ``schema``, for tables like ``first`` (``schema``,
    some of its string columns as dictionary arrays: :func:`with_constants`, a merge's
    :data:`~.context.DICTIONARY_META`). The file stores ``schema`` as its Arrow schema, as
    pyarrow stores a writer's own: readers see plain string columns, and a file of one-value
    dictionaries holds the same bytes as one written from strings."""
    writer = pq.ParquetWriter(
        sink, first.schema, compression=_compression(options),
        use_dictionary=dictionary_columns(first), store_schema=False,
    )
    writer.add_key_value_metadata({ARROW_SCHEMA_KEY: arrow_schema_metadata(schema)})
    return writer


#: the footer key under which Arrow's Parquet writer stores a file's Arrow schema
ARROW_SCHEMA_KEY = "ARROW:schema"


def arrow_schema_metadata(schema: pa.Schema) -> str:
    """``schema`` as Arrow's Parquet writer stores it: its IPC message, base64."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


class BaseFileWriter:
    """A base file of ``schema`` written piece by piece: rows are buffered into row groups of
    ``hoodline.parquet.row.group.rows`` and encoded as each fills, so a merge holds one row group
    of output at a time; the footer metadata (bloom filter, key range: known once every row went
    through) comes with :meth:`finish`. On an object store the file is uploaded whole by
    :meth:`finish`, never partly. The columns' encodings are chosen from the first row group
    (:func:`dictionary_columns`). Use as a context manager: leaving it without :meth:`finish`
    (an error) closes the file without uploading it.

    ``constants``: string columns with one value in every row of the file (its
    ``_hoodie_file_name``; the commit time and partition path of a file of new records only),
    given here instead of in the rows (:func:`with_constants`)."""

    def __init__(
        self,
        path: TablePath,
        options: WriteOptions,
        schema: pa.Schema,
        constants: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self.options = options
        self.schema = schema
        self.constants = dict(constants or {})
        self.rows = 0
        #: the column types of the first piece, which later ones take
        self._types: pa.Schema | None = None
        self._sink, self._upload = output_sink(path)
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def __enter__(self) -> BaseFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def write(self, rows: pa.Table) -> None:
        """Append ``rows``: the schema's columns but the constants, a string column possibly
        as a dictionary array (a piece takes the types of the first)."""
        if self._types is None:
            self._types = rows.schema
        else:
            rows = _like(rows, self._types)
        self._pending.append(rows)
        self._pending_rows += rows.num_rows
        self.rows += rows.num_rows
        size = self.options.row_group_rows
        if self._pending_rows >= size:
            table = pa.concat_tables(self._pending)
            full = table.num_rows - table.num_rows % size
            self._encode(table.slice(0, full))
            self._pending = [table.slice(full)]
            self._pending_rows = table.num_rows - full

    def finish(self, footer: dict[str, str]) -> None:
        """Encode what is left, add ``footer`` and close the file."""
        table = (
            pa.concat_tables(self._pending) if self._pending
            else without(self.schema, self.constants).empty_table()
        )
        self._pending, self._pending_rows = [], 0
        if table.num_rows or self._writer is None:
            self._encode(table)
        assert self._writer is not None
        if footer:
            self._writer.add_key_value_metadata(footer)
        self._writer.close()
        self._writer = None
        if self._upload is not None:
            self._upload.close()

    def _encode(self, rows: pa.Table) -> None:
        table = _one_dictionary(with_constants(rows, self.schema, self.constants))
        if self._writer is None:
            self._writer = parquet_writer(self._sink, self.schema, table, self.options)
        size = self.options.row_group_rows
        if (
            faults.armed(FaultPoint.FILE_PARTIAL)
            and table.num_rows > 1
            and _FILE_PARTIAL_ONCE.acquire(blocking=False)
        ):
            try:
                half = table.num_rows // 2
                self._writer.write_table(table.slice(0, half), row_group_size=half)
                faults.reach(FaultPoint.FILE_PARTIAL)
                self._writer.write_table(table.slice(half), row_group_size=size)
            finally:
                _FILE_PARTIAL_ONCE.release()
        else:
            self._writer.write_table(table, row_group_size=size)


def write_parquet_copying(
    path: TablePath,
    plan: CopyPlan,
    schema: pa.Schema,
    file_name: str,
    rows: pa.Table,
    footer: dict[str, str],
    options: WriteOptions,
) -> None:
    """Write a base file of ``schema``: the row groups ``plan`` copies from the old version
    (their ``_hoodie_file_name`` set to ``file_name``) followed by ``rows`` (every column but
    the file name), with ``footer`` (see :mod:`hoodline.table.parquet.row_groups`)."""
    table = _one_dictionary(with_constants(rows, schema, {FILE_NAME: file_name}))
    sink = pa.BufferOutputStream()
    writer = parquet_writer(sink, schema, table, options)
    try:
        if table.num_rows:
            writer.write_table(table, row_group_size=options.row_group_rows)
        if footer:
            writer.add_key_value_metadata(footer)
    finally:
        writer.close()
    names = file_name_file(plan, schema, file_name, _compression(options))
    # the encoded rows as they are in the sink's buffer (a view, not a copy)
    pieces = spliced_file(plan, names, memoryview(sink.getvalue()).cast("B"))
    if faults.armed(FaultPoint.FILE_PARTIAL) and _FILE_PARTIAL_ONCE.acquire(blocking=False):
        try:
            write_pieces(path, pieces[: len(pieces) // 2])
            faults.reach(FaultPoint.FILE_PARTIAL)
        finally:
            _FILE_PARTIAL_ONCE.release()
    write_pieces(path, pieces)


def copy_plan_for(ctx: WriteContext, path: TablePath, schema: pa.Schema) -> CopyPlan | None:
    """The row groups of the old base file ``path`` that a write of a file of ``schema`` which
    keeps all its rows could copy, from its footer: those of at least half
    ``hoodline.parquet.row.group.rows`` (None: encode every row; the option
    ``hoodline.parquet.copy.row.groups`` off, or nothing qualifies)."""
    if not ctx.options.copy_row_groups:
        return None
    return copy_plan(path, schema, FILE_NAME, ctx.options.row_group_rows // 2)


def write_file_group(
    ctx: WriteContext,
    partition: str,
    file_id: str,
    records: pa.Table,
    base: FileSlice | None,
    task_id: int = 0,
    attempt: int = 0,
    read_threads: bool = False,
) -> WriteStat | None:
    """Write the new version of one file group; None when there is nothing to write (only
    deletes for a group that does not exist).

    ``records`` are the group's: ``_hoodie_record_key``, the data columns and, for deletes,
    ``_hoodline_is_delete`` (a partition path or file id column is not read). They hold at most
    one record per key, as :func:`~.client.prepare_for_schema` (or the pipeline's per-round
    reduction) leaves them; only a bulk_insert that does not combine
    (``hoodie.combine.before.insert``) brings duplicates, and they are written as given.

    ``read_threads``: decode the old base file's columns on pyarrow's thread pool; off, as
    callers usually write several groups at once (more busy threads than cores cost CPU)."""
    if appends_to_log(ctx, base) and not _takes_inserts_into_base(ctx, base, records):
        return append_log_file(ctx, partition, file_id, records, base, task_id, attempt)
    upserts, deletes = split_deletes(records)
    delete_keys = deletes.column(RECORD_KEY).combine_chunks()
    if upserts.num_rows and IS_DELETE in upserts.schema.names:
        upserts = upserts.drop_columns([IS_DELETE])
    if FILE_ID in upserts.schema.names:
        upserts = upserts.drop_columns([FILE_ID])
    if base is None and upserts.num_rows == 0:
        return None
    table = ctx.table()
    file_name = base_file_name(file_id, write_token(task_id, attempt), ctx.instant_ts)
    rel = f"{partition}/{file_name}" if partition else file_name
    path = table.base_path / rel
    new_keys = (
        upserts.column(RECORD_KEY).combine_chunks()
        if upserts.num_rows
        else pa.array([], pa.string())
    )
    added_keys = new_keys
    parts: list[pa.Table] = []
    num_updates = num_deletes = 0
    previous: KeyFilter | None = None
    plan: CopyPlan | None = None
    #: the old rows that stay (None: all of them)
    keep: pa.ChunkedArray | None = None
    #: whole columns of the old file read to decide that (not read again row group by row group)
    head: pa.Table | None = None
    if base is not None:
        if base.base_file is None:
            raise TableError(
                f"file group '{file_id}' in partition '{partition}' has only log files; a "
                "copy-on-write write cannot merge it (is the table merge-on-read?)"
            )
        base_path = table.base_path / base.base_file
        old_file = parquet_file(base_path, DICTIONARY_META)
        if _writes_bloom_filter(ctx):
            previous = previous_filter(old_file)
        if RECORD_KEY not in old_file.schema_arrow.names:
            raise TableError(
                f"base file '{base_path}' lacks Hudi meta columns; it cannot be merged"
            )
        # every column but the old file name, which carried-over rows do not keep
        wanted = [n for n in old_file.schema_arrow.names if n not in (FILE_NAME, RECORD_KEY)]
        # the keys first: whether the write keeps every old row decides how the rest is read
        # (reading the other columns after them costs no more than reading all at once)
        old_keys = old_file.read(columns=[RECORD_KEY], use_threads=read_threads).column(0)
        # each stored row's position among the incoming keys: the rows they replace, and the
        # keys the old version did not hold (the only ones its bloom filter lacks)
        positions = pc.index_in(old_keys, value_set=new_keys)
        replaced = pc.is_valid(positions)
        stored = np.zeros(len(new_keys), dtype=np.bool_)
        stored[pc.drop_null(positions).to_numpy()] = True
        added_keys = new_keys.filter(pa.array(~stored)) if stored.any() else new_keys
        if ctx.options.copy_row_groups and not stored.any() and not (
            len(delete_keys) and pc.any(pc.is_in(old_keys, value_set=delete_keys)).as_py()
        ):
            # the write keeps every old row: the row groups that can be copied, from the
            # footer (a write that replaces or deletes old rows encodes every row)
            plan = copy_plan_for(ctx, base_path, output_schema(ctx.data_schema))
        if plan is None:
            # which old rows go, from their keys and ordering values alone: the rows
            # themselves are then read one row group at a time (see below)
            head = pa.table({RECORD_KEY: old_keys})
            ordering = ctx.config.precombine_field
            if ordering is not None and ordering in wanted:
                head = head.append_column(ordering, old_file.read(
                    columns=[ordering], use_threads=read_threads).column(0))
            if ctx.options.payload_class is PayloadClass.DEFAULT and upserts.num_rows:
                replaced, upserts = _keep_newer_stored(ctx, head, upserts, replaced, positions)
            num_updates = int(pc.sum(replaced).as_py() or 0)
            gone = replaced
            if len(delete_keys) and ctx.options.payload_class is PayloadClass.DEFAULT:
                delete_keys = _deletes_newer_than_stored(ctx, head, records, delete_keys)
            if len(delete_keys):
                deleted = pc.is_in(old_keys, value_set=delete_keys)
                num_deletes = int(pc.sum(pc.and_(deleted, pc.invert(replaced))).as_py() or 0)
                gone = pc.or_(replaced, deleted)
            keep = None if num_updates + num_deletes == 0 else pc.invert(gone)
    if plan is not None:
        # an append: the old row groups are copied as they are (only the small ones are read)
        rest = plan.left_over()
        if rest:
            small = old_file.read_row_groups(rest, columns=[*wanted, RECORD_KEY],
                                             use_threads=read_threads)
            parts.append(_old_rows(small.replace_schema_metadata(None), ctx, str(base_path)))
    # the file name is one value in the whole file, and so are the commit time and partition
    # path of a file of new records only: the writer gives them (no column of them is built)
    constants = {FILE_NAME: file_name}
    if base is None:
        constants.update({COMMIT_TIME: ctx.instant_ts, PARTITION_PATH: partition})
    if upserts.num_rows:
        # beside old rows, the new rows' repeating meta columns are dictionaries as theirs
        parts.append(new_rows(upserts, ctx, partition, file_name, task_id, given=constants,
                              dictionaries=base is not None))
    ensure_partition_metadata(table.base_path, partition, ctx.instant_ts)
    Markers(table, ctx.instant_ts).create(partition, file_name, "MERGE" if base else "CREATE")
    out_schema = output_schema(ctx.data_schema)
    if plan is not None:
        out = pa.concat_tables(parts) if len(parts) > 1 else parts[0] if parts else (
            without(out_schema, constants).empty_table())
        # the copied rows' keys were read apart; every key is theirs or one of ``added_keys``
        keys = pa.chunked_array([*old_keys.chunks, *upserts.column(RECORD_KEY).chunks],
                                type=pa.string())
        footer = footer_for(keys, ctx, previous, added_keys)
        write_parquet_copying(path, plan, out_schema, file_name, out, footer, ctx.options)
        num_writes = plan.rows() + out.num_rows
    else:
        with BaseFileWriter(path, ctx.options, out_schema, constants) as writer:
            kept_keys: list[pa.ChunkedArray] = []
            if base is not None:
                # the old rows that stay, one row group at a time: a merge holds one of them
                # besides the incoming records, not the whole old file read and filtered
                at = 0
                assert head is not None
                pieces = by_row_group.row_groups(
                    old_file, wanted, dict(zip(head.column_names, head.columns, strict=True)),
                    read_threads)
                for rows in pieces:
                    n = rows.num_rows
                    rows = rows.replace_schema_metadata(None)
                    if keep is not None:
                        rows = rows.filter(keep.slice(at, n))
                    at += n
                    writer.write(_old_rows(rows, ctx, str(base_path)))
                    kept_keys.append(rows.column(RECORD_KEY))
            for part in parts:
                writer.write(part)
                kept_keys.append(part.column(RECORD_KEY))
            # every key written is the old version's or one of ``added_keys``
            keys = pa.chunked_array([c for k in kept_keys for c in k.chunks], type=pa.string())
            writer.finish(footer_for(keys, ctx, previous, added_keys))
            num_writes = writer.rows
    size = path.stat().st_size
    return WriteStat(
        file_id=file_id,
        path=rel,
        prev_commit=base.base_instant if base is not None else None,
        num_writes=num_writes,
        num_deletes=num_deletes,
        num_update_writes=num_updates,
        num_inserts=upserts.num_rows - num_updates,
        total_write_bytes=size,
        total_write_errors=0,
        partition_path=partition,
        file_size_in_bytes=size,
    )


def _takes_inserts_into_base(ctx: WriteContext, base: FileSlice | None, records: pa.Table) -> bool:
    """Merge-on-read with the BLOOM index: whether this write brings new keys to a small base
    file without log files (the partition's small-file target the assigner gave inserts to,
    :func:`~.profile.merge_targets`). Such a group is rewritten into a new base file, as Java's
    ``handleUpdate`` does for small file ids, since the index finds keys in base files only."""
    config, options = ctx.config, ctx.options
    if not config.merge_on_read or config.index_type is not IndexType.BLOOM:
        return False
    if ctx.operation is WriteOperation.BULK_INSERT or options.small_file_limit <= 0:
        return False
    if base is None or base.base_file is None or base.log_files or base.pending_compaction:
        return False
    if base.file_size >= options.small_file_limit:
        return False
    upserts, _deletes = split_deletes(records)
    if upserts.num_rows == 0:
        return False
    stored = read_parquet(ctx.table().base_path / base.base_file, [RECORD_KEY]).column(RECORD_KEY)
    return not pc.all(pc.is_in(upserts.column(RECORD_KEY), value_set=stored)).as_py()


def write_file_groups(
    ctx: WriteContext,
    tagged: pa.Table,
    task_id: int = 0,
    attempt: int = 0,
    view: FileSystemView | None = None,
    threads: int | None = None,
) -> list[WriteStat]:
    """Write every file group named in ``tagged._hoodline_file_id`` (one task's share).

    File groups are written by ``threads`` threads at once (0: every core; None:
    ``hoodline.write.threads`` of the options); pass 1 when the caller already runs several
    writers side by side. pyarrow and numpy release the GIL for the heavy parts (gathering the
    rows, reading the old base file, encoding, hashing keys into the bloom filter). Stats come
    back in file-group order whatever the threads; if one group fails, groups not yet started
    are cancelled and the call returns only after the running ones finished (then raises)."""
    if tagged.num_rows == 0:
        return []
    if tagged.column(FILE_ID).null_count:
        raise TableError(
            "records reached the file writer without a file group; run the index and the "
            "bucket assigner first"
        )
    if view is None:
        view = ctx.table().fs_view()
    found = FileGroupCodes.of_records(tagged)
    threads = resolve_threads(ctx.options.write_threads if threads is None else threads)
    # each group's rows, gathered from the columns write_file_group reads (not the file id;
    # the partition path is the group's own)
    payload = tagged.drop_columns([FILE_ID, PARTITION_PATH])
    results: list[WriteStat | None] = []
    # the groups a wave at a time: the rows of a wave's groups are copied together
    for wave in code_waves(payload, found.codes, threads):
        jobs: list[tuple[str, str, pa.Table, FileSlice | None]] = []
        for code, records in wave:
            partition, file_id = found.of(code)
            jobs.append((partition, file_id, records, view.write_slice(partition, file_id)))
        workers = min(max(1, threads), len(jobs))
        read_threads = workers < threads  # cores left over: pyarrow may decode in parallel

        def write(job: tuple[str, str, pa.Table, FileSlice | None],
                  read_threads: bool = read_threads) -> WriteStat | None:
            partition, file_id, records, base = job
            return write_file_group(
                ctx, partition, file_id, records, base, task_id, attempt, read_threads
            )

        results += map_in_threads(write, jobs, workers, cost=lambda job: job[2].num_rows)
    return [stat for stat in results if stat is not None]


def stats_by_partition(stats: Iterable[WriteStat]) -> dict[str, list[WriteStat]]:
    out: dict[str, list[WriteStat]] = {}
    for s in stats:
        out.setdefault(s.partition_path, []).append(s)
    return out
