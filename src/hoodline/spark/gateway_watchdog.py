"""A bound on how long Spark's JVM may take to open its gateway.

PySpark starts the JVM (``spark-submit``) and waits for it to write a connection file, for as
long as the JVM lives. A JVM whose main thread died without exiting (``No space left on
device`` writing that file to a full temporary folder) or that never gets that far left
``hoodline run`` waiting forever, and a supervisor saw a live process. :func:`watch_gateway`
ends the processes this process started for Spark when the gateway is not up within a bound;
PySpark then reports the JVM as gone, and the caller says why.

Linux only (``/proc``); elsewhere nothing is watched.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["GATEWAY_START_TIMEOUT_S", "descendants", "watch_gateway"]

log = logging.getLogger(__name__)

#: seconds Spark's JVM gets to open its gateway (it takes a few; a loaded machine, tens)
GATEWAY_START_TIMEOUT_S = 180.0


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out.update(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, theirs, ...); empty without ``/proc``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in _children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


@contextmanager
def watch_gateway(
    started: Callable[[], bool], timeout_s: float | None = None
) -> Iterator[Callable[[], bool]]:
    """Within the block, PySpark launches the JVM; if ``started()`` (its gateway is up) is not
    true within ``timeout_s`` (default :data:`GATEWAY_START_TIMEOUT_S`), the processes this
    process started since the block began are killed. Yields whether that happened."""
    limit = GATEWAY_START_TIMEOUT_S if timeout_s is None else timeout_s
    me = os.getpid()
    before = descendants(me)
    done = threading.Event()
    fired = threading.Event()

    def watch() -> None:
        if done.wait(limit) or started():
            return
        doomed = descendants(me) - before
        if not doomed:
            return
        fired.set()
        log.warning("Spark's JVM did not open its gateway within %.0f s: ending it (pids %s)",
                    limit, ", ".join(map(str, sorted(doomed))))
        for pid in sorted(doomed):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # gone already

    thread = threading.Thread(target=watch, name="hoodline-gateway-watchdog", daemon=True)
    thread.start()
    try:
        yield fired.is_set
    finally:
        done.set()
        thread.join()
