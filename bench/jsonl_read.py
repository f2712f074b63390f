"""JSON-lines read benchmark: the file source's reader with and without record isolation
(``errors.tolerance=all``: bad lines become rejected records, the rest of the file is read)
against pyarrow's streaming JSON reader alone (the limit), on one file.

    PYTHONPATH=src:. .venv/bin/python -m bench.jsonl_read [--lines 1000000] [--bad-every 0]
        [--repeat 3] [--record]

The file has ``--lines`` events (ids, a user, an amount, an ISO timestamp, a country, a small
int; ~118 bytes a line), generated with a fixed seed; ``--bad-every K`` makes every K-th line
unparseable (then only the isolating reader can read the file; the others are skipped). The
three readers run alternately in this process, ``--repeat`` times each, on the declared schema
with the default block size; reported are medians of the process's CPU and wall time. The
readers must agree: the same good rows (and, isolating, one rejected record per bad line).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from bench import common
from hoodline.connectors.files.formats.jsonl import read_jsonl
from hoodline.connectors.files.rejections import is_rejected_records
from hoodline.connectors.files.split import FileSourceSplit
from hoodline.formats.json_decoder import parse_schema

SCHEMA = pa.schema([
    ("id", pa.int64()), ("user", pa.string()), ("amount", pa.float64()),
    ("at", pa.timestamp("us", tz="UTC")), ("country", pa.string()), ("n", pa.int32()),
])
BLOCK = 4 * 1024 * 1024
COUNTRIES = ["de", "fr", "us", "br", "in", "jp", "za", "au"]


def write_file(path: Path, lines: int, bad_every: int) -> int:
    """Write the events; returns the number of bad lines."""
    rng = np.random.default_rng(7)
    users = rng.integers(0, 10**6, lines)
    amounts = rng.random(lines) * 100
    bad = 0
    with open(path, "w") as fh:
        for i in range(lines):
            if bad_every and i % bad_every == bad_every - 1:
                fh.write('{"id": ' + str(i) + ', "user": oops}\n')
                bad += 1
                continue
            fh.write(json.dumps({
                "id": i, "user": f"user-{users[i]:07d}", "amount": round(float(amounts[i]), 4),
                "at": f"2024-03-{1 + i % 28:02d}T10:00:00Z", "country": COUNTRIES[i % 8],
                "n": i % 7,
            }) + "\n")
    return bad


def _split(path: Path) -> FileSourceSplit:
    st = os.stat(path)
    return FileSourceSplit(str(path), st.st_size, st.st_mtime_ns)


def read_pyarrow(path: Path) -> tuple[int, int]:
    parse = pj.ParseOptions(explicit_schema=parse_schema(SCHEMA),
                            unexpected_field_behavior="ignore")
    with pa.OSFile(str(path)) as f:
        reader = pj.open_json(f, read_options=pj.ReadOptions(block_size=BLOCK),
                              parse_options=parse)
        return sum(b.num_rows for b in reader), 0


def read_hoodline(path: Path, isolate: bool) -> tuple[int, int]:
    rows = rejected = 0
    for batch in read_jsonl(_split(path), SCHEMA, BLOCK, True, isolate_records=isolate):
        if is_rejected_records(batch):
            rejected += batch.num_rows
        else:
            rows += batch.num_rows
    return rows, rejected


READERS = {
    "pyarrow open_json": lambda p: read_pyarrow(p),
    "hoodline": lambda p: read_hoodline(p, False),
    "hoodline, isolating": lambda p: read_hoodline(p, True),
}


def run(lines: int, bad_every: int, repeat: int, workdir: Path) -> dict[str, Any]:
    path = workdir / "events.jsonl"
    bad = write_file(path, lines, bad_every)
    names = [n for n in READERS if not bad or n == "hoodline, isolating"]
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    problems: list[str] = []
    for _ in range(repeat):
        for name in names:
            cpu, wall, (rows, rejected) = common.timed(lambda name=name: READERS[name](path))
            times[name].append((cpu, wall))
            if (rows, rejected) != (lines - bad, bad if name == "hoodline, isolating" else 0):
                problems.append(f"{name}: {rows} rows, {rejected} rejected")
    return {"lines": lines, "bad": bad, "bytes": path.stat().st_size, "repeat": repeat,
            "times": times, "problems": problems}


def report(rep: dict[str, Any]) -> str:
    rows = []
    base = statistics.median(c for c, _ in next(iter(rep["times"].values())))
    for name, runs in rep["times"].items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        rows.append([name, f"{cpu:.3f} s", f"{wall:.3f} s", f"{cpu / base:.2f}x"])
    table = common.markdown_table(["reader", "CPU (median)", "wall (median)", "CPU ratio"], rows)
    head = (f"{rep['lines']:,} lines ({rep['bytes'] / 2**20:,.0f} MiB), {rep['bad']:,} bad, "
            f"{rep['repeat']} runs each, alternating.")
    check = ("Every reader returned the expected rows." if not rep["problems"]
             else "PROBLEMS: " + "; ".join(rep["problems"]))
    return f"{head}\n\n{table}\n\n{check}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--bad-every", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rep = run(args.lines, args.bad_every, args.repeat, Path(tmp))
    text = report(rep)
    print(text)
    if args.record:
        common.append_block("JSON-lines read (file source)", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
