"""Bloom filters of record keys, byte-compatible with Hudi's parquet-footer bloom filters.

Java Hudi keeps a bloom filter of a base file's record keys in the parquet footer under
``org.apache.hudi.bloomfilter`` (type in ``hoodie_bloom_filter_type_code``):

* ``SIMPLE``: Base64 of Hadoop's ``BloomFilter.write`` — int32 version ``-1``, int32 number of
  hash functions, byte hash type (1 = murmur), int32 vector size in bits, then the bit vector
  (``ceil(bits / 8)`` bytes, bit *i* in byte ``i // 8`` at value ``1 << (i % 8)``). All integers
  big-endian (Java ``DataOutput``).
* ``DYNAMIC_V0``: the same header, then int32 rows threshold, int32 records in the current row,
  int32 row count and that many ``SIMPLE`` filters (header + bits). A key may be in any row.

Hashing is Hadoop's: for hash *i* = 0..k-1, ``h_i = murmur2(utf8(key), seed=h_{i-1})`` (seed 0 for
the first) and the bit is ``abs(h_i % bits)`` with Java's signed ``%``; murmur2 is Hadoop's 32-bit
``MurmurHash`` (little-endian blocks; the 1-3 tail bytes taken from the end of the key,
*sign-extended*, last byte lowest — unlike reference murmur2). Sizing as Hudi:
``bits = ceil(n * -ln(p) / ln(2)^2)``, ``k = ceil(ln(2) * bits / n)``, or with fewer hash
functions and more bits for the same rate (:func:`filter_shape`).

hoodline reads both types. It writes a ``SIMPLE`` filter, or for files with more keys than
``hoodline.index.bloom.row.entries`` in tables whose index does not look keys up in the filters,
a ``DYNAMIC_V0`` filter of rows of that many keys each (:func:`build_filter`).

Everything is vectorised with numpy (one pass per 4-byte block per hash function) over chunks of
keys small enough for the CPU cache, in place; never one Python call per key.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import TableError

#: Parquet footer keys Java Hudi uses.
BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_FILTER_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"

_VERSION = -1
_MURMUR = 1
_M = np.uint32(0x5BD1E995)

U32 = npt.NDArray[np.uint32]
Bools = npt.NDArray[np.bool_]


class BloomFilterError(TableError):
    """A serialized bloom filter cannot be decoded."""


def bit_size(num_entries: int, fpp: float) -> int:
    """Hudi's ``BloomFilterUtils.getBitSize``."""
    return math.ceil(max(num_entries, 1) * (-math.log(fpp) / (math.log(2) ** 2)))


def num_hashes(bits: int, num_entries: int) -> int:
    """Hudi's ``BloomFilterUtils.getNumHashes``."""
    return max(1, math.ceil(math.log(2) * bits / max(num_entries, 1)))


def filter_shape(num_entries: int, fpp: float, max_hashes: int = 0) -> tuple[int, int]:
    """(bits, hash functions) of a filter for ``num_entries`` keys at false-positive rate
    ``fpp``: Hudi's sizing, or with more than ``max_hashes`` (> 0) hash functions, that many
    with the bits that keep the rate: ``fpp = (1 - exp(-k n / m)) ** k`` solved for ``m``.

    Each hash function costs a hash computation and a bit write per key, whenever keys are
    added or looked up. Hudi's count, ``ceil(log2(1 / fpp))`` (30 at its default 1e-9), is the
    one that needs the fewest bits; fewer functions need more bits for the same rate (16: ~16 %
    more at 1e-9) and about half the work. The count is in the filter's header, so Java Hudi
    and every other reader evaluate such a filter as any other."""
    bits = bit_size(num_entries, fpp)
    hashes = num_hashes(bits, num_entries)
    if max_hashes <= 0 or hashes <= max_hashes:
        return bits, hashes
    root = math.exp(math.log(fpp) / max_hashes)  # fpp ** (1 / k): one bit's chance of being set
    bits = math.ceil(-max_hashes * max(num_entries, 1) / math.log1p(-root))
    return bits, max_hashes


@dataclass
class _KeyBytes:
    """The UTF-8 bytes of the keys (one buffer) with each key's start and length."""

    data: npt.NDArray[np.uint8]
    starts: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]


def _key_bytes(keys: pa.Array | pa.ChunkedArray) -> _KeyBytes:
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = pc.cast(arr, pa.large_binary())
    if arr.null_count:
        raise TableError("bloom filter keys must not be null")
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf else np.zeros(0, np.uint8)
    return _KeyBytes(data, offsets[:-1], np.diff(offsets))


@dataclass
class _MurmurPlan:
    """The seed-independent part of Hadoop murmur2 for a set of keys, computed once.

    Block words (after their own mixing) and the tail bits do not depend on the seed, so the
    ``k`` chained hash functions of a bloom filter only redo the cheap per-seed part."""

    lengths: U32
    blocks: list[tuple[U32, Bools | None]]  # mixed block word, rows that have this block
    tail: U32
    has_tail: Bools | None  # None: every key has a tail; all-false arrays are dropped


def _murmur_plan(keys: _KeyBytes) -> _MurmurPlan:
    starts, lengths = keys.starts, keys.lengths
    n = len(lengths)
    # the buffer plus zero padding, read as a little-endian uint32 at every byte offset
    data: npt.NDArray[np.uint8] = np.concatenate((keys.data, np.zeros(4, np.uint8)))
    words = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
    last = len(words) - 1
    nblocks = lengths >> 2
    max_blocks = int(nblocks.max()) if n else 0
    blocks: list[tuple[U32, Bools | None]] = []
    for i in range(max_blocks):
        k = words[np.minimum(starts + 4 * i, last)].astype(np.uint32)
        k *= _M
        k ^= k >> np.uint32(24)
        k *= _M
        active = nblocks > i
        blocks.append((k, None if active.all() else active))
    left = lengths & 3
    tail = np.zeros(n, dtype=np.uint32)
    if n and left.any():
        ends = starts + lengths

        def signed_from_end(j: int) -> U32:
            # Hadoop reads the tail from the end: data[length - j], sign-extended
            raw: npt.NDArray[np.uint8] = data[np.maximum(ends - j, 0)]
            return raw.view(np.int8).astype(np.int32).astype(np.uint32)

        tail = np.where(left >= 3, tail ^ (signed_from_end(3) << np.uint32(16)), tail)
        tail = np.where(left >= 2, tail ^ (signed_from_end(2) << np.uint32(8)), tail)
        tail = np.where(left >= 1, tail ^ signed_from_end(1), tail)
    has_tail = left != 0
    return _MurmurPlan(
        lengths.astype(np.uint32),
        blocks,
        tail.astype(np.uint32),
        None if has_tail.all() else has_tail,
    )


def _plan_rows(plan: _MurmurPlan, start: int, stop: int) -> _MurmurPlan:
    """The plan of keys ``start:stop`` (views, no copies)."""

    def rows(mask: Bools | None) -> Bools | None:
        return None if mask is None else mask[start:stop]

    return _MurmurPlan(
        plan.lengths[start:stop],
        [(k[start:stop], rows(active)) for k, active in plan.blocks],
        plan.tail[start:stop],
        rows(plan.has_tail),
    )


def _murmur_in_place(plan: _MurmurPlan, h: U32, scratch: U32) -> tuple[U32, U32]:
    """Hadoop ``MurmurHash.hash(bytes, length, seed)`` of every key of ``plan`` with the seeds in
    ``h``; the hashes end up in one of the two buffers: returns (hashes, the other buffer)."""
    np.bitwise_xor(h, plan.lengths, out=h)
    for k, active in plan.blocks:
        np.multiply(h, _M, out=scratch)
        np.bitwise_xor(scratch, k, out=scratch)
        if active is None:
            h, scratch = scratch, h
        else:
            np.copyto(h, scratch, where=active)
    if plan.has_tail is None:
        np.bitwise_xor(h, plan.tail, out=h)
        np.multiply(h, _M, out=h)
    elif plan.has_tail.any():
        np.bitwise_xor(h, plan.tail, out=scratch)
        np.multiply(scratch, _M, out=scratch)
        np.copyto(h, scratch, where=plan.has_tail)
    np.right_shift(h, np.uint32(13), out=scratch)
    np.bitwise_xor(h, scratch, out=h)
    np.multiply(h, _M, out=h)
    np.right_shift(h, np.uint32(15), out=scratch)
    np.bitwise_xor(h, scratch, out=h)
    return h, scratch


#: keys hashed at a time: the working arrays of one chunk stay in the CPU cache
_CHUNK = 16384


def bit_positions(
    keys: _KeyBytes, nb_hash: int, vector_size: int
) -> Iterator[tuple[int, int, npt.NDArray[np.intp]]]:
    """Bit positions as Hadoop's ``HashFunction.hash`` computes them, chunk by chunk: for keys
    ``start:stop`` and each hash function in turn, ``(start, stop, positions)``. The positions
    array is reused for the next item: use it before asking for the next one."""
    plan = _murmur_plan(keys)
    n = len(keys.lengths)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        chunk = _plan_rows(plan, start, stop)
        h = np.zeros(stop - start, dtype=np.uint32)  # the first seed is 0, then the last hash
        scratch = np.empty_like(h)
        pos = np.empty(stop - start, dtype=np.intp)
        quotient = np.empty_like(pos)
        for _ in range(nb_hash):
            h, scratch = _murmur_in_place(chunk, h, scratch)
            # Java's Math.abs(hash % size) in int32 is |hash| % size (|hash| <= 2^31 fits);
            # integer floor division by a scalar is much cheaper than a remainder in numpy
            np.copyto(pos, h.view(np.int32))  # widened first: |-2^31| overflows int32
            np.abs(pos, out=pos)
            np.floor_divide(pos, vector_size, out=quotient)
            np.multiply(quotient, vector_size, out=quotient)
            np.subtract(pos, quotient, out=pos)
            yield start, stop, pos


class SimpleBloomFilter:
    """Hadoop/Hudi ``SimpleBloomFilter`` (murmur hash)."""

    def __init__(
        self, vector_size: int, nb_hash: int, bits: Bools | None = None, hash_type: int = _MURMUR
    ) -> None:
        if vector_size < 1 or nb_hash < 1:
            raise BloomFilterError(
                f"invalid bloom filter: {vector_size} bits, {nb_hash} hash functions"
            )
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        self.bits: Bools = bits if bits is not None else np.zeros(vector_size, dtype=np.bool_)

    @property
    def type_code(self) -> str:
        return SIMPLE

    @classmethod
    def for_entries(cls, num_entries: int, fpp: float, max_hashes: int = 0) -> SimpleBloomFilter:
        """A filter sized for ``num_entries`` keys at false-positive rate ``fpp`` (Hudi's rule,
        with at most ``max_hashes`` hash functions: see :func:`filter_shape`)."""
        bits, hashes = filter_shape(num_entries, fpp, max_hashes)
        return cls(bits, hashes)

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        if len(keys) == 0:
            return
        self._check_murmur()
        for _start, _stop, pos in bit_positions(_key_bytes(keys), self.nb_hash, self.vector_size):
            self.bits[pos] = True

    def might_contain(self, keys: pa.Array | pa.ChunkedArray) -> Bools:
        if len(keys) == 0:
            return np.zeros(0, dtype=np.bool_)
        if self.hash_type != _MURMUR:  # cannot evaluate: never exclude a key
            return np.ones(len(keys), dtype=np.bool_)
        out = np.ones(len(keys), dtype=np.bool_)
        for start, stop, pos in bit_positions(_key_bytes(keys), self.nb_hash, self.vector_size):
            out[start:stop] &= self.bits[pos]
        return out

    def _check_murmur(self) -> None:
        if self.hash_type != _MURMUR:
            raise BloomFilterError(
                f"cannot add keys to a bloom filter of hash type {self.hash_type}"
            )

    # -- serialization ----------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        header = struct.pack(">iibi", _VERSION, self.nb_hash, self.hash_type, self.vector_size)
        return header + np.packbits(self.bits, bitorder="little").tobytes()

    def serialize(self) -> str:
        """Base64 text stored in the parquet footer (type code ``SIMPLE``)."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def read_from(cls, raw: bytes, pos: int) -> tuple[SimpleBloomFilter, int]:
        """Decode one filter starting at ``pos``; returns it and the position after it."""
        (nb_hash, hash_type, vector_size), pos = _read_header(raw, pos)
        nbytes = (vector_size + 7) // 8
        if vector_size < 1 or pos + nbytes > len(raw):
            raise BloomFilterError(
                f"bloom filter bytes are truncated ({vector_size} bits announced, "
                f"{len(raw) - pos} bytes left)"
            )
        packed = np.frombuffer(raw, dtype=np.uint8, count=nbytes, offset=pos)
        bits = np.unpackbits(packed, bitorder="little")[:vector_size].view(np.bool_)  # 0s and 1s
        return cls(vector_size, nb_hash, bits, hash_type), pos + nbytes


def _read_header(raw: bytes, pos: int) -> tuple[tuple[int, int, int], int]:
    """Hadoop ``Filter.readFields``: (hash count, hash type, vector size) and the next position."""
    try:
        (version,) = struct.unpack_from(">i", raw, pos)
        if version > 0:  # old unversioned format: the first int is the hash count (Jenkins)
            nb_hash, hash_type, pos = version, 0, pos + 4
        elif version == _VERSION:
            nb_hash, hash_type = struct.unpack_from(">ib", raw, pos + 4)
            pos += 9
        else:
            raise BloomFilterError(f"unknown bloom filter version {version}")
        (vector_size,) = struct.unpack_from(">i", raw, pos)
        return (nb_hash, hash_type, vector_size), pos + 4
    except struct.error as exc:
        raise BloomFilterError(f"bloom filter bytes are truncated: {exc}") from None


class DynamicBloomFilter:
    """Hudi's ``DYNAMIC_V0`` filter (``InternalDynamicBloomFilter``): rows of one shape, each a
    :class:`SimpleBloomFilter` holding up to ``row_entries`` keys; keys fill the last row, then
    a new one. A key may be in any row.

    hoodline writes it for files with more keys than one row holds (see :func:`build_filter`):
    a row's bits fit the CPU cache, where setting a bit costs ~5 ns against ~20 ns in a filter
    sized for a few hundred thousand keys; and a file rewritten with more keys keeps its old
    rows and hashes only the keys it gained."""

    def __init__(
        self, rows: list[SimpleBloomFilter], row_entries: int = 0, current: int = 0
    ) -> None:
        if not rows:
            raise BloomFilterError("a dynamic bloom filter needs at least one row")
        self.rows = rows
        #: keys a row holds before the next one starts (Java's ``nr``)
        self.row_entries = row_entries
        #: keys in the last row (Java's ``currentNbRecord``)
        self.current = current

    @classmethod
    def for_rows(cls, row_entries: int, fpp: float, max_hashes: int = 0) -> DynamicBloomFilter:
        """An empty filter whose rows hold ``row_entries`` keys at rate ``fpp`` each."""
        return cls([SimpleBloomFilter.for_entries(row_entries, fpp, max_hashes)], row_entries, 0)

    @property
    def type_code(self) -> str:
        return DYNAMIC_V0

    @property
    def vector_size(self) -> int:
        return self.rows[0].vector_size

    @property
    def nb_hash(self) -> int:
        return self.rows[0].nb_hash

    @property
    def hash_type(self) -> int:
        return self.rows[0].hash_type

    @property
    def recorded(self) -> int:
        """Keys added so far (stale ones of rewritten files included)."""
        return (len(self.rows) - 1) * self.row_entries + self.current

    def is_uniform(self) -> bool:
        """Whether every row has the first row's shape and murmur hashing (as hoodline and Hudi
        write them)."""
        return all(
            r.vector_size == self.vector_size and r.nb_hash == self.nb_hash
            and r.hash_type == _MURMUR
            for r in self.rows
        )

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        if self.row_entries < 1:
            raise BloomFilterError(
                f"cannot add keys to a dynamic bloom filter of {self.row_entries} keys per row"
            )
        done, n = 0, len(keys)
        while done < n:
            if self.current >= self.row_entries:
                last = self.rows[-1]
                self.rows.append(SimpleBloomFilter(last.vector_size, last.nb_hash))
                self.current = 0
            take = min(n - done, self.row_entries - self.current)
            self.rows[-1].add(keys.slice(done, take))
            done += take
            self.current += take

    def might_contain(self, keys: pa.Array | pa.ChunkedArray) -> Bools:
        if len(keys) == 0:
            return np.zeros(0, dtype=np.bool_)
        if not self.is_uniform():  # rows of other shapes or hashing: each row on its own
            out = np.zeros(len(keys), dtype=np.bool_)
            for row in self.rows:
                out |= row.might_contain(keys)
            return out
        # Every row has the same bit positions for a key: hash once, then look the keys up row
        # by row, each hash function only for the keys whose bits were all set so far (about a
        # quarter of the keys pass each function at fpp 1e-9), and each row only for the keys
        # no earlier row holds.
        out = np.empty(len(keys), dtype=np.bool_)
        chunk: list[npt.NDArray[np.intp]] = []
        for start, stop, pos in bit_positions(_key_bytes(keys), self.nb_hash, self.vector_size):
            chunk.append(pos.copy())  # the generator reuses its array
            if len(chunk) < self.nb_hash:
                continue
            found = np.zeros(stop - start, dtype=np.bool_)
            for row in self.rows:
                alive = np.flatnonzero(~found)
                for positions in chunk:
                    alive = alive[row.bits[positions[alive]]]
                    if not len(alive):
                        break
                found[alive] = True
            out[start:stop] = found
            chunk = []
        return out

    # -- serialization ----------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        header = struct.pack(">iibi", _VERSION, self.nb_hash, self.hash_type, self.vector_size)
        counts = struct.pack(">iii", self.row_entries, self.current, len(self.rows))
        return header + counts + b"".join(r.to_bytes() for r in self.rows)

    def serialize(self) -> str:
        """Base64 text stored in the parquet footer (type code ``DYNAMIC_V0``)."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_bytes(cls, raw: bytes) -> DynamicBloomFilter:
        _, pos = _read_header(raw, 0)  # header of the dynamic filter itself
        try:
            nr, current, count = struct.unpack_from(">iii", raw, pos)
        except struct.error as exc:
            raise BloomFilterError(f"dynamic bloom filter bytes are truncated: {exc}") from None
        pos += 12
        rows: list[SimpleBloomFilter] = []
        for _ in range(count):
            row, pos = SimpleBloomFilter.read_from(raw, pos)
            rows.append(row)
        return cls(rows, nr, current)


KeyFilter = SimpleBloomFilter | DynamicBloomFilter


def deserialize(text: str | bytes, type_code: str | None) -> KeyFilter:
    """Decode a footer bloom filter (``type_code`` None means ``SIMPLE``, as old Hudi wrote)."""
    try:
        raw = base64.b64decode(text, validate=False)
    except (ValueError, TypeError) as exc:
        raise BloomFilterError(f"bloom filter is not valid Base64: {exc}") from None
    code = (type_code or SIMPLE).strip().upper()
    if code == SIMPLE:
        flt, _ = SimpleBloomFilter.read_from(raw, 0)
        return flt
    if code == DYNAMIC_V0:
        return DynamicBloomFilter.from_bytes(raw)
    raise BloomFilterError(f"unknown bloom filter type code '{type_code}'")


#: filter capacities grow in steps of a quarter power of two (~19 %)
_STEPS_PER_DOUBLING = 4


def sized_entries(num_keys: int, min_entries: int) -> int:
    """The capacity a file's filter is sized for: the smallest ``min_entries * 2**(q/4)``
    (``q >= 0``) that holds ``num_keys``. A file rewritten with a few more or fewer keys usually
    stays in its step, so the new version's filter has the old one's size (see
    :func:`build_filter`), at the price of filters up to ~19 % larger than an exact fit."""
    floor = max(min_entries, 1)
    q = 0
    entries = floor
    while entries < num_keys:
        q += 1
        entries = math.ceil(floor * 2 ** (q / _STEPS_PER_DOUBLING))
    return entries


def expected_fill(num_entries: int, nb_hash: int, vector_size: int) -> float:
    """Share of set bits expected once ``num_entries`` distinct keys were added."""
    return 1.0 - math.exp(-nb_hash * num_entries / vector_size)


#: a reused dynamic filter may hold stale keys (of rows deleted since) up to this share of the
#: file's keys before it is rebuilt from the keys alone
_MAX_RECORDED_PER_KEY = 1.5


def build_filter(
    keys: pa.Array | pa.ChunkedArray,
    fpp: float,
    min_entries: int,
    previous: KeyFilter | None = None,
    added: pa.Array | pa.ChunkedArray | None = None,
    max_hashes: int = 0,
    row_entries: int = 0,
) -> KeyFilter:
    """A filter holding ``keys``.

    Up to ``row_entries`` keys (or any number, with ``row_entries`` 0): a ``SIMPLE`` filter
    sized for :func:`sized_entries` of their count (with at most ``max_hashes`` hash functions,
    see :func:`filter_shape`). Copy-on-write base files are immutable, so each file's filter
    can be sized for the keys it actually holds; the format is the same as a fixed-size Hudi
    filter. More keys: a ``DYNAMIC_V0`` filter (:class:`DynamicBloomFilter`) of rows of
    ``row_entries`` keys, each row at rate ``fpp`` (a key is looked up in every row, so the
    file's rate is the number of rows times ``fpp``, as in Hudi's dynamic filters).

    ``previous`` (the filter of the file version this one replaces) and ``added`` (the keys of
    ``keys`` that did not come from that version): when ``previous`` has this filter's shape,
    its bits are taken over and only ``added`` is hashed. ``previous`` is then changed in
    place: callers pass a filter just read from the old file's footer, and copying its bits
    cost ~5 ms per file of 150k keys. Keys of the old version that are gone stay set, which
    can only add false positives. A ``SIMPLE`` filter's old bits are not reused once more of
    them are set than a full filter of this capacity would have (the rate stays at its design
    value); a dynamic filter's rows never hold more than ``row_entries`` keys, and
    it is rebuilt once it records 1.5 times the file's keys (stale keys only cost space there).
    """
    if row_entries > 0 and len(keys) > row_entries:
        bits, hashes = filter_shape(row_entries, fpp, max_hashes)
        if (
            added is not None
            and isinstance(previous, DynamicBloomFilter)
            and previous.row_entries == row_entries
            and previous.vector_size == bits
            and previous.nb_hash == hashes
            and previous.is_uniform()
            and previous.recorded + len(added) <= _MAX_RECORDED_PER_KEY * len(keys)
        ):
            previous.add(added)
            return previous
        dyn = DynamicBloomFilter.for_rows(row_entries, fpp, max_hashes)
        dyn.add(keys)
        return dyn
    capacity = sized_entries(len(keys), min_entries)
    flt = SimpleBloomFilter.for_entries(capacity, fpp, max_hashes)
    if (
        added is not None
        and isinstance(previous, SimpleBloomFilter)
        and previous.hash_type == _MURMUR
        and previous.vector_size == flt.vector_size
        and previous.nb_hash == flt.nb_hash
        and np.count_nonzero(previous.bits)
        <= expected_fill(capacity, flt.nb_hash, flt.vector_size) * flt.vector_size
    ):
        flt.bits = previous.bits
        flt.add(added)
        return flt
    flt.add(keys)
    return flt
