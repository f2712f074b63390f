"""A warm Python worker daemon for ``local[N]`` sessions: imported while the JVM starts.

Facts this module is built on (pyspark 4.3.0, the 2-core machine of BENCHMARKS.md):

* Spark launches the Python worker daemon (:mod:`.worker_daemon`) when the first Python task
  of a session runs, and the daemon's preloads (pyarrow, pyspark, hoodline's task code)
  take 0.9-1.3 s: a session's first trivial job took 1.6-2.0 s where the second took 0.1 s.
* Meanwhile the driver waits, and while the JVM starts (3-4 s) it keeps only ~1.2 of the two
  cores busy.
* Spark starts the daemon as ``python -m <daemon module> <worker module>`` in a directory of
  its choosing, with an environment of its own. The daemon talks to the JVM through its stdin
  (PIDs of workers to kill; EOF: exit), its stdout (the port it listens on) and its stderr
  (logged); the JVM knows it as a process (``Process.destroy``, i.e. SIGTERM, stops it).
  Spark sets ``OMP_NUM_THREADS`` to the task's CPUs (``spark.task.cpus``) unless
  ``spark.executorEnv.OMP_NUM_THREADS`` is set.

So a session starts a **zygote** beside the JVM (:class:`Zygote`): a process that imports the
preloads at once and then waits on a Unix socket. When Spark launches the daemon module, that
small process (the *launcher*, :func:`hand_over`) sends the zygote its stdin, stdout and stderr
(``SCM_RIGHTS``), its environment, ``sys.path``, arguments and working directory; the zygote
takes them over and runs pyspark's daemon unchanged -- it *becomes* the session's daemon (a
session has one; should Spark launch another, that one starts cold), so the daemon and its
workers stay in the driver's process tree. The launcher stays the process Spark knows: it
forwards SIGTERM to the daemon and exits when the daemon and every worker it forked have (the
socket they inherited closes).

The zygote refuses -- and the launcher runs the daemon itself, cold, as before -- when the
launcher runs another interpreter or virtual environment, when a variable read when a process
or a preloaded library starts (hash seed, malloc, thread-pool and library settings) differs
from the zygote's, or when the launcher's ``sys.path`` would import a module the zygote loaded
from another file. Both ends check that the other runs as the same user. The zygote runs in a
process group of its own (a Ctrl-C in the driver's terminal is the driver's business). Before
it becomes the daemon it exits when its stdin (a pipe from the session) closes: when the
session stops, or the driver dies; as the daemon it exits when Spark stops it or closes *its*
stdin. Only the standard library is imported here: the launcher must start fast.
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
#: Environment variables the interpreter, glibc, a thread pool or a preloaded library reads
#: when a process starts or a library loads: the launcher's must equal the zygote's.
_START_VARIABLES = re.compile(
    r"PYTHON[A-Z]*|MALLOC_.*|MIMALLOC_.*|JE_.*|GLIBC_TUNABLES|LD_.*|ARROW_.*|.*_NUM_THREADS"
    r"|OMP_.*|GOMP_.*|KMP_.*|OPENBLAS_.*|GOTO_.*|MKL_.*|BLIS_.*|NUMEXPR_.*|NUMPY_.*|NPY_.*"
    r"|PANDAS_.*|PYSPARK_ENABLE_NAMEDTUPLE_PATCH|TZ|LANG|LC_.*"
)
#: ... except ``PYTHONPATH`` (what it finds is checked through ``sys.path``), Spark's
#: ``PYTHONUNBUFFERED`` (stdio buffering, which the zygote is started with too) and
#: ``PYTHONSTARTUP`` (read by interactive interpreters only)
_NOT_START_VARIABLES = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONSTARTUP"})
_HASH_PROBE = "hoodline-worker-zygote"
_LENGTH = struct.Struct(">I")
_CREDENTIALS = struct.Struct("3i")  # pid, uid, gid of a Unix socket's peer


def start_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` a process or a preloaded library reads when it starts."""
    return {k: v for k, v in env.items()
            if _START_VARIABLES.fullmatch(k) and k not in _NOT_START_VARIABLES}


def interpreter() -> dict[str, object]:
    """What identifies this process's interpreter and hash seed (compared on hand-over)."""
    return {"executable": os.path.realpath(sys.executable), "prefix": sys.prefix,
            "version": sys.version, "hash": hash(_HASH_PROBE)}


def incompatibility(
    request: Mapping[str, object],
    own_env: Mapping[str, str],
    loaded: Mapping[str, str],
    find_origin: Callable[[str, list[str]], str | None],
) -> str | None:
    """Why a zygote whose process started with ``own_env`` and imported ``loaded`` (top-level
    module -> file) cannot run the daemon ``request`` describes; None when it can."""
    ours = interpreter()
    for key, what in (("executable", "interpreter"), ("prefix", "environment (sys.prefix)"),
                      ("version", "Python version")):
        if request.get(key) != ours[key]:
            return f"{what} {request.get(key)!r} is not the zygote's {ours[key]!r}"
    if request.get("hash") != ours["hash"]:
        return "a different PYTHONHASHSEED"
    env = request.get("env")
    if not isinstance(env, dict):
        return "no environment in the request"
    theirs, mine = start_variables(env), start_variables(own_env)
    for name in sorted(set(theirs) | set(mine)):
        if theirs.get(name) != mine.get(name):
            return f"{name}={theirs.get(name)!r} where the zygote started with {mine.get(name)!r}"
    path = request.get("path")
    if not isinstance(path, list):
        return "no sys.path in the request"
    for module, origin in sorted(loaded.items()):
        found = find_origin(module, path)
        if found is None or os.path.realpath(found) != os.path.realpath(origin):
            return f"{module} would load from {found!r}, the zygote loaded {origin!r}"
    return None


def _find_origin(module: str, path: list[str]) -> str | None:
    spec = importlib.machinery.PathFinder.find_spec(module, path)
    return spec.origin if spec is not None else None


def loaded_modules() -> dict[str, str]:
    """Top-level modules this process loaded from files outside the standard library."""
    out: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if ("." not in name and name != "__main__" and where
                and name not in sys.stdlib_module_names):
            out[name] = str(where)
    return out


def _same_user(conn: socket.socket) -> bool:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return bool(_CREDENTIALS.unpack(raw)[1] == os.getuid())


# -- the launcher (Spark's daemon process) --------------------------------------------------------
def hand_over(path: Sequence[str]) -> bool:
    """Run the daemon in the zygote named by ``$HOODLINE_WORKER_ZYGOTE``: True once that daemon
    and every worker it forked have exited (this process then exits too); False when there is
    no zygote or it refused (the caller starts the daemon itself)."""
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
        if not _same_user(conn):
            raise OSError(f"the socket {where} belongs to another user's process")
        body = json.dumps({
            **interpreter(),
            "env": dict(os.environ),
            "path": list(path),
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
        }).encode()
        socket.send_fds(conn, [_LENGTH.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
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
    when the session closes stdin first, or the launcher's request is refused or gone."""
    own_env = dict(os.environ)  # what this process started with
    listener = socket.socket(fileno=listener_fd)
    where = listener.getsockname()
    try:
        preload()
        origins = loaded_modules()
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
        _answer(conn, f"cold {reason}")
        _close(fds)
        conn.close()
        return 0
    return _run_daemon(conn, request, fds)


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """A launcher's request and its three standard streams; None (reported) if unreadable."""
    fds: list[int] = []
    try:
        conn.settimeout(10.0)
        if not _same_user(conn):
            raise OSError("a process of another user connected")
        head, fds, _, _ = socket.recv_fds(conn, _LENGTH.size, 3)
        head += _read_exactly(conn, _LENGTH.size - len(head))
        (size,) = _LENGTH.unpack(head)
        request = json.loads(_read_exactly(conn, size))
        if len(fds) != 3 or not isinstance(request, dict):
            raise OSError(f"expected a request and 3 standard streams, got {len(fds)} streams")
        conn.settimeout(None)
        return request, fds
    except (OSError, ValueError, struct.error) as exc:
        _say(f"the zygote dropped a request: {exc}")
        _close(fds)
        conn.close()
        return None


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("the launcher closed the connection mid-request")
        data += chunk
    return data


def _answer(conn: socket.socket, line: str) -> bool:
    try:
        conn.sendall(f"{line}\n".encode())
        return True
    except OSError:  # the launcher gave up (or was stopped) meanwhile
        return False


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def adopt(request: Mapping[str, object]) -> None:
    """Take the launcher's environment, ``sys.path``, arguments and working directory."""
    env, path, argv, cwd = (request.get(k) for k in ("env", "path", "argv", "cwd"))
    if not (isinstance(env, dict) and isinstance(path, list) and isinstance(argv, list)
            and isinstance(cwd, str)):
        raise ValueError("the request lacks the launcher's env, path, argv or cwd")
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.environ[STARTED_ENV] = "warm"
    sys.path[:] = path
    sys.argv[1:] = argv  # pyspark's daemon reads its worker module from sys.argv[1]


def _run_daemon(conn: socket.socket, request: Mapping[str, object], fds: list[int]) -> int:
    """Take the launcher's place: its streams, environment and path; then pyspark's daemon."""
    from pyspark import daemon

    try:
        adopt(request)
    except (OSError, ValueError) as exc:
        _answer(conn, f"cold cannot take the launcher's place: {exc}")
        _close(fds)
        return 0
    if not _answer(conn, f"warm {os.getpid()}"):
        _close(fds)
        return 0
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # stdin: the session's pipe is closed here, Spark's replaces it
        os.close(fd)
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
        ``env`` (what Spark will give its daemon), in a process group of its own."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(socket_path))
            listener.listen(8)
            fd = listener.fileno()
            process = subprocess.Popen(
                [sys.executable, "-m", "hoodline.spark.worker_daemon", "--zygote", str(fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=dict(env), pass_fds=[fd],
                process_group=0,
            )
        finally:
            listener.close()
        return cls(process, socket_path)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the zygote (after its session's JVM: no launcher can come any more).

        Still a zygote (its socket is there: it may still be importing, and would only notice
        its closed stdin afterwards): SIGTERM at once. As the session's daemon it exits when
        Spark stops it, which a session's stop does first: wait for that; after ``timeout_s``
        SIGTERM (pyspark's daemon then stops its workers), after as long again SIGKILL to its
        process group (it and its workers)."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        if self.socket_path.exists() and self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout_s)
            return
        except subprocess.TimeoutExpired:
            self.process.terminate()
        try:
            self.process.wait(timeout_s)
            return
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
        self.process.wait()


def fits(socket_path: Path) -> bool:
    """Whether ``socket_path`` is short enough for a Unix socket."""
    return len(os.fsencode(socket_path)) <= MAX_SOCKET_PATH


def daemon_environment(base: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """The environment Spark gives a ``local[N]`` session's Python worker daemon, as far as a
    process started before the JVM can know it: ``base`` with the session's
    ``spark.executorEnv.*`` settings, pyspark's hash seed, Spark's ``OMP_NUM_THREADS`` and
    ``PYTHONUNBUFFERED``."""
    env = dict(base)
    prefix = "spark.executorEnv."
    for key, value in conf.items():
        if key.startswith(prefix):
            env[key[len(prefix):]] = value
    env["PYTHONHASHSEED"] = base.get("PYTHONHASHSEED", "0")
    if prefix + "OMP_NUM_THREADS" not in conf:
        env["OMP_NUM_THREADS"] = conf.get("spark.task.cpus", "1")
    env["PYTHONUNBUFFERED"] = "YES"
    return env
