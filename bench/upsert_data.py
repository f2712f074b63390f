"""Data of the upsert benchmark: a base table and an upsert batch, fixed seeds, vectorised.

Base: ``rows`` records with unique int64 keys ``id`` in ``[0, rows)`` (shuffled order), 13 columns
of mixed types, partition column ``region`` (8 values) derived from the key, so an update never
moves a key to another partition. Batch: ``batch_rows`` records, half updates of uniformly chosen
existing keys (new ``ts``, amounts, comments, times), half new keys ``[rows, rows + new)``,
shuffled together. Keys in the batch are unique.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REGIONS = (
    "af-south",
    "ap-east",
    "ap-south",
    "eu-central",
    "eu-west",
    "sa-east",
    "us-east",
    "us-west",
)
CATEGORIES = tuple(f"category-{i:02d}" for i in range(20))
KEY = "id"
PARTITION = "region"
ORDERING = "ts"
EPOCH_US = 1_700_000_000_000_000

SCHEMA = pa.schema(
    [
        pa.field(KEY, pa.int64(), nullable=False),
        pa.field(PARTITION, pa.string(), nullable=False),
        pa.field(ORDERING, pa.int64(), nullable=False),
        ("amount", pa.float64()),
        ("score", pa.float32()),
        ("qty", pa.int32()),
        ("price", pa.decimal128(12, 2)),
        ("active", pa.bool_()),
        ("category", pa.string()),
        ("name", pa.string()),
        ("comment", pa.string()),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("event_date", pa.date32()),
    ]
)


def _letters(rng: np.random.Generator, lengths: np.ndarray) -> pa.Array:
    """Random lowercase strings of the given lengths, built from raw buffers."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(97, 123, size=int(offsets[-1]), dtype=np.uint8)
    return pa.StringArray.from_buffers(
        len(lengths), pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())
    )


def _decimal_cents(cents: np.ndarray) -> pa.Array:
    """decimal128(12, 2) from non-negative int64 cents (unscaled little-endian 128-bit words)."""
    words = np.zeros((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    return pa.Array.from_buffers(
        pa.decimal128(12, 2), len(cents), [None, pa.py_buffer(words.tobytes())]
    )


def _columns(rng: np.random.Generator, ids: np.ndarray, ts: np.ndarray) -> pa.Table:
    n = len(ids)
    regions = pa.array(REGIONS, pa.string())
    categories = pa.array(CATEGORIES, pa.string())
    cents = rng.integers(100, 10_000_000, size=n, dtype=np.int64)
    comment = _letters(rng, rng.integers(20, 41, size=n))
    comment_null = rng.random(n) < 0.1
    event_us = EPOCH_US + rng.integers(0, 86_400 * 365, size=n, dtype=np.int64) * 1_000_000
    arrays = [
        pa.array(ids, pa.int64()),
        regions.take(pa.array(ids % len(REGIONS))),
        pa.array(ts, pa.int64()),
        pa.array(rng.normal(100.0, 25.0, size=n)),
        pa.array(rng.random(n, dtype=np.float32)),
        pa.array(rng.integers(0, 1000, size=n, dtype=np.int32)),
        _decimal_cents(cents),
        pa.array(rng.random(n) < 0.5),
        categories.take(pa.array(rng.integers(0, len(CATEGORIES), size=n))),
        _letters(rng, np.full(n, 16)),
        pc.if_else(pa.array(comment_null), pa.scalar(None, pa.string()), comment),
        pa.array(event_us, pa.timestamp("us", tz="UTC")),
        pa.array((event_us // 86_400_000_000).astype(np.int32), pa.date32()),
    ]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def make_base(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64)
    ts = np.full(rows, 1, dtype=np.int64)
    return _columns(rng, ids, ts)


def make_batch(base: pa.Table, batch_rows: int, seed: int = 2) -> pa.Table:
    """Half updates of existing keys (all columns but key/partition re-drawn), half new keys."""
    rows = base.num_rows
    n_upd = min(batch_rows // 2, rows)
    n_new = batch_rows - n_upd
    rng = np.random.default_rng(seed)
    upd_ids = rng.choice(rows, size=n_upd, replace=False).astype(np.int64)
    new_ids = np.arange(rows, rows + n_new, dtype=np.int64)
    ids = np.concatenate([upd_ids, new_ids])
    rng.shuffle(ids)
    return _columns(rng, ids, np.full(len(ids), 2, dtype=np.int64))


def expected_after_upsert(base: pa.Table, batch: pa.Table) -> pa.Table:
    """What every system must hold after the upsert, sorted by key."""
    kept = base.filter(pc.invert(pc.is_in(base.column(KEY), value_set=batch.column(KEY))))
    return canonical(pa.concat_tables([kept, batch]))


def canonical(table: pa.Table) -> pa.Table:
    """Data columns only, in the benchmark schema's order and types, sorted by key."""
    cols = [table.column(f.name).cast(f.type) for f in SCHEMA]
    out = pa.Table.from_arrays(cols, schema=SCHEMA)
    return out.take(pc.sort_indices(out, [(KEY, "ascending")])).combine_chunks()


def first_difference(a: pa.Table, b: pa.Table) -> str | None:
    """None when equal, else a short description of the first difference."""
    if a.num_rows != b.num_rows:
        return f"row count {a.num_rows} != {b.num_rows}"
    for f in SCHEMA:
        x, y = a.column(f.name), b.column(f.name)
        if not x.equals(y):
            same = pc.fill_null(pc.equal(x, y), False)
            both_null = pc.and_(pc.is_null(x), pc.is_null(y))
            bad = pc.invert(pc.or_(same, both_null))
            idx = int(pc.index(bad, True).as_py())
            key = a.column(KEY)[idx].as_py()
            return f"column '{f.name}' differs first at id={key}: {x[idx]} vs {y[idx]}"
    return None
