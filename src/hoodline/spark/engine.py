"""The Spark engine: runs the round driver's jobs on a SparkContext (see :mod:`.job`)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pyspark import RDD

from hoodline.errors import EngineJobError, HoodlineError, SparkRuntimeError
from hoodline.pipeline.config import RuntimeSection
from hoodline.pipeline.engine import Engine, RoundOutput, RoundOutputBuilder
from hoodline.pipeline.master import master_knows_application, master_ui_url
from hoodline.pipeline.tasks import RoundJob
from hoodline.spark.job import Envelope, decode, round_rdd
from hoodline.spark.session import (
    SERVICES_POOL,
    HoodlineSpark,
    settings_from_runtime,
    start_session,
)
from hoodline.spark.worker_gc import freeze_loaded

__all__ = ["SparkEngine"]

_POOL = "spark.scheduler.pool"

T = TypeVar("T")
R = TypeVar("R")


def _frozen_first(fn: Callable[[T], R]) -> Callable[[T], R]:
    """``fn`` run by a worker that first froze what it loaded (see :mod:`.worker_gc`)."""

    def call(item: T) -> R:
        freeze_loaded()
        return fn(item)

    return call


log = logging.getLogger(__name__)

#: seconds a cluster job may wait without any executor before that is said (and again after)
NO_EXECUTOR_WARNING_S = 30.0

_ABORTED = re.compile(r"Job aborted due to stage failure: ([^\n]*)")
#: The last line of a Java or Python traceback inside a Spark error ("SomeError: message").
_ERROR_LINE = re.compile(r"^(?:Caused by: )?([\w.$]+(?:Error|Exception)\b: [^\n]*)$", re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last):"
#: a Python exception line, ``package.module.Class: message``: the class's own name is kept
_QUALIFIED = re.compile(r"^(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*(?::|$))")


def _python_error(text: str) -> str | None:
    """The exception line of the last Python traceback in ``text`` (the error a task raised;
    Spark 4 puts the worker's traceback at the top of the job's error), module path dropped."""
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    for line in text[at + len(_TRACEBACK):].splitlines()[1:]:
        if line.strip() and not line[0].isspace():
            return _QUALIFIED.sub(r"\1", line.strip())
    return None


def _summary(exc: BaseException) -> str:
    """A short description of a failed Spark job (its root error), for the round's log line:
    the error a Python task raised, else Spark's reason for aborting the job (a lost executor),
    else the last error line of the JVM's trace. For people, and for one decision: a task's
    ModuleNotFoundError/ImportError is not retried (see :meth:`SparkEngine._job_error`)."""
    text = str(exc)
    python = _python_error(text)
    if python:
        return python[:500]
    aborted = _ABORTED.search(text)
    if aborted:
        return aborted.group(1)[:500]
    found = _ERROR_LINE.findall(text)
    line = found[-1] if found else (text.strip().splitlines() or [type(exc).__name__])[0]
    return line[:500]


class SparkEngine(Engine):
    """Runs rounds on ``spark`` (a session hoodline started; stopped by :meth:`close` when
    ``owns_session``). ``shuffle_files``: on a ``local[N]`` master, the rounds' records go from
    task to task as files (``runtime.shuffle-files``, see :mod:`.job`)."""

    def __init__(
        self, spark: HoodlineSpark, *, owns_session: bool = False, shuffle_files: bool = True,
        master_ui: str = "",
    ) -> None:
        self.spark = spark
        self._owns = owns_session
        self._shuffle_files = shuffle_files
        #: runtime.master-ui ('' = the standalone master's host, Spark's default UI port)
        self._master_ui_setting = master_ui
        #: why the running job was cancelled: the application can never get executors again
        self._abandoned: str | None = None

    @classmethod
    def start(cls, runtime: RuntimeSection, app_name: str) -> SparkEngine:
        """Start a session for a pipeline's ``[runtime]`` section (closed with the engine)."""
        return cls(start_session(settings_from_runtime(runtime, app_name=app_name)),
                   owns_session=True, shuffle_files=runtime.shuffle_files,
                   master_ui=runtime.master_ui)

    @property
    def shuffle_files(self) -> bool:
        """Whether the rounds' tasks hand records to each other as files."""
        return self._shuffle_dir() is not None

    def _shuffle_dir(self) -> Path | None:
        """Where the rounds' record files go; None: through Spark's shuffle."""
        return self.spark.shuffle_files_dir() if self._shuffle_files else None

    @property
    def default_parallelism(self) -> int:
        return int(self.spark.context.defaultParallelism)

    def run_round(self, job: RoundJob) -> RoundOutput:
        # the round's record files (local masters), gone with its job: a retried round, or a
        # task the failed job left running, never reads another job's files
        shuffle = self._shuffle_dir()
        files = (tempfile.mkdtemp(prefix=f"round-{job.round_id}-", dir=shuffle)
                 if shuffle is not None else None)
        try:
            results = self._collect(round_rdd(self.spark.context, job, files))
        except HoodlineError:
            raise
        except Exception as exc:  # a failed Spark job: retryable (lost executor, I/O, ...)
            raise self._job_error("the round's Spark job", exc) from exc
        finally:
            if files is not None:
                shutil.rmtree(files, ignore_errors=True)
        return decode(results, RoundOutputBuilder(job.readers, job.writer_tasks)).build()

    def _collect(self, rdd: RDD[Envelope]) -> list[Envelope]:
        """Run a round's job: its result envelopes. On a cluster, a job waiting for executors
        that never come is said so (Spark only logs "Initial job has not accepted any
        resources" at WARN, which hoodline's quiet log level hides)."""
        if self.spark.master.is_local:
            return rdd.collect()
        done = threading.Event()
        watch = threading.Thread(target=self._watch_executors, args=(done,), daemon=True,
                                 name="hoodline-executor-watch")
        watch.start()
        try:
            return rdd.collect()
        except Exception as exc:
            if self._abandoned is not None:
                raise SparkRuntimeError(self._abandoned) from exc
            raise
        finally:
            done.set()

    def _watch_executors(self, done: threading.Event) -> None:
        waited = 0.0
        while not done.wait(NO_EXECUTOR_WARNING_S):
            waited += NO_EXECUTOR_WARNING_S
            try:
                executors = len(self.spark.context.statusTracker().getExecutorInfos()) - 1
            except Exception:  # the context is stopping: nothing to say
                return
            if executors > 0:
                return
            context = self.spark.context
            ui = master_ui_url(context.master or "", self._master_ui_setting)
            known = master_knows_application(ui, context.applicationId) if ui else None
            if known is False:
                # a master restarted without recovery: it killed the application's executors
                # and will never give it others; the job would wait forever
                self._abandoned = (
                    f"the Spark master at {context.master} no longer knows this application "
                    f"({context.applicationId}; its UI {ui} lists it nowhere): it "
                    "was restarted, and the application will never get an executor again. "
                    "Start the pipeline again (the unfinished round is rolled back); to ride "
                    "out master restarts, run the master with recovery (spark.deploy."
                    "recoveryMode)")
                context.cancelAllJobs()
                return
            conf = context.getConf()
            asked = ("" if known else
                     f", or the master was restarted and no longer knows this application (its "
                     f"UI, runtime.master-ui = {ui}, did not answer)"
                     if ui is not None else "")
            log.warning(
                "no executor has joined the application for %.0f s: the cluster at %s may have "
                "no worker with the cores and memory it asks for (spark.executor.memory = %s, "
                "spark.executor.cores = %s) or no worker at all%s; the round waits for one",
                waited, context.master, conf.get("spark.executor.memory", "1g"),
                conf.get("spark.executor.cores", "all of a worker's"), asked)

    def _jvm_gone(self) -> str | None:
        """Why Spark's JVM (the driver this process started) is gone, or None while it runs
        (or when this process did not start it: nothing to watch)."""
        proc = getattr(getattr(self.spark.context, "_gateway", None), "proc", None)
        code = proc.poll() if proc is not None else None
        if proc is None or code is None:
            return None
        how = (f"killed by signal {-code}{' (SIGKILL: out of memory?)' if code == -9 else ''}"
               if code < 0 else f"exit code {code}")
        return (f"Spark's JVM (pid {proc.pid}) is gone ({how}); every round needs it: check "
                "its log above and the machine's memory (dmesg), then start the pipeline again")

    def check_alive(self) -> None:
        gone = self._jvm_gone()
        if gone is not None:
            raise SparkRuntimeError(gone)

    def _job_error(self, what: str, exc: Exception) -> HoodlineError:
        """The error of a failed Spark job: :class:`EngineJobError` (retryable) unless retrying
        cannot help -- Spark's JVM is gone, Spark stopped the application (its master did not
        answer, the cluster killed it), or the executors' Python cannot import what the tasks
        need."""
        summary = _summary(exc)
        gone = self._jvm_gone()
        if gone is not None:  # what py4j says of it is "Connection refused" (chaos review)
            return SparkRuntimeError(f"{what} failed: {gone}")
        if self.spark.context._jsc is None or self.spark.context._jsc.sc().isStopped():
            return SparkRuntimeError(
                f"{what} failed and Spark has stopped the application ({summary}); on a "
                f"cluster, check that the master at {self.spark.context.master!r} "
                "(runtime.master) answers and has room for the application (Spark's log above "
                "says why it gave up)")
        python = os.environ.get("PYSPARK_PYTHON", "")
        if "Cannot run program" in summary and python and python in summary:
            return SparkRuntimeError(
                f"{what} failed: the executors cannot start the Python '{python}' ({summary}); "
                "install it at that path on every node, or choose the executors' Python with "
                "PYSPARK_PYTHON or spark.pyspark.python in [runtime.spark-conf]")
        if summary.startswith(("ModuleNotFoundError:", "ImportError:")):
            return SparkRuntimeError(
                f"{what} failed: the executors' Python cannot import what hoodline's tasks need "
                f"({summary}); install hoodline's dependencies (pip install hoodline) for the "
                "Python the executors run (PYSPARK_PYTHON, or spark.pyspark.python in "
                "[runtime.spark-conf]); see 'Code on "
                "the executors' in the README's 'On a Spark cluster'")
        return EngineJobError(f"{what} failed: {summary}")

    def wait_until_idle(self, timeout_s: float = 60.0) -> None:
        self.spark.wait_until_idle(timeout_s)

    def run_tasks(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """One Spark job, a task per item (on the executors; results collected in order)."""
        if not items:
            return []
        sc = self.spark.context
        # a pool of its own: a compaction running in the background shares the cores fairly
        # with the rounds' jobs (FAIR scheduler) instead of taking them first
        sc.setLocalProperty(_POOL, SERVICES_POOL)
        try:
            rdd = sc.parallelize(list(items), len(items))
            results: list[R] = rdd.map(_frozen_first(fn)).collect()
        except HoodlineError:
            raise
        except Exception as exc:
            raise self._job_error("a table-service Spark job", exc) from exc
        finally:
            sc.setLocalProperty(_POOL, None)  # type: ignore[arg-type]  # None: unset
        return results

    def close(self) -> None:
        if self._owns:
            self._owns = False
            if self._jvm_gone() is None:
                self.spark.stop()
                return
            try:  # its Python side: temporary files, the zygote (the JVM calls fail)
                self.spark.stop()
            except Exception as exc:  # the run's error says the JVM is gone; not this one
                log.debug("stopping Spark after its JVM was gone: %s", exc)
