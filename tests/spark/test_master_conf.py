"""Pure parts of the Spark session factory (no JVM is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.errors import ConfigError
from hoodline.pipeline.master import MasterKind, parse_master
from hoodline.spark.session import SparkSettings, spark_conf


def test_parse_master() -> None:
    m = parse_master("local-cluster[2,1,1024]")
    assert (m.kind, m.executors, m.cores_per_executor) == (MasterKind.LOCAL_CLUSTER, 2, 1)
    assert parse_master("local[3]").total_cores == 3
    assert parse_master("local").total_cores == 1
    assert parse_master("local[2,4]").total_cores == 2  # 4: task failures allowed
    assert parse_master("local[*]").total_cores >= 1
    assert parse_master("spark://h:7077").kind is MasterKind.REMOTE
    for remote in ("yarn", "k8s://https://h:6443"):
        assert parse_master(remote).kind is MasterKind.REMOTE
    for bad in ("local[0]", "local[x]", "local-cluster[2,1]", "localhost", "", "lokal", "spark:/h"):
        with pytest.raises(ConfigError):
            parse_master(bad)


def test_spark_conf_defaults_for_a_small_machine(tmp_path: Path) -> None:
    master = parse_master("local-cluster[2,1,1024]")
    conf = spark_conf(SparkSettings(master="local-cluster[2,1,1024]"), master, tmp_path / "l.p")
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert conf["spark.python.worker.reuse"] == "true"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.shuffle.compress"] == "false"  # payloads arrive compressed by Arrow
    assert f"file:{tmp_path / 'l.p'}" in conf["spark.executor.extraJavaOptions"]
    assert "-XX:TieredStopAtLevel=1" in conf["spark.driver.extraJavaOptions"].split()
    assert "-XX:TieredStopAtLevel=1" in conf["spark.executor.extraJavaOptions"].split()
    for side in ("driver", "executor"):  # local JVMs: serial collector, small initial heap
        options = conf[f"spark.{side}.extraJavaOptions"].split()
        assert "-XX:+UseSerialGC" in options and "-Xms64m" in options
    extra = SparkSettings(extra_conf={"spark.sql.shuffle.partitions": "7"}, shuffle_partitions=3)
    assert spark_conf(extra, parse_master("local[2]"), None)["spark.sql.shuffle.partitions"] == "7"
    with pytest.raises(ConfigError, match="log level 'LOUD'"):
        spark_conf(SparkSettings(log_level="LOUD"), master, None)


def test_settings_from_pipeline_runtime_section() -> None:
    from hoodline.pipeline.config import parse_config
    from hoodline.spark.session import settings_from_runtime

    cfg = parse_config(
        '[source.options]\ntopic = "t"\nproperties.bootstrap.servers = "b:9092"\n'
        '[table]\npath = "/t"\nrecord-key = ["id"]\n[schema]\nid = "int64"\n'
        '[runtime]\nmaster = "local-cluster[2,1,1024]"\n'
        '[runtime.spark-conf]\nspark.sql.shuffle.partitions = 6\nspark.speculation = false\n'
    )
    s = settings_from_runtime(cfg.runtime, app_name="pipe")
    assert s.master == "local-cluster[2,1,1024]" and s.app_name == "pipe"
    conf = spark_conf(s, parse_master(s.master), None)
    assert conf["spark.sql.shuffle.partitions"] == "6"
    assert conf["spark.speculation"] == "false"


def test_python_workers_get_two_malloc_arenas_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    for url in ("local[2]", "spark://10.0.0.5:7077"):
        conf = spark_conf(SparkSettings(master=url), parse_master(url), None)
        assert conf["spark.executorEnv.MALLOC_ARENA_MAX"] == "2"
    own = SparkSettings(extra_conf={"spark.executorEnv.MALLOC_ARENA_MAX": "8"})
    assert spark_conf(own, parse_master("local[2]"), None)[
        "spark.executorEnv.MALLOC_ARENA_MAX"] == "8"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # the user's environment is left to reach them
    conf = spark_conf(SparkSettings(), parse_master("local[2]"), None)
    assert "spark.executorEnv.MALLOC_ARENA_MAX" not in conf


def test_remote_master_gets_no_local_only_settings(tmp_path: Path) -> None:
    remote = parse_master("spark://10.0.0.5:7077")
    conf = spark_conf(SparkSettings(master=remote.url), remote, tmp_path / "l.p")
    assert "spark.driver.host" not in conf
    assert "spark.executor.extraJavaOptions" not in conf
    assert "spark.driver.extraJavaOptions" in conf
    assert "TieredStopAtLevel" not in conf["spark.driver.extraJavaOptions"]  # not our cluster's
    assert "UseSerialGC" not in conf["spark.driver.extraJavaOptions"]


def test_the_jvms_take_their_temporary_folder_from_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java on Linux ignores TMPDIR: Spark's local directories and the native libraries it
    unpacks went to /tmp when TMPDIR named a larger disk. The driver (here) and a local
    master's executors get it; a cluster's executors run elsewhere. (How Spark splits the
    quoted option: tests/spark/test_session.py.)"""
    import tempfile

    from hoodline.spark.java import java_option

    folder = tmp_path / "a folder's temp"
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    option = java_option(f"-Djava.io.tmpdir={folder}")
    for url in ("local[2]", "local-cluster[2,1,1024]", "spark://10.0.0.5:7077"):
        master = parse_master(url)
        conf = spark_conf(SparkSettings(master=url), master, tmp_path / "l.p")
        sides = ("driver", "executor") if master.is_local else ("driver",)
        for side in sides:
            assert option in conf[f"spark.{side}.extraJavaOptions"], (url, side, conf)
        if not master.is_local:
            assert "spark.executor.extraJavaOptions" not in conf
        # a session's scratch directory, when given: the JVMs' and a local master's workers'
        scratch = tmp_path / "hoodline-spark-x"
        conf = spark_conf(SparkSettings(master=url), master, None, temp_dir=scratch)
        assert f"-Djava.io.tmpdir={scratch}" in conf["spark.driver.extraJavaOptions"]
        assert conf.get("spark.executorEnv.TMPDIR") == (str(scratch) if master.is_local
                                                        else None)


def test_the_worker_daemon_is_told_of_a_zygote_only_when_it_is_hoodlines(tmp_path: Path) -> None:
    key = "spark.executorEnv.HOODLINE_WORKER_ZYGOTE"
    where = tmp_path / "z.sock"
    local = parse_master("local[2]")
    assert spark_conf(SparkSettings(), local, None, zygote_socket=where)[key] == str(where)
    assert key not in spark_conf(SparkSettings(), local, None)  # no zygote started
    replaced = [
        SparkSettings(preload_workers=False),
        SparkSettings(extra_conf={"spark.python.daemon.module": "my.daemon"}),
        SparkSettings(extra_conf={"spark.python.use.daemon": "false"}),
    ]
    for settings in replaced:
        assert key not in spark_conf(settings, local, None, zygote_socket=where), settings
    cluster = parse_master("local-cluster[2,1,1024]")  # executors start their own daemons
    assert key not in spark_conf(SparkSettings(master=cluster.url), cluster, None,
                                 zygote_socket=where)
    assert key not in spark_conf(SparkSettings(), local, None,
                                 zygote_socket=tmp_path / ("x" * 120))  # too long a path


def test_failed_tasks_print_no_stack_traces_unless_asked() -> None:
    """hoodline reports a failed round in one line and retries it: the executor's and the
    scheduler's stack traces of the failed task stay off the console at Spark's default WARN,
    and come back with hoodline at debug level or Spark at INFO."""
    from hoodline.spark.session import TASK_FAILURE_LOGGERS, _log4j2_properties

    def levels(text: str) -> dict[str, str]:
        lines = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
        names = {v: k.rsplit(".", 1)[0] for k, v in lines.items() if k.endswith(".name")}
        return {name: lines[f"{key}.level"] for name, key in names.items()
                if f"{key}.level" in lines}

    quiet = levels(_log4j2_properties("WARN"))
    assert all(quiet.get(name) == "off" for name in TASK_FAILURE_LOGGERS), quiet
    for loud in (_log4j2_properties("WARN", task_failures=True), _log4j2_properties("info")):
        assert not set(TASK_FAILURE_LOGGERS) & set(levels(loud))
    assert quiet["org.apache.hadoop.util.NativeCodeLoader"] == "error"  # the others stay
    assert quiet["org.apache.spark.ContextCleaner"] == "off"  # its stop-time stack trace


def test_a_cluster_master_leaves_the_parallelism_to_its_executors() -> None:
    """On spark:// masters the parallelism was pinned to 2 (a remote master's cores are not
    in its URL), so every write ran in 2 tasks whatever the cluster; Spark's default follows
    the cores of the executors that registered. An explicit setting still pins it."""
    url = "spark://127.0.0.1:7077"
    conf = spark_conf(SparkSettings(master=url), parse_master(url), None)
    assert "spark.default.parallelism" not in conf
    assert "spark.sql.shuffle.partitions" not in conf
    pinned = spark_conf(SparkSettings(master=url, shuffle_partitions=6), parse_master(url), None)
    assert pinned["spark.default.parallelism"] == pinned["spark.sql.shuffle.partitions"] == "6"


def test_spark_pyspark_python_chooses_the_executors_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was ignored (PySpark reads only PYSPARK_PYTHON), though hoodline's own error about
    executors that cannot import its dependencies recommended it."""
    import sys

    from hoodline.spark.session import executor_python

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert executor_python(SparkSettings()) == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert executor_python(SparkSettings()) == "/opt/env/bin/python"
    chosen = SparkSettings(extra_conf={"spark.pyspark.python": "/srv/venv/bin/python"})
    assert executor_python(chosen) == "/srv/venv/bin/python"


def test_spark_master_in_spark_conf_is_refused() -> None:
    """It overrode runtime.master after hoodline had configured the session for that master
    (the banner said local[2], the application ran on the cluster, some runs failed)."""
    from hoodline.pipeline.config import parse_config

    with pytest.raises(ConfigError, match=r"\[runtime.spark-conf\] spark.master: set the master "
                                          r"with runtime.master"):
        parse_config('[source]\ntype = "files"\n[source.options]\npath = "/tmp/x"\n'
                     'format = "jsonl"\n[table]\npath = "/tmp/t"\nrecord-key = ["id"]\n'
                     '[schema]\nid = "int64"\n[runtime.spark-conf]\n'
                     '"spark.master" = "spark://h:7077"\n')


def test_standalone_master_addresses_and_reachability() -> None:
    import socket

    from hoodline.pipeline.master import standalone_addresses, unreachable_master

    assert standalone_addresses("spark://h1:7077,h2:7078") == [("h1", 7077), ("h2", 7078)]
    assert standalone_addresses("local[2]") == [] and unreachable_master("yarn") is None
    assert standalone_addresses("spark://h1:\u00b2") == []  # int() refuses it
    with socket.socket() as listening:  # one of a standby list answers: reachable
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
        closed.close()
        assert unreachable_master(f"spark://127.0.0.1:{dead},127.0.0.1:{port}") is None
        problem = unreachable_master(f"spark://127.0.0.1:{dead}")
        assert problem is not None and problem.startswith(f"127.0.0.1:{dead}: ")
