"""Pipeline process for the crash tests: ``python pipeline_runner.py CONFIG.toml [--once]``.

Runs :func:`hoodline.pipeline.api.run_pipeline` and prints one JSON line per round report (and
``{"summary": ...}`` at the end) on stdout. SIGTERM / SIGINT stop it gracefully after the
current round.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from typing import Any


def main(argv: list[str]) -> int:
    from hoodline.pipeline.api import run_pipeline

    config = argv[0]
    once = "--once" in argv[1:]
    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def on_round(report: Any) -> None:
        print(json.dumps({"round": dataclasses.asdict(report)}), flush=True)

    summary = run_pipeline(config, once=once, on_round=on_round, stop=stop)
    print(json.dumps({"summary": dataclasses.asdict(summary)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
