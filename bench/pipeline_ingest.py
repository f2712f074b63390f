"""Kafka -> table ingest through the hoodline pipeline at two input sizes (issue 6 items 2 and 4):
hoodline ``run --once`` (insert, upsert) next to the peers of :mod:`bench.ingest` (single-process
limit, ``write_deltalake`` loop), with the peak RSS of the driver (Python + its Spark JVM) and of
the Python workers, and how they scale when the input doubles.

    PYTHONPATH=src .venv/bin/python -m bench.pipeline_ingest [--messages 2500000] [--double]
        [--max-records 1000000] [--systems hoodline-insert,hoodline-upsert,limit,delta]
        [--record]

The parent starts the bundled broker and loads ``--messages`` messages with
:func:`bench.ingest.load_topic` (the same data, topic and partitioning as ``bench.ingest``: 8
partitions, ~215-byte JSON, fixed seed). Each system runs in its own child process on the whole
topic; outputs are checked with :func:`bench.ingest.check_output` (ids 0..n-1 exactly once).
With ``--double`` the same number of messages again (ids n..2n-1, same generator) is appended to
the topic and every system runs again on all 2n messages.

* ``limit`` / ``delta``: the children of :mod:`bench.ingest` (unchanged; their peak RSS is the
  whole process tree, sampled every 10 ms).
* ``hoodline-insert`` / ``hoodline-upsert``: ``Pipeline(config).run(once=True)`` -- what
  ``hoodline run --once`` calls -- with Spark ``local[2]``, ``--readers`` readers, ``--writers``
  writer tasks and rounds of ``--max-records`` records / ``--max-bytes``; BUCKET index with 8
  buckets, non-partitioned table keyed by ``id``, ``round.min-interval = 0``. Wall time is
  reported including and excluding the Spark start; memory per role (driver Python, Spark JVM,
  Python workers) is sampled every 50 ms with psutil (:class:`bench.pipeline_common.RoleRss`).
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

from bench import common, ingest
from bench.pipeline_common import RoleRss, parse, pipeline_toml
from hoodline.config.arrow_types import format_type
from hoodline.table.write.operation import WriteOperation

HOODLINE = ("hoodline-insert", "hoodline-upsert")
DEFAULT_SYSTEMS = ("hoodline-insert", "hoodline-upsert", "limit", "delta")


def _schema() -> dict[str, str]:
    return {f.name: format_type(f.type) for f in ingest.SCHEMA}


def hoodline_child(
    system: str,
    bootstrap: str,
    total: int,
    out: Path,
    *,
    max_records: int,
    max_bytes: str,
    readers: int,
    writers: int,
) -> dict[str, Any]:
    from hoodline.pipeline.api import Pipeline

    operation = WriteOperation.parse(system.split("-", 1)[1])
    cfg = parse(
        pipeline_toml(
            bootstrap=bootstrap,
            topic=ingest.TOPIC,
            out=out,
            schema=_schema(),
            operation=operation,
            max_records=max_records,
            max_bytes=max_bytes,
            readers=readers,
            writers=writers,
        ),
        "bench-pipeline-ingest",
    )
    rounds: list[Any] = []
    with RoleRss() as mem:
        t0 = time.perf_counter()
        cpu0 = ingest._tree_cpu()
        with Pipeline(cfg) as pipeline:
            pipeline.engine  # noqa: B018 - start Spark (timed apart)
            t1 = time.perf_counter()
            summary = pipeline.run(once=True, on_round=rounds.append)
            t2 = time.perf_counter()
            cpu = ingest._tree_cpu() - cpu0
    if summary.records_read != total:
        raise RuntimeError(f"hoodline read {summary.records_read} of {total} messages")
    committed = [r for r in rounds if r.committed]
    from hoodline.table.table import HudiTable

    table = HudiTable.open(out)
    stats = [
        st
        for inst in table.timeline.completed_commits()
        for group in table.timeline.read_commit_metadata(inst).partition_to_write_stats.values()
        for st in group
    ]
    return {
        "system": system,
        "time_s": t2 - t0,
        "run_s": t2 - t1,
        "spark_start_s": t1 - t0,
        "cpu_s": cpu,
        "memory_peak": dict(mem.peak),
        "peak_rss": mem.peak["total"],
        "files": summary.commits,
        "rounds": summary.rounds,
        "records_written": summary.records_written,
        "error_records": summary.error_records,
        "round_read_s": sum(r.read_seconds for r in committed),
        "round_write_s": sum(r.write_seconds for r in committed),
        "round_commit_s": sum(r.commit_seconds for r in committed),
        "round_total_s": sum(r.duration_seconds for r in rounds),
        "round_retries": sum(r.retries for r in rounds),
        # copy-on-write: rows/bytes of every file version written (rewrites count again)
        "rows_written_total": sum(st.num_writes for st in stats),
        "bytes_written_total": sum(st.total_write_bytes for st in stats),
        "config": {
            "max_records": max_records,
            "max_bytes": max_bytes,
            "readers": readers,
            "writers": writers,
        },
    }


def run_scale(
    bootstrap: str, n: int, systems: list[str], wd: Path, hood_args: list[str], timeout: float
) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name in systems:
        out = wd / f"{name}-{n}"
        if name in HOODLINE:
            module, args = "bench.pipeline_ingest", ["--child", name, *hood_args]
        else:
            module, args = "bench.ingest", ["--child", name, "--batch-records", "250000"]
        args += ["--bootstrap", bootstrap, "--messages", str(n), "--out", str(out)]
        res = common.run_child(module, args, timeout=timeout)
        if "error" not in res:
            res["difference"] = ingest.check_output(ingest.read_output(name, out), n)
        shutil.rmtree(out, ignore_errors=True)
        results[name] = res
        print(f"  {n}: {name}: {res.get('time_s', res.get('error'))}", file=sys.stderr, flush=True)
        print(
            "PARTIAL " + json.dumps({"messages": n, "system": name, "result": res}, default=str),
            file=sys.stderr,
            flush=True,
        )
    return results


def run(
    n: int,
    systems: list[str],
    double: bool,
    max_records: int = 1_000_000,
    max_bytes: str = "512MiB",
    readers: int = 2,
    writers: int = 2,
    timeout: float = 3600,
) -> dict[str, Any]:
    from hoodline.broker import EmbeddedBroker

    info = common.machine()
    hood_args = [
        "--max-records",
        str(max_records),
        "--max-bytes",
        max_bytes,
        "--readers",
        str(readers),
        "--writers",
        str(writers),
    ]
    wd = Path(tempfile.mkdtemp(prefix="bench-pipeline-ingest-"))
    broker = EmbeddedBroker(log_dir=wd)
    broker.start()
    try:
        bs = broker.bootstrap_servers
        loads = [ingest.load_topic(bs, n)]
        scales: dict[str, dict[str, dict[str, Any]]] = {}
        sizes = [n, 2 * n] if double else [n]
        for i, size in enumerate(sizes):
            if i:
                loads.append(ingest.produce_messages(bs, n, n))
            ends = ingest.end_offsets(bs)
            if sum(ends) != size:
                raise RuntimeError(f"broker end offsets {ends} do not add up to {size}")
            scales[str(size)] = run_scale(bs, size, systems, wd, hood_args, timeout)
        return {
            "messages": sizes,
            "loads": loads,
            "avg_message_bytes": loads[0]["bytes"] / max(n, 1),
            "machine": info,
            "config": {
                "max_records": max_records,
                "max_bytes": max_bytes,
                "readers": readers,
                "writers": writers,
            },
            "scales": scales,
        }
    finally:
        broker.stop()
        shutil.rmtree(wd, ignore_errors=True)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def report(rep: dict[str, Any]) -> str:
    c = rep["config"]
    parts = [
        f"~{rep['avg_message_bytes']:.0f}-byte JSON messages in 8 partitions "
        "(bench.ingest's data), "
        f"bundled Tansu broker; hoodline: Spark `local[2]`, {c['readers']} readers, "
        f"{c['writers']} writer tasks, rounds of {c['max_records']:,} records / {c['max_bytes']}, "
        "BUCKET index 8 buckets, non-partitioned, round.min-interval 0. Peers: batches of 250,000. "
        "`limit` = confluent-kafka + pyarrow.json + parquet, `delta` = write_deltalake loop "
        "(bench.ingest's children). 'target' = limit time / hoodline time (issue: >= 0.6)."
    ]
    for size, res in rep["scales"].items():
        n = int(size)
        limit = res.get("limit", {}).get("time_s")
        rows = []
        for name, r in res.items():
            if "error" in r:
                rows.append([name, "error: " + r["error"].splitlines()[-1][:120], *[""] * 10])
                continue
            hood = name in HOODLINE
            m = r.get("memory_peak", {})
            rows.append(
                [
                    name,
                    common.secs(r["time_s"]),
                    common.secs(r["run_s"]) if hood else "-",
                    common.secs(r["cpu_s"]),
                    common.rate(n, r["time_s"]),
                    common.rate(n, r["run_s"]) if hood else "-",
                    _ratio(limit, r["time_s"])
                    + (f" ({_ratio(limit, r['run_s'])})" if hood else ""),
                    common.mib(m.get("driver")) if hood else "-",
                    common.mib(m.get("workers")) if hood else "-",
                    common.mib(r["peak_rss"]),
                    "exact" if r["difference"] is None else "WRONG: " + r["difference"],
                    str(r["load_before"][0]),
                ]
            )
        table = common.markdown_table(
            [
                "system",
                "wall incl. Spark start",
                "wall excl. Spark start",
                "CPU (tree)",
                "msg/s",
                "msg/s excl. start",
                "limit / system (excl. start)",
                "driver peak RSS (Py+JVM)",
                "workers peak RSS",
                "tree peak RSS",
                "output",
                "load 1 min",
            ],
            rows,
        )
        notes = [
            f"- {name}: Spark start {r['spark_start_s']:.1f} s; {r['rounds']} rounds "
            f"({r['files']} commits) summing {r['round_total_s']:.1f} s = read (slowest reader) "
            f"{r['round_read_s']:.1f} s + shuffle/write {r['round_write_s']:.1f} s + commit "
            f"{r['round_commit_s']:.1f} s (+ planning); driver Python "
            f"{common.mib(r['memory_peak']['driver_py'])}, "
            f"JVM {common.mib(r['memory_peak']['jvm'])}"
            f"; {r['round_retries']} retries; file versions written hold "
            f"{r.get('rows_written_total', 0):,} rows"
            for name, r in res.items()
            if name in HOODLINE and "error" not in r
        ]
        parts.append(f"**{n:,} messages**\n\n{table}\n\n" + "\n".join(notes))
    if len(rep["scales"]) == 2:
        (s1, r1), (s2, r2) = rep["scales"].items()
        lines = []
        for name in r1:
            a, b = r1[name], r2.get(name, {})
            if "error" in a or "error" in b or not b:
                continue
            if name in HOODLINE:
                ma, mb = a["memory_peak"], b["memory_peak"]
                lines.append(
                    f"- {name}: time x{b['time_s'] / a['time_s']:.2f} (excl. start "
                    f"x{b['run_s'] / a['run_s']:.2f}); "
                    f"driver RSS x{mb['driver'] / ma['driver']:.2f} "
                    f"({common.mib(ma['driver'])} -> {common.mib(mb['driver'])}); workers RSS "
                    f"x{mb['workers'] / max(ma['workers'], 1):.2f} ({common.mib(ma['workers'])} -> "
                    f"{common.mib(mb['workers'])})"
                )
            else:
                lines.append(
                    f"- {name}: time x{b['time_s'] / a['time_s']:.2f}; tree RSS "
                    f"x{b['peak_rss'] / a['peak_rss']:.2f}"
                )
        parts.append(f"Input doubled ({int(s1):,} -> {int(s2):,}):\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=2_500_000)
    ap.add_argument("--double", action="store_true", help="run again with twice the messages")
    ap.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    ap.add_argument("--max-records", type=int, default=1_000_000)
    ap.add_argument("--max-bytes", default="512MiB")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        common.emit_result(
            hoodline_child(
                args.child,
                args.bootstrap,
                args.messages,
                args.out,
                max_records=args.max_records,
                max_bytes=args.max_bytes,
                readers=args.readers,
                writers=args.writers,
            )
        )
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    rep = run(
        args.messages,
        systems,
        args.double,
        args.max_records,
        args.max_bytes,
        args.readers,
        args.writers,
        args.timeout,
    )
    text = report(rep)
    common.publish("Kafka -> table ingest through the pipeline, memory scaling", text, rep,
                   args.json, args.record)
    bad = [
        f"{s}/{n}"
        for s, res in rep["scales"].items()
        for n, r in res.items()
        if "error" in r or r.get("difference")
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
