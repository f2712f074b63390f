"""local[N]: the worker daemon's imports run in a zygote while the JVM starts; the daemon
process Spark launches hands its pipes over to the zygote, which becomes the daemon, or starts
cold when it cannot."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pyspark import cloudpickle

import hoodline
from hoodline.spark import worker_zygote
from hoodline.spark.job import per_subtask
from hoodline.spark.session import HoodlineSpark
from hoodline.spark.worker_zygote import (
    SOCKET_ENV,
    STARTED_ENV,
    Zygote,
    daemon_environment,
    incompatibility,
    start_variables,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

SOURCE_ROOT = str(Path(hoodline.__file__).resolve().parent.parent)


# -- policy ---------------------------------------------------------------------------------------
def test_start_variables_are_those_read_when_a_process_or_library_starts() -> None:
    read_at_start = {
        "MALLOC_ARENA_MAX": "2", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
        "LD_PRELOAD": "x.so", "ARROW_DEFAULT_MEMORY_POOL": "system",
        "JE_ARROW_MALLOC_CONF": "x", "NUMPY_MADVISE_HUGEPAGE": "0",
        "PANDAS_COPY_ON_WRITE": "1", "PYSPARK_ENABLE_NAMEDTUPLE_PATCH": "1",
        "GOTO_NUM_THREADS": "2", "KMP_AFFINITY": "x", "BLIS_NUM_THREADS": "2"}
    others = {"PYTHONPATH": "/a", "PYTHONUNBUFFERED": "YES", "PYTHON_WORKER_FACTORY_SECRET": "s",
              "SPARK_HOME": "/s", "PYSPARK_PYTHON": "python", "HOME": "/root"}
    assert start_variables({**read_at_start, **others}) == read_at_start


def _request(env: dict[str, str], path: list[str] | None = None) -> dict[str, object]:
    return {**worker_zygote.interpreter(), "env": env,
            "path": path if path is not None else ["/site"]}


def test_a_matching_request_is_served() -> None:
    env = {"MALLOC_ARENA_MAX": "2", "SPARK_HOME": "/s"}
    origins = {"pyarrow": "/site/pyarrow/__init__.py"}
    found = {"pyarrow": "/site/pyarrow/__init__.py"}
    assert incompatibility(_request({**env, "PYTHON_WORKER_FACTORY_SECRET": "x"}), env, origins,
                           lambda name, _path: found.get(name)) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"executable": "/other/python"}, "interpreter '/other/python'"),
        ({"prefix": "/other/venv"}, "environment (sys.prefix) '/other/venv'"),
        ({"version": "3.99.0"}, "Python version '3.99.0'"),
        ({"hash": 12345}, "PYTHONHASHSEED"),
        ({"env": {"MALLOC_ARENA_MAX": "8"}}, "MALLOC_ARENA_MAX='8' where the zygote started "
                                             "with '2'"),
        ({"env": {"MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "4"}}, "OMP_NUM_THREADS='4'"),
        ({"env": {}}, "MALLOC_ARENA_MAX=None"),
        ({"path": ["/elsewhere"]}, "pyarrow would load from '/elsewhere/pyarrow/__init__.py'"),
    ],
)
def test_a_request_the_zygote_cannot_serve_says_why(change: dict[str, object],
                                                     reason: str) -> None:
    own = {"MALLOC_ARENA_MAX": "2"}
    request = {**_request(dict(own)), **change}

    def find(name: str, path: list[str]) -> str:
        return f"{path[0]}/{name}/__init__.py"

    got = incompatibility(request, own, {"pyarrow": "/site/pyarrow/__init__.py"}, find)
    assert got is not None and reason in got, got


def test_the_daemon_environment_is_what_spark_gives_its_daemon() -> None:
    conf = {"spark.executorEnv.MALLOC_ARENA_MAX": "2", "spark.executorEnv.PYTHONPATH": "/src",
            "spark.app.name": "x", "spark.executor.cores": "4"}
    env = daemon_environment({"HOME": "/root", "PYTHONPATH": "src"}, conf)
    assert env == {"HOME": "/root", "PYTHONPATH": "/src", "MALLOC_ARENA_MAX": "2",
                   "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "YES"}
    # Spark's thread count is a task's CPUs; a driver's own seed and an explicit thread count
    # are passed on as they are
    assert daemon_environment({}, {"spark.task.cpus": "2"})["OMP_NUM_THREADS"] == "2"
    env = daemon_environment({"PYTHONHASHSEED": "7"},
                             {"spark.executorEnv.OMP_NUM_THREADS": "3"})
    assert env["PYTHONHASHSEED"] == "7" and env["OMP_NUM_THREADS"] == "3"


def test_a_socket_path_too_long_for_the_kernel_is_not_used(tmp_path: Path) -> None:
    assert worker_zygote.fits(tmp_path / "zygote.sock")
    assert not worker_zygote.fits(tmp_path / ("x" * 120))


# -- a zygote and a launcher, without Spark -------------------------------------------------------
@pytest.fixture
def sock_dir() -> Iterator[Path]:
    import tempfile

    # short: a Unix socket path must fit in 107 bytes (pytest's tmp_path may not)
    with tempfile.TemporaryDirectory(prefix="hz-") as where:
        yield Path(where)


def _base_env() -> dict[str, str]:
    env = daemon_environment(dict(os.environ), {"spark.executorEnv.PYTHONPATH": SOURCE_ROOT,
                                                "spark.executorEnv.MALLOC_ARENA_MAX": "2"})
    env.pop(SOCKET_ENV, None)
    return env


@pytest.fixture
def zygote(sock_dir: Path) -> Iterator[Zygote]:
    """A zygote started as a session starts it, stopped after the test."""
    started = Zygote.start(sock_dir / "z.sock", _base_env())
    try:
        yield started
    finally:
        started.stop()


def _launch(env: dict[str, str], argv: tuple[str, ...] = (),
            cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start the daemon module as Spark does (pipes on stdin/stdout/stderr)."""
    return subprocess.Popen([sys.executable, "-m", "hoodline.spark.worker_daemon", *argv],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd)


def _port(launcher: subprocess.Popen[bytes]) -> int:
    assert launcher.stdout is not None
    data = launcher.stdout.read(4)
    assert len(data) == 4, data
    port: int = struct.unpack(">i", data)[0]
    return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


_SECRET = "zygote-test-secret"
#: a worker module as Spark names them (pyspark's daemon imports ``sys.argv[1]`` when it starts
#: with "pyspark"): reports what its worker process sees
_PROBE = """
import json, os, sys

def main(infile, outfile):
    data = json.dumps({"cwd": os.getcwd(), "argv": sys.argv[1:], "ppid": os.getppid(),
                       "daemon": os.environ.get("HOODLINE_WORKER_DAEMON")}).encode()
    outfile.write(len(data).to_bytes(4, "big") + data)
    outfile.flush()
"""


def _ask_worker(port: int) -> dict[str, object]:
    """Ask the daemon at ``port`` for a worker as the JVM does (authenticated with the secret)
    and return what the probe worker module reports."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        f = sock.makefile("rwb")
        f.read(4)  # the worker's PID
        secret = _SECRET.encode()
        f.write(struct.pack(">i", len(secret)) + secret)
        f.flush()
        (size,) = struct.unpack(">i", f.read(4))
        assert f.read(size) == b"ok"
        (size,) = struct.unpack(">i", f.read(4))
        report: dict[str, object] = json.loads(f.read(size))
        return report


@pytest.fixture
def probe_dir(sock_dir: Path) -> Path:
    where = sock_dir / "cwd"
    where.mkdir()
    (where / "pyspark_zygote_probe.py").write_text(_PROBE)
    return where


def _launcher_env(env: dict[str, str], where: Path) -> dict[str, str]:
    return {**env, SOCKET_ENV: str(where), "PYTHON_WORKER_FACTORY_SECRET": _SECRET}


def test_the_zygote_takes_the_launchers_place_as_its_daemon(zygote: Zygote,
                                                            probe_dir: Path) -> None:
    where, env = zygote.socket_path, _base_env()
    launcher = _launch(_launcher_env(env, where), ("pyspark_zygote_probe",), probe_dir)
    port = _port(launcher)  # written by the zygote, which became the daemon
    assert not where.exists()  # one daemon per session: no more launchers are served
    # its workers run the launcher's worker module in its directory, forked by the zygote
    report = _ask_worker(port)
    assert report == {"cwd": str(probe_dir), "argv": ["pyspark_zygote_probe"],
                      "ppid": zygote.process.pid, "daemon": "warm"}
    # the JVM's exit closes the daemon's stdin: the daemon, then the launcher, exit
    assert launcher.stdin is not None
    launcher.stdin.close()
    zygote.process.wait(20)
    assert _wait_exit(launcher) == 0
    assert not _listening(port)
    assert "hoodline worker daemon" not in _stderr(launcher)  # neither refused nor cold


def test_sigterm_to_the_launcher_stops_the_warm_daemon(zygote: Zygote) -> None:
    where, env = zygote.socket_path, _base_env()
    launcher = _launch(_launcher_env(env, where))
    port = _port(launcher)
    launcher.send_signal(signal.SIGTERM)  # how Spark's Process.destroy() stops it
    zygote.process.wait(20)  # the daemon got it
    assert _wait_exit(launcher) == 0
    assert not _listening(port)


def test_sigterm_before_the_zygote_answers_stops_both(zygote: Zygote) -> None:
    where, env = zygote.socket_path, _base_env()
    launcher = _launch(_launcher_env(env, where))
    time.sleep(0.3)  # connected (or still starting); the zygote is still importing
    launcher.send_signal(signal.SIGTERM)
    _wait_exit(launcher, 30)
    zygote.process.wait(30)  # it either found the launcher gone or got the SIGTERM


def test_an_unreadable_request_is_dropped_and_the_next_launcher_served(
    zygote: Zygote, probe_dir: Path
) -> None:
    where, env = zygote.socket_path, _base_env()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:
        bad.connect(str(where))
        bad.sendall(b"\x00\x00")  # half a length, no streams
    launcher = _launch(_launcher_env(env, where), ("pyspark_zygote_probe",), probe_dir)
    assert _ask_worker(_port(launcher))["daemon"] == "warm"
    assert launcher.stdin is not None
    launcher.stdin.close()
    assert _wait_exit(launcher) == 0


def _wait_exit(process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> int:
    code: int = process.wait(timeout_s)
    return code


def _stderr(process: subprocess.Popen[bytes]) -> str:
    assert process.stderr is not None
    return process.stderr.read().decode()


def test_a_launcher_whose_environment_differs_starts_cold_and_says_why(zygote: Zygote) -> None:
    where, env = zygote.socket_path, _base_env()
    launcher = _launch({**env, SOCKET_ENV: str(where), "MALLOC_ARENA_MAX": "4"})
    port = _port(launcher)  # its own daemon: it imported and listens itself
    assert _listening(port)
    assert zygote.process.wait(20) == 0  # refused and gone
    assert launcher.stdin is not None
    launcher.stdin.close()
    _wait_exit(launcher)  # (pyspark's own daemon exits with 1 on EOF)
    err = _stderr(launcher)
    assert "refused (MALLOC_ARENA_MAX='4' where the zygote started with '2')" in err, err


def test_a_launcher_without_a_zygote_starts_cold(sock_dir: Path) -> None:
    launcher = _launch({**_base_env(), SOCKET_ENV: str(sock_dir / "gone.sock")})
    assert _listening(_port(launcher))
    assert launcher.stdin is not None
    launcher.stdin.close()
    _wait_exit(launcher)
    assert "no warm worker daemon" in _stderr(launcher)


def test_a_zygote_exits_when_its_session_closes_its_stdin(sock_dir: Path) -> None:
    # (also when the driver dies: its end of the pipe closes)
    where = sock_dir / "z.sock"
    zygote = Zygote.start(where, _base_env())
    assert where.exists()  # bound by the session before the zygote started
    assert zygote.process.stdin is not None
    zygote.process.stdin.close()
    assert zygote.process.wait(60) == 0  # by itself, once imported (no signal)
    assert not where.exists()


def test_stopping_a_session_ends_a_zygote_still_importing_at_once(sock_dir: Path) -> None:
    where = sock_dir / "z.sock"
    zygote = Zygote.start(where, _base_env())
    zygote.stop()  # a session stopped before any Python task: it need not finish importing
    assert zygote.process.returncode == -signal.SIGTERM


# -- in a session ---------------------------------------------------------------------------------
@pytest.mark.spark
def test_a_local_sessions_workers_come_from_the_warm_daemon_in_the_drivers_tree(
    spark: HoodlineSpark,
) -> None:
    def probe(i: int) -> Iterator[tuple[str, int]]:
        yield os.environ.get(STARTED_ENV, ""), os.getppid()

    got = per_subtask(spark.context, 2, probe).collect()
    assert [daemon for daemon, _ in got] == ["warm", "warm"]
    # the daemon (the zygote) is a child of this driver: its workers' CPU and memory count
    # as the driver's process tree's
    assert {psutil.Process(parent).ppid() for _, parent in got} == {os.getpid()}
