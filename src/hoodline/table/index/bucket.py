"""BUCKET index: a fixed number of buckets per partition, bucket = hash(key) % buckets.

Compatible with Java Hudi's simple bucket index (``BucketIdentifier``), so Hudi writers and
hoodline agree on where a key lives:

* hash keys: what Java (the 0.14 line: apache/hudi at d924f1816^, Aug 2023) parses back out of
  the **record key string**
  (``BucketIdentifier.getHashKeys``): a key without ``:`` is its own one hash key; otherwise it
  is split at ``,`` (Java ``String.split``: trailing empty parts dropped), each part at the first
  ``:``, and the values of parts naming a hash field (or parts without ``:``) are kept in order,
  ``__null__`` read as null and ``__empty__`` as "". So a complex key ``f1:v1,f2:v2`` hashes
  ``[v1, v2]``, but values holding ``:`` or ``,`` hash as Java splits them, not as written;
* hash: Java's ``List<String>.hashCode()`` of the hash keys: ``h = 1; h = 31 * h +
  s.hashCode()`` per value (0 for null), with ``String.hashCode`` over UTF-16 code units, all in
  32-bit two's complement; bucket = ``(h & 0x7fffffff) % buckets``.
* file id of bucket *b*: ``%08d`` of *b* followed by the rest of a UUID and ``-0``
  (``00000002-7c1f-4f4e-9d2b-1a0c5e3b9f10-0``); Hudi reads the bucket back from the first
  8 characters. An existing file group of the bucket is always reused; a new one gets a UUID
  derived from the partition path and bucket number (uuid5), so every task and every retry
  creates the *same* file id for the same bucket.

The hash is vectorised: ASCII strings (the common case) are hashed with numpy, one character
position at a time over chunks of keys;
strings with non-ASCII characters fall back to per-value hashing for those values only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError
from hoodline.spans import span_bytes
from hoodline.table.fs_view import FileGroup, FileSystemView
from hoodline.table.keygen.generator import KeyGenerator
from hoodline.table.parallel import map_in_threads
from hoodline.table.properties import TableConfig
from hoodline.table.write.records import FILE_ID, PARTITION_PATH, RECORD_KEY, dictionary_codes

_NAMESPACE = uuid.UUID("6f1d4c56-2b8e-4f4e-9a61-5d0c2b7e8a11")
#: keys hashed at a time (their working arrays stay in the CPU cache)
_CHUNK = 32768
_31 = np.uint32(31)


def _java_string_hash_scalar(s: str) -> int:
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def java_string_hashes(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.uint32]:
    """``String.hashCode()`` of every value, as uint32 bits."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    arr = pc.cast(arr, pa.large_string())
    n = len(arr)
    out = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return out
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data = (
        np.frombuffer(arr.buffers()[2], dtype=np.uint8)
        if arr.buffers()[2]
        else np.zeros(1, np.uint8)
    )
    last = max(0, len(data) - 1)
    lengths = np.diff(offsets)
    # the common case, no byte >= 0x80 in the values' bytes, needs no test per value
    ascii_mask = (
        None if int(data[offsets[0]:offsets[-1]].max(initial=0)) < 0x80
        else np.asarray(pc.string_is_ascii(arr).to_numpy(zero_copy_only=False), dtype=bool)
    )
    # Horner over the characters, one character position at a time for a chunk of keys:
    # h = 31 * h + c (keys shorter than the position keep their hash)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        lens = lengths[start:stop]
        shortest, longest = int(lens.min()), int(lens.max())
        h = out[start:stop]
        pos = offsets[start:stop].copy()
        step = np.empty_like(h)
        for j in range(longest):
            np.multiply(h, _31, out=step)
            np.add(step, data[pos if j < shortest else np.minimum(pos, last)], out=step)
            if j < shortest:
                h, step = step, h
            else:
                np.copyto(h, step, where=lens > j)
            pos += 1
        out[start:stop] = h
    if ascii_mask is not None:
        for i in np.nonzero(~ascii_mask)[0]:
            out[i] = _java_string_hash_scalar(arr[int(i)].as_py())
    return out


def bucket_ids(
    hash_values: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int
) -> npt.NDArray[np.int64]:
    """Bucket of every row: Java ``List.hashCode`` of the values, then ``& MAX_INT % buckets``."""
    if num_buckets < 1:
        raise ValueError(f"bucket count {num_buckets} must be >= 1")
    n = len(hash_values[0]) if hash_values else 0
    h = np.ones(n, dtype=np.uint32)
    for values in hash_values:
        h = h * np.uint32(31) + java_string_hashes(values)
    return (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_buckets


NULL_KEY_PLACEHOLDER = "__null__"
EMPTY_KEY_PLACEHOLDER = "__empty__"


def _powers_of_31(n: int) -> npt.NDArray[np.uint32]:
    out = np.empty(n + 1, dtype=np.uint32)
    value = 1
    for k in range(n + 1):
        out[k] = value
        value = (value * 31) & 0xFFFFFFFF
    return out


def key_bucket_ids(
    record_keys: pa.Array | pa.ChunkedArray, hash_fields: Sequence[str], num_buckets: int
) -> npt.NDArray[np.int64]:
    """Bucket of every record key as Java Hudi computes it from the key string (see module
    docs), column at a time."""
    if num_buckets < 1:
        raise ValueError(f"bucket count {num_buckets} must be >= 1")
    keys = record_keys.combine_chunks() if isinstance(record_keys, pa.ChunkedArray) else record_keys
    keys = pc.cast(keys, pa.large_string())
    if not (span_bytes(keys) == ord(":")).any():  # every key is its own one hash key
        return bucket_ids([keys], num_buckets)
    colon = np.asarray(pc.match_substring(keys, ":").to_numpy(zero_copy_only=False), dtype=bool)
    out = np.empty(len(keys), dtype=np.int64)
    plain = np.flatnonzero(~colon)
    if len(plain):
        out[plain] = bucket_ids([keys.take(pa.array(plain))], num_buckets)
    parsed = np.flatnonzero(colon)
    h = _parsed_key_hashes(keys.take(pa.array(parsed)), hash_fields)
    out[parsed] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_buckets
    return out


def _parsed_key_hashes(keys: pa.Array, hash_fields: Sequence[str]) -> npt.NDArray[np.uint32]:
    """``List.hashCode`` of the values Java parses out of keys that contain ``:``."""
    m = len(keys)
    parts = pc.split_pattern(keys, ",")
    row = np.asarray(pc.list_parent_indices(parts).to_numpy(), dtype=np.int64)
    flat = pc.list_flatten(parts)
    idx = np.arange(len(flat), dtype=np.int64)
    # String.split drops trailing empty parts: keep parts up to each row's last non-empty one
    nonempty = np.asarray(pc.greater(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False),
                          dtype=bool)
    last = np.full(m, -1, dtype=np.int64)
    np.maximum.at(last, row[nonempty], idx[nonempty])
    kv = pc.split_pattern(flat, ":", max_splits=1)
    sizes = np.asarray(pc.list_value_length(kv).to_numpy(zero_copy_only=False), dtype=np.int64)
    kv_flat = pc.list_flatten(kv)
    starts = np.asarray(kv.offsets.to_numpy(), dtype=np.int64)[:-1] - kv.offsets[0].as_py()
    names = kv_flat.take(pa.array(starts))
    values = kv_flat.take(pa.array(starts + (sizes == 2)))
    named = np.asarray(pc.is_in(names, pa.array(list(hash_fields), pa.large_string()))
                       .to_numpy(zero_copy_only=False), dtype=bool)
    keep = (idx <= last[row]) & ((sizes == 1) | named)
    kept = np.flatnonzero(keep)
    krow = row[kept]
    vals = values.take(pa.array(kept))
    eh = java_string_hashes(vals)
    placeholder = np.asarray(
        pc.is_in(vals, pa.array([NULL_KEY_PLACEHOLDER, EMPTY_KEY_PLACEHOLDER], pa.large_string()))
        .to_numpy(zero_copy_only=False), dtype=bool)
    eh[placeholder & (sizes[kept] == 2)] = 0  # null and "" both hash to 0
    counts = np.bincount(krow, minlength=m)
    first = np.cumsum(counts) - counts
    pos = np.arange(len(kept), dtype=np.int64) - first[krow]
    pw = _powers_of_31(int(counts.max()) if m else 0)
    contrib = eh * pw[counts[krow] - 1 - pos]
    sums = np.zeros(m, dtype=np.uint32)
    np.add.at(sums, krow, contrib)
    return pw[counts] + sums


def bucket_prefix(bucket: int) -> str:
    return f"{bucket:08d}"


def bucket_of_file_id(file_id: str) -> int | None:
    """The bucket number encoded in a bucket-index file id (None if it is not one)."""
    head = file_id[:8]
    return int(head) if len(head) == 8 and head.isdigit() else None


def new_bucket_file_id(partition_path: str, bucket: int) -> str:
    """Deterministic file id for a bucket that has no file group yet."""
    u = str(uuid.uuid5(_NAMESPACE, f"{partition_path}\x00{bucket}"))
    return f"{bucket_prefix(bucket)}{u[8:]}-0"


#: keys one thread hashes at least when :class:`BucketIndex` splits the work
_KEYS_PER_THREAD = 262_144


class BucketIndex:
    """Tags every record with its bucket's file group (existing, or the deterministic new id);
    the keys of a large batch are hashed on ``threads`` threads (numpy releases the GIL)."""

    def __init__(self, config: TableConfig, threads: int = 1) -> None:
        self.config = config
        self.num_buckets = config.bucket_count
        self.threads = max(1, threads)

    def bucket_ids(self, records: pa.Table) -> npt.NDArray[np.int64]:
        if RECORD_KEY in records.schema.names:
            keys = records.column(RECORD_KEY)
        else:
            keys = KeyGenerator(self.config).record_keys(records)
        n = len(keys)
        parts = min(self.threads, n // _KEYS_PER_THREAD)
        if parts <= 1:
            return key_bucket_ids(keys, self.config.record_key_fields, self.num_buckets)
        bounds = np.linspace(0, n, parts + 1).astype(np.int64).tolist()

        def of_slice(i: int) -> npt.NDArray[np.int64]:
            piece = keys.slice(bounds[i], bounds[i + 1] - bounds[i])
            return key_bucket_ids(piece, self.config.record_key_fields, self.num_buckets)

        return np.concatenate(map_in_threads(of_slice, range(parts), parts))

    def tag(self, records: pa.Table, view: FileSystemView, dictionary: bool = False) -> pa.Table:
        """``records`` + ``_hoodline_file_id`` for every row (never null); with ``dictionary``,
        dictionary-encoded with one entry per partition and bucket (grouped by its codes, no
        file id string is built or hashed per row: see ``dictionary_codes``)."""
        n = records.num_rows
        buckets = self.bucket_ids(records) if n else np.zeros(0, dtype=np.int64)
        codes, partitions = dictionary_codes(records.column(PARTITION_PATH))
        table_ids: list[str] = []
        for part in partitions:
            existing: dict[int, FileGroup] = {}
            for group in view.file_groups(part):
                b = bucket_of_file_id(group.file_id)
                if b is None or b >= self.num_buckets:
                    raise TableError(
                        f"file group '{group.file_id}' in partition '{part}' (file "
                        f"'{_shown_file(group)}') is not a bucket of this {self.num_buckets}-"
                        "bucket table; was the table written with another index or bucket "
                        f"count? {_STRAY_HINT}"
                    )
                if b in existing:
                    raise TableError(
                        f"partition '{part}' has two file groups for bucket {b}: "
                        f"'{existing[b].file_id}' (file '{_shown_file(existing[b])}') and "
                        f"'{group.file_id}' (file '{_shown_file(group)}'). {_STRAY_HINT}"
                    )
                existing[b] = group
            for b in range(self.num_buckets):
                found = existing.get(b)
                table_ids.append(found.file_id if found else new_bucket_file_id(part, b))
        flat = codes * self.num_buckets + buckets
        col = pa.DictionaryArray.from_arrays(
            pa.array(flat.astype(np.int32)), pa.array(table_ids or [""], pa.string())
        )
        if not dictionary:
            col = pc.cast(col, pa.string())
        if FILE_ID in records.schema.names:
            records = records.drop_columns([FILE_ID])
        return records.append_column(FILE_ID, col)


#: what to do about a file group that does not fit the bucket layout
_STRAY_HINT = ("A file copied into the table by hand reads as a file group of its own (readers "
               "then return its rows twice): if 'hoodline table commits' shows no commit that "
               "wrote it, move it out of the table")


def _shown_file(group: FileGroup) -> str:
    """The newest file of ``group``, as the table names it."""
    latest = group.latest
    return latest.base_file or (latest.log_files[-1] if latest.log_files else group.file_id)
