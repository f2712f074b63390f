"""Throughput of hoodline's bulk JSON decoder on ~200-byte messages (not a test).

    PYTHONPATH=src .venv/bin/python bench/bench_json_decoder.py [--records 200000] [--batch 10000]

Prints, per case, the median wall and CPU seconds of 3 runs (records/s and MB/s from the wall
median) for: all-good batches, batches with 0.1% / 1% bad records (bisection path), the speed
limit (one bare ``pyarrow.json.read_json`` of each batch's values joined by newlines, no checks)
and a per-record ``json.loads`` + ``pa.Table.from_pylist`` baseline.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from hoodline.formats.json_decoder import JsonDecoder

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("user", pa.string()),
        ("event", pa.string()),
        ("amount", pa.float64()),
        ("count", pa.int32()),
        ("ok", pa.bool_()),
        ("ts", pa.timestamp("ms")),
        ("tags", pa.list_(pa.string())),
    ]
)


def make_values(n: int, bad_fraction: float, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        doc = {
            "id": i,
            "user": f"user-{rnd.randrange(100_000):06d}",
            "event": rnd.choice(["click", "view", "purchase", "signup"]),
            "amount": round(rnd.random() * 1000, 2),
            "count": rnd.randrange(1000),
            "ok": rnd.random() < 0.5,
            "ts": f"2024-03-{1 + i % 28:02d}T10:{i % 60:02d}:00",
            "tags": ["a", "bb", "ccc"][: rnd.randrange(4)],
            "note": "x" * rnd.randrange(20, 40),
        }
        bad = rnd.random() < bad_fraction
        if bad and i % 2:
            doc["count"] = "many"  # wrong type: only the bulk parse notices (bisection path)
        raw = json.dumps(doc).encode()
        if bad and not i % 2:
            raw = raw[: len(raw) // 2]  # truncated: rejected before parsing
        out.append(raw)
    return out


def run(name: str, values: list[bytes], batch: int, decode: object) -> None:
    arrays = [pa.array(values[i : i + batch], pa.binary()) for i in range(0, len(values), batch)]
    size = sum(len(v) for v in values)
    walls, cpus = [], []
    good = bad = 0
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        good = bad = 0
        for arr in arrays:
            g, b = decode(arr)  # type: ignore[operator]
            good += g
            bad += b
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    n = len(values)
    print(
        f"{name:38s} wall {wall:6.3f} s cpu {cpu:6.3f} s {n / wall:>11,.0f} rec/s "
        f"{size / wall / 1e6:>6.1f} MB/s (avg {size / n:.0f} B/msg, good {good}, bad {bad})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    decoder = JsonDecoder(SCHEMA, ["id"])

    def hoodline(arr: pa.Array) -> tuple[int, int]:
        r = decoder.decode(arr)
        return r.records.num_rows, len(r.errors)

    def baseline(arr: pa.Array) -> tuple[int, int]:
        rows, bad = [], 0
        for v in arr.to_pylist():
            try:
                d = json.loads(v)
                rows.append({k: d.get(k) for k in SCHEMA.names})
            except ValueError:
                bad += 1
        schema = SCHEMA.remove(6).insert(6, pa.field("ts", pa.string()))
        return pa.Table.from_pylist(rows, schema=schema).num_rows, bad

    parse_options = pj.ParseOptions(
        explicit_schema=pa.schema([f.with_nullable(True) for f in SCHEMA]),
        unexpected_field_behavior="ignore",
    )

    def bare_read_json(arr: pa.Array) -> tuple[int, int]:
        joined = pc.binary_join(
            pa.ListArray.from_arrays(pa.array([0, len(arr)], pa.int32()), arr),
            pa.scalar(b"\n", arr.type),
        )[0].as_buffer()
        read_options = pj.ReadOptions(use_threads=False, block_size=joined.size + 1)
        table = pj.read_json(
            pa.BufferReader(joined), read_options=read_options, parse_options=parse_options
        )
        return table.num_rows, 0

    good = make_values(args.records, 0.0)
    some_bad = make_values(args.records, 0.001)
    run(f"hoodline bulk, all good (batch {args.batch})", good, args.batch, hoodline)
    run("hoodline bulk, 0.1% bad (bisection)", some_bad, args.batch, hoodline)
    run("hoodline bulk, 1% bad (bisection)", make_values(args.records, 0.01), args.batch, hoodline)
    run("limit: bare pyarrow.json.read_json", good, args.batch, bare_read_json)
    run("per-record json.loads + from_pylist", good, args.batch, baseline)


if __name__ == "__main__":
    main()
