"""Appends benchmark: writes that keep every row of a base file, with the old row groups copied
(``hoodline.parquet.copy.row.groups``, the default) against encoded again (the option off).

    PYTHONPATH=src:. .venv/bin/python -m bench.appends [--rows 500000] [--rounds 4]
        [--compaction-base 300000] [--repeat 3] [--record]

Two cases, through :class:`~hoodline.table.write.client.WriteClient` (no Spark), on a local
table under a temporary folder:

* ``cow-insert``: a copy-on-write table (BUCKET index, 8 buckets) takes ``--rounds`` inserts of
  ``--rows`` new keys each (the rows of the ingest benchmark's messages, generated with numpy):
  every round after the first rewrites every bucket's file with the old rows plus the new ones.
  Reported: CPU and wall time of each insert.
* ``mor-compaction``: a merge-on-read table (BUCKET, 2 buckets) with a base file of
  ``--compaction-base`` rows per bucket, then 6 deltacommits of 13,000 new keys per bucket (an
  append stream, as ``bench.rounds_latency`` writes): the compaction of both slices is timed.

Each case runs ``--repeat`` times per variant, the variants alternating, each on a fresh table
(the same rows; the writes use the default ``hoodline.write.threads``, every core). Times are
the process's CPU time (all threads) and wall time; the report gives medians and the ratio
encoded / copied. The two variants' tables must read back identically (rows and meta columns
but the file names), which the benchmark checks.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import common
from hoodline.table.properties import IndexType, TableConfig, TableType
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient

VARIANTS = {"copied": True, "encoded": False}
COPY_OPTION = "hoodline.parquet.copy.row.groups"
EVENTS = np.array(["click", "view", "purchase", "signup", "refund", "logout"])
COUNTRIES = np.array(["de", "fr", "us", "br", "in", "jp", "za", "au"])
LOG_ROWS = 13_000
LOG_COMMITS = 6


def rows(start: int, n: int) -> pa.Table:
    """Rows of ids ``start .. start+n-1`` shaped like the ingest benchmark's messages."""
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n, dtype=np.int64)
    users = pc.binary_join_element_wise(
        "user-", pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 10**6, n)), pa.string()), 7, "0"),
        "")
    return pa.table({
        "id": ids,
        "user": users,
        "event": pa.array(EVENTS[rng.integers(0, len(EVENTS), n)]),
        "amount": np.round(rng.random(n) * 1000, 2),
        "count": rng.integers(0, 1000, n).astype(np.int32),
        "ok": rng.random(n) < 0.5,
        "ts": pa.array(1_709_251_200_000_000 + rng.integers(0, 86_400 * 30, n) * 10**6,
                       pa.timestamp("us", "UTC")),
        "country": pa.array(COUNTRIES[rng.integers(0, len(COUNTRIES), n)]),
        "session": pc.cast(pa.array(rng.integers(0, 2**62, n)), pa.string()),
    })


def _config(table_type: TableType, buckets: int) -> TableConfig:
    return TableConfig(
        name="appends", record_key_fields=("id",), partition_fields=(), precombine_field="ts",
        index_type=IndexType.BUCKET, bucket_count=buckets, table_type=table_type,
    )


def _content(path: Path) -> pa.Table:
    """What must not depend on the variant, sorted by id: every column but the file name, the
    commit time as the number of the write that wrote the row, and the sequence number
    without its instant (the instants differ between two tables)."""
    snap = read_snapshot(HudiTable.open(path))
    times = snap.column("_hoodie_commit_time")
    write = pc.index_in(times, value_set=pc.unique(times).sort())
    seq = pc.utf8_slice_codeunits(snap.column("_hoodie_commit_seqno"), 17)
    snap = snap.drop_columns(["_hoodie_file_name", "_hoodie_commit_time", "_hoodie_commit_seqno"])
    return snap.append_column("write", write).append_column("seq", seq).sort_by("id")


def _options(copy: bool, row_group_rows: int | None, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {COPY_OPTION: copy, "hoodie.clean.automatic": False, **extra}
    if row_group_rows is not None:
        out["hoodline.parquet.row.group.rows"] = row_group_rows
    return out


def cow_insert(
    workdir: Path, copy: bool, n: int, rounds: int, row_group_rows: int | None = None
) -> dict[str, Any]:
    path = workdir / f"cow-{copy}"
    shutil.rmtree(path, ignore_errors=True)
    table = HudiTable.create(path, _config(TableType.COPY_ON_WRITE, 8))
    batches = [rows(r * n, n) for r in range(rounds)]
    per_round = []
    with WriteClient(table, _options(copy, row_group_rows)) as client:
        for batch in batches:
            cpu, wall, _ = common.timed(lambda b=batch: client.insert(b))
            per_round.append((cpu, wall))
    return {"rounds": per_round, "content": _content(path)}


def mor_compaction(
    workdir: Path, copy: bool, base_rows: int, row_group_rows: int | None = None
) -> dict[str, Any]:
    path = workdir / f"mor-{copy}"
    shutil.rmtree(path, ignore_errors=True)
    table = HudiTable.create(path, _config(TableType.MERGE_ON_READ, 2))
    options = _options(copy, row_group_rows, **{"hoodie.compact.inline": False})
    with WriteClient(table, options) as client:
        client.upsert(rows(0, 2 * base_rows))
        client.compact()
        start = 2 * base_rows
        for _ in range(LOG_COMMITS):
            client.upsert(rows(start, 2 * LOG_ROWS))
            start += 2 * LOG_ROWS
        cpu, wall, done = common.timed(client.compact)
    if done is None:
        raise RuntimeError("the compaction found nothing to compact")
    return {"compaction": (cpu, wall), "content": _content(path)}


def run(
    n: int,
    rounds: int,
    base_rows: int,
    repeat: int,
    workdir: Path | None,
    row_group_rows: int | None = None,
) -> dict[str, Any]:
    """Both cases, ``repeat`` times per variant (``row_group_rows``: the tables' row-group
    size, default hoodline's)."""
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="bench-appends-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"rows": n, "rounds": rounds, "compaction_base": base_rows,
                           "repeat": repeat, "machine": common.machine(), "problems": []}
    cow: dict[str, list[list[tuple[float, float]]]] = {v: [] for v in VARIANTS}
    comp: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    try:
        for i in range(repeat):
            order = list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
            contents = {}
            for variant in order:
                res = cow_insert(wd, VARIANTS[variant], n, rounds, row_group_rows)
                cow[variant].append(res["rounds"])
                contents[("cow", variant)] = res["content"]
                res = mor_compaction(wd, VARIANTS[variant], base_rows, row_group_rows)
                comp[variant].append(res["compaction"])
                contents[("mor", variant)] = res["content"]
            for case in ("cow", "mor"):
                if not contents[(case, "copied")].equals(contents[(case, "encoded")]):
                    out["problems"].append(f"{case}: the variants' tables differ (repeat {i})")
    finally:
        if own:
            shutil.rmtree(wd, ignore_errors=True)
    out["cow_insert"] = {
        v: [{"cpu_s": statistics.median(r[k][0] for r in runs),
             "wall_s": statistics.median(r[k][1] for r in runs)} for k in range(rounds)]
        for v, runs in cow.items()
    }
    out["mor_compaction"] = {
        v: {"cpu_s": statistics.median(r[0] for r in runs),
            "wall_s": statistics.median(r[1] for r in runs)}
        for v, runs in comp.items()
    }
    return out


def report(rep: dict[str, Any]) -> str:
    n, rounds = rep["rows"], rep["rounds"]
    cow = rep["cow_insert"]
    lines = [
        f"**cow-insert**: {rounds} inserts of {n:,} new keys into a copy-on-write table "
        f"(BUCKET, 8 buckets); median of {rep['repeat']} per variant, variants alternating.",
        "",
    ]
    header = ["insert", "rows before", "copied CPU / wall", "encoded CPU / wall",
              "encoded / copied (CPU)"]
    body = []
    for k in range(rounds):
        c, e = cow["copied"][k], cow["encoded"][k]
        body.append([str(k + 1), f"{k * n:,}", f"{c['cpu_s']:.2f} / {c['wall_s']:.2f} s",
                     f"{e['cpu_s']:.2f} / {e['wall_s']:.2f} s", f"{e['cpu_s'] / c['cpu_s']:.2f}x"])
    tc = sum(r["cpu_s"] for r in cow["copied"])
    te = sum(r["cpu_s"] for r in cow["encoded"])
    body.append(["all", "", f"{tc:.2f} s CPU", f"{te:.2f} s CPU", f"{te / tc:.2f}x"])
    lines.append(common.markdown_table(header, body))
    c, e = rep["mor_compaction"]["copied"], rep["mor_compaction"]["encoded"]
    lines += [
        "",
        f"**mor-compaction**: a merge-on-read table (BUCKET, 2 buckets) with "
        f"{rep['compaction_base']:,} base rows per bucket and {LOG_COMMITS} deltacommits of "
        f"{LOG_ROWS:,} new keys per bucket; the compaction of both slices:",
        "",
        common.markdown_table(
            ["variant", "CPU (median)", "wall (median)"],
            [["copied", f"{c['cpu_s']:.3f} s", f"{c['wall_s']:.3f} s"],
             ["encoded", f"{e['cpu_s']:.3f} s", f"{e['wall_s']:.3f} s"]],
        ),
        "",
        f"encoded / copied: {e['cpu_s'] / c['cpu_s']:.2f}x CPU, "
        f"{e['wall_s'] / c['wall_s']:.2f}x wall.",
        "",
        "Checks: " + ("; ".join(rep["problems"]) if rep["problems"]
                      else "both variants' tables hold the same rows and meta columns"),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--compaction-base", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--record", action="store_true", help="append the results to BENCHMARKS.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw report here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rep = run(args.rows, args.rounds, args.compaction_base, args.repeat, args.workdir)
    rep["wall_s"] = time.perf_counter() - t0
    text = report(rep)
    common.publish("Appends: copied row groups vs encoded", text, rep, args.json, args.record)
    return 1 if rep["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
