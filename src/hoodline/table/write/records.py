"""Column names and small Arrow helpers shared by the write path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import InvalidRecordsError
from hoodline.table.parallel import map_in_threads

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
#: The five Hudi meta columns, in the order every base file starts with.
META_COLUMNS: tuple[str, ...] = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)

#: Internal columns of prepared/tagged batches (never written to base files).
FILE_ID = "_hoodline_file_id"
IS_DELETE = "_hoodline_is_delete"
INTERNAL_COLUMNS: tuple[str, ...] = (FILE_ID, IS_DELETE)

#: Records to write: a pyarrow Table or RecordBatch, a pandas DataFrame (its index is not
#: written), or any object exporting an Arrow stream (``__arrow_c_stream__``: polars, DuckDB
#: relations, ...).
Batch: TypeAlias = "pa.Table | pa.RecordBatch | Any"


def as_table(batch: Batch) -> pa.Table:
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if isinstance(batch, pa.Table):
        return batch
    if type(batch).__module__.split(".")[0] == "pandas" and hasattr(batch, "columns"):
        # the index is pandas' row labels, not a column of the records (pandas' own Arrow
        # export would add a non-default index as '__index_level_0__')
        try:
            return pa.Table.from_pandas(batch, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InvalidRecordsError(
                f"the pandas DataFrame does not convert to Arrow: {exc}; give its columns "
                "one type each (an object column mixing types cannot be written)"
            ) from exc
    if hasattr(batch, "__arrow_c_stream__"):
        return pa.table(batch)
    raise InvalidRecordsError(
        f"records must be a pyarrow Table or RecordBatch, a pandas DataFrame or an object "
        f"exporting an Arrow stream (__arrow_c_stream__), got {type(batch).__name__}"
    )


def group_slices(codes: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Stable order grouping equal ``codes`` together, and ``(code, start, stop)`` per group
    (groups in ascending code order)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64), []
    if 0 <= codes.min() and codes.max() <= np.iinfo(np.uint16).max:
        # numpy sorts 16-bit integers by radix (linear), far cheaper than a stable int64 sort;
        # the group bounds follow from the counts
        order = np.argsort(codes.astype(np.uint16), kind="stable")
        counts = np.bincount(codes)
        present = np.flatnonzero(counts)
        stops = np.cumsum(counts)[present]
        starts = stops - counts[present]
        runs = zip(present, starts, stops, strict=True)
        return order, [(int(c), int(s), int(e)) for c, s, e in runs]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
    starts = np.concatenate(([0], cuts))
    stops = np.concatenate((cuts, [len(codes)]))
    return order, [
        (int(sorted_codes[s]), int(s), int(e)) for s, e in zip(starts, stops, strict=True)
    ]


@dataclass(frozen=True)
class FileGroupCodes:
    """A code per row for its (partition path, file group): ``partition * width + file``."""

    codes: npt.NDArray[np.int64]
    partitions: list[str]
    file_ids: list[str]

    @property
    def width(self) -> int:
        return max(1, len(self.file_ids))

    def of(self, code: int) -> tuple[str, str]:
        """The (partition path, file id) of ``code``."""
        return self.partitions[code // self.width], self.file_ids[code % self.width]

    @staticmethod
    def of_records(records: pa.Table | pa.RecordBatch) -> FileGroupCodes:
        pcodes, partitions = dictionary_codes(records.column(PARTITION_PATH))
        fcodes, file_ids = dictionary_codes(records.column(FILE_ID))
        return FileGroupCodes(pcodes * max(1, len(file_ids)) + fcodes, partitions, file_ids)


#: rows of the input reordered at a time by :func:`code_waves` (their values stay in the CPU
#: cache while they are reordered)
GROUP_WINDOW_ROWS = 131_072
#: input bytes one wave of :func:`code_waves` copies (whole rounds of ``threads`` groups)
GROUP_WAVE_BYTES = 128 << 20


@dataclass(frozen=True)
class _Window:
    """A window of the input in code order: ``order`` None when its rows are already grouped
    (then ``runs`` are positions in the window itself), else the positions that sort it
    (``runs`` are positions in that order)."""

    batch: pa.RecordBatch
    order: npt.NDArray[np.int64] | None
    runs: list[tuple[int, int, int]]  # (code, start, stop)


def _window(batch: pa.RecordBatch, codes: npt.NDArray[np.int64]) -> _Window:
    cuts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    firsts = codes[np.concatenate(([0], cuts))]
    if len(firsts) <= max(64, len(codes) // 8) and len(np.unique(firsts)) == len(firsts):
        bounds = [0, *cuts.tolist(), len(codes)]
        return _Window(batch, None, list(zip(firsts.tolist(), bounds[:-1], bounds[1:],
                                             strict=True)))
    order, runs = group_slices(codes)
    return _Window(batch, order, runs)


def code_waves(
    table: pa.Table,
    codes: npt.NDArray[np.int64],
    threads: int = 1,
    wave_bytes: int = GROUP_WAVE_BYTES,
    window: int = GROUP_WINDOW_ROWS,
) -> Iterator[list[tuple[int, pa.Table]]]:
    """The rows of ``table`` grouped by ``codes`` (one non-negative code per row), a wave of
    groups at a time: ``(code, rows)`` for every code present, in ascending code order, each
    group's rows in input order. A wave holds groups of about ``wave_bytes`` of input (a
    multiple of ``threads`` groups, but the last wave); ``wave_bytes`` 0: every group in one
    wave.

    The input is reordered window by window (``window`` rows of a record batch at a time, on
    ``threads`` threads): one take copies a window's rows of the wave's groups in code order,
    and every group is the concatenation of its slices of those copies. A window whose rows are
    grouped already (a batch the pipeline's readers grouped) is sliced without a copy.

    Why: one take per group from the whole input reads a cache line per row of the group, i.e.
    the input's memory once per group; one take of everything jumps across the whole input.
    Windows are read while they are in the cache, once per wave. Waves bound the copy held at
    once, and the memory of one wave's copy is reused for the next: taking fresh memory from
    the system costs more CPU than the copy itself on some machines (huge pages faulted in)."""
    n = table.num_rows
    if len(codes) != n:
        raise ValueError(f"{len(codes)} codes for {n} rows")
    if n == 0:
        return
    windows: list[tuple[int, pa.RecordBatch]] = []
    at = 0
    for batch in table.to_batches():
        for lo in range(0, batch.num_rows, window):
            part = batch.slice(lo, window)
            windows.append((at, part))
            at += part.num_rows

    def window_plan(item: tuple[int, pa.RecordBatch]) -> _Window:
        start, batch = item
        return _window(batch, codes[start : start + batch.num_rows])

    plans = map_in_threads(window_plan, windows, threads)
    sizes: dict[int, int] = {}
    for plan in plans:
        for code, start, stop in plan.runs:
            sizes[code] = sizes.get(code, 0) + stop - start
    per_row = max(1, table.nbytes // n)
    waves: list[list[int]] = [[]]
    rows = 0
    for code in sorted(sizes):
        # whole rounds of ``threads`` groups, so that no thread waits for another's last group
        if wave_bytes > 0 and rows * per_row >= wave_bytes and len(waves[-1]) % threads == 0:
            waves.append([])
            rows = 0
        waves[-1].append(code)
        rows += sizes[code]

    def cost(plan: _Window) -> int:
        return int(plan.batch.num_rows)

    for wave in waves:
        lo, hi = wave[0], wave[-1]

        def gather(plan: _Window, lo: int = lo, hi: int = hi) -> list[tuple[int, pa.RecordBatch]]:
            runs = [r for r in plan.runs if lo <= r[0] <= hi]
            if plan.order is None or not runs:
                return [(code, plan.batch.slice(s, e - s)) for code, s, e in runs]
            first, last = runs[0][1], runs[-1][2]  # a sorted window's runs are in code order
            taken = plan.batch.take(pa.array(plan.order[first:last]))
            return [(code, taken.slice(s - first, e - s)) for code, s, e in runs]

        per_code: dict[int, list[pa.RecordBatch]] = {}
        for parts in map_in_threads(gather, plans, threads, cost):
            for code, part in parts:
                per_code.setdefault(code, []).append(part)
        yield [(code, pa.Table.from_batches(per_code[code], schema=table.schema))
               for code in wave]


def file_group_parts(records: pa.Table) -> list[tuple[str, str, pa.Table]]:
    """``(partition path, file id, rows)`` of every file group in ``records`` (in code order),
    each group's rows in input order (see :func:`code_waves`: when every record batch holds
    its rows grouped by file group, as the pipeline's readers send them, each group is
    zero-copy slices of the input)."""
    found = FileGroupCodes.of_records(records)
    return [(*found.of(code), rows)
            for wave in code_waves(records, found.codes, wave_bytes=0) for code, rows in wave]


def take_rows(table: pa.Table, rows: npt.NDArray[np.int64]) -> pa.Table:
    """``table.take(rows)`` for *ascending* ``rows``, taken record batch by record batch.

    pyarrow's take on chunked columns (a table read from a parquet file has a chunk per row
    group) locates the chunk of every row, two to three times slower than a take from one
    contiguous batch; concatenating the chunks first costs a copy of everything instead."""
    batches = table.to_batches()
    if len(batches) <= 1:
        return table.take(pa.array(rows))
    bounds = np.cumsum([0] + [b.num_rows for b in batches])
    cuts = np.searchsorted(rows, bounds)
    parts = [
        batch.take(pa.array(rows[lo:hi] - start))
        for batch, start, lo, hi in zip(batches, bounds[:-1], cuts[:-1], cuts[1:], strict=True)
        if hi > lo
    ]
    return pa.Table.from_batches(parts, schema=table.schema)


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_HASH_CHUNK = 32768


def string_hashes64(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.uint64]:
    """A 64-bit FNV-1a hash of every string's bytes (and length), vectorised one byte position
    at a time over chunks of values: equal strings, equal hashes. Nulls hash as empty."""
    data, starts, lengths = _binary_buffers(values)
    data = np.concatenate((data, np.zeros(1, np.uint8)))
    last = len(data) - 1
    n = len(lengths)
    out = np.empty(n, dtype=np.uint64)
    for start in range(0, n, _HASH_CHUNK):
        stop = min(n, start + _HASH_CHUNK)
        lens = lengths[start:stop]
        pos = starts[start:stop].copy()
        h = _FNV_OFFSET ^ lens.astype(np.uint64)
        for j in range(int(lens.max()) if stop > start else 0):
            byte = data[np.minimum(pos, last)].astype(np.uint64)
            byte[lens <= j] = 0
            h ^= byte
            h *= _FNV_PRIME
            pos += 1
        out[start:stop] = h
    return out


def all_distinct(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether no string occurs twice: distinct 64-bit hashes prove it cheaply (sorting them
    beats Arrow's hash table on strings 4x); a repeated hash is checked exactly."""
    hashes = np.sort(string_hashes64(values))
    if not (hashes[1:] == hashes[:-1]).any():
        return True
    return bool(pc.count_distinct(values, mode="all").as_py() == len(values))


def _binary_buffers(
    values: pa.Array | pa.ChunkedArray,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(bytes, start, length) of every string (one contiguous buffer)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    arr = pc.cast(arr, pa.large_binary())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf else np.zeros(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


#: the high ``i`` bytes of a 64-bit integer, by ``i``
_PREFIX_MASKS = np.array(
    [0, *(((1 << 64) - 1) ^ ((1 << (64 - 8 * i)) - 1) for i in range(1, 9))], dtype=np.uint64
)


def string_sort_order(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Row order sorting the strings ascending (byte-wise, ties in row order), as
    ``pc.sort_indices`` gives it.

    Strings of at most 8 bytes (numeric ids, short codes) are sorted as big-endian 64-bit
    integers of their zero-padded bytes, ~5x cheaper than Arrow's string sort (625k numeric ids:
    33 against 178 ms); equal integers (equal strings, or strings differing only in trailing NUL
    bytes) and longer strings are left to Arrow."""
    data, starts, lengths = _binary_buffers(values)
    n = len(lengths)
    if n < 2 or lengths.max() > 8:
        return np.asarray(pc.sort_indices(values).to_numpy(), dtype=np.int64)
    # the 8 bytes from each string's start, read as one big-endian integer, bytes past its
    # end masked off
    padded = np.concatenate((data, np.zeros(8, np.uint8)))
    windows = np.ndarray((len(padded) - 7,), dtype=">u8", buffer=padded, strides=(1,))
    prefix = windows[starts].astype(np.uint64)
    prefix &= _PREFIX_MASKS[lengths]
    # numpy's default sort of 64-bit integers is vectorised (~4x a stable sort); with no two
    # prefixes equal, which is checked next, every sort gives the same order
    order = np.argsort(prefix)
    in_order = prefix[order]
    if (in_order[1:] == in_order[:-1]).any():
        return np.asarray(pc.sort_indices(values).to_numpy(), dtype=np.int64)
    return order


def dictionary_codes(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer code per row and the values the codes stand for (for grouping string columns):
    equal strings, equal codes.

    A dictionary-encoded column of one chunk without nulls whose dictionary holds each value
    once (the bucket index's file ids) gives its indices as they are: no string is hashed.
    Its dictionary may hold values no row uses."""
    if isinstance(values, pa.ChunkedArray) and values.num_chunks == 1:
        values = values.chunk(0)
    if isinstance(values, pa.DictionaryArray) and not values.null_count:
        dictionary = [str(v) for v in values.dictionary.to_pylist()]
        if len(set(dictionary)) == len(dictionary):
            return values.indices.to_numpy(zero_copy_only=False).astype(np.int64), dictionary
    if pa.types.is_dictionary(values.type):
        values = pc.cast(values, values.type.value_type)
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    enc = pc.dictionary_encode(arr)
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return codes, [str(v) for v in enc.dictionary.to_pylist()]


def align_to_schema(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Columns of ``schema`` in its order: present ones cast (lossless only), missing ones null.

    Raises :class:`InvalidRecordsError` naming the column when a value cannot be converted, or a
    missing column is not nullable."""
    cols: list[pa.Array | pa.ChunkedArray] = []
    for fld in schema:
        if fld.name in table.schema.names:
            col = table.column(fld.name)
            if col.type != fld.type:
                try:
                    col = pc.cast(col, fld.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise InvalidRecordsError(
                        f"column '{fld.name}' of {what} has type {col.type} but the table "
                        f"stores {fld.type}, and the values cannot be converted losslessly "
                        f"({exc}); cast the column to {fld.type} first"
                    ) from None
            cols.append(col)
        else:
            if not fld.nullable:
                raise InvalidRecordsError(
                    f"column '{fld.name}' ({fld.type}, not nullable) is missing from {what}"
                )
            cols.append(pa.nulls(table.num_rows, fld.type))
    return pa.Table.from_arrays(cols, schema=schema)
