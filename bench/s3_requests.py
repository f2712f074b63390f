"""Requests a small upsert makes on S3 as a table gains partitions (issue 13).

A ``WriteClient`` on a table in a bucket of moto's S3 server on 127.0.0.1 (cleaning, archival
on, as a pipeline has them) writes ``--steps`` batches of ``--step-partitions`` new partitions,
each followed by ``--rounds`` upserts of one record; the HTTP requests of each upsert (all, and
the LIST requests among them) are counted from moto's request log, with the upsert's wall time.
``--partitioning nested`` (the default) keys partitions by ``day/region`` and puts each step's new
partitions under one new day; ``flat`` keys them by ``day`` alone, one new day per partition (a
table partitioned by date: every partition is a folder at the table's top).
What it shows: whether a round's request count follows the partitions the round writes or the
partitions the table has. No peer: the requests are hoodline's own (the count does not depend on
the machine's load; the seconds do).

    PYTHONPATH=src:. .venv/bin/python -m bench.s3_requests [--steps 4] [--step-partitions 250]
        [--rounds 6] [--partitioning nested|flat] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.helpers.moto_s3 import MotoS3


def _requests(log: Path, bucket: str) -> tuple[int, int]:
    """(requests, LIST requests) in moto's log so far."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if '" 20' in line
             or '" 30' in line or '" 40' in line]
    listing = sum(1 for line in lines if f'"GET /{bucket}?' in line
                  or f'"GET /{bucket}/?' in line)
    return len(lines), listing


def _day(n: int) -> str:
    return (datetime.date(2020, 1, 1) + datetime.timedelta(days=n)).isoformat()


def run(steps: int, step_partitions: int, rounds: int,
        partitioning: str = "nested") -> list[dict[str, Any]]:
    from hoodline.table.properties import TableConfig
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import WriteClient

    with tempfile.TemporaryDirectory(prefix="hoodline-s3-requests-") as wd:
        moto = MotoS3(Path(wd) / "moto.log").start()
        try:
            bucket = moto.new_bucket()
            flat = partitioning == "flat"
            fields = ("day",) if flat else ("day", "region")
            table = HudiTable.create(f"s3://{bucket}/t", TableConfig(
                "t", ("id",), fields, "v", bucket_count=1), storage_options=moto.options)
            out: list[dict[str, Any]] = []
            partitions = 0
            with WriteClient(table) as client:
                for step in range(steps):
                    n = step_partitions
                    days = ([_day(partitions + i) for i in range(n)] if flat
                            else [f"2024-01-{step + 1:02d}"] * n)
                    client.upsert(pa.table({
                        "id": [f"g{step}-{i}" for i in range(n)], "day": days,
                        "region": [f"r{i}" for i in range(n)], "v": [1] * n}))
                    partitions += n
                    for r in range(rounds):
                        before = _requests(moto.log, bucket)
                        start = time.perf_counter()
                        client.upsert(pa.table({
                            "id": [f"s{step}-{r}"], "day": [_day(0) if flat else "2024-01-01"],
                            "region": ["r0"], "v": [2]}))
                        seconds = time.perf_counter() - start
                        time.sleep(0.3)  # moto writes its log line after answering
                        after = _requests(moto.log, bucket)
                        row = {"partitions": partitions, "round": r + 1,
                               "seconds": round(seconds, 3),
                               "requests": after[0] - before[0],
                               "list_requests": after[1] - before[1]}
                        out.append(row)
                        print(json.dumps(row), flush=True)
            return out
        finally:
            moto.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--step-partitions", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--partitioning", choices=("nested", "flat"), default="nested",
                        help="nested: day/region, new partitions under one new day per step; "
                        "flat: day only, one new day per partition")
    parser.add_argument("--json", type=Path, default=None, help="Write the rows here too.")
    args = parser.parse_args(argv)
    rows = run(args.steps, args.step_partitions, args.rounds, args.partitioning)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
