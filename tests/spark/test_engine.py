"""The one-line summary of a failed Spark job that a retried round's warning shows (the stack
traces themselves stay off the console, see ``test_master_conf``)."""

from __future__ import annotations

import re

import pytest

from hoodline.errors import EngineJobError, SparkRuntimeError, is_retryable
from hoodline.spark.engine import SparkEngine, _summary
from hoodline.spark.session import HoodlineSpark

#: the head of a Py4JJavaError's text from Spark 4.1 when a Python task raised (captured)
SPARK4_PYTHON = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown "
    "from the Python worker: Traceback (most recent call last):\n"
) + """  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 4327, in invoke_udf
    run_process()
  File "/venv/lib/python3.11/site-packages/pyspark/util.py", line 158, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/src/hoodline/pipeline/tasks.py", line 218, in read
    faults.reach(FaultPoint.READ)
hoodline.faults.InjectedFailure: injected failure at 'read' (1 of 1)
 SQLSTATE: 38000
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(
\tat org.apache.spark.api.python.PythonRunner$$anon$5.read(PythonRunner.scala:1642)
"""

CHAINED = """An error occurred while calling o42.collect.
: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/src/hoodline/formats/registry.py", line 171, in fetch
    raise httpx.ConnectError("refused")
httpx.ConnectError: refused

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/src/hoodline/formats/registry.py", line 180, in fetch
    raise SchemaRegistryError(msg) from None
hoodline.errors.SchemaRegistryError: Schema Registry http://127.0.0.1:1 failed to return schema 7
\tat org.apache.spark.api.python.BasePythonRunner.handle(PythonRunner.scala:1)
"""

LOST_EXECUTOR = (
    "An error occurred while calling o99.collect.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 4.0 "
    "failed 1 times, most recent failure: Lost task 1.0 in stage 4.0 (TID 9) (10.0.0.2 executor "
    "1): ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
    "Command exited with code 137\n"
) + """\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(
"""


def test_a_python_task_error_is_named_by_its_class_and_message() -> None:
    assert _summary(Exception(SPARK4_PYTHON)) == (
        "InjectedFailure: injected failure at 'read' (1 of 1)")


def test_the_last_of_chained_python_errors_is_named() -> None:
    assert _summary(Exception(CHAINED)) == (
        "SchemaRegistryError: Schema Registry http://127.0.0.1:1 failed to return schema 7")


def test_a_job_aborted_by_spark_names_the_reason() -> None:
    summary = _summary(Exception(LOST_EXECUTOR))
    assert summary.startswith("Task 1 in stage 4.0 failed 1 times")
    assert "ExecutorLostFailure" in summary and "\n" not in summary


def test_a_java_error_without_either_names_its_last_error_line() -> None:
    text = ("An error occurred while calling o1.collect.\n: java.io.IOException: disk full\n"
            "\tat Foo.bar(Foo.java:1)\nCaused by: java.lang.IllegalStateException: no space\n")
    assert _summary(Exception(text)) == "java.lang.IllegalStateException: no space"


def _import_missing(item: int) -> int:
    import hoodline_no_such_module  # type: ignore[import-not-found]  # noqa: F401

    return item


@pytest.mark.spark
def test_executors_that_cannot_import_stop_the_job_at_once(spark: HoodlineSpark) -> None:
    """Retrying cannot give the executors' Python a missing module: the error says what to
    install where, and is not retried."""
    with pytest.raises(SparkRuntimeError) as caught:
        SparkEngine(spark).run_tasks(_import_missing, [1, 2])
    text = str(caught.value)
    assert "ModuleNotFoundError: No module named 'hoodline_no_such_module'" in text
    assert "PYSPARK_PYTHON" in text and not is_retryable(caught.value)


class _StoppedContext:
    master = "spark://127.0.0.1:7077"

    class _jsc:
        @staticmethod
        def sc() -> object:
            return type("SC", (), {"isStopped": staticmethod(lambda: True)})()


def test_a_job_of_a_stopped_application_names_the_master_and_is_not_retried() -> None:
    spark = type("Spark", (), {"context": _StoppedContext()})()
    error = SparkEngine(spark)._job_error(  # type: ignore[arg-type]
        "the round's Spark job", Exception(
            "An error occurred while calling z:...readRDDFromFile.\n: java.lang."
            "IllegalStateException: Cannot call methods on a stopped SparkContext."))
    assert isinstance(error, SparkRuntimeError) and not is_retryable(error)
    assert "spark://127.0.0.1:7077" in str(error) and "runtime.master" in str(error)


class _DeadJvm:
    """A context whose JVM (the gateway's process) was killed: py4j calls are refused."""

    master = "local[2]"

    class _gateway:
        class proc:
            pid = 4242

            @staticmethod
            def poll() -> int:
                return -9

    class _jsc:
        @staticmethod
        def sc() -> object:
            raise ConnectionRefusedError(111, "Connection refused")


def test_a_job_whose_jvm_was_killed_says_so_and_is_not_retried() -> None:
    """A JVM killed (OOM) made every round fail with py4j's "[Errno 111] Connection refused",
    which sent a Kafka user to the brokers, and was retried (chaos review, 2 of 2)."""
    spark = type("Spark", (), {"context": _DeadJvm()})()
    engine = SparkEngine(spark)  # type: ignore[arg-type]
    error = engine._job_error("the round's Spark job", ConnectionRefusedError(111, "refused"))
    assert isinstance(error, SparkRuntimeError) and not is_retryable(error)
    assert ("Spark's JVM (pid 4242) is gone (killed by signal 9 (SIGKILL: out of memory?))"
            in str(error))
    with pytest.raises(SparkRuntimeError, match=r"Spark's JVM \(pid 4242\) is gone"):
        engine.check_alive()
    # stopping it afterwards raised py4j's error over the run's own (the last line printed)
    stops: list[bool] = []

    def stop() -> None:
        stops.append(True)
        raise ConnectionRefusedError(111, "Connection refused")

    spark.stop = stop  # type: ignore[attr-defined]
    owning = SparkEngine(spark, owns_session=True)  # type: ignore[arg-type]
    owning.close()
    assert stops == [True]


def test_other_job_failures_are_retried() -> None:
    running = type("Spark", (), {"context": type("Ctx", (), {
        "master": "local[2]", "_jsc": type("J", (), {"sc": staticmethod(lambda: type(
            "SC", (), {"isStopped": staticmethod(lambda: False)})())})()})()})()
    error = SparkEngine(running)._job_error(  # type: ignore[arg-type]
        "the round's Spark job", Exception(SPARK4_PYTHON))
    assert isinstance(error, EngineJobError) and is_retryable(error)


def test_executors_that_cannot_start_their_python_stop_the_job_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interpreter path that does not exist on the nodes was retried round after round."""
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/venv/bin/python")
    running = type("Spark", (), {"context": type("Ctx", (), {
        "master": "spark://h:7077", "_jsc": type("J", (), {"sc": staticmethod(lambda: type(
            "SC", (), {"isStopped": staticmethod(lambda: False)})())})()})()})()
    error = SparkEngine(running)._job_error(  # type: ignore[arg-type]
        "the round's Spark job", Exception(
            "Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most recent "
            "failure: Lost task 0.3 in stage 0.0 (TID 6) (127.0.0.1 executor 0): "
            "java.io.IOException: Cannot run program \"/opt/venv/bin/python\": error=2, No such "
            "file or directory"))
    assert isinstance(error, SparkRuntimeError) and not is_retryable(error)
    assert "the executors cannot start the Python '/opt/venv/bin/python'" in str(error)


def test_a_cluster_job_without_executors_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Executors asking for more memory than any worker has: the run waited without a word
    from hoodline (Spark's own warning is below hoodline's log level)."""
    import time

    from hoodline.pipeline.master import parse_master
    from hoodline.spark import engine as engine_module

    monkeypatch.setattr(engine_module, "NO_EXECUTOR_WARNING_S", 0.05)
    conf = {"spark.executor.memory": "2g"}
    context = type("Ctx", (), {
        "master": "spark://h:7077", "applicationId": "app-1",
        "statusTracker": lambda self: type("T", (), {
            "getExecutorInfos": lambda self: ["driver"]})(),
        "getConf": lambda self: type("C", (), {"get": lambda self, k, d=None: conf.get(k, d)})(),
    })()
    spark = type("Spark", (), {"context": context, "master": parse_master("spark://h:7077")})()
    rdd = type("Rdd", (), {"collect": lambda self: time.sleep(0.4) or []})()
    with caplog.at_level("WARNING", logger="hoodline.spark.engine"):
        # the master's UI does not answer: the round goes on waiting
        engine = SparkEngine(spark, master_ui="http://127.0.0.1:9")  # type: ignore[arg-type]
        assert engine._collect(rdd) == []  # type: ignore[arg-type]
    assert re.search(r"no executor has joined the application for \d+ s: the cluster at "
                     r"spark://h:7077 may have no worker with the cores and memory it asks for "
                     r"\(spark.executor.memory = 2g", caplog.text)
