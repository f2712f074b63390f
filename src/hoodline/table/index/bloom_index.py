"""BLOOM index: find the file group holding each key from base-file footers, then check exactly.

For every partition of the incoming records and every latest base file of that partition:

1. key range: keys outside ``[hoodie_min_record_key, hoodie_max_record_key]`` are skipped;
2. bloom filter (``org.apache.hudi.bloomfilter``): keys the filter rules out are skipped;
3. exact check: the remaining candidates are looked up in the file's ``_hoodie_record_key``
   column (one column read per candidate file).

Keys no base file holds are then looked up among the records of the slices' log files
(merge-on-read). Inserts go to base files, but a key can still live in a log only: deleted,
then compacted out of the base file by a compaction planned before it was written again,
which logged it against that compaction. Missed there, its next write went to another file
group as an insert, and the table held the key twice (a review, 3 of 3 runs with async
compaction).

A base file without these footer keys (e.g. written by another tool) is a candidate for every
key, so correctness never depends on the footers — only speed does. Footers of base files are
cached per path (base files are immutable). Works per file, vectorised over keys; never one
Python call per record.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError
from hoodline.storage.ops import read_parquet, read_parquet_metadata
from hoodline.storage.paths import ObjectPath, TablePath, parse_location
from hoodline.table.bloom import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    BloomFilterError,
    DynamicBloomFilter,
    KeyFilter,
    deserialize,
)
from hoodline.table.fs_view import FileSlice, FileSystemView
from hoodline.table.log.blocks import LogBlock, LogBlockType
from hoodline.table.log.content import read_data_blocks, same_records_schema
from hoodline.table.log.merge import committed_blocks
from hoodline.table.parallel import map_in_threads
from hoodline.table.write.records import (
    FILE_ID,
    PARTITION_PATH,
    RECORD_KEY,
    dictionary_codes,
    group_slices,
)

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FooterIndex:
    """What the footer of one base file says about its keys."""

    num_rows: int
    min_key: str | None
    max_key: str | None
    filter: KeyFilter | None


def read_footer_index(path: TablePath) -> FooterIndex:
    md = read_parquet_metadata(path)
    kv = md.metadata or {}

    def text(key: str) -> str | None:
        raw = kv.get(key.encode())
        return raw.decode("utf-8") if raw is not None else None

    flt: KeyFilter | None = None
    serialized = text(BLOOM_FILTER_KEY)
    if serialized:
        try:
            flt = deserialize(serialized, text(BLOOM_FILTER_TYPE_KEY))
        except BloomFilterError:
            flt = None  # unusable filter: every key in range stays a candidate
    lo, hi = text(MIN_RECORD_KEY), text(MAX_RECORD_KEY)
    if lo is not None and hi is not None and any(ord(c) >= 0xD800 for c in lo + hi):
        # Java orders strings by UTF-16 code units, Arrow by UTF-8 bytes; the two orders can only
        # disagree around characters >= U+D800, so such a range is not used for pruning.
        lo = hi = None
    return FooterIndex(md.num_rows, lo, hi, flt)


#: The footer cache of a process holds at most this many bytes of filters: a BLOOM table's
#: rewritten files get new names every round, and an entry-count cap alone let a worker of a
#: long-running pipeline grow by the filters of every file it had ever looked at (~13 MiB per
#: round in the large-table review; a filter of 1M keys takes ~50 MB unpacked).
FOOTER_CACHE_BYTES = 128 * 1024 * 1024


def _footprint(info: FooterIndex) -> int:
    """Bytes an entry holds: its filter's bits (one byte each, unpacked), plus a little."""
    flt = info.filter
    rows = [] if flt is None else flt.rows if isinstance(flt, DynamicBloomFilter) else [flt]
    return 256 + sum(r.bits.nbytes for r in rows)


class _PathCache(Generic[T]):
    """What ``load`` makes of a file, by path, least recently used first out, bounded by
    entries and by the bytes ``footprint`` says each holds."""

    def __init__(self, load: Callable[[TablePath], T], footprint: Callable[[T], int],
                 capacity: int = 4096, max_bytes: int = FOOTER_CACHE_BYTES) -> None:
        self._load = load
        self._footprint = footprint
        self._data: OrderedDict[str, tuple[T, int]] = OrderedDict()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def get(self, path: TablePath) -> T:
        if isinstance(path, ObjectPath):  # written once under a unique name, never replaced
            key = str(path)
        else:
            st = os.stat(path)
            key = f"{path}\x00{st.st_size}\x00{st.st_mtime_ns}"  # a replaced file is re-read
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
                return hit[0]
        value = self._load(path)
        size = self._footprint(value)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, size)
            self._bytes += size
            while len(self._data) > 1 and (len(self._data) > self._capacity
                                           or self._bytes > self._max_bytes):
                _, (_, dropped) = self._data.popitem(last=False)
                self._bytes -= dropped
        return value


#: footer indexes of base files (see :data:`FOOTER_CACHE_BYTES`)
FOOTERS: _PathCache[FooterIndex] = _PathCache(read_footer_index, _footprint)

#: the column read from log data blocks
_KEY_ONLY = pa.schema([pa.field(RECORD_KEY, pa.string())])


def _log_file_keys(path: TablePath) -> list[tuple[str, pa.Array]]:
    """(instant, record keys) of the data blocks of a log file, consecutive blocks of one instant
    and schema together; blocks a rollback command block dropped are left out, as readers do
    (:func:`~hoodline.table.log.merge.committed_blocks`: visibility is the view's to decide)."""
    found: list[tuple[str, pa.Array]] = []
    run: list[LogBlock] = []

    def flush() -> None:
        if run:
            keys = read_data_blocks(run, _KEY_ONLY).column(RECORD_KEY).combine_chunks()
            found.append((run[0].instant, keys))
            run.clear()

    for block in committed_blocks([path], lambda _instant: True):
        if block.type is LogBlockType.DELETE:
            flush()
            continue
        if run and not (same_records_schema(run[0], block) and run[0].instant == block.instant):
            flush()
        run.append(block)
    flush()
    return found


def _keys_footprint(blocks: list[tuple[str, pa.Array]]) -> int:
    return 256 + sum(int(keys.nbytes) for _, keys in blocks)


#: record keys of log files' data blocks (log files are written once, under unique names)
LOG_KEYS: _PathCache[list[tuple[str, pa.Array]]] = _PathCache(
    _log_file_keys, _keys_footprint, max_bytes=64 * 1024 * 1024)


@dataclass
class LookupStats:
    """Counters of one lookup, to see how well footers prune (logged at debug level)."""

    files_considered: int = 0
    files_read: int = 0
    keys_checked_exactly: int = 0
    #: log files whose keys were looked at (merge-on-read: keys no base file holds)
    log_files_read: int = 0


def candidate_mask(keys: pa.Array, info: FooterIndex) -> np.ndarray:
    """Keys of ``keys`` that may be in the file (range + bloom)."""
    n = len(keys)
    if info.num_rows == 0:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    if info.min_key is not None and info.max_key is not None:
        in_range = pc.and_(
            pc.greater_equal(keys, pa.scalar(info.min_key)),
            pc.less_equal(keys, pa.scalar(info.max_key)),
        )
        mask = np.asarray(in_range.to_numpy(zero_copy_only=False), dtype=bool)
    if info.filter is not None and mask.any():
        idx = np.flatnonzero(mask)
        maybe = info.filter.might_contain(keys.take(pa.array(idx)))
        mask[idx] = maybe
    return mask


def file_id_column(codes: np.ndarray, file_ids: list[str], dictionary: bool = False) -> pa.Array:
    """String column from per-row codes into ``file_ids`` (-1 = null); with ``dictionary``,
    the dictionary array itself (no string per row)."""
    indices = pa.array(codes.astype(np.int32), mask=codes < 0)
    values = pa.array(file_ids if file_ids else [""], type=pa.string())
    encoded = pa.DictionaryArray.from_arrays(indices, values)
    return encoded if dictionary else pc.cast(encoded, pa.string())


class BloomIndex:
    """Tags records with the file group already holding their key (null file id = new key).

    Partitions are looked up on ``threads`` threads at once (their base files are
    independent)."""

    def __init__(self, base_path: str | TablePath, threads: int = 1) -> None:
        self.base_path = parse_location(base_path)
        self.threads = threads

    def tag(self, records: pa.Table, view: FileSystemView, dictionary: bool = False) -> pa.Table:
        """``records`` + ``_hoodline_file_id`` (null where the key is not in the table; strings,
        or with ``dictionary`` a dictionary array)."""
        stats = LookupStats()
        n = records.num_rows
        found = np.full(n, -1, dtype=np.int64)
        file_ids: list[str] = []
        if n:
            codes, partitions = dictionary_codes(records.column(PARTITION_PATH))
            keys_all = records.column(RECORD_KEY).combine_chunks()
            order, groups = group_slices(codes)
            jobs = [(partitions[code], order[start:stop]) for code, start, stop in groups]

            def lookup(job: tuple[str, npt.NDArray[np.int64]]) -> _Found:
                partition, rows = job
                return self._tag_partition(partition, keys_all, rows, view)

            for part in map_in_threads(lookup, jobs, self.threads, cost=lambda j: len(j[1])):
                for file_id, rows in part.hits:
                    found[rows] = len(file_ids)
                    file_ids.append(file_id)
                stats.files_considered += part.stats.files_considered
                stats.files_read += part.stats.files_read
                stats.keys_checked_exactly += part.stats.keys_checked_exactly
                stats.log_files_read += part.stats.log_files_read
        log.debug("bloom index lookup of %d keys: %s", n, stats)
        col = file_id_column(found, file_ids, dictionary)
        if FILE_ID in records.schema.names:
            records = records.drop_columns([FILE_ID])
        return records.append_column(FILE_ID, col)

    def _tag_partition(
        self,
        partition: str,
        keys_all: pa.Array,
        rows: npt.NDArray[np.int64],
        view: FileSystemView,
    ) -> _Found:
        out = _Found([], LookupStats())
        stats = out.stats
        slices = view.latest_file_slices(partition)
        if not slices:
            return out
        keys = keys_all.take(pa.array(rows))
        unresolved = np.ones(len(rows), dtype=bool)
        for sl in slices:
            if not unresolved.any():
                break
            if sl.base_file is None:
                continue  # a log-only slice: its keys are found through base files only
            stats.files_considered += 1
            path = self.base_path / sl.base_file
            try:
                info = FOOTERS.get(path)
            except FileNotFoundError:
                raise TableError(
                    f"base file '{path}' of committed instant {sl.base_instant} is missing; "
                    "the BLOOM index cannot tell which keys it held"
                ) from None
            idx = np.flatnonzero(unresolved)
            cand = candidate_mask(keys.take(pa.array(idx)), info)
            if not cand.any():
                continue
            cand_idx = idx[cand]
            stats.files_read += 1
            stats.keys_checked_exactly += len(cand_idx)
            file_keys = read_parquet(path, [RECORD_KEY])
            hit = pc.is_in(
                keys.take(pa.array(cand_idx)),
                value_set=file_keys.column(RECORD_KEY).combine_chunks(),
            )
            hit_np = np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
            hit_idx = cand_idx[hit_np]
            if len(hit_idx):
                out.hits.append((sl.file_id, rows[hit_idx]))
            unresolved[hit_idx] = False
        for sl in slices:  # keys that live in a log file only (see module docs)
            if not unresolved.any():
                break
            logged = self._log_keys(sl, view)
            if logged is None:
                continue
            idx = np.flatnonzero(unresolved)
            stats.log_files_read += len(sl.log_files)
            hit_np = np.asarray(pc.is_in(keys.take(pa.array(idx)), value_set=logged)
                                .to_numpy(zero_copy_only=False), dtype=bool)
            hit_idx = idx[hit_np]
            if len(hit_idx):
                out.hits.append((sl.file_id, rows[hit_idx]))
            unresolved[hit_idx] = False
        return out

    def _log_keys(self, sl: FileSlice, view: FileSystemView) -> pa.Array | None:
        """The record keys of the slice's log files' data blocks of visible instants; None
        without log files."""
        if not sl.log_files:
            return None
        found: list[pa.Array] = []
        for rel in sl.log_files:
            path = self.base_path / rel
            try:
                blocks = LOG_KEYS.get(path)
            except FileNotFoundError:
                raise TableError(
                    f"log file '{path}' of file group {sl.file_id} is missing; the BLOOM index "
                    "cannot tell which keys it held"
                ) from None
            found.extend(keys for ts, keys in blocks if view.is_visible(ts))
        return pa.concat_arrays(found) if found else None


@dataclass
class _Found:
    """One partition's lookup: (file id, rows whose key it holds) per file, and counters."""

    hits: list[tuple[str, npt.NDArray[np.int64]]]
    stats: LookupStats
