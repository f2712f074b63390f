"""hoodline's bloom filter and bucket hash against golden outputs of the Java originals.

The fixtures were produced by the two small Java programs next to them (``BloomRef.java`` uses
Hadoop's ``org.apache.hadoop.util.bloom.BloomFilter`` with murmur hashing, exactly what Hudi's
``SimpleBloomFilter`` serializes; ``JHash.java`` prints ``(List.hashCode() & MAX_INT) % 7`` as
Hudi's ``BucketIdentifier`` computes it). Re-generate with the hadoop-client jars of pyspark:
``java -cp <hadoop-client-api.jar>:<hadoop-client-runtime.jar>:. BloomRef 300 0.001 < keys.txt``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hoodline.table.bloom import (
    DYNAMIC_V0,
    DynamicBloomFilter,
    KeyFilter,
    SimpleBloomFilter,
    build_filter,
    deserialize,
    filter_shape,
    sized_entries,
)
from hoodline.table.index.bucket import (
    BucketIndex,
    bucket_ids,
    bucket_of_file_id,
    java_string_hashes,
    key_bucket_ids,
    new_bucket_file_id,
)
from hoodline.table.properties import IndexType, TableConfig
from hoodline.table.write.records import RECORD_KEY
from tests.helpers.java_reference import pyspark_jars, run_java

FIX = Path(__file__).parent / "fixtures"


def _keys() -> pa.Array:
    lines = (FIX / "keys.txt").read_text(encoding="utf-8").split("\n")
    return pa.array([x for x in lines if x])


@pytest.mark.parametrize(
    ("entries", "fpp", "golden"),
    [(300, 0.001, "hadoop_bloom_300_0.001.b64"), (10, 1e-9, "hadoop_bloom_10_1e-9.b64")],
)
def test_simple_bloom_filter_bytes_equal_hadoop(entries: int, fpp: float, golden: str) -> None:
    keys = _keys()
    assert len(keys) == 300
    flt = SimpleBloomFilter.for_entries(entries, fpp)
    flt.add(keys)
    assert flt.serialize() == (FIX / golden).read_text().strip()


def test_filters_with_capped_hash_counts_keep_the_false_positive_rate() -> None:
    # Hudi's sizing at fpp 1e-9: 30 hash functions; capped at 16 the bits grow to keep the rate
    assert filter_shape(156_250, 1e-9) == (6_739_495, 30)
    bits, hashes = filter_shape(156_250, 1e-9, max_hashes=16)
    assert hashes == 16 and 1.15 < bits / 6_739_495 < 1.17
    assert (1 - math.exp(-hashes * 156_250 / bits)) ** hashes == pytest.approx(1e-9, rel=1e-3)
    # a cap above Hudi's count changes nothing; 0 means no cap
    assert filter_shape(1000, 0.01, max_hashes=16) == filter_shape(1000, 0.01) == (9586, 7)
    assert filter_shape(1000, 1e-9, max_hashes=0) == filter_shape(1000, 1e-9)


def _hadoop_reads(
    flt: KeyFilter, keys: pa.Array, absent: list[str], tmp_path: Path
) -> list[list[str]]:
    """What Hadoop's own filter classes (what Hudi's filters wrap or copy) make of ``flt``: per
    key file, [keys it may contain, keys, whether Hadoop writes the same bytes back]."""
    (tmp_path / "filter.b64").write_text(flt.serialize())
    (tmp_path / "keys.txt").write_text("\n".join(keys.to_pylist()) + "\n", encoding="utf-8")
    (tmp_path / "absent.txt").write_text("\n".join(absent) + "\n", encoding="utf-8")
    out = run_java(FIX / "BloomRead.java", flt.type_code, str(tmp_path / "filter.b64"),
                   str(tmp_path / "keys.txt"), str(tmp_path / "absent.txt"),
                   classpath=pyspark_jars("hadoop-client-"))
    assert out.returncode == 0, out.stderr[-3000:]
    return [line.split() for line in out.stdout.splitlines()]


def test_hadoop_reads_a_capped_filter_and_finds_every_key(tmp_path: Path) -> None:
    """The hash count travels in the filter's header: Hadoop's own BloomFilter (what Hudi's
    SimpleBloomFilter wraps) reads a filter of 16 hash functions and finds every key."""
    keys = pa.array([f"key-{i}" for i in range(20_000)] + ["ü€-1", ""])
    flt = build_filter(keys, 1e-9, 1000, max_hashes=16)
    assert isinstance(flt, SimpleBloomFilter) and flt.nb_hash == 16
    absent = [f"other-{i}" for i in range(20_000)]
    assert not flt.might_contain(pa.array(absent)).any()
    outputs = _hadoop_reads(flt, keys, absent, tmp_path)
    # every key found (the empty key is skipped by the reader), Hadoop writes the same bytes
    assert outputs[0] == [str(len(keys) - 1), str(len(keys) - 1), "true"]
    assert outputs[1] == ["0", str(len(absent)), "true"]


def test_files_with_more_keys_than_a_row_get_a_dynamic_filter_hadoop_reads(
    tmp_path: Path,
) -> None:
    """Past ``row_entries`` keys the filter is DYNAMIC_V0 (Hudi's default type): full rows of
    ``row_entries`` keys and a partly filled last one, each sized for the rate. Hadoop's
    DynamicBloomFilter (whose layout Hudi's InternalDynamicBloomFilter writes and reads) finds
    every key and writes the same bytes back."""
    keys = pa.array([f"key-{i}" for i in range(25_000)] + ["ü€-1"])
    flt = build_filter(keys, 1e-9, 1000, max_hashes=16, row_entries=10_000)
    assert isinstance(flt, DynamicBloomFilter) and flt.type_code == DYNAMIC_V0
    assert len(flt.rows) == 3 and (flt.row_entries, flt.current) == (10_000, 5_001)
    assert flt.recorded == len(keys)
    assert (flt.vector_size, flt.nb_hash) == filter_shape(10_000, 1e-9, 16)
    assert all(r.vector_size == flt.vector_size for r in flt.rows)
    absent = [f"other-{i}" for i in range(20_000)]
    assert flt.might_contain(keys).all() and not flt.might_contain(pa.array(absent)).any()
    back = deserialize(flt.serialize(), DYNAMIC_V0)
    assert isinstance(back, DynamicBloomFilter) and back.to_bytes() == flt.to_bytes()
    assert back.might_contain(keys).all()
    assert _hadoop_reads(flt, keys, absent, tmp_path) == [
        [str(len(keys)), str(len(keys)), "true"], ["0", str(len(absent)), "true"]]
    # up to a row's worth of keys, or without rows: one SIMPLE filter as before
    assert isinstance(build_filter(keys.slice(0, 10_000), 1e-9, 1000, row_entries=10_000),
                      SimpleBloomFilter)
    assert isinstance(build_filter(keys, 1e-9, 1000, row_entries=0), SimpleBloomFilter)


def test_a_dynamic_filter_keeps_its_rows_and_adds_only_new_keys() -> None:
    old_keys = pa.array([f"k{i}" for i in range(2_500)])
    previous = build_filter(old_keys, 1e-6, 100, row_entries=1_000)
    assert isinstance(previous, DynamicBloomFilter) and previous.current == 500
    old_bits = [row.bits.copy() for row in previous.rows]
    added = pa.array([f"new-{i}" for i in range(700)])
    keys = pa.concat_arrays([old_keys.slice(1), added])  # k0 gone, 700 added
    grown = build_filter(keys, 1e-6, 100, previous, added, row_entries=1_000)
    assert grown is previous  # taken over, not copied
    # the last row filled up to 1,000 keys, one new row holds the remaining 200
    assert len(grown.rows) == 4 and grown.current == 200 and grown.recorded == 3_200
    for bits, new_row in zip(old_bits[:2], grown.rows[:2], strict=True):
        assert (bits == new_row.bits).all()  # full rows kept as they were
    assert (grown.rows[2].bits >= old_bits[2]).all()
    assert grown.might_contain(keys).all() and grown.might_contain(pa.array(["k0"])).all()
    previous = build_filter(old_keys, 1e-6, 100, row_entries=1_000)
    # stale keys piling up past 1.5x the file's keys: rebuilt from the file's keys alone
    few = pa.concat_arrays([old_keys.slice(0, 1_100), added])
    rebuilt = build_filter(few, 1e-6, 100, grown, added, row_entries=1_000)
    assert isinstance(rebuilt, DynamicBloomFilter) and rebuilt.recorded == len(few)
    assert rebuilt.might_contain(few).all()
    assert not rebuilt.might_contain(pa.array([f"k{i}" for i in range(1_500, 2_500)])).any()
    # another row shape (the option changed): rebuilt too
    other = build_filter(keys, 1e-6, 100, previous, added, row_entries=2_000)
    assert isinstance(other, DynamicBloomFilter) and other.recorded == len(keys)


def test_hadoop_filter_deserializes_and_contains_all_keys() -> None:
    keys = _keys()
    flt = deserialize((FIX / "hadoop_bloom_300_0.001.b64").read_text().strip(), "SIMPLE")
    assert flt.might_contain(keys).all()
    others = pa.array([f"absent-{i}" for i in range(2000)])
    # fpp 0.001 at the sized capacity: a handful of false positives at most
    assert flt.might_contain(others).sum() < 20


def test_dynamic_v0_filter_is_read_row_by_row() -> None:
    a = build_filter(pa.array(["a", "b"]), 0.01, 10)
    b = build_filter(pa.array(["c", "d"]), 0.01, 10)
    import base64
    import struct

    header = struct.pack(">iibi", -1, a.nb_hash, 1, a.vector_size)
    body = struct.pack(">iii", 2, 2, 2) + a.to_bytes() + b.to_bytes()
    text = base64.b64encode(header + body).decode()
    dyn = deserialize(text, DYNAMIC_V0)
    assert dyn.might_contain(pa.array(["a", "b", "c", "d"])).all()
    assert not dyn.might_contain(pa.array(["zzz-not-there"])).any()


def test_bloom_roundtrip_and_no_false_negatives_on_many_keys() -> None:
    keys = pa.array([f"key-{i:07d}" for i in range(20000)])
    flt = build_filter(keys, 1e-6, 1000)
    back = deserialize(flt.serialize(), "SIMPLE")
    assert back.might_contain(keys).all()
    absent = pa.array([f"nope-{i:07d}" for i in range(20000)])
    assert back.might_contain(absent).sum() <= 2


def test_filters_are_sized_on_a_grid_of_quarter_doublings() -> None:
    assert sized_entries(0, 1000) == sized_entries(1000, 1000) == 1000
    assert sized_entries(1001, 1000) == 1190  # ceil(1000 * 2 ** 0.25)
    assert sized_entries(2000, 1000) == 2000 and sized_entries(2001, 1000) == 2379
    steps = [sized_entries(n, 1000) for n in range(1, 50_000, 97)]
    assert steps == sorted(steps)
    assert all(n <= sized_entries(n, 1000) < 1.19 * n + 1 for n in range(1001, 50_000, 97))


def test_a_filter_reuses_the_previous_bits_only_when_they_fit() -> None:
    old_keys = pa.array([f"k{i}" for i in range(900)])
    previous = build_filter(old_keys, 1e-6, 1000)
    assert isinstance(previous, SimpleBloomFilter)
    old_bits = previous.bits.copy()
    added = pa.array(["new-1", "new-2"])
    keys = pa.concat_arrays([old_keys.slice(1), added])  # k0 gone, two added
    reused = build_filter(keys, 1e-6, 1000, previous, added)
    assert isinstance(reused, SimpleBloomFilter) and reused.bits is previous.bits  # taken over
    assert reused.might_contain(keys).all()
    assert reused.might_contain(pa.array(["k0"])).all()  # old bits kept
    assert (reused.bits >= old_bits).all() and reused.bits.sum() > old_bits.sum()
    # another size (more keys than the step holds): built from the keys alone
    more = pa.concat_arrays([keys, pa.array([f"m{i}" for i in range(500)])])
    rebuilt = build_filter(more, 1e-6, 1000, previous, added)
    assert rebuilt.vector_size != previous.vector_size
    assert rebuilt.might_contain(more).all() and not rebuilt.might_contain(pa.array(["k0"])).any()
    # previous bits fuller than a filter at capacity (stale keys piled up): not reused
    crowded = build_filter(pa.array([f"x{i}" for i in range(1000)]), 1e-6, 1000)
    crowded.add(pa.array([f"y{i}" for i in range(400)]))
    fresh = build_filter(keys, 1e-6, 1000, crowded, added)
    assert fresh.might_contain(keys).all()
    assert not fresh.might_contain(pa.array([f"y{i}" for i in range(400)])).any()


def test_bucket_ids_equal_java_list_hashcode() -> None:
    keys = _keys()
    golden = np.array([int(x) for x in (FIX / "java_buckets7.txt").read_text().split()])
    assert (bucket_ids([keys], 7) == golden).all()
    rev = pa.array(keys.to_pylist()[::-1])
    golden2 = np.array([int(x) for x in (FIX / "java_buckets7_two_fields.txt").read_text().split()])
    assert (bucket_ids([keys, rev], 7) == golden2).all()


def test_java_string_hash_known_values() -> None:
    # "hello".hashCode() == 99162322, "".hashCode() == 0, "€".hashCode() == 8364
    h = java_string_hashes(pa.array(["hello", "", "€", "a" * 100]))
    assert h.view(np.int32)[:3].tolist() == [99162322, 0, 8364]
    expected = 0
    for _ in range(100):
        expected = (31 * expected + 97) & 0xFFFFFFFF
    assert int(h[3]) == expected


@pytest.mark.parametrize("large", [False, True])
def test_hashes_of_a_slice_look_only_at_the_slice_bytes(large: bool) -> None:
    # whether any key holds ':' or a non-ASCII character is decided from the bytes of the
    # slice's own values: bytes of values outside it must not change (or hide) its hashes
    values = ["id:1,region:eu", "€", "plain", "42", "x", "id:7", "ü:x", "a€b", "tail"]
    arr = pa.array(values, pa.large_string() if large else pa.string())
    for start, stop in [(2, 5), (5, 8), (1, 2), (3, 3), (0, 9)]:
        part = arr.slice(start, stop - start)
        fresh = pa.array(values[start:stop], pa.string())
        assert java_string_hashes(part).tolist() == java_string_hashes(fresh).tolist()
        ours = key_bucket_ids(part, ("id",), 7).tolist()
        assert ours == key_bucket_ids(fresh, ("id",), 7).tolist(), (start, stop)
    # the keys with ':' are parsed: "id:7" hashes as "7"
    assert key_bucket_ids(arr.slice(5, 1), ("id",), 7)[0] == bucket_ids([pa.array(["7"])], 7)[0]
    assert java_string_hashes(arr.slice(1, 1)).view(np.int32)[0] == 8364  # "€".hashCode()


@pytest.mark.parametrize("threads", [2, 3])
def test_bucket_index_hashes_slices_on_threads_as_in_one(threads: int) -> None:
    """A large batch's keys hashed in slices on threads land in the buckets of one pass, in row
    order, also with keys Java parses (``id:...``) in some slices only and chunked columns."""
    n = 700_001
    keys = np.arange(n).astype(str).astype(object)
    keys[n - 10 :] = [f"id:{i}" for i in range(10)]  # only in the last slice
    column = pa.chunked_array([pa.array(keys[:250_000]), pa.array(keys[250_000:])])
    records = pa.table({RECORD_KEY: column})
    config = TableConfig(name="t", record_key_fields=("id",), partition_fields=(),
                         index_type=IndexType.BUCKET, bucket_count=13)
    one = BucketIndex(config, 1).bucket_ids(records)
    assert len(one) == n and len(np.unique(one)) == 13
    assert (BucketIndex(config, threads).bucket_ids(records) == one).all()
    assert one[-1] == bucket_ids([pa.array(["9"])], 13)[0]


def test_bucket_file_ids_are_stable_and_carry_the_bucket() -> None:
    fid = new_bucket_file_id("region=eu", 2)
    assert fid == new_bucket_file_id("region=eu", 2)
    assert fid != new_bucket_file_id("region=us", 2)
    assert fid.startswith("00000002-") and fid.endswith("-0") and "_" not in fid
    assert bucket_of_file_id(fid) == 2
    assert bucket_of_file_id("not-a-bucket-id") is None


KEYS_AS_JAVA_PARSES_THEM = [
    "plain", "42", "", "a:b", "id:7", "id:x:y", "id:a,b", "id:__null__", "id:__empty__",
    "id:a,region:eu", "region:eu,id:a", "id:a,,region:eu", "id:a,region:eu,", "id:a,region:eu,,",
    ",id:a", "id:,region:", "id::", ":", "::", ",", "a,b", "id:2024-01-01 10:00:00",
    "2024-01-01 10:00:00", "day:2024-01-01T10:00:00.123Z,id:9", "ü:x", "id:€,region:ü",
    "other:1,id:2", "id:1,other:2,region:3", "id:a,region:__null__",
]


@pytest.mark.parametrize("fields", [("id",), ("id", "region")])
def test_bucket_of_a_record_key_is_what_java_parses_out_of_it(
    tmp_path: Path, fields: tuple[str, ...]
) -> None:
    rng = np.random.default_rng(5)
    alphabet = list("ab:,_x€ü19")
    keys = KEYS_AS_JAVA_PARSES_THEM + [
        "".join(rng.choice(alphabet, size=int(rng.integers(1, 12)))) for _ in range(300)
    ]
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("\n".join(keys) + "\n", encoding="utf-8")
    out = run_java(FIX / "JavaKeyBucket.java", ",".join(fields), "7", str(keys_file))
    assert out.returncode == 0, out.stderr[-3000:]
    expected = [int(x) for x in out.stdout.split()]
    assert len(expected) == len(keys)
    ours = key_bucket_ids(pa.array(keys), fields, 7).tolist()
    wrong = [(k, o, e) for k, o, e in zip(keys, ours, expected, strict=True) if o != e]
    assert not wrong, f"{len(wrong)} keys in another bucket than Java's, first: {wrong[:5]}"
    # keys without ':' keep the plain hash of the whole key
    assert ours[0] == bucket_ids([pa.array(["plain"])], 7)[0]
