"""Time from starting ``hoodline run`` to its first commit, with several pipelines started at once.

    PYTHONPATH=src .venv/bin/python -m bench.first_commit [--pipelines 2] [--messages 200000]
        [--runs 3] [--record]

What a user sees after typing ``hoodline run pipeline.toml``: the parent starts the bundled broker
(127.0.0.1 only, stopped by PID at the end), loads ``--messages`` JSON messages of ~200 bytes into
one 8-partition topic (bench.ingest's data; not timed), writes one pipeline file per pipeline
(bench.ingest's pipeline: BUCKET index, upsert, ``local[2]``, 2 readers; each its own table and
consumer group) and then starts every pipeline at the same moment as its own
``python -m hoodline run PIPELINE.toml`` process (continuous mode, as a user runs it). It measures,
per pipeline, the time from starting the process to the first completed instant in the table's
timeline (the ``.commit`` file appearing, polled every 20 ms), then stops every pipeline with
Ctrl-C (SIGINT, as a user would; SIGKILL by PID after 60 s) and checks each exited cleanly with at
least one commit. All pipelines share the machine's cores, as two users' pipelines would.

The JVM class-data archive hoodline builds on its first start on a machine (``runtime.
jvm-class-cache``) exists when this runs (any earlier Spark start built it); ``--no-class-cache``
measures without it. Each run starts fresh processes and tables; the report shows the median run
per pipeline and every run's figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common
from bench.ingest import end_offsets, hoodline_config, load_topic
from hoodline.table.write.operation import WriteOperation

POLL_S = 0.02
STOP_TIMEOUT_S = 60.0


def pipeline_file(
    workdir: Path, bootstrap: str, index: int, class_cache: bool
) -> tuple[Path, Path]:
    """Pipeline file and table path of pipeline ``index``."""
    table = workdir / f"table-{index}"
    text = hoodline_config(bootstrap, table, WriteOperation.UPSERT)
    text = text.replace(
        "[table]", f'properties.group.id = "bench-first-commit-{index}"\n[table]', 1
    )
    if not class_cache:
        text += "jvm-class-cache = false\n"
    path = workdir / f"pipeline-{index}.toml"
    path.write_text(text)
    return path, table


def first_commit_at(table: Path) -> bool:
    hoodie = table / ".hoodie"
    return hoodie.is_dir() and any(hoodie.glob("*.commit"))


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C, then SIGKILL by PID if it does not end in time; (exit code, stderr tail)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return -9, "killed: did not stop within 60 s of Ctrl-C\n" + err[-2000:]
    return proc.returncode, err[-2000:]


def one_run(
    workdir: Path, bootstrap: str, pipelines: int, class_cache: bool, timeout: float
) -> list[dict[str, Any]]:
    """Start ``pipelines`` ``hoodline run`` processes at once; time each one's first commit."""
    files = [pipeline_file(workdir, bootstrap, i, class_cache) for i in range(pipelines)]
    load_before = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hoodline", "run", str(path)],
            cwd=workdir,
            env=common.child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path, _ in files
    ]
    firsts: list[float | None] = [None] * pipelines
    try:
        while any(f is None for f in firsts) and time.perf_counter() - t0 < timeout:
            for i, (_, table) in enumerate(files):
                if firsts[i] is None and first_commit_at(table):
                    firsts[i] = time.perf_counter() - t0
            if any(p.poll() is not None for p in procs):
                break  # a pipeline ended before committing: reported below
            time.sleep(POLL_S)
    finally:
        ended = [stop(p) for p in procs]
    results = []
    for i, ((_, table), first, (code, err)) in enumerate(zip(files, firsts, ended, strict=True)):
        if first is None:
            results.append({"pipeline": i, "error": f"no commit (exit code {code}): {err}"})
        elif code != 0:
            results.append({"pipeline": i, "error": f"exit code {code} after Ctrl-C: {err}"})
        else:
            results.append({"pipeline": i, "first_commit_s": first, "load_before": load_before})
        shutil.rmtree(table, ignore_errors=True)
    return results


def run(
    messages: int,
    pipelines: int,
    runs: int,
    class_cache: bool = True,
    timeout: float = 300.0,
) -> dict[str, Any]:
    from hoodline.broker import EmbeddedBroker

    info = common.machine()
    wd = Path(tempfile.mkdtemp(prefix="bench-first-commit-"))
    broker = EmbeddedBroker(log_dir=wd)
    broker.start()
    try:
        loaded = load_topic(broker.bootstrap_servers, messages)
        if sum(end_offsets(broker.bootstrap_servers)) != messages:
            raise RuntimeError("the topic does not hold the messages just produced")
        per_run = []
        for attempt in range(runs):
            per_run.append(one_run(wd, broker.bootstrap_servers, pipelines, class_cache, timeout))
            print(f"  run {attempt + 1}: {per_run[-1]}", file=sys.stderr, flush=True)
        return {
            "messages": messages,
            "pipelines": pipelines,
            "runs": per_run,
            "class_cache": class_cache,
            "loaded": loaded,
            "machine": info,
        }
    finally:
        broker.stop()
        shutil.rmtree(wd, ignore_errors=True)


def failures(rep: dict[str, Any]) -> list[str]:
    return [r["error"] for run in rep["runs"] for r in run if "error" in r]


def report(rep: dict[str, Any]) -> str:
    rows = []
    for i in range(rep["pipelines"]):
        times = [run[i].get("first_commit_s") for run in rep["runs"]]
        ok = [t for t in times if t is not None]
        rows.append(
            [
                f"pipeline {i + 1}",
                common.secs(statistics.median(ok)) if len(ok) == len(times) else "FAILED",
                " / ".join("failed" if t is None else f"{t:.1f}" for t in times),
                str(rep["runs"][0][i].get("load_before", ["-"])[0]),
            ]
        )
    intro = (
        f"{rep['pipelines']} `hoodline run PIPELINE.toml` processes started at the same moment on "
        f"this machine (continuous mode; upsert, BUCKET index, local[2], 2 readers each; their own "
        f"tables), each reading a topic of {rep['messages']:,} JSON messages (8 partitions, "
        "bundled broker). First commit = time from starting the process to the first completed "
        "instant in its table's timeline; every pipeline then stopped cleanly with Ctrl-C. JVM "
        f"class-data archive: {'used' if rep['class_cache'] else 'off (--no-class-cache)'}. "
        f"{len(rep['runs'])} run(s); median and every run shown. Issue 10's target: <= 15 s."
    )
    header = ["pipeline", "first commit (median)", "each run (s)", "load avg before (1 min)"]
    return intro + "\n\n" + common.markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pipelines", type=int, default=2)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-class-cache", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    for name in ("pipelines", "messages", "runs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    rep = run(args.messages, args.pipelines, args.runs, not args.no_class_cache, args.timeout)
    text = report(rep)
    common.publish("First commit after `hoodline run`", text, rep, args.json, args.record)
    bad = failures(rep)
    for error in bad:
        print(error, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
