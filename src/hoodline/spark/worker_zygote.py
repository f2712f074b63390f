"""A warm Python worker daemon for ``local[N]`` sessions: imported while the JVM starts.

Facts this module is built on (pyspark 4.3.0, the 2-core machine of BENCHMARKS.md):

* Spark launches the Python worker daemon (:mod:`.worker_daemon`) when the first Python task
  of a session runs, and the daemon's preloads (pyarrow, pandas, pyspark, hoodline's task code)
  take 0.9-1.3 s: a session's first trivial job took 1.6-2.0 s where the second took 0.1 s.
* Meanwhile the driver waits, and while the JVM starts (3-4 s) it keeps only ~1.2 of the two
  cores busy.
* The daemon talks to the JVM through nothing but its stdin (PIDs of workers to kill; EOF:
  exit), its stdout (the port it listens on) and its stderr (logged), and reads its settings
  from its environment; the JVM knows it as a process (SIGTERM stops it).

So a session starts a **zygote** beside the JVM (:class:`Zygote`): a process that imports the
preloads at once and then waits on a Unix socket. When Spark launches the daemon module, that
small process (the *launcher*, :func:`hand_over`) sends the zygote its stdin, stdout and stderr
(``SCM_RIGHTS``), its environment and its ``sys.path``; the zygote takes them over and runs
pyspark's daemon unchanged -- it *becomes* the session's daemon (a session has one; should
Spark launch another, that one starts cold), so the daemon and its workers stay in the driver's
process tree. The launcher stays the process Spark knows: it forwards SIGTERM to the daemon and
exits when the daemon and its workers have (the socket they inherited closes).

The zygote refuses -- and the launcher runs the daemon itself, cold, as before -- when the
launcher's interpreter or a variable read when a process or a preloaded library starts (hash
seed, malloc and thread-pool settings, ...) differs from the zygote's, or when the launcher's
``sys.path`` would import a preloaded package from another file. Before it becomes the daemon,
the zygote exits when its stdin (a pipe from the session) closes: when the session stops, or
the driver dies; as the daemon, it exits when Spark closes *its* stdin or stops it.
Only the standard library is imported here: the launcher must start fast.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

#: The launcher finds the zygote's socket in this variable (``spark.executorEnv``).
SOCKET_ENV = "HOODLINE_WORKER_ZYGOTE"
#: Set in the daemon's (and so every worker's) environment: ``warm`` or ``cold``.
STARTED_ENV = "HOODLINE_WORKER_DAEMON"
#: Longest Unix socket path the kernel takes (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH = 107
#: How long a launcher waits for the zygote's answer (it may still be importing) before it
#: starts the daemon itself.
HAND_OVER_TIMEOUT_S = 60.0
#: Environment variables the interpreter, glibc or a preloaded library reads when a process
#: starts or a library loads: the launcher's must equal the zygote's.
_START_VARIABLES = re.compile(
    r"PYTHON[A-Z]*|MALLOC_.*|MIMALLOC_.*|JE_MALLOC_.*|GLIBC_TUNABLES|LD_.*|ARROW_.*|OMP_.*"
    r"|OPENBLAS_.*|MKL_.*|NUMEXPR_.*|TZ|LANG|LC_.*"
)
#: ... except those that only steer finding modules (checked through ``sys.path``) or stdio
#: buffering
_NOT_START_VARIABLES = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONSTARTUP"})
_HASH_PROBE = "hoodline-worker-zygote"
_LENGTH = struct.Struct(">I")


def start_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` a process or a preloaded library reads when it starts."""
    return {k: v for k, v in env.items()
            if _START_VARIABLES.fullmatch(k) and k not in _NOT_START_VARIABLES}


def incompatibility(
    request: Mapping[str, object],
    own_env: Mapping[str, str],
    loaded: Mapping[str, str],
    find_origin: Callable[[str, list[str]], str | None],
) -> str | None:
    """Why a zygote whose process started with ``own_env`` and imported ``loaded`` (top-level
    package -> file) cannot run the daemon ``request`` describes; None when it can."""
    if request.get("executable") != os.path.realpath(sys.executable):
        return f"interpreter {request.get('executable')!r} is not the zygote's {sys.executable!r}"
    if request.get("hash") != hash(_HASH_PROBE):
        return "a different PYTHONHASHSEED"
    env = request.get("env")
    if not isinstance(env, dict):
        return "no environment in the request"
    theirs, ours = start_variables(env), start_variables(own_env)
    for name in sorted(set(theirs) | set(ours)):
        if theirs.get(name) != ours.get(name):
            return f"{name}={theirs.get(name)!r} where the zygote started with {ours.get(name)!r}"
    path = request.get("path")
    if not isinstance(path, list):
        return "no sys.path in the request"
    for package, origin in sorted(loaded.items()):
        found = find_origin(package, path)
        if found is None or os.path.realpath(found) != os.path.realpath(origin):
            return f"{package} would load from {found!r}, the zygote loaded {origin!r}"
    return None


def _find_origin(package: str, path: list[str]) -> str | None:
    spec = importlib.machinery.PathFinder.find_spec(package, path)
    return spec.origin if spec is not None else None


# -- the launcher (Spark's daemon process) --------------------------------------------------------
def hand_over(path: Sequence[str]) -> bool:
    """Run the daemon in the zygote named by ``$HOODLINE_WORKER_ZYGOTE``: True once that daemon
    has exited (this process then exits too); False when there is no zygote or it refused (the
    caller starts the daemon itself)."""
    where = os.environ.get(SOCKET_ENV)
    if not where:
        return False
    daemon: list[int] = []  # its PID, once known
    terminated: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        # Spark stops its daemon with SIGTERM: pass it on, also when it comes mid-hand-over
        terminated.append(signum)
        for pid in daemon:
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    previous = signal.signal(signal.SIGTERM, forward)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(HAND_OVER_TIMEOUT_S)
        conn.connect(where)
        request = json.dumps({
            "executable": os.path.realpath(sys.executable),
            "hash": hash(_HASH_PROBE),
            "env": dict(os.environ),
            "path": list(path),
        }).encode()
        socket.send_fds(conn, [_LENGTH.pack(len(request)) + request], [0, 1, 2])
        answer = _read_line(conn)
    except OSError as exc:
        conn.close()
        answer = f"none ({exc})"
    kind, _, detail = answer.partition(" ")
    if kind != "warm":
        conn.close()
        signal.signal(signal.SIGTERM, previous)
        if terminated:  # stopped while asking: nothing to start
            sys.exit(1)
        _say(f"the warm worker daemon refused ({detail}); starting one" if kind == "cold"
             else f"no warm worker daemon {detail}; starting one")
        return False
    daemon.append(int(detail))
    if terminated:
        forward(terminated[0], None)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the daemon alone holds Spark's pipes now
    os.dup2(devnull, 1)
    os.close(devnull)
    conn.settimeout(None)
    while conn.recv(4096):  # EOF: the daemon and every worker it forked have exited
        pass
    conn.close()
    return True


def _read_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(256)
        if not chunk:
            raise OSError("the zygote closed the connection without an answer")
        data += chunk
    return data.decode().strip()


def _say(message: str) -> None:
    print(f"hoodline worker daemon: {message}", file=sys.stderr, flush=True)


# -- the zygote -----------------------------------------------------------------------------------
def serve(listener_fd: int, preload: Callable[[], None]) -> int:
    """The zygote's life: run ``preload``, then become the daemon of the first launcher that
    connects to the listening socket ``listener_fd`` (bound by the session before this process
    started, so a launcher never finds it missing) and return the daemon's exit code; return 0
    when the session closes stdin first, or the launcher's request is refused."""
    own_env = dict(os.environ)  # what this process started with
    listener = socket.socket(fileno=listener_fd)
    where = listener.getsockname()
    try:
        preload()
        origins = {name: str(sys.modules[name].__file__) for name in sorted(_PACKAGES)
                   if getattr(sys.modules.get(name), "__file__", None)}
        while True:
            ready, _, _ = select.select([listener.fileno(), 0], [], [])
            if 0 in ready and not os.read(0, 4096):
                return 0  # the session closed our stdin (or is gone)
            if listener.fileno() in ready:
                conn, _ = listener.accept()
                received = _receive(conn)
                if received is not None:
                    break
    finally:
        listener.close()
        try:  # later launchers find no zygote (not a stale socket nobody accepts on)
            os.unlink(where)
        except OSError:
            pass
    request, fds = received
    reason = incompatibility(request, own_env, origins, _find_origin)
    if reason is not None:
        conn.sendall(f"cold {reason}\n".encode())
        conn.close()
        for fd in fds:
            os.close(fd)
        return 0
    return _run_daemon(conn, request, fds)


#: the top-level packages whose origins a launcher's ``sys.path`` must agree with
_PACKAGES = frozenset({"pyarrow", "numpy", "pandas", "pyspark", "hoodline"})


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """A launcher's request and its three standard streams; None (reported) if unreadable."""
    fds: list[int] = []
    try:
        conn.settimeout(10.0)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        (size,) = _LENGTH.unpack_from(data)
        data = data[_LENGTH.size:]
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise OSError("the launcher closed the connection mid-request")
            data += chunk
        request = json.loads(data)
        if len(fds) != 3 or not isinstance(request, dict):
            raise OSError(f"expected a request and 3 standard streams, got {len(fds)} streams")
        conn.settimeout(None)
        return request, fds
    except (OSError, ValueError) as exc:
        _say(f"the zygote dropped a request: {exc}")
        for fd in fds:
            os.close(fd)
        conn.close()
        return None


def _run_daemon(conn: socket.socket, request: Mapping[str, object], fds: list[int]) -> int:
    """Take the launcher's place: its streams, environment and path; then pyspark's daemon."""
    from pyspark import daemon

    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # stdin: the session's pipe is closed here, Spark's replaces it
        os.close(fd)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    os.environ[STARTED_ENV] = "warm"
    path = request["path"]
    assert isinstance(path, list)
    sys.path[:] = path
    conn.sendall(f"warm {os.getpid()}\n".encode())
    # ``conn`` stays open here and in the forked workers: the launcher's EOF when all are gone
    try:
        daemon.manager()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


# -- the session's side ---------------------------------------------------------------------------
class Zygote:
    """A running zygote (see module docs), started by the session and stopped with it."""

    def __init__(self, process: subprocess.Popen[bytes], socket_path: Path) -> None:
        self.process = process
        self.socket_path = socket_path

    @classmethod
    def start(cls, socket_path: Path, env: Mapping[str, str]) -> Zygote:
        """Start a zygote listening at ``socket_path`` (see :func:`fits`) with environment
        ``env`` (what Spark will give its daemon)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(socket_path))
            listener.listen(8)
            fd = listener.fileno()
            process = subprocess.Popen(
                [sys.executable, "-m", "hoodline.spark.worker_daemon", "--zygote", str(fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=dict(env), pass_fds=[fd],
            )
        finally:
            listener.close()
        return cls(process, socket_path)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close the zygote's stdin and wait for it to exit; SIGTERM after ``timeout_s`` (as
        the session's daemon it exits when Spark stops it, which a session's stop does first),
        SIGKILL after as long again."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        for stop in (self.process.terminate, self.process.kill):
            try:
                self.process.wait(timeout_s)
                return
            except subprocess.TimeoutExpired:
                stop()
        self.process.wait()


def fits(socket_path: Path) -> bool:
    """Whether ``socket_path`` is short enough for a Unix socket."""
    return len(os.fsencode(socket_path)) <= MAX_SOCKET_PATH


def daemon_environment(base: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """The environment Spark gives a ``local[N]`` session's Python worker daemon, as far as a
    process started before the JVM can know it: ``base`` with the session's
    ``spark.executorEnv.*`` settings, pyspark's hash seed and Spark's ``OMP_NUM_THREADS``."""
    env = dict(base)
    prefix = "spark.executorEnv."
    for key, value in conf.items():
        if key.startswith(prefix):
            env[key[len(prefix):]] = value
    env["PYTHONHASHSEED"] = base.get("PYTHONHASHSEED", "0")
    if prefix + "OMP_NUM_THREADS" not in conf:
        env["OMP_NUM_THREADS"] = conf.get("spark.executor.cores", "1")
    env["PYTHONUNBUFFERED"] = "YES"
    return env
