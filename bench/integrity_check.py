"""What the check of the latest file slices against their commits costs a write (issue 11).

    PYTHONPATH=src:. .venv/bin/python -m bench.integrity_check [--groups 1000] [--commits 30]
        [--repeat 5]

Makes a local copy-on-write table whose ``--commits`` commits each rewrote all ``--groups``
file groups (over 10 partitions; the files of the last two commits exist, older versions are
"cleaned"), then times, in this process: the first check (it parses every commit of the active
timeline), and ``--repeat`` later ones, each on a fresh file-system view as a write makes it
(the listing the write makes anyway, then the check), giving medians. No peer: the check is
hoodline's own (before it, a write did the listing alone).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def run(groups: int, commits: int, repeat: int) -> dict[str, Any]:
    from hoodline.table.commit_metadata import CommitMetadata, WriteStat
    from hoodline.table.fs_view import base_file_name
    from hoodline.table.integrity import check_writable
    from hoodline.table.properties import TableConfig
    from hoodline.table.table import HudiTable

    with tempfile.TemporaryDirectory(prefix="hoodline-integrity-") as wd:
        table = HudiTable.create(Path(wd) / "t", TableConfig("t", ("id",), ("p",)))
        tl = table.timeline
        for c in range(commits):
            ts = f"20260101{c // 60:02d}{c % 60:02d}00000"
            inst = tl.transition_to_inflight(tl.create_requested("commit", ts))
            stats: dict[str, list[WriteStat]] = {}
            for g in range(groups):
                part = f"p={g % 10}"
                fid = f"{g:08d}-0000-0000-0000-000000000000-0"
                rel = f"{part}/{base_file_name(fid, '0-1-2', ts)}"
                if c >= commits - 2:
                    path = Path(str(table.base_path)) / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"x" * 100)
                stats.setdefault(part, []).append(
                    WriteStat(fid, rel, None, 1, 0, 0, 1, 100, 0, part, 100))
            tl.complete(inst, CommitMetadata(stats, "UPSERT", {}))
        table = HudiTable.open(table.base_path)  # a new writer: nothing parsed yet
        view = table.fs_view()
        view.file_groups()
        t0 = time.perf_counter()
        check_writable(view, table.meta_path)
        first = time.perf_counter() - t0
        listing, check = [], []
        for _ in range(repeat):
            view = table.fs_view()
            t1 = time.perf_counter()
            view.file_groups()
            t2 = time.perf_counter()
            check_writable(view, table.meta_path)
            t3 = time.perf_counter()
            listing.append(t2 - t1)
            check.append(t3 - t2)
    return {"groups": groups, "commits": commits, "first_check_s": round(first, 4),
            "listing_s": round(statistics.median(listing), 4),
            "check_s": round(statistics.median(check), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(run(args.groups, args.commits, args.repeat))


if __name__ == "__main__":
    main()
