"""Run one benchmark by name: ``bench/run.py <name> [args...]`` (= ``python -m bench.<name>``).

Names: every benchmark module in ``bench/`` (see ``NAMES``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

NAMES = (
    "upsert",
    "bulk_insert",
    "balance",
    "ingest",
    "first_commit",
    "rounds_latency",
    "pipeline_ingest",
    "profile_upsert",
    "bench_json_decoder",
    "bench_kafka_reader",
    "avro_decode",
    "protobuf_decode",
    "appends",
    "jsonl_read",
    "s3_requests",
    "bloom_log_lookup",
    "integrity_check",
)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in NAMES:
        print(f"usage: bench/run.py {{{','.join(NAMES)}}} [args...]", file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parent.parent
    for p in (str(repo / "src"), str(repo)):
        if p not in sys.path:
            sys.path.insert(0, p)
    module = importlib.import_module(f"bench.{argv[0]}")
    sys.argv = [str(repo / "bench" / f"{argv[0]}.py"), *argv[1:]]
    return int(module.main(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
