"""Rounds benchmark (issue 6 item 3, with the memory of item 4): fixed overhead of empty and of
one-record rounds, and produce-to-visible latency with a producer at a steady rate.

    PYTHONPATH=src .venv/bin/python -m bench.rounds_latency [--rate 20000] [--seconds 120]
        [--empty-rounds 100] [--tiny-rounds 20] [--operation upsert] [--index BUCKET] [--record]

The parent starts the bundled broker (Tansu, memory engine, 127.0.0.1, stopped by PID) and
creates one topic with 8 partitions; a child process is the hoodline driver: it starts Spark
(``local[2]``, timed apart), runs one continuous pipeline (``Pipeline.run(once=False)``) in a
thread and, on the same table and Spark session, goes through three phases:

1. **empty rounds**: nothing is produced; the pipeline's own round reports of ``--empty-rounds``
   empty rounds give the time a round takes to find there is nothing to do
   (``RoundReport.duration_seconds``: plan + bound the round against the broker's end offsets)
   and the interval between consecutive empty rounds (includes the pipeline's idle wait of
   ``max(round.min-interval, 0.2 s)``);
2. **one-record rounds**: ``--tiny-rounds`` times, one message is produced (and flushed), and the
   driver waits for the round that commits it: the duration of a committing round with a
   single record (Spark job + write + commit) and that record's produce-to-visible latency;
3. **steady load**: a producer child process sends ``--rate`` msg/s (paced every 10 ms,
   round-robin over the 8 partitions) for ``--seconds`` seconds; afterwards the pipeline runs
   until every message is committed, then stops.

Method for produce-to-visible latency: every message carries ``pt`` = the producer's wall clock
(``time.time()``, microseconds) taken right before ``produce()``. The pipeline calls
``on_round`` after a round's instant is completed on the timeline (so its rows are readable by
any snapshot reader from then on); the callback records ``time.time()`` for that instant. After
the run the table is read once (snapshot, columns ``_hoodie_commit_time``, ``id``, ``pt``) and
each row's latency is ``visible_time[_hoodie_commit_time] - pt``. The check that
``_hoodie_commit_time`` names the round that first wrote the row: the number of rows per commit
time equals that round's ``records_written``, and ids are exactly 0..n-1 once each.
Producer and driver run on the same machine (same clock). Tansu quirk workaround: messages go
through :class:`hoodline.broker.ExactEndProducer` (holds back each partition's newest message
until the next one; ~0.4 ms at 20k msg/s over 8 partitions, and flushed at the end).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from bench import common
from bench.pipeline_common import RoleRss, create_topic, parse, percentiles, pipeline_toml
from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation

PARTITIONS = 8
TOPIC = "bench-rounds"
SCHEMA = {"id": "int64", "pt": "int64", "pad": "string"}
PAD = "p" * 160  # ~200-byte messages


def message(i: int) -> bytes:
    return f'{{"id":{i},"pt":{int(time.time() * 1e6)},"pad":"{PAD}"}}'.encode()


# --- producer child ------------------------------------------------------------------------------
def produce_steady(
    bootstrap: str, rate: float, seconds: float, start_id: int, tick: float = 0.01
) -> dict[str, Any]:
    """Send ``rate`` msg/s for ``seconds`` (ids from ``start_id``), paced every ``tick``."""
    from hoodline.broker import ExactEndProducer

    total = int(rate * seconds)
    producer = ExactEndProducer(
        bootstrap, **{"linger.ms": 5, "queue.buffering.max.messages": 4_000_000}
    )
    t0 = time.perf_counter()
    sent = 0
    behind_max = 0
    while sent < total:
        tick_start = time.perf_counter()
        target = min(total, int(rate * (tick_start - t0)) + 1)
        behind_max = max(behind_max, target - sent)
        while sent < target:
            i = start_id + sent
            producer.produce(TOPIC, i % PARTITIONS, message(i))
            sent += 1
        delay = tick - (time.perf_counter() - tick_start)
        if delay > 0:
            time.sleep(delay)
    produce_s = time.perf_counter() - t0
    producer.flush(120)
    return {
        "sent": sent,
        "produce_s": produce_s,
        "flushed_s": time.perf_counter() - t0,
        "achieved_rate": sent / produce_s if produce_s else 0.0,
        "max_backlog_per_tick": behind_max,
    }


# --- driver child --------------------------------------------------------------------------------
class _Rounds:
    """Collects round reports with the wall time they were delivered (after the commit)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, Any]] = []
        self.cond = threading.Condition()

    def __call__(self, report: Any) -> None:
        with self.cond:
            self.items.append((time.time(), report))
            self.cond.notify_all()

    def wait_for(self, pred: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.items):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
                self.cond.wait(min(left, 1.0))

    def written(self) -> int:
        with self.cond:
            return sum(r.records_written for _, r in self.items)


def _stats(values: list[float]) -> dict[str, float]:
    return percentiles(values, (50, 90, 99))


def driver(
    bootstrap: str,
    out: Path,
    *,
    rate: float,
    seconds: float,
    empty_rounds: int,
    tiny_rounds: int,
    operation: WriteOperation,
    index: IndexType,
    table_type: TableType,
    max_records: int,
    min_interval: float,
    drain_timeout: float,
    compaction: str = "inline",
    rss_rescan: float = 0.5,
) -> dict[str, Any]:
    from hoodline.broker import ExactEndProducer
    from hoodline.pipeline.api import Pipeline
    from hoodline.table.read import read_snapshot
    from hoodline.table.table import HudiTable

    cfg = parse(
        pipeline_toml(
            bootstrap=bootstrap,
            topic=TOPIC,
            out=out,
            schema=SCHEMA,
            operation=operation,
            index=index,
            table_type=table_type,
            max_records=max_records,
            min_interval=min_interval,
            table_options={"hoodline.compaction.async": str(compaction == "async").lower()},
        ),
        "bench-rounds",
    )
    rounds = _Rounds()
    stop = threading.Event()
    failure: list[BaseException] = []
    result: dict[str, Any] = {
        "operation": operation.config_text,
        "index": index.config_text,
        "table_type": table_type.config_text,
        "compaction": compaction,
        "max_records": max_records,
        "rss_rescan_s": rss_rescan,
    }
    with RoleRss(rescan=rss_rescan) as mem, Pipeline(cfg) as pipeline:
        t0 = time.perf_counter()
        pipeline.engine  # noqa: B018 - start Spark (timed apart)
        result["spark_start_s"] = time.perf_counter() - t0

        def _run() -> None:
            try:
                pipeline.run(once=False, on_round=rounds, stop=stop)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)
                with rounds.cond:
                    rounds.cond.notify_all()

        thread = threading.Thread(target=_run, name="pipeline", daemon=True)
        thread.start()
        try:

            def check_failed(items: list[tuple[float, Any]]) -> None:
                if failure:
                    raise RuntimeError(f"pipeline failed: {failure[0]!r}") from failure[0]

            # 1. empty rounds
            def enough_empty(items: list[tuple[float, Any]]) -> bool:
                check_failed(items)
                return sum(1 for _, r in items if not r.committed) >= empty_rounds

            rounds.wait_for(enough_empty, 60 + 5 * empty_rounds, "empty rounds")
            with rounds.cond:
                empty = [(t, r) for t, r in rounds.items if not r.committed][:empty_rounds]
            result["empty"] = {
                "rounds": len(empty),
                "duration_s": _stats([r.duration_seconds for _, r in empty]),
                "interval_s": _stats([b[0] - a[0] for a, b in itertools.pairwise(empty)]),
                "first_duration_s": empty[0][1].duration_seconds if empty else None,
            }

            # 2. one-record rounds
            next_id = 0
            tiny_lat: list[float] = []
            tiny_reports: list[Any] = []
            producer = ExactEndProducer(bootstrap)
            for _ in range(tiny_rounds):
                with rounds.cond:
                    seen = len(rounds.items)
                pt = time.time()
                producer.produce(TOPIC, next_id % PARTITIONS, message(next_id))
                producer.flush(30)
                next_id += 1

                def committed_after(items: list[tuple[float, Any]], seen: int = seen) -> bool:
                    check_failed(items)
                    return any(r.committed for _, r in items[seen:])

                rounds.wait_for(committed_after, 120, "a one-record round")
                with rounds.cond:
                    t_vis, rep = next((t, r) for t, r in rounds.items[seen:] if r.committed)
                tiny_lat.append(t_vis - pt)
                tiny_reports.append(rep)
            result["tiny"] = {
                "rounds": len(tiny_reports),
                "records": sum(r.records_written for r in tiny_reports),
                "duration_s": _stats([r.duration_seconds for r in tiny_reports]),
                "read_s": _stats([r.read_seconds for r in tiny_reports]),
                "write_s": _stats([r.write_seconds for r in tiny_reports]),
                "commit_s": _stats([r.commit_seconds for r in tiny_reports]),
                "visible_after_produce_s": _stats(tiny_lat),
            }

            # 3. steady load from a producer process
            with rounds.cond:
                steady_from = len(rounds.items)
            cmd = [
                sys.executable,
                "-m",
                "bench.rounds_latency",
                "--producer",
                "--bootstrap",
                bootstrap,
                "--rate",
                str(rate),
                "--seconds",
                str(seconds),
                "--start-id",
                str(next_id),
            ]
            proc = subprocess.Popen(
                cmd, cwd=common.REPO, env=common.child_env(), stdout=subprocess.PIPE, text=True
            )
            mem.exclude.add(proc.pid)
            stdout, _ = proc.communicate(timeout=seconds * 3 + 180)
            produced_at = time.perf_counter()
            prod = next(
                json.loads(line[len(common.RESULT_PREFIX) :])
                for line in stdout.splitlines()
                if line.startswith(common.RESULT_PREFIX)
            )
            if proc.returncode != 0:
                raise RuntimeError(f"producer exited with {proc.returncode}")
            expected = next_id + int(prod["sent"])

            def all_written(items: list[tuple[float, Any]]) -> bool:
                check_failed(items)
                return bool(sum(r.records_written for _, r in items) >= expected)

            rounds.wait_for(all_written, drain_timeout, "every produced message to be committed")
            result["drain_after_producer_s"] = time.perf_counter() - produced_at
        finally:
            stop.set()
            thread.join(timeout=300)
        if failure:
            raise RuntimeError(f"pipeline failed: {failure[0]!r}") from failure[0]
        if thread.is_alive():
            raise RuntimeError("the pipeline did not stop within 300 s")
    result["memory_peak"] = dict(mem.peak)
    result["memory_samples"] = mem.samples

    # latency per message, from the table
    with rounds.cond:
        items = list(rounds.items)
    visible = {r.instant: t for t, r in items if r.committed}
    written = {r.instant: r.records_written for _, r in items if r.committed}
    table = read_snapshot(HudiTable.open(out), columns=["_hoodie_commit_time", "id", "pt"])
    ids = table.column("id")
    n = expected
    problems = []
    if table.num_rows != n:
        problems.append(f"{table.num_rows} rows, expected {n}")
    if int(pc.count_distinct(ids).as_py()) != table.num_rows:
        problems.append("duplicate ids")
    if n and (int(pc.sum(ids).as_py()) != n * (n - 1) // 2 or int(pc.min(ids).as_py()) != 0):
        problems.append("ids are not exactly 0..n-1")
    commit_times = table.column("_hoodie_commit_time").to_numpy(zero_copy_only=False)
    per_commit = dict(zip(*np.unique(commit_times, return_counts=True), strict=True))
    if {str(k): int(v) for k, v in per_commit.items()} != written:
        problems.append("rows per _hoodie_commit_time differ from the rounds' records_written")
    unknown = set(map(str, per_commit)) - set(visible)
    if unknown:
        problems.append(f"rows with commit times no round reported: {sorted(unknown)[:3]}")
    vis = np.array([visible.get(str(c), math.nan) for c in commit_times], dtype=np.float64)
    lat = vis - table.column("pt").to_numpy().astype(np.float64) / 1e6
    steady = table.column("id").to_numpy() >= next_id
    steady_lat = lat[steady]
    if not np.all(np.isfinite(lat)) or not np.all(lat > 0):
        problems.append("latencies not all positive and finite")
    steady_reports = [r for _, r in items[steady_from:] if r.committed]
    result["steady"] = {
        "rate_target": rate,
        "seconds": seconds,
        "producer": prod,
        "messages": int(steady.sum()),
        "latency_s": _stats(steady_lat.tolist()),
        "rounds": len(steady_reports),
        "round_duration_s": _stats([r.duration_seconds for r in steady_reports]),
        "records_per_round": _stats([float(r.records_written) for r in steady_reports]),
        "max_lag": max((sum(r.lag.values()) for r in steady_reports), default=0),
        "retries": sum(r.retries for _, r in items),
        # per committed round: [seconds since the first steady round, duration, records]
        "round_series": [
            [t - items[steady_from][0], r.duration_seconds, r.records_written]
            for t, r in items[steady_from:]
            if r.committed
        ],
    }
    result["latency_all_min_s"] = float(np.nanmin(lat)) if lat.size else None
    result["problems"] = problems
    result["rows"] = table.num_rows
    return result


# --- parent --------------------------------------------------------------------------------------
def run(
    rate: float = 20_000,
    seconds: float = 120,
    empty_rounds: int = 100,
    tiny_rounds: int = 20,
    operation: WriteOperation = WriteOperation.UPSERT,
    index: IndexType = IndexType.BUCKET,
    max_records: int = 500_000,
    min_interval: float = 0.0,
    drain_timeout: float = 900,
    timeout: float | None = 3600,
    table_type: TableType = TableType.COPY_ON_WRITE,
    compaction: str = "inline",
    rss_rescan: float = 0.5,
) -> dict[str, Any]:
    from hoodline.broker import EmbeddedBroker

    info = common.machine()
    wd = Path(tempfile.mkdtemp(prefix="bench-rounds-"))
    broker = EmbeddedBroker(log_dir=wd)
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
        res = common.run_child(
            "bench.rounds_latency",
            [
                "--child",
                "--bootstrap",
                broker.bootstrap_servers,
                "--out",
                str(wd / "table"),
                "--rate",
                str(rate),
                "--seconds",
                str(seconds),
                "--empty-rounds",
                str(empty_rounds),
                "--tiny-rounds",
                str(tiny_rounds),
                "--operation",
                operation.config_text,
                "--index",
                index.config_text,
                "--table-type",
                table_type.config_text,
                "--compaction",
                compaction,
                "--max-records",
                str(max_records),
                "--min-interval",
                str(min_interval),
                "--drain-timeout",
                str(drain_timeout),
                "--rss-rescan",
                str(rss_rescan),
            ],
            timeout=timeout,
        )
        return {"machine": info, "result": res}
    finally:
        broker.stop()
        shutil.rmtree(wd, ignore_errors=True)


def _fmt(st: dict[str, float] | None, keys: tuple[str, ...] = ("p50", "p90", "p99", "max")) -> str:
    if not st:
        return "-"
    return ", ".join(f"{k} {st[k]:.3f}" for k in keys if k in st)


def report(rep: dict[str, Any]) -> str:
    r = rep["result"]
    if "error" in r:
        return "**error**: " + str(r["error"]).splitlines()[-1][:300]
    e, t, s = r["empty"], r["tiny"], r["steady"]
    m = r["memory_peak"]
    p = s["producer"]
    lines = [
        f"{r.get('table_type', 'COPY_ON_WRITE')} table "
        f"(compaction {r.get('compaction', 'inline')}), "
        f"operation `{r['operation']}`, index {r.get('index', 'BUCKET')} (8 buckets with BUCKET), "
        "non-partitioned, Spark `local[2]`, "
        f"2 readers, round.max-records {r['max_records']:,}, round.min-interval 0; topic of 8 "
        f"partitions, ~200-byte JSON messages. Spark start {r['spark_start_s']:.1f} s (not in any "
        f"figure). Load average before/after: {r['load_before']} / {r.get('load_after')}.",
        "",
        "| measure | value (seconds) |",
        "|---|---|",
        f"| empty round: duration (plan + bound, {e['rounds']} rounds) | {_fmt(e['duration_s'])} |",
        f"| empty round: interval between empty rounds (incl. 0.2 s idle wait) "
        f"| {_fmt(e['interval_s'])} |",
        f"| one-record round: duration ({t['rounds']} rounds) | {_fmt(t['duration_s'])} |",
        f"| one-record round: read / write / commit p50 | {t['read_s'].get('p50', 0):.3f} / "
        f"{t['write_s'].get('p50', 0):.3f} / {t['commit_s'].get('p50', 0):.3f} |",
        f"| one-record round: produce-to-visible | {_fmt(t['visible_after_produce_s'])} |",
        f"| steady {p['achieved_rate']:,.0f} msg/s (target {s['rate_target']:,.0f}) for "
        f"{p['produce_s']:.0f} s: produce-to-visible over {s['messages']:,} messages "
        f"| {_fmt(s['latency_s'])} |",
        f"| steady: round duration ({s['rounds']} rounds) | {_fmt(s['round_duration_s'])} |",
        f"| steady: records per round | {_fmt(s['records_per_round'], ('p50', 'max'))} |",
        "| steady: largest lag after a round (records behind the end offsets fetched when the "
        f"round was planned) | {s['max_lag']:,} |",
        f"| after the producer stopped, until all committed | {r['drain_after_producer_s']:.1f} |",
        "",
        f"Peak RSS over the whole run (sampled every 50 ms, {r['memory_samples']} samples, "
        f"process tree scanned every {r.get('rss_rescan_s', 0.0):g} s): "
        f"driver Python {common.mib(m['driver_py'])}, Spark JVM {common.mib(m['jvm'])}, "
        f"driver (Python + JVM, same instant) {common.mib(m['driver'])}, Python workers "
        f"{common.mib(m['workers'])}, all {common.mib(m['total'])} (producer process excluded).",
        "",
        f"Checks: {r['rows']:,} rows; "
        + (
            "every message exactly once, rows per commit = the round's records_written, "
            "all latencies positive and finite"
            if not r["problems"]
            else "PROBLEMS: " + "; ".join(r["problems"])
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rate", type=float, default=20_000)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--empty-rounds", type=int, default=100)
    ap.add_argument("--tiny-rounds", type=int, default=20)
    ap.add_argument("--operation", type=WriteOperation.parse, default=WriteOperation.UPSERT,
                    choices=list(WriteOperation))
    ap.add_argument("--index", type=IndexType.parse, default=IndexType.BUCKET,
                    choices=list(IndexType))
    ap.add_argument("--table-type", type=TableType.parse, default=TableType.COPY_ON_WRITE,
                    choices=list(TableType))
    ap.add_argument("--compaction", choices=("inline", "async"), default="inline",
                    help="merge-on-read: compact between rounds or beside them")
    ap.add_argument("--max-records", type=int, default=500_000)
    ap.add_argument("--min-interval", type=float, default=0.0)
    ap.add_argument("--drain-timeout", type=float, default=900)
    ap.add_argument("--rss-rescan", type=float, default=0.5,
                    help="seconds between scans of the process tree for the memory figures "
                         "(0: every 50 ms sample, as before 2026-11-23; costs the driver CPU)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--producer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--start-id", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.producer:
        common.emit_result(produce_steady(args.bootstrap, args.rate, args.seconds, args.start_id))
        return 0
    if args.child:
        common.emit_result(
            driver(
                args.bootstrap,
                args.out,
                rate=args.rate,
                seconds=args.seconds,
                empty_rounds=args.empty_rounds,
                tiny_rounds=args.tiny_rounds,
                operation=args.operation,
                index=args.index,
                table_type=args.table_type,
                max_records=args.max_records,
                min_interval=args.min_interval,
                drain_timeout=args.drain_timeout,
                compaction=args.compaction,
                rss_rescan=args.rss_rescan,
            )
        )
        return 0
    rep = run(
        args.rate,
        args.seconds,
        args.empty_rounds,
        args.tiny_rounds,
        args.operation,
        args.index,
        args.max_records,
        args.min_interval,
        args.drain_timeout,
        args.timeout,
        args.table_type,
        args.compaction,
        args.rss_rescan,
    )
    text = report(rep)
    common.publish("Rounds: empty-round overhead and produce-to-visible latency", text, rep,
                   args.json, args.record)
    r = rep["result"]
    return 1 if "error" in r or r.get("problems") else 0


if __name__ == "__main__":
    raise SystemExit(main())
