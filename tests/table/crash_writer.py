"""Subprocess for crash tests: writes with the hand writer, then SIGKILLs itself at a stage.

usage: crash_writer.py <table path> <stage>   stage: partial | written | committed | hold_lock
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.* imports

from hoodline.table.lock import WriterLock
from hoodline.table.table import HudiTable
from tests.table.handwriter import HandWriter, rows


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    path, stage = sys.argv[1], sys.argv[2]
    table = HudiTable.open(path)
    lock = WriterLock(table, owner=f"crash-{stage}", heartbeat_interval=0.2, expiry=30).acquire()
    if stage == "hold_lock":
        print("locked", flush=True)
        time.sleep(60)
        return
    w = HandWriter(table)
    p = w.start()
    w.write_group(p, ("region=us", "fg-us"), rows(["a", "n1"], "us", [100, 1]))
    if stage == "partial":
        # second file: marker created and file half written
        name = "fg-eu_0-9-0_" + p.ts + ".parquet"
        from hoodline.table.markers import Markers

        Markers(table, p.ts).create("region=eu", name, "MERGE")
        (table.base_path / "region=eu" / name).write_bytes(b"PAR1 truncated")
        die()
    w.write_group(p, ("region=eu", "fg-eu"), rows(["n2"], "eu", [2]))
    if stage == "written":
        die()
    w.table.timeline.complete(p.instant, _md(w, p))
    if stage == "committed":  # before markers are removed and the lock released
        die()
    lock.release()


def _md(w: HandWriter, p: object) -> object:
    from hoodline.table.commit_metadata import CommitMetadata
    from hoodline.table.schema import arrow_to_avro_schema_json

    return CommitMetadata(
        p.stats,  # type: ignore[attr-defined]
        "UPSERT",
        {"schema": arrow_to_avro_schema_json(p.schema, "trips")},  # type: ignore[attr-defined]
    )


if __name__ == "__main__":
    main()
