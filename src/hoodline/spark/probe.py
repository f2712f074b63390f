"""Executor-side facts (where a task runs, which hoodline/pyarrow it imports) for health checks.

``executor_probe`` is a ``mapInArrow`` function: it proves that executors can import the shipped
hoodline package and pyarrow, and reports the task's Python and executor-JVM process ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

PROBE_SCHEMA = pa.schema(
    [
        ("partition_id", pa.int32()),
        ("attempt", pa.int32()),
        ("python_pid", pa.int64()),
        ("executor_pid", pa.int64()),
        ("hoodline_file", pa.string()),
        ("pyarrow_version", pa.string()),
        ("rows", pa.int64()),
    ]
)

PROBE_DDL = (
    "partition_id int, attempt int, python_pid long, executor_pid long, "
    "hoodline_file string, pyarrow_version string, rows long"
)


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        # Field 4 is the parent pid; split after the ')' closing the command name.
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().replace(b"\0", b" ").decode(errors="replace")


def executor_jvm_pid() -> int:
    """PID of the JVM that runs this Python worker (walks up /proc; -1 when unknown)."""
    try:
        pid = os.getppid()
        for _ in range(4):
            if "java" in _cmdline(pid).split(" ", 1)[0]:
                return pid
            pid = _parent_pid(pid)
    except OSError:
        pass
    return -1


def task_identity() -> tuple[int, int]:
    """(partition id, attempt number) of the running Spark task; (-1, -1) outside a task.

    The attempt number restarts at 0 when a stage is resubmitted (fetch failure), so it does not
    identify an attempt uniquely: use :func:`task_attempt_id` for file names / write tokens.
    """
    from pyspark import TaskContext

    ctx: Any = TaskContext.get()
    if ctx is None:
        return -1, -1
    return int(ctx.partitionId()), int(ctx.attemptNumber())


def task_attempt_id() -> int:
    """Spark's task attempt id: unique among all attempts of this SparkContext (-1 outside a task).

    Use it, not ``attemptNumber``, wherever an attempt must not collide with another one (e.g. a
    file's write token): ``attemptNumber`` restarts at 0 when a stage is resubmitted after a
    fetch failure, so a retry would reuse -- and overwrite -- the lost attempt's file names,
    possibly while a zombie attempt of the old stage still writes them.
    """
    from pyspark import TaskContext

    ctx: Any = TaskContext.get()
    return -1 if ctx is None else int(ctx.taskAttemptId())


def executor_probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One row per task (also for tasks without input rows): identity and environment."""
    import hoodline

    rows = 0
    for batch in batches:
        rows += batch.num_rows
    partition, attempt = task_identity()
    yield pa.RecordBatch.from_pylist(
        [
            {
                "partition_id": partition,
                "attempt": attempt,
                "python_pid": os.getpid(),
                "executor_pid": executor_jvm_pid(),
                "hoodline_file": hoodline.__file__ or "",
                "pyarrow_version": pa.__version__,
                "rows": rows,
            }
        ],
        schema=PROBE_SCHEMA,
    )
