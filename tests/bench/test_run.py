"""bench/run.py dispatches to a benchmark by name (one command per benchmark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_run_dispatches_by_name() -> None:
    out = subprocess.run(
        [sys.executable, "bench/run.py", "balance", "--records-per-partition", "10"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("| flink-legacy |") == 3


def test_bench_run_rejects_unknown_names() -> None:
    out = subprocess.run(
        [sys.executable, "bench/run.py", "nosuch"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 2 and "usage" in out.stderr


def test_bench_run_knows_every_benchmark_module() -> None:
    from bench.run import NAMES

    helpers = {"__init__", "common", "run", "upsert_data", "upsert_systems", "pipeline_common"}
    modules = {p.stem for p in (REPO / "bench").glob("*.py")} - helpers
    assert set(NAMES) == modules
