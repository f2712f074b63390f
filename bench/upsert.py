"""Upsert benchmark: hoodline (copy-on-write BUCKET and BLOOM, merge-on-read BUCKET with Avro or
Parquet log blocks) vs deltalake MERGE vs pyiceberg upsert.

    PYTHONPATH=src .venv/bin/python -m bench.upsert [--rows 5000000] [--batch 1000000]
        [--systems hoodline-bucket,hoodline-bloom,hoodline-mor-bucket,hoodline-mor-parquet,
                   delta,iceberg]
        [--buckets 4] [--runs 3] [--record]

The parent makes the data once (fixed seeds) and writes it as Parquet; every system then runs in
its own child process (separate memory peaks) that loads the base table (timed separately),
upserts the batch (timed), reads its table back and writes it sorted by key. The parent checks
every result against the independently computed expected contents and prints time, rows/s,
bytes rewritten (from each system's own commit record) and peak RSS, plus ratios
(peer time / hoodline BUCKET time). ``--record`` appends the block to BENCHMARKS.md.
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

import pyarrow.parquet as pq

from bench import common
from bench.upsert_data import (
    canonical,
    expected_after_upsert,
    first_difference,
    make_base,
    make_batch,
)
from bench.upsert_systems import SYSTEMS, Hoodline, make_system

BASELINE = "hoodline-bucket"


def run_phase(phase: str, system: str, workdir: Path, buckets: int) -> dict[str, Any]:
    """Child process body. ``load``: create the table from base.parquet (timed).
    ``upsert``: a fresh process opens the table, reads the batch, upserts it (timed, memory
    sampled), then reads the table back and writes it sorted by key (not timed)."""
    target = workdir / system
    if phase == "load":
        base = pq.read_table(workdir / "base.parquet")
        sysobj = make_system(system, target, buckets)
        with common.PeakRss() as mem:
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            sysobj.load(base)
            elapsed = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
        return {"load_s": elapsed, "load_cpu_s": cpu, "load_peak_rss": mem.peak}
    if phase != "upsert":
        raise ValueError(f"unknown phase '{phase}'")
    batch = pq.read_table(workdir / "batch.parquet")
    sysobj = make_system(system, target, buckets)
    with common.PeakRss() as mem:
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        facts = sysobj.upsert(batch)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    if isinstance(sysobj, Hoodline) and sysobj.table.config.merge_on_read:
        facts.update(sysobj.compact())  # the result read back below is the compacted table
    result = canonical(sysobj.read())
    pq.write_table(result, workdir / f"result-{system}.parquet")
    return {
        "upsert_s": elapsed,
        "upsert_cpu_s": cpu,
        "upsert_start_rss": mem.start_rss,
        "upsert_peak_rss": mem.peak,
        **facts,
    }


def run_system(name: str, wd: Path, buckets: int, timeout: float | None) -> dict[str, Any]:
    common_args = ["--child", name, "--workdir", str(wd), "--buckets", str(buckets)]
    loaded = common.run_child("bench.upsert", [*common_args, "--phase", "load"], timeout)
    if "error" in loaded:
        return {"error": "load: " + loaded["error"], "load_before": loaded["load_before"]}
    res = common.run_child("bench.upsert", [*common_args, "--phase", "upsert"], timeout)
    res["load_s"] = loaded["load_s"]
    res["load_cpu_s"] = loaded["load_cpu_s"]
    res["load_peak_rss"] = loaded["load_peak_rss"]
    return res


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
    runs: int = 1,
) -> dict[str, Any]:
    """Make data, run every system ``runs`` times (interleaved), verify contents; returns a
    report dict whose per-system result is the run with the median upsert wall time."""
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="bench-upsert-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    info = common.machine()
    try:
        t0 = time.perf_counter()
        n_base, n_batch = make_data(wd, rows, batch_rows)
        gen_s = time.perf_counter() - t0
        expected = pq.read_table(wd / "expected.parquet")
        measured: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        for _attempt, name in ((a, nm) for a in range(runs) for nm in systems):
            res = run_system(name, wd, buckets, timeout)
            if "error" not in res:
                got = pq.read_table(wd / f"result-{name}.parquet")
                res["difference"] = first_difference(got, expected)
                res["rows_after"] = got.num_rows
                del got
                shutil.rmtree(wd / name, ignore_errors=True)
            measured[name].append(res)
            print(f"  {name}: {_short(res)}", file=sys.stderr, flush=True)
        results = {name: median_run(rs) for name, rs in measured.items()}
        return {
            "runs": runs,
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


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median upsert wall time, every run's upsert wall/CPU and load time
    beside it (see :func:`bench.common.median_run`)."""
    chosen = common.median_run(
        runs, "upsert_s", ("upsert_s", "upsert_cpu_s", "load_s", "steal_s"))
    if "error" not in chosen and all("compact_s" in r for r in runs):
        # compaction is compared with the COW upsert's median: every run's is kept
        chosen["runs_compact_s"] = [r["compact_s"] for r in runs]
    return chosen


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
            rows.append([name, "error: " + str(r["error"]).splitlines()[-1][:80]] + [""] * 12)
            continue
        ratio = f"{r['upsert_s'] / base:.2f}" if base else "-"
        rows.append(
            [
                name,
                common.secs(r["upsert_s"]),
                common.secs(r["upsert_cpu_s"]),
                " / ".join(f"{w:.1f}" for w in r.get("runs_upsert_s", [r["upsert_s"]])),
                common.rate(rep["batch"], r["upsert_s"]),
                ratio,
                common.mib(r["bytes_rewritten"]),
                f"{r['files_written']} ({r['files_merged']} replaced)",
                common.mib(r["upsert_peak_rss"]),
                common.mib(r["upsert_start_rss"]),
                common.secs(r["load_s"]),
                "identical" if r["difference"] is None else "DIFFERS: " + r["difference"],
                f"{r['load_before'][0]}",
                common.steal_text(r.get("runs_steal_s", [r.get("steal_s")])),
            ]
        )
    header = [
        "system",
        "upsert wall",
        "upsert CPU",
        "upsert wall of each run (s)",
        "rows/s (wall)",
        f"wall / {BASELINE}",
        "bytes rewritten",
        "files written",
        "peak RSS (upsert process)",
        "RSS before upsert",
        "load wall",
        "contents vs expected",
        "load avg (1 min)",
        "steal of each upsert process (s)",
    ]
    intro = (
        f"{rep['rows']:,} base rows (8 partitions, 13 columns), upsert batch {rep['batch']:,} "
        f"(half updates of uniformly chosen keys, half new keys); hoodline bucket count "
        f"{rep['buckets']} per partition; expected rows after: {rep['expected_rows']:,}. "
        "Each system loads the base in one process and upserts in a fresh one. Upsert wall time "
        "covers opening the table/writer through the completed commit; CPU = process CPU time "
        "(user+sys, all threads) of the same span. rows/s = batch rows / wall time. Bytes "
        "rewritten: hoodline commit write stats, delta sizes of the files its log added, iceberg "
        "snapshot summaries (added-files-size). Peak RSS sampled every 10 ms in the upsert "
        "process (includes the batch it read, ~150 MB per 1M rows). "
        f"Each system ran {rep.get('runs', 1)} time(s), interleaved; a row shows the run with "
        "the median upsert wall time. Steal: CPU time the hypervisor took from the machine "
        "while each upsert process ran (its compaction included): the host was busy then."
    )
    notes = [
        f"{name}: then compacted in {common.secs(r['compact_s'])} wall, "
        f"{common.secs(r['compact_cpu_s'])} CPU (not in the upsert time; the contents check "
        "reads the compacted table)"
        + (f"; compaction wall of each run (s): "
           f"{' / '.join(f'{c:.2f}' for c in r['runs_compact_s'])}, median "
           f"{statistics.median(r['runs_compact_s']):.2f} s" if "runs_compact_s" in r else "")
        for name, r in results.items()
        if "compact_s" in r
    ]
    tail = "\n\n" + "\n".join(f"- {n}" for n in notes) if notes else ""
    return intro + "\n\n" + common.markdown_table(header, rows) + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --rows and --batch")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per system, seconds")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3, help="runs of each system; median shown")
    ap.add_argument("--record", action="store_true", help="append the results to BENCHMARKS.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw report here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        common.emit_result(run_phase(args.phase, args.child, args.workdir, args.buckets))
        return common.end_child(args.child)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    rep = run(
        int(args.rows * args.scale),
        int(args.batch * args.scale),
        systems,
        args.buckets,
        args.workdir,
        args.timeout,
        args.runs,
    )
    text = report(rep)
    common.publish("Upsert", text, rep, args.json, args.record)
    bad = [n for n, r in rep["results"].items() if "error" in r or r.get("difference")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
