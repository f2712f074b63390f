"""Upsert benchmark: hoodline (BUCKET, BLOOM) vs deltalake MERGE vs pyiceberg upsert.

    PYTHONPATH=src .venv/bin/python -m bench.upsert [--rows 5000000] [--batch 1000000]
        [--systems hoodline-bucket,hoodline-bloom,delta,iceberg] [--buckets 4] [--record]

The parent makes the data once (fixed seeds) and writes it as Parquet; every system then runs in
its own child process (separate memory peaks) that loads the base table (timed separately),
upserts the batch (timed), reads its table back and writes it sorted by key. The parent checks
every result against the independently computed expected contents and prints time, rows/s,
bytes rewritten (from each system's own commit record) and peak RSS, plus ratios
(peer time / hoodline BUCKET time). ``--record`` appends the block to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench import common
from bench.upsert_data import (
    canonical,
    expected_after_upsert,
    first_difference,
    make_base,
    make_batch,
)
from bench.upsert_systems import SYSTEMS, make_system

BASELINE = "hoodline-bucket"


def run_child(system: str, workdir: Path, buckets: int) -> dict[str, Any]:
    """Child process body: load, upsert (measured), read back sorted."""
    base = pq.read_table(workdir / "base.parquet")
    batch = pq.read_table(workdir / "batch.parquet")
    target = workdir / system
    sysobj = make_system(system, target, buckets)
    with common.PeakRss() as load_mem:
        t0 = time.perf_counter()
        sysobj.load(base)
        load_s = time.perf_counter() - t0
    del base
    with common.PeakRss() as up_mem:
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        facts = sysobj.upsert(batch)
        upsert_s = time.perf_counter() - t0
        upsert_cpu = time.process_time() - cpu0
    maxrss = common.max_rss_bytes()
    result = canonical(sysobj.read())
    pq.write_table(result, workdir / f"result-{system}.parquet")
    return {
        "system": system,
        "load_s": load_s,
        "upsert_s": upsert_s,
        "upsert_cpu_s": upsert_cpu,
        "load_peak_rss": load_mem.peak,
        "upsert_start_rss": up_mem.start_rss,
        "upsert_peak_rss": up_mem.peak,
        "maxrss_before_readback": maxrss,
        **facts,
    }


def make_data(workdir: Path, rows: int, batch_rows: int) -> tuple[int, int]:
    base = make_base(rows)
    batch = make_batch(base, batch_rows)
    pq.write_table(base, workdir / "base.parquet")
    pq.write_table(batch, workdir / "batch.parquet")
    pq.write_table(expected_after_upsert(base, batch), workdir / "expected.parquet")
    return base.num_rows, batch.num_rows


def run(
    rows: int,
    batch_rows: int,
    systems: list[str],
    buckets: int = 4,
    workdir: Path | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Make data, run every system, verify contents; returns a report dict."""
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="bench-upsert-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    info = common.machine()
    try:
        t0 = time.perf_counter()
        n_base, n_batch = make_data(wd, rows, batch_rows)
        gen_s = time.perf_counter() - t0
        expected = pq.read_table(wd / "expected.parquet")
        results: dict[str, dict[str, Any]] = {}
        for name in systems:
            res = common.run_child(
                "bench.upsert",
                ["--child", name, "--workdir", str(wd), "--buckets", str(buckets)],
                timeout=timeout,
            )
            if "error" not in res:
                got = pq.read_table(wd / f"result-{name}.parquet")
                res["difference"] = first_difference(got, expected)
                res["rows_after"] = got.num_rows
                del got
                shutil.rmtree(wd / name, ignore_errors=True)
            results[name] = res
            print(f"  {name}: {_short(res)}", file=sys.stderr, flush=True)
        return {
            "rows": n_base,
            "batch": n_batch,
            "buckets": buckets,
            "generate_s": gen_s,
            "expected_rows": expected.num_rows,
            "machine": info,
            "results": results,
        }
    finally:
        if own:
            shutil.rmtree(wd, ignore_errors=True)


def _short(res: dict[str, Any]) -> str:
    if "error" in res:
        return "ERROR " + str(res["error"]).splitlines()[-1]
    return f"upsert {res['upsert_s']:.2f} s, load {res['load_s']:.2f} s, diff={res['difference']}"


def report(rep: dict[str, Any]) -> str:
    results = rep["results"]
    base = results.get(BASELINE, {}).get("upsert_s")
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append([name, "error: " + r["error"].splitlines()[-1][:80]] + [""] * 8)
            continue
        ratio = (
            f"{r['upsert_s'] / base:.2f}" if base and name != BASELINE else "1.00" if base else "-"
        )
        rows.append(
            [
                name,
                common.secs(r["upsert_s"]),
                common.rate(rep["batch"], r["upsert_s"]),
                ratio,
                common.mib(r["bytes_rewritten"]),
                f"{r['files_written']} ({r['files_merged']} replaced)",
                common.mib(r["upsert_peak_rss"]),
                common.secs(r["load_s"]),
                "identical" if r["difference"] is None else "DIFFERS: " + r["difference"],
                f"{r['load_before'][0]}",
            ]
        )
    header = [
        "system",
        "upsert time",
        "rows/s",
        f"time / {BASELINE}",
        "bytes rewritten",
        "files written",
        "peak RSS (upsert)",
        "load time",
        "contents vs expected",
        "load avg (1 min)",
    ]
    intro = (
        f"{rep['rows']:,} base rows (8 partitions, 13 columns), upsert batch {rep['batch']:,} "
        f"(half updates, half new keys); hoodline bucket count {rep['buckets']} per partition; "
        f"expected rows after: {rep['expected_rows']:,}. rows/s = batch rows / upsert time. "
        "Bytes rewritten: hoodline commit write stats, delta new files' sizes in the log, "
        "iceberg snapshot summaries (added-files-size). Peak RSS sampled every 10 ms in the "
        "system's own process during the upsert (it includes the base/batch data held by the "
        "harness process, same for all)."
    )
    return intro + "\n\n" + common.markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --rows and --batch")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per system, seconds")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--record", action="store_true", help="append the results to BENCHMARKS.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw report here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        common.emit_result(run_child(args.child, args.workdir, args.buckets))
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    rep = run(
        int(args.rows * args.scale),
        int(args.batch * args.scale),
        systems,
        args.buckets,
        args.workdir,
        args.timeout,
    )
    text = report(rep)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rep, indent=2, default=str))
    if args.record:
        common.append_block("Upsert", text, rep["machine"])
    bad = [n for n, r in rep["results"].items() if "error" in r or r.get("difference")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
