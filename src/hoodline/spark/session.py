"""Create and stop the Spark application hoodline runs on (``local[N]``, ``local-cluster[E,C,M]``).

Facts this module is built on (pip-installed pyspark 4.3.0, Java 17, measured on a 2-core machine):

* ``local-cluster[E,C,M]`` works with the pip package: pyspark's own directory is ``SPARK_HOME``
  (it holds ``bin/spark-class`` and ``jars/``); the master and workers run inside the driver JVM and
  every executor is a separate ``CoarseGrainedExecutorBackend`` JVM, a child of the driver JVM.
* Executors start Python workers with ``PYSPARK_PYTHON`` or, when unset, ``python3`` from
  ``PATH`` -- usually *not* the interpreter that has pyarrow. We default it to
  ``sys.executable``.
* Executors do not see the driver's ``sys.path`` (pytest's ``pythonpath``, a source checkout ...):
  unless hoodline is installed in the executors' interpreter, its modules cannot be imported in
  tasks. We zip the imported ``hoodline`` package and ship it with ``addPyFile``; shipped files come
  first on the workers' ``sys.path``, so executors run exactly the driver's code
  (:mod:`.package_archive`).
* The standalone worker writes each executor's work directory under ``$SPARK_HOME/work/<app id>``
  (inside site-packages for a pip install; not configurable for local-cluster). Sessions started in
  the same second share it (same app id); the last one to stop deletes it (:mod:`.work_dir`).
* Spark picks a non-loopback address by default; for local masters we bind to 127.0.0.1.
* JVM-level settings (driver memory, log configuration) only take effect when the JVM is launched,
  i.e. for the first session of a Python process.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
from pyspark import SparkConf, SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

import hoodline
from hoodline.errors import ConfigError, EngineJobError, SparkRuntimeError
from hoodline.pipeline.config import RuntimeSection
from hoodline.pipeline.master import Master, MasterKind, parse_master
from hoodline.spark import class_cache, gateway_watchdog, worker_zygote
from hoodline.spark.java import java_option, start_problem
from hoodline.spark.package_archive import shipped_archive
from hoodline.spark.scratch import ScratchDir, sweep_stale
from hoodline.spark.work_dir import WorkDirClaim
from hoodline.spark.work_dir import sweep_stale as sweep_stale_work_dirs
from hoodline.spark.worker_zygote import Zygote, daemon_environment

log = logging.getLogger(__name__)

WORKER_DAEMON = "hoodline.spark.worker_daemon"
#: glibc malloc arenas of a Python worker (``spark.executorEnv.MALLOC_ARENA_MAX``; a value in
#: ``runtime.spark-conf`` or in the environment wins)
WORKER_MALLOC_ARENAS = 2
#: Arrow's memory pool in the Python workers (``spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL``,
#: when this pyarrow build has it; a value in ``runtime.spark-conf`` or in the environment wins)
WORKER_ARROW_POOL = "jemalloc"
#: initial heap of a local master's JVMs (``-Xms``; they grow it as they need, up to
#: ``spark.driver.memory``); they run the serial collector (``spark.driver.extraJavaOptions`` /
#: ``spark.executor.extraJavaOptions`` in ``runtime.spark-conf`` replace both)
LOCAL_JVM_INITIAL_HEAP = "64m"
_LOG_LEVELS = ("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


@dataclass(frozen=True)
class SparkSettings:
    """How to build the session. Defaults suit a 2-core laptop."""

    master: str = "local[2]"
    app_name: str = "hoodline"
    #: JVM heap of the driver (only applied when this process launches the JVM).
    driver_memory: str = "1g"
    #: ``spark.sql.shuffle.partitions``; ``None`` = total cores of the master (at least 2).
    shuffle_partitions: int | None = None
    #: Zip the imported hoodline package and ship it to executors (the zip is cached, see
    #: :mod:`.package_archive`).
    ship_package: bool = True
    #: Spark (log4j) log level: WARN keeps the console quiet, ERROR quieter.
    log_level: str = "WARN"
    #: Map (building it once first) the JVM class-data archive of :mod:`.class_cache`: the
    #: driver JVM starts ~2.5 s faster.
    class_cache: bool = True
    #: ``local[N]`` only: start Python workers from :mod:`hoodline.spark.worker_daemon`, which
    #: loads pyspark from its installation and pyarrow and the task code before forking.
    preload_workers: bool = True
    #: Extra ``spark.*`` settings, applied last (they win).
    extra_conf: Mapping[str, str] = field(default_factory=dict)


#: the loggers that print a failed task's whole Python and Java stack traces on the console:
#: the executor's "Exception in task" and the scheduler's "Lost task" / "aborting job", three
#: times over for one failure. hoodline reports a failed round itself, in one line, and retries
#: it; these speak only when hoodline logs at debug level or Spark's level is INFO or finer.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    # the session's stop interrupts its cleaner while it drops a broadcast: "ERROR
    # ContextCleaner: Error cleaning broadcast 1" and an InterruptedException's stack trace
    # after a run's last line (~1 run in 30); what it cleans goes with the JVM anyway
    "org.apache.spark.ContextCleaner",
)


def _log4j2_properties(level: str, task_failures: bool = False) -> str:
    """The JVM's log4j2 configuration: ``level`` for Spark (to stderr, one line per record);
    ``task_failures``: whether failed tasks print their stack traces (see
    :data:`TASK_FAILURE_LOGGERS`)."""
    quiet = [] if task_failures or level.upper() in ("ALL", "DEBUG", "INFO") else [
        line
        for i, name in enumerate(TASK_FAILURE_LOGGERS)
        for line in (f"logger.task{i}.name = {name}", f"logger.task{i}.level = off")
    ]
    return "\n".join(
        [
            f"rootLogger.level = {level.lower()}",
            "rootLogger.appenderRef.stderr.ref = console",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.target = SYSTEM_ERR",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex",
            "logger.native.name = org.apache.hadoop.util.NativeCodeLoader",
            "logger.native.level = error",
            *quiet,
            "",
        ]
    )


#: the FAIR scheduler pool of table-service jobs (a background compaction)
SERVICES_POOL = "table-services"


def _scheduler_pools() -> str:
    """Spark's FAIR scheduler allocation file declaring the table-services pool (Spark's
    defaults for a pool: FIFO inside it, weight 1, no minimum share) -- declared, so Spark does
    not warn on the console when the first background compaction uses it."""
    return (
        '<?xml version="1.0"?>\n<allocations>\n'
        f'  <pool name="{SERVICES_POOL}">\n'
        "    <schedulingMode>FIFO</schedulingMode>\n    <weight>1</weight>\n"
        "    <minShare>0</minShare>\n  </pool>\n</allocations>\n"
    )


def spark_conf(
    settings: SparkSettings,
    master: Master,
    log_config: Path | None,
    class_archive: Path | None = None,
    scheduler_pools: Path | None = None,
    zygote_socket: Path | None = None,
    temp_dir: Path | None = None,
) -> dict[str, str]:
    """The ``spark.*`` settings for ``settings`` (pure; no JVM needed). ``class_archive``: a
    built class-data archive for the driver JVM (see :mod:`.class_cache`); ``scheduler_pools``:
    the FAIR scheduler's allocation file (see :func:`_scheduler_pools`); ``zygote_socket``:
    where the worker daemon is to find a warm zygote -- used when the workers start from
    hoodline's daemon (``local[N]``, preloads on, not replaced through ``extra_conf``) and the
    path fits a Unix socket (see :mod:`.worker_zygote`); ``temp_dir``: the session's scratch
    directory, where the JVMs (and a local master's Python workers) keep their temporary files
    (default: ``$TMPDIR``)."""
    if settings.log_level.upper() not in _LOG_LEVELS:
        raise ConfigError(
            f"Spark log level {settings.log_level!r} is invalid; "
            f"use one of {', '.join(_LOG_LEVELS)}"
        )
    # a cluster master's cores are known once its executors registered: Spark's own default
    # parallelism follows them (pinned to 2 here, every write ran in 2 tasks on any cluster)
    partitions = settings.shuffle_partitions or (
        max(2, master.total_cores) if master.total_cores else 0)
    conf: dict[str, str] = {
        "spark.app.name": settings.app_name,
        "spark.driver.memory": settings.driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.sql.session.timeZone": "UTC",
        # hoodline's shuffles carry envelopes whose record payloads Arrow compressed already
        # (job.RECORDS_IPC): compressing them again cost the 2M-message ingest's JVM ~2.5 s CPU
        "spark.shuffle.compress": "false",
        # table services (a background compaction) run in a pool of their own beside the
        # rounds' jobs instead of queueing them behind it (see SparkEngine.run_tasks)
        "spark.scheduler.mode": "FAIR",
    }
    if partitions:
        conf["spark.sql.shuffle.partitions"] = str(partitions)
        conf["spark.default.parallelism"] = str(partitions)
    if scheduler_pools is not None:
        conf["spark.scheduler.allocation.file"] = f"file:{scheduler_pools}"
    if master.is_local:
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if master.kind is MasterKind.LOCAL and settings.preload_workers:
        conf["spark.python.daemon.module"] = WORKER_DAEMON
        # The daemon is imported before Spark ships hoodline's archive: workers find this
        # installation through their environment (set for them only; this process's
        # environment, which later sessions' JVMs inherit, stays as it was).
        conf["spark.executorEnv.PYTHONPATH"] = str(Path(hoodline.__file__).resolve().parent.parent)
    if "MALLOC_ARENA_MAX" not in os.environ:
        # Python workers run librdkafka's and pyarrow's threads, and glibc gives each thread a
        # malloc arena of its own (up to 8 per core) that keeps freed memory resident: with two
        # arenas the 2M-message ingest peaked 80-230 MiB lower at the same speed (BENCHMARKS.md)
        conf["spark.executorEnv.MALLOC_ARENA_MAX"] = str(WORKER_MALLOC_ARENAS)
    if ("ARROW_DEFAULT_MEMORY_POOL" not in os.environ
            and WORKER_ARROW_POOL in pa.supported_memory_backends()):
        # jemalloc hands the Arrow buffers a task freed back to the system sooner than mimalloc
        # (pyarrow's default), which keeps them resident in the reused workers: the 2M-message
        # insert peaked 1,764 -> 1,551 MiB at the same speed (BENCHMARKS.md)
        conf["spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"] = WORKER_ARROW_POOL
    # Java on Linux ignores TMPDIR: its temporary files (Spark's local directories, unless
    # SPARK_LOCAL_DIRS or spark.local.dir name others, with a round's shuffled records; the
    # native libraries it unpacks) went to /tmp even when TMPDIR pointed to a larger disk, as
    # hoodline's messages about a full temporary folder advise. In the session's scratch
    # directory (``temp_dir``), the next session removes them when this one was killed.
    temp = temp_dir if temp_dir is not None else Path(tempfile.gettempdir())
    java: list[str] = [java_option(f"-Djava.io.tmpdir={temp}")]
    if temp_dir is not None and master.is_local:
        # and the Python workers' (a writer's spilled records), for the same reason
        conf["spark.executorEnv.TMPDIR"] = str(temp_dir)
    if log_config is not None:
        java.append(java_option(f"-Dlog4j2.configurationFile=file:{log_config}"))
    if master.is_local:
        # The JVMs of a local master only move bytes for hoodline's Python tasks; the optimising
        # JIT compiler (C2) costs more CPU on the shared cores than it saves: C1 only starts
        # Spark ~0.8 s faster and took 12 % less CPU over a 2M-message ingest (BENCHMARKS.md).
        java.append("-XX:TieredStopAtLevel=1")
        # Their heaps hold little but Spark's own bookkeeping: the serial collector, starting
        # from a small heap, has no GC threads competing for the cores and no G1 remembered
        # sets; the 2M-message merge-on-read ingest ran ~9 % faster with ~1.5 s less CPU and
        # a ~55 MiB lower peak (four alternating pairs, BENCHMARKS.md)
        java += ["-XX:+UseSerialGC", f"-Xms{LOCAL_JVM_INITIAL_HEAP}"]
    if master.is_local:  # the same files and flags on this machine
        conf["spark.executor.extraJavaOptions"] = " ".join(java)
    java += class_cache.java_options(class_archive)
    conf["spark.driver.extraJavaOptions"] = " ".join(java)
    conf.update({str(k): str(v) for k, v in settings.extra_conf.items()})
    if (zygote_socket is not None and master.kind is MasterKind.LOCAL
            and _runs_hoodline_daemon(conf) and worker_zygote.fits(zygote_socket)):
        conf[f"spark.executorEnv.{worker_zygote.SOCKET_ENV}"] = str(zygote_socket)
    return conf


def _runs_hoodline_daemon(conf: Mapping[str, str]) -> bool:
    """Whether Spark will start Python workers from hoodline's daemon module with ``conf``."""
    return (conf.get("spark.python.daemon.module") == WORKER_DAEMON
            and conf.get("spark.python.use.daemon", "true").strip().lower() != "false")


def settings_from_runtime(runtime: RuntimeSection, app_name: str = "hoodline") -> SparkSettings:
    """Session settings for a pipeline's ``[runtime]`` section (``spark-conf`` entries win)."""
    return SparkSettings(
        master=runtime.master,
        app_name=app_name,
        class_cache=runtime.jvm_class_cache,
        extra_conf={k: _conf_text(v) for k, v in runtime.spark_conf.items()},
    )


def _conf_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


class HoodlineSpark:
    """A running Spark application plus what is needed to stop it cleanly. Use as a context
    manager.

    hoodline's jobs are RDD jobs: only a :class:`SparkContext` is started. Starting Spark SQL's
    session on top of it cost ~1 s more at every start (BENCHMARKS.md); :attr:`session`
    creates one on first use, for callers that want DataFrames."""

    def __init__(
        self,
        context: SparkContext,
        master: Master,
        scratch: ScratchDir,
        applied_conf: dict[str, str] | None = None,
        work_dir: WorkDirClaim | None = None,
        zygote: Zygote | None = None,
    ) -> None:
        self._context = context
        self._session: SparkSession | None = None
        self.master = master
        self._scratch = scratch
        self._applied_conf = dict(applied_conf or {})
        self._work_dir = work_dir
        self._zygote = zygote
        self._stopped = False

    @property
    def context(self) -> SparkContext:
        return self._context

    @property
    def session(self) -> SparkSession:
        """A Spark SQL session on this context (created on first use)."""
        if self._session is None:
            self._session = SparkSession(self._context)
        return self._session

    def shuffle_files_dir(self) -> Path | None:
        """A directory in this session's scratch space where tasks may hand each other files:
        on a ``local[N]`` master, whose tasks all run on this machine; None on other masters
        (their executors need not share a disk)."""
        if self.master.kind is not MasterKind.LOCAL:
            return None
        path = self._scratch.path / "shuffle"
        path.mkdir(exist_ok=True)
        return path

    def executor_pids(self) -> list[int]:
        """PIDs of executor JVMs (children of the driver JVM); empty for ``local[N]``."""
        jvm: Any = self.context._jvm
        handles = jvm.java.lang.ProcessHandle.current().children().toArray()
        pids = []
        for h in handles:
            cmd = h.info().commandLine().orElse("")
            if "CoarseGrainedExecutorBackend" in cmd and h.isAlive():
                pids.append(int(h.pid()))
        return sorted(pids)

    def wait_for_executors(self, count: int, timeout_s: float = 60.0) -> list[int]:
        """Block until ``count`` executors are registered with the driver (local-cluster)."""
        deadline = time.monotonic() + timeout_s
        tracker: Any = self.context._jsc.sc().statusTracker()
        while True:
            # getExecutorInfos includes the driver itself.
            registered = len(tracker.getExecutorInfos()) - 1
            if registered >= count:
                return self.executor_pids()
            if time.monotonic() > deadline:
                raise SparkRuntimeError(
                    f"only {registered} of {count} executors registered within {timeout_s:.0f}s "
                    f"on master {self.master.url!r}; check memory (M in local-cluster[E,C,M])"
                )
            time.sleep(0.2)

    def running_tasks(self) -> int:
        """Tasks running right now on any executor (the driver's own in local mode included)."""
        tracker: Any = self.context._jsc.sc().statusTracker()
        return sum(int(info.numRunningTasks()) for info in tracker.getExecutorInfos())

    def wait_until_idle(self, timeout_s: float = 60.0) -> None:
        """Block until no task runs anywhere.

        A job can return while task attempts it no longer needs still run (e.g. the old attempt
        of a stage resubmitted after a fetch failure, or a speculative copy); such a "zombie"
        could write files after the round committed. Rounds run one at a time, so "no task
        running" is a safe barrier before reconciling markers and committing.
        """
        deadline = time.monotonic() + timeout_s
        while (running := self.running_tasks()) > 0:
            if time.monotonic() > deadline:
                raise EngineJobError(
                    f"{running} task(s) still running {timeout_s:.0f}s after the round's job "
                    "finished; not committing (the round will be rolled back and retried)"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop Spark, wait for executor processes to exit, remove temporary files."""
        if self._stopped:
            return
        self._stopped = True
        pids: list[int] = []
        try:
            pids = self.executor_pids()
        except Exception:  # JVM already gone: nothing to wait for
            pids = []
        jvm = self.context._jvm
        updates = _take_accumulator_server(self.context)
        try:
            if self._session is not None:
                self._session.stop()  # (stops the context too)
            else:
                self._context.stop()
            if updates is not None:
                threading.Thread(target=updates.shutdown, name="accumulator-server-stop",
                                 daemon=True).start()
            _forget_conf(jvm, self._applied_conf)
            deadline = time.monotonic() + 30
            while pids and time.monotonic() < deadline:
                pids = [p for p in pids if _alive(p)]
                if pids:
                    time.sleep(0.1)
        finally:
            if self._zygote is not None:
                self._zygote.stop()
            self._scratch.remove()
            if self._work_dir is not None:
                self._work_dir.release()

    def __enter__(self) -> HoodlineSpark:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def kill_gateway_jvm() -> bool:
    """SIGKILL the JVM this process started for Spark (its driver and, on local masters, its
    executors), as a crash would end it; True if there was one. What the JVM ran stops at once
    and says nothing more; its Python worker daemons exit when their pipes to it close. For a
    user's second Ctrl-C: the tables it wrote to recover as after a crash (the next writer rolls
    the unfinished write back)."""
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is None or proc.poll() is not None:
        return False
    proc.kill()
    return True


def _take_accumulator_server(context: SparkContext) -> Any:
    """Detach PySpark's accumulator-update server from ``context`` so that stopping the
    context does not wait for it: its handler polls with a 1 s timeout, and
    ``SparkContext.stop`` spent ~0.9 s of its ~1 s in ``shutdown()`` after the JVM had stopped
    in 0.1 s. The caller shuts it down in the background once the JVM has stopped (nothing
    sends updates any more). None when this PySpark has no such attribute."""
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        context._accumulatorServer = None  # type: ignore[assignment]
    return server


def _forget_conf(jvm: Any, applied: dict[str, str]) -> None:
    """PySpark keeps its JVM after a session stops and passed the first session's settings to it
    as system properties, which every later SparkConf in this process loads as defaults: a
    ``local[N]`` session's worker daemon would leak into a later ``local-cluster`` one. Remove
    the properties this session set (unless something else changed them since)."""
    if jvm is None:
        return
    try:
        system = jvm.java.lang.System
        for key, value in applied.items():
            if system.getProperty(key) == value:
                system.clearProperty(key)
    except Exception:  # JVM already gone: nothing leaks
        log.debug("could not clear the session's settings from the JVM", exc_info=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by the JVM) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def executor_python(settings: SparkSettings) -> str:
    """The Python the executors start: ``spark.pyspark.python`` of [runtime.spark-conf] (PySpark
    reads only the PYSPARK_PYTHON variable, so that setting was ignored), else PYSPARK_PYTHON,
    else this interpreter."""
    chosen = settings.extra_conf.get("spark.pyspark.python")
    return str(chosen) if chosen else os.environ.get("PYSPARK_PYTHON", sys.executable)


@contextmanager
def _interrupts_deferred() -> Iterator[Callable[[], bool]]:
    """Ctrl-C while Spark's JVM starts is held until the SparkContext exists (then the caller
    stops it): interrupted in the middle, pyspark loses the JVM it launched (with SIGINT
    ignored), which then runs on without a parent. A second Ctrl-C interrupts at once. Only
    in the main thread (where Python delivers signals)."""
    hits: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return

    def held(signum: int, frame: object) -> None:
        if hits:
            raise KeyboardInterrupt
        hits.append(signum)
        log.warning("Ctrl-C: stopping as soon as Spark has started (again to abort at once, "
                    "which may leave Spark's JVM running)")

    previous = signal.signal(signal.SIGINT, held)
    try:
        yield lambda: bool(hits)
    finally:
        if signal.getsignal(signal.SIGINT) is held:  # (pyspark may have set its own meanwhile)
            signal.signal(signal.SIGINT, previous)


_JAVA_EXCEPTION = re.compile(r"^(?::\s*)?[\w.$]+(?:Exception|Error): (.+)$", re.MULTILINE)


def _start_failure(exc: BaseException) -> str:
    """What a failed SparkContext start says: the JVM's exception message when the error carries
    one, else its first line, and where the rest is."""
    text = str(exc)
    java = _JAVA_EXCEPTION.search(text)
    if java is not None:
        return java.group(1).strip()
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return (f"{first} (the JVM's own lines above say why; e.g. master 'yarn' needs "
            "HADOOP_CONF_DIR or YARN_CONF_DIR)")


def start_session(settings: SparkSettings | None = None) -> HoodlineSpark:
    """Start Spark for hoodline (a SparkContext; see :class:`HoodlineSpark`). Refuses to reuse a
    context started elsewhere."""
    settings = settings or SparkSettings()
    master = parse_master(settings.master)
    if SparkContext._active_spark_context is not None:
        active = SparkContext._active_spark_context.master
        raise SparkRuntimeError(
            f"a SparkContext (master {active!r}) is already running in this process; stop it "
            f"before starting hoodline's session on {master.url!r}"
        )
    problem = start_problem(master.url)
    if problem is not None:
        raise SparkRuntimeError(problem)
    if class_cache.jvm_started_by_spark_submit():
        # the submitted master (spark-submit puts it in the JVM's defaults) loses to the
        # pipeline's: a run submitted to a cluster ran on local[2] without a word
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM (its defaults)
        submitted = SparkConf().get("spark.master", None)
        if submitted is not None and submitted != master.url:
            raise SparkRuntimeError(
                f"spark-submit was given master {submitted!r}, but the pipeline's runtime.master "
                f"is {master.url!r}: set runtime.master to the same master (hoodline configures "
                "the session for the master the pipeline names)"
            )
    sweep_stale()  # what killed sessions left behind
    if master.kind is MasterKind.LOCAL_CLUSTER:
        sweep_stale_work_dirs(Path(_find_spark_home()) / "work")
    claim = ScratchDir.create()
    scratch = claim.path
    context: SparkContext | None = None
    work_dir: WorkDirClaim | None = None
    zygote: Zygote | None = None
    try:
        log_config = scratch / "log4j2.properties"
        task_failures = logging.getLogger("hoodline").isEnabledFor(logging.DEBUG)
        log_config.write_text(_log4j2_properties(settings.log_level, task_failures))
        pools = scratch / "fairscheduler.xml"
        pools.write_text(_scheduler_pools())
        archive = class_cache.archive_path() if settings.class_cache else None
        if archive is not None and not archive.is_file():
            log.info("building the JVM class cache once (later starts are ~2.5 s faster): %s",
                     archive)
            class_cache.build(archive)
        # Executors must run the interpreter that has pyarrow & co (see module docs).
        os.environ["PYSPARK_PYTHON"] = executor_python(settings)
        socket_path = scratch / "zygote.sock"
        conf = spark_conf(settings, master, log_config, archive, pools, socket_path, scratch)
        if f"spark.executorEnv.{worker_zygote.SOCKET_ENV}" in conf:
            # the worker daemon's imports run while the JVM starts
            try:
                zygote = Zygote.start(socket_path, daemon_environment(os.environ, conf))
            except OSError as exc:  # workers start as they did before (cold)
                log.info("no warm worker daemon for this session: %s", exc)
                del conf[f"spark.executorEnv.{worker_zygote.SOCKET_ENV}"]
        if master.is_local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        spark_settings = SparkConf().setMaster(master.url).setAll(list(conf.items()))
        # the package archive (cached; ~0.8 s of compiling when not) is made while the JVM starts
        with ThreadPoolExecutor(1, thread_name_prefix="hoodline-archive") as pool:
            shipped = (pool.submit(shipped_archive, scratch, class_cache.cache_dir())
                       if settings.ship_package else None)
            with _interrupts_deferred() as interrupted, gateway_watchdog.watch_gateway(
                lambda: SparkContext._gateway is not None
            ) as stuck:
                try:
                    context = SparkContext(conf=spark_settings)
                except Exception as exc:
                    if not stuck():
                        # one line, not Python's traceback over the JVM's (walkthrough review:
                        # master 'yarn' without HADOOP_CONF_DIR ended in ~110 lines)
                        raise SparkRuntimeError(
                            f"Spark did not start with master {master.url!r}: "
                            f"{_start_failure(exc)}") from exc
                    raise SparkRuntimeError(
                        "Spark's JVM did not start within "
                        f"{gateway_watchdog.GATEWAY_START_TIMEOUT_S:.0f} s and "
                        "was ended: see the JVM's lines above (a full temporary folder says 'No "
                        "space left on device'; TMPDIR, SPARK_LOCAL_DIRS)"
                    ) from exc
            if interrupted():
                raise KeyboardInterrupt  # the handler below stops the context it started
            if master.kind is MasterKind.LOCAL_CLUSTER:  # before anything else (see .work_dir)
                work_dir = WorkDirClaim(
                    Path(_find_spark_home()) / "work" / context.applicationId
                )
            context.setLogLevel(settings.log_level.upper())
            if shipped is not None:
                context.addPyFile(str(shipped.result()))
    except BaseException:
        try:
            if context is not None:  # started, but not ready for hoodline: stop it again
                context.stop()
        except Exception:  # the start's own error is the one to report
            log.warning("stopping the half-started Spark session failed", exc_info=True)
        finally:
            if work_dir is not None:
                work_dir.release()
            if zygote is not None:
                zygote.stop()
            claim.remove()
        raise
    return HoodlineSpark(context, master, claim, conf, work_dir, zygote)
