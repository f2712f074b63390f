"""Plumbing shared by the pipeline benchmarks (``bench.pipeline_ingest``, ``bench.rounds_latency``):
per-role peak RSS of a Spark driver's process tree, percentiles, pipeline configs and topics.

Roles of the process tree (sampled with psutil):

* ``driver_py`` -- this Python process (the hoodline driver: planning, commits, Py4J client);
* ``jvm`` -- the Spark JVM(s) this process started (``java`` children);
* ``workers`` -- Python processes below the JVM (PySpark daemon and its forked workers);
* ``driver`` = ``driver_py`` + ``jvm`` (what the issue calls "the driver (Python + its JVM)").

Peaks are of the sum at one sampling instant (not the sum of separate peaks).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import psutil

from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation

ROLES = ("driver_py", "jvm", "workers", "driver", "total")


def _is_java(p: psutil.Process) -> bool:
    try:
        return "java" in p.name().lower()
    except psutil.Error:
        return False


class RoleRss:
    """Samples the RSS of this process, its Spark JVM(s) and the Python workers (children of the
    JVM's daemon or of hoodline's worker zygote, a child of this process) every
    ``interval`` seconds in a thread; ``peak[role]`` holds each role's highest sample (bytes).
    Processes whose pid is in ``exclude`` (and their descendants) are ignored, e.g. a producer
    child.

    The process tree is scanned every ``rescan`` seconds only (a scan reads every process's
    ``/proc`` entry: sampling the tree 20 times a second took ~16 % of a core, in the driver's
    own process, i.e. CPU and GIL time the pipeline under measurement lost); in between, the
    known processes' RSS is read. A process living less than ``rescan`` may be missed."""

    def __init__(
        self, interval: float = 0.05, exclude: Sequence[int] = (), rescan: float = 0.5
    ) -> None:
        self.interval = interval
        self.rescan = rescan
        self.exclude = set(exclude)
        self.proc = psutil.Process()
        self.peak: dict[str, int] = dict.fromkeys(ROLES, 0)
        self.samples = 0
        self._roles: list[tuple[str, psutil.Process]] = []
        self._scanned = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _scan(self) -> None:
        roles: list[tuple[str, psutil.Process]] = []
        for child in self.proc.children(recursive=False):
            if child.pid in self.exclude:
                continue
            try:
                if _is_java(child):
                    roles.append(("jvm", child))
                    roles.extend(("workers", w) for w in child.children(recursive=True))
                else:  # the worker zygote (it becomes the daemon: the workers are its
                    # children) and any other helper of the driver
                    roles.append(("workers", child))
                    roles.extend(("workers", w) for w in child.children(recursive=True))
            except psutil.Error:
                pass
        self._roles = roles
        self._scanned = time.monotonic()

    def sample(self) -> dict[str, int]:
        if time.monotonic() - self._scanned >= self.rescan:
            self._scan()
        cur = dict.fromkeys(ROLES, 0)
        cur["driver_py"] = self.proc.memory_info().rss
        for role, p in self._roles:
            try:
                cur[role] += p.memory_info().rss
            except psutil.Error:  # ended since the last scan
                pass
        cur["driver"] = cur["driver_py"] + cur["jvm"]
        cur["total"] = cur["driver"] + cur["workers"]
        return cur

    def _take(self) -> None:
        cur = self.sample()
        self.samples += 1
        for k, v in cur.items():
            if v > self.peak[k]:
                self.peak[k] = v

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._take()
            except psutil.Error:
                pass
            self._stop.wait(self.interval)

    def __enter__(self) -> RoleRss:
        self._take()
        self._thread = threading.Thread(target=self._run, name="role-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 99)) -> dict[str, float]:
    """``{"p50": .., "p99": .., "max": .., "min": .., "mean": ..}`` (linear interpolation)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {}
    out = {f"p{q:g}": float(np.percentile(a, q)) for q in qs}
    out.update(min=float(a.min()), max=float(a.max()), mean=float(a.mean()), n=float(a.size))
    return out


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(timeout=30)


def pipeline_toml(
    *,
    bootstrap: str,
    topic: str,
    out: Path,
    schema: dict[str, str],
    operation: WriteOperation,
    index: IndexType = IndexType.BUCKET,
    table_type: TableType = TableType.COPY_ON_WRITE,
    bucket_count: int = 8,
    max_records: int = 500_000,
    max_bytes: str = "256MiB",
    readers: int = 2,
    writers: int = 0,
    min_interval: float = 0.0,
    max_interval: float = 30.0,
    master: str = "local[2]",
    table_options: dict[str, str] | None = None,
) -> str:
    """Pipeline TOML (Kafka JSON topic -> non-partitioned table keyed by ``id``)."""
    fields = "\n".join(f'{k} = "{v}"' for k, v in schema.items())
    options = "\n".join(f'"{k}" = "{v}"' for k, v in (table_options or {}).items())
    return f"""
[source]
type = "kafka"
format = "json"
[source.options]
topic = "{topic}"
scan.startup.mode = "earliest-offset"
properties.bootstrap.servers = "{bootstrap}"
[table]
path = "{out}"
record-key = ["id"]
type = "{table_type.config_text}"
index = "{index.config_text}"
bucket-count = {bucket_count}
operation = "{operation.config_text}"
[table.options]
{options}
[schema]
{fields}
[runtime]
master = "{master}"
reader-parallelism = {readers}
writer-parallelism = {writers}
round.max-records = {max_records}
round.max-bytes = "{max_bytes}"
round.min-interval = {min_interval}
round.max-interval = {max_interval}
"""


def parse(toml: str, name: str) -> Any:
    from hoodline.pipeline.config import parse_config

    return parse_config(toml, name)
