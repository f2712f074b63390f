"""local[N]: the worker daemon's imports run in a zygote while the JVM starts; Spark's daemon
process hands its pipes over to a child of the zygote, or starts cold when it cannot."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

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
    env = {"MALLOC_ARENA_MAX": "2", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
           "LD_PRELOAD": "x.so", "ARROW_DEFAULT_MEMORY_POOL": "system", "PYTHONPATH": "/a",
           "PYTHONUNBUFFERED": "YES", "PYTHON_WORKER_FACTORY_SECRET": "s", "SPARK_HOME": "/s",
           "HOME": "/root"}
    assert start_variables(env) == {
        "MALLOC_ARENA_MAX": "2", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
        "LD_PRELOAD": "x.so", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def _request(env: dict[str, str], path: list[str] | None = None) -> dict[str, object]:
    return {"executable": os.path.realpath(sys.executable), "hash": hash("hoodline-worker-zygote"),
            "env": env, "path": path if path is not None else ["/site"]}


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
            "spark.app.name": "x"}
    env = daemon_environment({"HOME": "/root", "PYTHONPATH": "src"}, conf)
    assert env == {"HOME": "/root", "PYTHONPATH": "/src", "MALLOC_ARENA_MAX": "2",
                   "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "YES"}
    # a driver's own seed and an explicit thread count are passed on as they are
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


def _launch(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the daemon module as Spark does (pipes on stdin/stdout/stderr)."""
    return subprocess.Popen([sys.executable, "-m", "hoodline.spark.worker_daemon"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def _port(launcher: subprocess.Popen[bytes]) -> int:
    assert launcher.stdout is not None
    data = launcher.stdout.read(4)
    assert len(data) == 4, data
    port: int = struct.unpack(">i", data)[0]
    return port


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _wait_exit(process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> int:
    code: int = process.wait(timeout_s)
    return code


def _stderr(process: subprocess.Popen[bytes]) -> str:
    assert process.stderr is not None
    return process.stderr.read().decode()


def test_the_launcher_hands_its_pipes_to_a_warm_daemon(sock_dir: Path) -> None:
    where = sock_dir / "z.sock"
    env = _base_env()
    zygote = Zygote.start(where, env)
    try:
        launcher = _launch({**env, SOCKET_ENV: str(where)})
        port = _port(launcher)  # written by the zygote, which became the daemon
        assert _listening(port)
        assert not where.exists()  # one daemon per session: no more launchers are served
        assert zygote.process.poll() is None  # the daemon: a child of the session, as is
        # Spark stops its daemon by closing its stdin: the daemon, then the launcher, exit
        assert launcher.stdin is not None
        launcher.stdin.close()
        zygote.process.wait(20)
        assert _wait_exit(launcher) == 0
        assert not _listening(port)
        assert "hoodline worker daemon" not in _stderr(launcher)  # neither refused nor cold
    finally:
        zygote.stop()


def test_sigterm_to_the_launcher_stops_the_warm_daemon(sock_dir: Path) -> None:
    where = sock_dir / "z.sock"
    env = _base_env()
    zygote = Zygote.start(where, env)
    try:
        launcher = _launch({**env, SOCKET_ENV: str(where)})
        port = _port(launcher)
        assert _listening(port)
        launcher.send_signal(signal.SIGTERM)  # how Spark's Process.destroy() stops it
        zygote.process.wait(20)  # the daemon got it
        assert _wait_exit(launcher) == 0
        assert not _listening(port)
    finally:
        zygote.stop()


def test_a_launcher_whose_environment_differs_starts_cold_and_says_why(sock_dir: Path) -> None:
    where = sock_dir / "z.sock"
    env = _base_env()
    zygote = Zygote.start(where, env)
    try:
        launcher = _launch({**env, SOCKET_ENV: str(where), "MALLOC_ARENA_MAX": "4"})
        port = _port(launcher)  # its own daemon: it imported and listens itself
        assert _listening(port)
        assert zygote.process.wait(20) == 0  # refused and gone
        assert launcher.stdin is not None
        launcher.stdin.close()
        _wait_exit(launcher)  # (pyspark's own daemon exits with 1 on EOF)
        err = _stderr(launcher)
        assert "refused (MALLOC_ARENA_MAX='4' where the zygote started with '2')" in err, err
    finally:
        zygote.stop()


def test_a_launcher_without_a_zygote_starts_cold(sock_dir: Path) -> None:
    launcher = _launch({**_base_env(), SOCKET_ENV: str(sock_dir / "gone.sock")})
    assert _listening(_port(launcher))
    assert launcher.stdin is not None
    launcher.stdin.close()
    _wait_exit(launcher)
    assert "no warm worker daemon" in _stderr(launcher)


def test_a_zygote_exits_when_its_session_closes_its_stdin(sock_dir: Path) -> None:
    where = sock_dir / "z.sock"
    zygote = Zygote.start(where, _base_env())
    deadline = time.monotonic() + 20
    while not where.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where.exists()
    zygote.stop()
    assert zygote.process.returncode == 0  # exited by itself, not killed
    assert not where.exists()


# -- in a session ---------------------------------------------------------------------------------
@pytest.mark.spark
def test_a_local_sessions_workers_come_from_the_warm_daemon(spark: HoodlineSpark) -> None:
    def probe(i: int) -> Iterator[str]:
        yield os.environ.get(STARTED_ENV, "")

    assert per_subtask(spark.context, 2, probe).collect() == ["warm", "warm"]
