"""Profile hoodline's upsert path with pyinstrument (same data as bench.upsert).

    PYTHONPATH=src .venv/bin/python -m bench.profile_upsert [--scale 1.0] [--index BUCKET]
        [--table-type MERGE_ON_READ] [--threads 1] [--html out.html]

Loads the base table (not profiled), then profiles one ``WriteClient.upsert`` of the batch and
prints the call tree (wall-clock) plus the upsert's wall and CPU time; on a merge-on-read table
then the compaction of the result the same way. pyinstrument samples only
the main thread, so file groups are written by one thread unless ``--threads`` says otherwise
(``hoodline.write.threads``; 0 = every core, as the benchmark runs).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyinstrument import Profiler

from bench.upsert_data import make_base, make_batch
from bench.upsert_systems import Hoodline
from hoodline.table.properties import IndexType, TableType


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--index", type=IndexType.parse, default=IndexType.BUCKET,
                    choices=list(IndexType))
    ap.add_argument("--table-type", type=TableType.parse, default=TableType.COPY_ON_WRITE,
                    choices=list(TableType))
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="hoodline.write.threads")
    ap.add_argument("--html", type=Path, default=None)
    args = ap.parse_args(argv)
    base = make_base(int(args.rows * args.scale))
    batch = make_batch(base, int(args.batch * args.scale))
    wd = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    try:
        options = {"hoodline.write.threads": args.threads, "hoodie.compact.inline": False}
        system = Hoodline(wd / "t", args.index, args.buckets, options, args.table_type)
        system.load(base)
        del base
        steps: list[tuple[str, Callable[[], object]]] = [("upsert", lambda: system.upsert(batch))]
        if args.table_type is TableType.MERGE_ON_READ:
            steps.append(("compaction", system.compact))
        for name, step in steps:
            profiler = Profiler(interval=0.005)
            t0, cpu0 = time.perf_counter(), time.process_time()
            profiler.start()
            facts = step()
            profiler.stop()
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            print(profiler.output_text(unicode=False, color=False, show_all=False))
            if args.html:
                args.html.with_suffix(f".{name}.html").write_text(profiler.output_html())
            print(f"{name} ({len(batch):,} rows upserted): {elapsed:.2f} s wall, {cpu:.2f} s CPU;"
                  f" {facts}")
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
