"""hoodline's Spark session: what its Python workers run with; stopping it waits for nothing
(PySpark's accumulator server polls with a 1 s timeout) and still shuts everything down."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from hoodline.spark.job import per_subtask
from hoodline.spark.session import (
    SERVICES_POOL,
    WORKER_ARROW_POOL,
    WORKER_MALLOC_ARENAS,
    HoodlineSpark,
)
from tests.helpers.files_pipeline import write_files_pipeline

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.spark


def test_python_workers_run_with_the_malloc_arena_limit(spark: HoodlineSpark) -> None:
    def probe(i: int) -> Iterator[str]:
        import os

        yield os.environ.get("MALLOC_ARENA_MAX", "")

    arenas = per_subtask(spark.context, 2, probe).collect()
    # hoodline's limit, unless this process's environment sets one (then that one reaches them)
    expected = os.environ.get("MALLOC_ARENA_MAX", str(WORKER_MALLOC_ARENAS))
    assert arenas == [expected, expected]


def test_python_workers_allocate_arrow_buffers_from_jemalloc(spark: HoodlineSpark) -> None:
    def probe(i: int) -> Iterator[str]:
        import pyarrow as pa

        yield pa.default_memory_pool().backend_name

    pools = per_subtask(spark.context, 2, probe).collect()
    # hoodline's choice, unless this process's environment names a pool
    expected = os.environ.get("ARROW_DEFAULT_MEMORY_POOL", WORKER_ARROW_POOL)
    assert pools == [expected, expected]


@pytest.mark.stops_spark
def test_stop_does_not_wait_for_the_accumulator_server(
    spark: HoodlineSpark, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = spark.context.accumulator(0)
    spark.context.range(0, 10, numSlices=2).foreach(lambda x: acc.add(x))
    assert acc.value == 45  # updates still arrive while the session runs
    server: Any = spark.context._accumulatorServer
    stop_returned = threading.Event()
    shut_after_stop: list[bool] = []
    real_shutdown = server.shutdown

    def shutdown() -> None:
        # a stop() that waited for this call would only get here after 10 s, with the flag unset
        shut_after_stop.append(stop_returned.wait(10))
        real_shutdown()

    monkeypatch.setattr(server, "shutdown", shutdown)
    spark.stop()
    stop_returned.set()
    deadline = time.monotonic() + 15
    while server.socket.fileno() != -1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shut_after_stop == [True]
    assert server.socket.fileno() == -1 and server.server_shutdown  # shut down, not leaked


def test_the_table_services_pool_is_declared_before_any_job_uses_it(spark: HoodlineSpark) -> None:
    """Spark creates an undeclared FAIR pool on first use and warns on the console (seen in
    `hoodline demo` at its first background compaction); the session declares it instead."""
    sc = spark.session.sparkContext
    pool = sc._jsc.sc().getPoolForName(SERVICES_POOL)
    assert pool.isDefined(), f"no {SERVICES_POOL!r} pool in the FAIR scheduler"
    assert pool.get().weight() == 1 and pool.get().minShare() == 0


_FAILED_START = """
import sys
from pyspark import SparkContext
from hoodline.spark.session import SparkSettings, start_session

def failing_log_level(self, level):
    raise RuntimeError("the start's own error")

real_stop = SparkContext.stop
def failing_stop(self):
    real_stop(self)
    raise RuntimeError("stop failed too")

SparkContext.setLogLevel = failing_log_level
SparkContext.stop = failing_stop
try:
    start_session(SparkSettings(master="local[1]"))
except RuntimeError as e:
    print("raised:", e)
"""


def test_a_failed_start_reports_its_own_error_and_cleans_up_when_stopping_fails_too(
    tmp_path: Path,
) -> None:
    """A session that started but failed to get ready is stopped again; when that stop raises
    as well, the start's error is the one reported and the scratch directory is still removed."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _FAILED_START], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "raised: the start's own error" in done.stdout, done.stdout + done.stderr
    assert "stopping the half-started Spark session failed" in done.stderr
    assert not list(tmp_path.glob("hoodline-spark-*"))


_CTRL_C_AT_START = """
import os, signal
from pyspark import SparkContext
from hoodline.spark.session import SparkSettings, start_session

real_init = SparkContext.__init__
def init_interrupted(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the JVM starts
    real_init(self, *args, **kwargs)

SparkContext.__init__ = init_interrupted
try:
    start_session(SparkSettings(master="local[1]"))
except KeyboardInterrupt:
    print("interrupted; context left:", SparkContext._active_spark_context is not None)
"""


def test_ctrl_c_while_spark_starts_stops_the_jvm_it_launched(tmp_path: Path) -> None:
    """Interrupted in the middle, pyspark lost the JVM it had launched (with SIGINT ignored),
    which ran on without a parent. The interrupt now waits until the context exists, which is
    then stopped; the JVM ends with the process."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _CTRL_C_AT_START], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "interrupted; context left: False" in done.stdout, done.stdout + done.stderr
    assert "stopping as soon as Spark has started" in done.stderr
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _jvms_in(tmp_path):
        time.sleep(0.2)
    assert _jvms_in(tmp_path) == []
    assert not list(tmp_path.glob("hoodline-spark-*"))


def _jvms_in(cwd: Path) -> list[int]:
    """Java processes started in ``cwd`` (the test's own: no other test runs there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == str(cwd) and "java" in (entry / "comm").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


_NO_SQL_AT_START = """
from pyspark.sql import SparkSession
from hoodline.spark.session import SparkSettings, start_session
spark = start_session(SparkSettings(master="local[1]"))
try:
    print("sql session at start:", SparkSession._instantiatedSession is not None)
    rows = spark.session.range(3).count()
    print("sql session on use:", SparkSession._instantiatedSession is not None, rows)
    jvm = spark.context._jvm
    print("jvm tmpdir:", jvm.System.getProperty("java.io.tmpdir"))
    conf = spark.context._jsc.sc().conf()
    print("jvm local dir:", jvm.org.apache.spark.util.Utils.getLocalDir(conf))
    temp = spark.context.parallelize([0], 1).map(lambda _: __import__("tempfile").gettempdir())
    print("worker tmpdir:", temp.collect()[0])
finally:
    spark.stop()
"""


def test_a_start_makes_no_sql_session_until_one_is_asked_for_and_honours_tmpdir(
    tmp_path: Path,
) -> None:
    """hoodline's jobs need only the SparkContext; Spark SQL's session cost ~1 s per start.
    Its JVM's temporary files, Spark's local directory among them, and its Python workers' go
    under TMPDIR (Java ignores the variable: they went to /tmp), in the session's scratch
    directory, which the next session removes when this one is killed (a killed session's
    Spark folders and writers' spill files stayed: first-contact review)."""
    temp = tmp_path / 'a user\'s "temp"'  # a space and quotes: Spark did not start at all
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, "-c", _NO_SQL_AT_START], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "sql session at start: False" in done.stdout, done.stdout + done.stderr
    assert "sql session on use: True 3" in done.stdout, done.stdout + done.stderr
    found = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    scratch = Path(found["jvm tmpdir"])
    assert scratch.parent == temp and scratch.name.startswith("hoodline-spark-"), found
    assert Path(found["jvm local dir"]).parent == scratch, found
    assert Path(found["worker tmpdir"]) == scratch, found
    assert not scratch.exists()  # removed with the session


def test_java_options_with_spaces_and_quotes_reach_executors_as_one_word_each(
    spark: HoodlineSpark,
) -> None:
    """Spark's workers split an executor's extraJavaOptions their own way (a backslash outside
    quotes is no escape there, unlike in its launcher): paths with spaces, quotes or
    backslashes must come out whole (code review: a single quote swallowed the next options)."""
    from hoodline.spark.java import java_option

    paths = ["/tmp/plain", "/tmp/a dir", "/tmp/it's", '/tmp/q"uote', "/tmp/back\\slash"]
    text = " ".join([java_option(f"-Dx={p}") for p in paths] + ["-XX:+UseSerialGC"])
    jvm = spark.context._jvm
    words = jvm.scala.jdk.javaapi.CollectionConverters.asJava(
        jvm.org.apache.spark.util.Utils.splitCommandString(text))
    assert list(words) == [f"-Dx={p}" for p in paths] + ["-XX:+UseSerialGC"]


def test_spark_submit_to_another_master_than_the_pipelines_is_refused(tmp_path: Path) -> None:
    """The pipeline's runtime.master silently won over spark-submit's --master: a run
    submitted to a cluster ran on local[2] and exited 0."""
    import pyspark

    import hoodline

    config = write_files_pipeline(tmp_path / "p.toml", tmp_path / "in", tmp_path / "t",
                                  {"id": "int64"}, '[runtime]\nmaster = "local[2]"')
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    entry = Path(hoodline.__file__).parent / "__main__.py"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "TMPDIR": str(tmp_path)}
    done = subprocess.run([str(submit), "--master", "local[1]", str(entry), "run", str(config),
                           "--once"], env=env, capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert ("error: spark-submit was given master 'local[1]', but the pipeline's runtime.master "
            "is 'local[2]': set runtime.master to the same master") in " ".join(
                (done.stdout + done.stderr).split())


_YARN_START = """
from hoodline.errors import SparkRuntimeError
from hoodline.spark.session import SparkSettings, start_session
try:
    start_session(SparkSettings(master="yarn"))
except SparkRuntimeError as exc:
    print("refused:", exc)
"""


def test_a_master_spark_cannot_start_with_is_one_error_line_naming_it(tmp_path: Path) -> None:
    """Walkthrough review: master 'yarn' without HADOOP_CONF_DIR ended in ~110 lines of
    Python traceback over the JVM's error; it is a hoodline error naming the master now (the
    CLI prints it as one 'error:' line)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")}
    done = subprocess.run([sys.executable, "-c", _YARN_START], env={**env, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: Spark did not start with master 'yarn': "), (
        done.stdout + done.stderr)
    assert "HADOOP_CONF_DIR" in done.stdout + done.stderr
    assert not list(tmp_path.glob("hoodline-spark-*"))


def test_a_failed_start_names_the_jvms_exception() -> None:
    from hoodline.spark.session import _start_failure

    py4j = ("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
            ": org.apache.spark.SparkException: Could not parse Master URL: 'x'\n"
            "\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3208)\n")
    assert _start_failure(RuntimeError(py4j)) == "Could not parse Master URL: 'x'"
    gateway = "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
    assert _start_failure(RuntimeError(gateway)).startswith(gateway + " (the JVM's own lines")
