"""Bulk-insert (load) benchmark: hoodline ``bulk_insert`` vs plain pyarrow vs deltalake.

    PYTHONPATH=src .venv/bin/python -m bench.bulk_insert [--rows 5000000] [--scale 1.0]
        [--systems hoodline-bucket,hoodline-bloom,pyarrow,delta] [--buckets 4] [--repeat 3]
        [--record]

The base rows are those of :mod:`bench.upsert` (fixed seed). Every system loads them into an
empty folder in its own fresh process, ``--repeat`` times (systems take turns, so load on the
machine spreads over all of them); the report gives the median wall and CPU time (process CPU,
all threads) and their ratio to the ``pyarrow`` peer.

``pyarrow`` is the floor hoodline's writer is measured against (issue 10: bulk_insert within
1.5x of it): one ``pyarrow.parquet.write_table`` of the same rows *with* the five ``_hoodie_``
meta columns, filled as hoodline fills them (plain strings; commit time and file name constant),
snappy, hoodline's row-group size. Building those columns is not timed, only the write.
``delta`` is ``write_deltalake`` partitioned by region. Each child reads its result back (not
timed) and reports the row count, which the parent checks.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import common
from bench.upsert_data import KEY, PARTITION, make_base
from bench.upsert_systems import make_system

SYSTEMS = ("hoodline-bucket", "hoodline-bloom", "pyarrow", "delta")
PEER = "pyarrow"
_TS = "20261122000000000"


def with_meta_columns(base: pa.Table) -> pa.Table:
    """``base`` behind the five Hudi meta columns, as hoodline fills them for one file."""
    n = base.num_rows
    seq = pc.binary_join_element_wise(
        pa.scalar(f"{_TS}_0_"), pc.cast(pa.array(np.arange(n)), pa.string()), ""
    )
    meta = {
        "_hoodie_commit_time": pa.array(np.full(n, _TS, dtype=object), pa.string()),
        "_hoodie_commit_seqno": seq,
        "_hoodie_record_key": pc.cast(base.column(KEY), pa.string()),
        "_hoodie_partition_path": pc.binary_join_element_wise(
            pa.scalar(f"{PARTITION}="), base.column(PARTITION), ""
        ),
        "_hoodie_file_name": pa.array(
            np.full(n, f"00000000-0000-0000-0000-000000000000-0_0-0-0_{_TS}.parquet", object),
            pa.string(),
        ),
    }
    return pa.Table.from_arrays([*meta.values(), *base.columns], [*meta, *base.column_names])


def _folder_bytes(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*.parquet") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def run_child(system: str, workdir: Path, buckets: int) -> dict[str, Any]:
    """Child process body: load ``base.parquet`` into ``workdir/system`` (timed), count rows."""
    target = workdir / system
    shutil.rmtree(target, ignore_errors=True)
    base = pq.read_table(workdir / "base.parquet")
    with common.PeakRss() as mem:
        if system == PEER:
            table = with_meta_columns(base)
            target.mkdir(parents=True)
            t0, cpu0 = time.perf_counter(), time.process_time()
            pq.write_table(table, target / "data.parquet", row_group_size=128 * 1024)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            rows = pq.read_metadata(target / "data.parquet").num_rows
        else:
            sysobj = make_system(system, target, buckets)
            t0, cpu0 = time.perf_counter(), time.process_time()
            sysobj.load(base)
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            rows = sysobj.read().num_rows
    files, size = _folder_bytes(target)
    shutil.rmtree(target, ignore_errors=True)
    return {
        "s": elapsed,
        "cpu_s": cpu,
        "rows": rows,
        "files": files,
        "bytes": size,
        "peak_rss": mem.peak,
    }


def run(
    rows: int,
    systems: list[str],
    buckets: int = 4,
    repeat: int = 3,
    workdir: Path | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Make the base rows, load them with every system ``repeat`` times; a report dict."""
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="bench-bulk-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    info = common.machine()
    try:
        pq.write_table(make_base(rows), wd / "base.parquet")
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        for i in range(repeat):
            for name in systems:
                args = ["--child", name, "--workdir", str(wd), "--buckets", str(buckets)]
                res = common.run_child("bench.bulk_insert", args, timeout)
                runs[name].append(res)
                short = res.get("error") or f"{res['s']:.2f} s wall, {res['cpu_s']:.2f} s CPU"
                print(f"  {name} #{i + 1}: {short}", file=sys.stderr, flush=True)
        return {
            "rows": rows,
            "buckets": buckets,
            "repeat": repeat,
            "machine": info,
            "results": {name: summarize(rs, rows) for name, rs in runs.items()},
        }
    finally:
        if own:
            shutil.rmtree(wd, ignore_errors=True)


def summarize(runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        return {"error": errors[0]}
    wrong = [r["rows"] for r in runs if r["rows"] != rows]
    if wrong:
        return {"error": f"read back {wrong[0]:,} rows, expected {rows:,}"}
    return {
        "s": statistics.median(r["s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "all_s": [round(r["s"], 3) for r in runs],
        "all_cpu_s": [round(r["cpu_s"], 3) for r in runs],
        "all_steal_s": [r.get("steal_s") for r in runs],
        "files": runs[0]["files"],
        "bytes": runs[0]["bytes"],
        "peak_rss": max(r["peak_rss"] for r in runs),
        "load_before": runs[0]["load_before"],
    }


def report(rep: dict[str, Any]) -> str:
    results = rep["results"]
    peer = results.get(PEER, {}).get("s")
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append([name, "error: " + str(r["error"]).splitlines()[-1][:80]] + [""] * 7)
            continue
        rows.append(
            [
                name,
                common.secs(r["s"]),
                common.secs(r["cpu_s"]),
                f"{r['s'] / peer:.2f}" if peer else "-",
                common.rate(rep["rows"], r["s"]),
                f"{r['files']} / {common.mib(r['bytes'])}",
                common.mib(r["peak_rss"]),
                " ".join(f"{s:.2f}" for s in r["all_s"]),
                common.steal_text(r["all_steal_s"]),
            ]
        )
    header = [
        "system",
        "wall (median)",
        "CPU (median)",
        f"wall / {PEER}",
        "rows/s (wall)",
        "files / bytes",
        "peak RSS",
        "every run's wall",
        "steal of each run (s)",
    ]
    intro = (
        f"Load of {rep['rows']:,} rows (13 columns, 8 partitions) into an empty table, median of "
        f"{rep['repeat']} runs, each in a fresh process; hoodline: WriteClient.bulk_insert "
        f"({rep['buckets']} buckets per partition for BUCKET); {PEER}: one pq.write_table of the "
        "rows with the five _hoodie_ meta columns (building them not timed); delta: "
        "write_deltalake partitioned by region. CPU = process CPU time (all threads). Steal: CPU "
        "time the hypervisor took from the machine during each run (the host was busy then)."
    )
    return intro + "\n\n" + common.markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --rows")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per run, seconds")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--record", action="store_true", help="append the results to BENCHMARKS.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw report here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        common.emit_result(run_child(args.child, args.workdir, args.buckets))
        return common.end_child(args.child)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    rep = run(
        int(args.rows * args.scale), systems, args.buckets, args.repeat, args.workdir, args.timeout
    )
    text = report(rep)
    common.publish("Bulk insert (load)", text, rep, args.json, args.record)
    return 1 if any("error" in r for r in rep["results"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
