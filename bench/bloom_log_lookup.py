"""An upsert into a merge-on-read BLOOM table whose slices have log files (the index's log lookup).

    PYTHONPATH=src:. .venv/bin/python -m bench.bloom_log_lookup [--rows 1000000]
        [--batch 200000] [--runs 3] [--json FILE]

The BLOOM index looks up keys that no base file holds among the records of the slices' log
files (a key can live in a log only; see :mod:`hoodline.table.index.bloom_index`). Each run, in
a fresh process: a table of ``--rows`` rows in 4 partitions, two upserts of ``--batch`` existing
keys (log files on every slice), then the timed upsert of ``--batch`` records, half updates and
half new keys (the new keys are the ones looked up in the logs). Prints wall and CPU seconds of
the timed upsert per run; the table is checked for one row per key (not timed). No peer: it
measures what this lookup costs (run it with another tree's ``src`` first on PYTHONPATH to
compare).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import common


def _batch(ids: np.ndarray, version: int) -> pa.Table:
    return pa.table({"id": [f"k{i:09d}" for i in ids], "r": [f"r{i % 4}" for i in ids],
                     "v": np.full(len(ids), version), "pad": ["x" * 40] * len(ids)})


def run_child(rows: int, batch: int, workdir: Path) -> dict[str, Any]:
    from hoodline.table.properties import IndexType, TableConfig, TableType
    from hoodline.table.read import read_snapshot
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import WriteClient

    table = HudiTable.create(workdir / "t", TableConfig(
        "t", ("id",), ("r",), "v", table_type=TableType.MERGE_ON_READ,
        index_type=IndexType.BLOOM))
    rng = np.random.default_rng(1)
    half = batch // 2
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.bulk_insert(_batch(np.arange(rows), 1))
        for version in (2, 3):
            client.upsert(_batch(rng.choice(rows, batch, replace=False), version))
        timed = np.concatenate([rng.choice(rows, half, replace=False),
                                np.arange(rows, rows + batch - half)])
        t0, cpu0 = time.perf_counter(), time.process_time()
        client.upsert(_batch(timed, 4))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ids = read_snapshot(HudiTable.open(table.base_path), columns=["id"]).column("id")
    return {"s": seconds, "cpu_s": cpu, "rows": len(ids),
            "keys": int(pc.count_distinct(ids).as_py())}


def run(rows: int, batch: int, runs: int) -> dict[str, Any]:
    results = []
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-bloom-logs-") as wd:
            res = common.run_child("bench.bloom_log_lookup",
                                   ["--child", "--rows", str(rows), "--batch", str(batch),
                                    "--workdir", wd], None)
        results.append(res)
        said = res.get("error") or f"{res['s']:.2f} s wall, {res['cpu_s']:.2f} s CPU"
        print(f"  run {i + 1}: {said}", flush=True)
    good = [r for r in results if "error" not in r]
    return {"rows": rows, "batch": batch, "machine": common.machine(), "runs": results,
            "s": statistics.median(r["s"] for r in good) if good else None,
            "cpu_s": statistics.median(r["cpu_s"] for r in good) if good else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        assert args.workdir is not None
        common.emit_result(run_child(args.rows, args.batch, args.workdir))
        return 0
    report = run(args.rows, args.batch, args.runs)
    print(f"median: {report['s']:.2f} s wall, {report['cpu_s']:.2f} s CPU")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
