"""Shared benchmark plumbing: machine description, peak-RSS sampling, child processes,
result tables and appending result blocks to ``BENCHMARKS.md``."""

from __future__ import annotations

import compileall
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
_PAGE = os.sysconf("SC_PAGE_SIZE")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BENCHMARKS_MD = REPO / "BENCHMARKS.md"
RESULT_PREFIX = "BENCH-RESULT "
LIBRARIES = (
    "pyarrow",
    "deltalake",
    "pyiceberg",
    "confluent-kafka",
    "numpy",
    "psutil",
    "duckdb",
)


def library_versions(names: Sequence[str] = LIBRARIES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(vm.total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "libraries": library_versions(),
    }


def machine_line(info: dict[str, Any] | None = None) -> str:
    m = info or machine()
    libs = ", ".join(f"{k} {v}" for k, v in m["libraries"].items())
    load = "/".join(str(x) for x in m["load_avg"])
    return (
        f"{m['cpus']} cores, {m['memory_gib']} GiB, Python {m['python']} ({m['platform']}); "
        f"{libs}; load average (1/5/15 min) at start {load}"
    )


class PeakRss:
    """Samples this process's RSS in a thread; ``peak`` is the highest seen (bytes).

    With ``children`` the descendants (e.g. a Spark JVM and its Python workers) are added. The
    process tree is scanned every ``rescan`` seconds only: a scan reads every process's
    ``/proc`` entry, and scanning at every 10 ms sample took ~15 % of the Python samples of a
    2M-message ingest (py-spy), in the measured process itself, i.e. CPU and GIL time the
    system under measurement lost (the peers' single-threaded loops too). In between, the known
    processes' RSS is read; a descendant living less than ``rescan`` may be missed.

    (``ru_maxrss`` is no substitute here: on Linux a child started by fork+exec inherits the
    parent's high-water mark, so it would report the harness's own peak.)"""

    def __init__(
        self, interval: float = 0.01, children: bool = False, rescan: float = 0.5
    ) -> None:
        self.interval = interval
        self.children = children
        self.rescan = rescan
        self.proc = psutil.Process()
        self.start_rss = 0
        self.peak = 0
        #: open ``/proc/<pid>/statm`` of this process and the known descendants
        self._statm: dict[int, int] = {}
        self._scanned = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def rss(self) -> int:
        """RSS of this process, plus its descendants with ``children``.

        Each process's ``/proc/<pid>/statm`` stays open and is re-read in place (~5 us a
        process); ``psutil``'s ``memory_info`` per process and sample took ~0.4 s of CPU in a
        2M-message hoodline run (6 processes sampled every 10 ms), in the measured process."""
        if not self._statm or (
            self.children and time.monotonic() - self._scanned >= self.rescan
        ):
            pids = {self.proc.pid}
            if self.children:
                pids.update(p.pid for p in self.proc.children(recursive=True))
            self._track(pids)
            self._scanned = time.monotonic()
        total = 0
        for pid, fd in list(self._statm.items()):
            try:
                total += int(os.pread(fd, 128, 0).split()[1]) * _PAGE
            except (OSError, IndexError, ValueError):  # ended since the last scan
                os.close(self._statm.pop(pid))
        return total

    def _track(self, pids: set[int]) -> None:
        for pid in set(self._statm) - pids:
            os.close(self._statm.pop(pid))
        for pid in pids - set(self._statm):
            try:
                self._statm[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
            except OSError:  # ended already
                pass

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self.rss()
            if rss > self.peak:
                self.peak = rss
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self.start_rss = self.peak = self.rss()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)
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
        self._scanned = -math.inf
        self.peak = max(self.peak, self.rss())
        self._track(set())


def publish(title: str, text: str, rep: dict[str, Any], json_path: Path | None,
            record: bool) -> None:
    """A parent's report: printed, the raw report written to ``json_path`` when given, and with
    ``record`` appended to BENCHMARKS.md as a block titled ``title``."""
    print(text)
    if json_path is not None:
        json_path.write_text(json.dumps(rep, indent=2, default=str))
    if record:
        append_block(title, text, rep.get("machine"))


def emit_result(result: dict[str, Any]) -> None:
    """Print a child's result as one tagged JSON line (the parent parses it)."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


#: Peers whose native threads may abort the interpreter's teardown: deltalake's writer (seen
#: once in CI, bench.bulk_insert's delta child: exit -6 "terminate called without an active
#: exception" after its work; delta-rs issue 2184)
ABRUPT_EXIT_PEERS = frozenset({"delta"})


def end_child(system: str) -> int:
    """A child's exit status once its result is out: peers of :data:`ABRUPT_EXIT_PEERS` leave
    without the interpreter's teardown (they own no processes or files left to close)."""
    if system in ABRUPT_EXIT_PEERS:
        sys.stderr.flush()
        os._exit(0)
    return 0


def compile_package() -> None:
    """Byte-compile hoodline's modules as installing a package does (pip compiles them), so
    that no measured process compiles them from source. With ``PYTHONDONTWRITEBYTECODE`` set
    (as on the machine of BENCHMARKS.md) a source checkout never keeps its bytecode: every
    hoodline driver and worker daemon compiled its ~200 modules again, ~0.45 s of CPU per run
    on the cores the JVM starts on (measured on a session start plus a first job: driver and
    worker daemon 2.1-2.2 s of CPU from source, 1.5-1.7 s compiled). Up-to-date modules are
    left alone."""
    compileall.compile_dir(str(REPO / "src" / "hoodline"), quiet=1)


def child_env() -> dict[str, str]:
    """The environment of a measured child (hoodline's modules compiled first, see
    :func:`compile_package`)."""
    compile_package()
    env = dict(os.environ)
    src = str(REPO / "src")
    parts = [src, str(REPO)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def steal_seconds(stat_text: str | None = None) -> float | None:
    """CPU time the hypervisor has taken from this virtual machine since boot, all CPUs summed
    (the ``steal`` field of ``/proc/stat``'s ``cpu`` line, in seconds); None where the system
    does not report it. Steal during a run shows that the host was busy then, which the load
    average inside the VM does not."""
    if stat_text is None:
        try:
            stat_text = Path("/proc/stat").read_text()
        except OSError:
            return None
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            return int(fields[8]) / _CLOCK_TICKS if len(fields) > 8 else None
    return None


def run_child(module: str, args: Sequence[str], timeout: float | None = None) -> dict[str, Any]:
    """Run ``python -m module args`` in a fresh process (separate memory peaks); returns its
    result dict plus ``wall_s``, the load average before/after and ``steal_s``, the CPU time
    the hypervisor took from the machine meanwhile (None where unknown; see
    :func:`steal_seconds`).

    A child that fails or times out yields ``{"error": ...}`` instead of raising, so one
    broken peer does not hide the others' numbers."""
    cmd = [sys.executable, "-m", module, *args]
    load_before = [round(x, 2) for x in os.getloadavg()]
    steal0 = steal_seconds()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {
            "error": f"timed out after {timeout:.0f} s",
            "wall_s": time.perf_counter() - t0,
            "load_before": load_before,
        }
    wall = time.perf_counter() - t0
    result: dict[str, Any] | None = None
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
    if proc.returncode != 0 or result is None:
        tail = "\n".join(err.strip().splitlines()[-15:])
        return {
            "error": f"exit code {proc.returncode}: {tail}",
            "wall_s": wall,
            "load_before": load_before,
        }
    result["wall_s"] = wall
    steal1 = steal_seconds()
    result["steal_s"] = None if steal0 is None or steal1 is None else steal1 - steal0
    result["load_before"] = load_before
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def median_run(runs: list[dict[str, Any]], time_key: str, kept: Sequence[str]) -> dict[str, Any]:
    """Of several runs of one system, the one with the median ``time_key`` (the lower middle one
    for an even count), with every run's value of each ``kept`` key beside it as
    ``runs_<key>``. A failed run (``error``) or a wrong result (``difference``) wins, so it is
    never hidden by the other runs."""
    bad = [r for r in runs if "error" in r or r.get("difference")]
    if bad:
        return bad[0]
    ordered = sorted(runs, key=lambda r: float(r[time_key]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    for key in kept:
        chosen[f"runs_{key}"] = [r[key] for r in runs]
    return chosen


def steal_text(values: Sequence[float | None]) -> str:
    """Every run's steal time (see :func:`steal_seconds`), or "-" where the machine does not
    report it."""
    if not values or any(v is None for v in values):
        return "-"
    return " / ".join(f"{v:.1f}" for v in values if v is not None)


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def secs(n: float | None) -> str:
    return "-" if n is None else f"{n:,.2f} s"


def rate(rows: int, seconds: float | None) -> str:
    return "-" if not seconds else f"{rows / seconds:,.0f}"


def timed(fn: Any) -> tuple[float, float, Any]:
    """(CPU seconds of this process, wall seconds, result) of ``fn()``."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def cpu_table(
    results: dict[str, list[tuple[float, float]]], n: int, peers: Sequence[str],
    base: str = "hoodline",
) -> tuple[str, str]:
    """A markdown table of each system's median CPU and wall time over its runs and
    records/s (CPU) for ``n`` records, and the ratios ``peer CPU / base CPU`` as text."""
    rows = []
    med: dict[str, float] = {}
    for name, runs in results.items():
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        med[name] = cpu
        rows.append([name, f"{cpu:.3f} s", f"{wall:.3f} s", f"{n / cpu:,.0f}"])
    ratios = ", ".join(f"{med[p] / med[base]:.1f}x {p}" for p in peers)
    table = markdown_table(["system", "CPU (median)", "wall (median)", "records/s (CPU)"], rows)
    return table, ratios


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def command_line() -> str:
    argv = [Path(sys.argv[0]).name if sys.argv[0].endswith(".py") else sys.argv[0], *sys.argv[1:]]
    if sys.argv[0].endswith("__main__.py") or "/bench/" in sys.argv[0]:
        mod = Path(sys.argv[0]).with_suffix("").name
        argv = ["-m", f"bench.{mod}", *sys.argv[1:]]
    return "PYTHONPATH=src:. .venv/bin/python " + " ".join(argv)


def append_block(
    title: str, body: str, info: dict[str, Any] | None = None, path: Path = BENCHMARKS_MD
) -> None:
    """Append a dated result block (title, command, machine, body) to ``BENCHMARKS.md``."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        f"\n### {title} — {stamp}\n\n"
        f"Command: `{command_line()}`\n\n"
        f"Machine: {machine_line(info)}\n\n{body.rstrip()}\n"
    )
    with path.open("a", encoding="utf-8") as fh:
        fh.write(block)
