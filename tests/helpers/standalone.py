"""A Spark standalone cluster on 127.0.0.1: a master and workers started from the pip-installed
pyspark's own launcher (``bin/spark-class``), each worker with its own work directory, so
executors are children of the workers, not of the driver (unlike ``local-cluster``).

Every daemon carries an environment marker; :meth:`StandaloneCluster.kill_worker` and
:meth:`StandaloneCluster.stop` end a worker together with the executor JVMs and Python workers
it started (found by the marker they inherit), by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

from hoodline.broker import free_port
from tests.helpers.crash_harness import cmdline, marked_pids

MARKER_ENV = "HOODLINE_STANDALONE_MARKER"
START_TIMEOUT_S = 120.0


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    marker: str
    log: Path

    def pids(self) -> list[int]:
        """The daemon and what it started (executors, their Python workers)."""
        return marked_pids(self.marker, env_name=MARKER_ENV)

    def kill(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


@dataclass
class StandaloneCluster:
    root: Path
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    port: int = 0
    ui_port: int = 0
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, main_class: str, *args: str) -> Daemon:
        home = Path(_find_spark_home())
        marker = uuid.uuid4().hex
        log = self.root / f"{name}.log"
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", MARKER_ENV: marker,
            "SPARK_LOG_DIR": str(self.root / "logs"), "SPARK_PID_DIR": str(self.root),
        })
        # The master's and workers' own JVMs (not the executors they start, which run with the
        # application's options): without the optimising JIT and with the serial collector the
        # cluster starts in ~8 s and 16 s of CPU instead of 18-24 s and 32-34 s, which the
        # other tests running beside it on the two cores were paying for
        env.setdefault("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(home / "bin" / "spark-class"), main_class, *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        daemon = Daemon(name, proc, marker, log)
        self.daemons.append(daemon)
        return daemon

    def start(self) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(self.workers):
            self.start_worker(i)
        self.wait_for_workers(self.workers)
        return self

    def work_dir(self, i: int) -> Path:
        return self.root / f"worker-{i}"

    def start_worker(self, i: int) -> None:
        """Start worker ``i`` (again, after :meth:`kill_worker`) with its own work dir."""
        self.daemons = [d for d in self.daemons if d.name != f"worker-{i}"]
        self.work_dir(i).mkdir(exist_ok=True)
        self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host",
                    "127.0.0.1", "--webui-port", str(free_port()), "--cores",
                    str(self.cores_per_worker), "--memory", self.memory_per_worker,
                    "--work-dir", str(self.work_dir(i)), self.url)

    def ensure_workers(self) -> None:
        """Start again every worker that was killed, and wait until all are registered."""
        for i in range(self.workers):
            if not any(d.name == f"worker-{i}" and d.proc.poll() is None for d in self.daemons):
                self.start_worker(i)
        self.wait_for_workers(self.workers)

    def app_dirs(self, i: int) -> list[Path]:
        """Application folders worker ``i`` made for the executors it ran."""
        return sorted(p for p in self.work_dir(i).glob("app-*") if p.is_dir())

    def state(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> int:
        try:
            return int(self.state().get("aliveworkers", 0))  # type: ignore[call-overload]
        except (OSError, ValueError):  # not up yet, or its status page not JSON yet
            return 0

    def wait_for_workers(self, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < count:
            for d in self.daemons:
                if d.proc.poll() is not None:
                    raise RuntimeError(
                        f"spark {d.name} exited ({d.proc.returncode}): "
                        f"{d.log.read_text(errors='replace')[-3000:]}"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} workers did not register within {timeout_s}s")
            time.sleep(0.3)

    def worker(self, i: int) -> Daemon:
        return next(d for d in self.daemons if d.name == f"worker-{i}")

    def executor_pids(self, i: int) -> list[int]:
        """Executor JVMs worker ``i`` started."""
        return [p for p in self.worker(i).pids()
                if "CoarseGrainedExecutorBackend" in cmdline(p)]

    def executor_ids(self, i: int) -> list[str]:
        """Spark's ids (``--executor-id``) of the executor JVMs worker ``i`` runs."""
        ids = []
        for pid in self.executor_pids(i):
            args = cmdline(pid).split()
            if "--executor-id" in args[:-1]:
                ids.append(args[args.index("--executor-id") + 1])
        return ids

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i``, its executors and their Python workers."""
        self.worker(i).kill()

    def stop(self) -> None:
        for d in reversed(self.daemons):
            d.kill()
        self.daemons.clear()

