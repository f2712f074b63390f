"""Profile hoodline's upsert path with pyinstrument (same data as bench.upsert).

    PYTHONPATH=src .venv/bin/python -m bench.profile_upsert [--scale 1.0] [--index BUCKET]
        [--threads 1] [--html out.html]

Loads the base table (not profiled), then profiles one ``WriteClient.upsert`` of the batch and
prints the call tree (wall-clock) plus the upsert's wall and CPU time. pyinstrument samples only
the main thread, so file groups are written by one thread unless ``--threads`` says otherwise
(``hoodline.write.threads``; 0 = every core, as the benchmark runs).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from pyinstrument import Profiler

from bench.upsert_data import make_base, make_batch
from bench.upsert_systems import Hoodline
from hoodline.table.properties import IndexType


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--batch", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--index", type=IndexType.parse, default=IndexType.BUCKET,
                    choices=list(IndexType))
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="hoodline.write.threads")
    ap.add_argument("--html", type=Path, default=None)
    args = ap.parse_args(argv)
    base = make_base(int(args.rows * args.scale))
    batch = make_batch(base, int(args.batch * args.scale))
    wd = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    try:
        system = Hoodline(
            wd / "t", args.index, args.buckets, {"hoodline.write.threads": args.threads}
        )
        system.load(base)
        del base
        profiler = Profiler(interval=0.005)
        t0, cpu0 = time.perf_counter(), time.process_time()
        profiler.start()
        facts = system.upsert(batch)
        profiler.stop()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        if args.html:
            args.html.write_text(profiler.output_html())
        print(f"upsert {len(batch):,} rows: {elapsed:.2f} s wall, {cpu:.2f} s CPU; {facts}")
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
