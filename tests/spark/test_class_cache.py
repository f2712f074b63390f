"""The driver JVM's class-data archive: where it lives, when it is used, and that a failed build
only costs speed."""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hoodline.pipeline.master import parse_master
from hoodline.spark import class_cache
from hoodline.spark.session import HoodlineSpark, SparkSettings, spark_conf
from tests.helpers.java_reference import jdk_tool


def test_the_archive_is_named_by_the_installation_and_lives_in_the_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOODLINE_CACHE_DIR", str(tmp_path))
    path = class_cache.archive_path()
    assert path is not None and path.parent == tmp_path and path.suffix == ".jsa"
    assert path == class_cache.archive_path()  # stable for one installation
    monkeypatch.delenv("HOODLINE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert class_cache.cache_dir() == tmp_path / "xdg" / "hoodline"


def _jars(folder: Path, names: tuple[str, ...] = ("a-1.jar", "b-2.jar")) -> Path:
    folder.mkdir(parents=True)
    for n in names:
        (folder / n).write_bytes(n.encode())
    return folder


def test_the_name_changes_with_anything_the_jvm_checks_before_it_maps_the_archive(
    tmp_path: Path,
) -> None:
    """The JVM ignores an archive (silently) unless every jar has the path, size and time it
    was built from: another jars folder, or a jar installed again, needs its own archive."""
    java = tmp_path / "java"
    java.write_bytes(b"java")
    jars = _jars(tmp_path / "venv-a" / "jars")
    name = class_cache.archive_name(java, jars, "4.3.0")
    assert name.startswith("spark-4.3.0-") and name.endswith(".jsa")
    assert class_cache.archive_name(java, jars, "4.3.0") == name  # stable
    # a second virtualenv with the same pyspark: same jar names and sizes, another folder
    other = _jars(tmp_path / "venv-b" / "jars")
    assert class_cache.archive_name(java, other, "4.3.0") != name
    # pyspark installed again in place: same folder, same sizes, a jar's time changed
    stat = (jars / "a-1.jar").stat()
    os.utime(jars / "a-1.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = class_cache.archive_name(java, jars, "4.3.0")
    assert again != name
    # ... and it belongs to the same installation (the folder), which the build replaces
    assert class_cache._installation(again) == class_cache._installation(name)
    assert class_cache._installation(class_cache.archive_name(java, other, "4.3.0")) != (
        class_cache._installation(name))
    assert class_cache.archive_name(java, jars, "4.3.1") != again


def test_a_build_replaces_the_archives_of_an_earlier_installation_in_the_same_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = tmp_path / "java"
    java.write_bytes(b"java")
    jars = _jars(tmp_path / "venv" / "jars")
    cache = tmp_path / "cache"
    cache.mkdir()
    old = cache / class_cache.archive_name(java, jars, "4.2.0")  # pyspark upgraded in place
    others = [cache / class_cache.archive_name(java, _jars(tmp_path / "other" / "jars"),
                                               "4.3.0"),
              cache / "spark-4.3.0-77ac83a4e808cd50.jsa",  # named as before: whose, unknown
              cache / "notes.txt"]
    for p in [old, cache / f".{old.name}.lock", *others]:
        p.write_bytes(b"x")

    def builder(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        Path(cmd[-1]).write_bytes(b"archive")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(class_cache.subprocess, "run", builder)
    target = cache / class_cache.archive_name(java, jars, "4.3.0")
    assert class_cache.build(target) is True
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [target.name, f".{target.name}.lock", *(p.name for p in others)])
    # a name that is not one of archive_name's belongs to no installation: nothing goes
    assert class_cache._same_installation(cache / "x.jsa") == []


def test_an_earlier_archive_that_cannot_be_removed_leaves_the_new_one_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def builder(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        Path(cmd[-1]).write_bytes(b"archive")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def refused(path: Path) -> list[Path]:
        raise PermissionError(13, "Permission denied", str(path.parent / "another.jsa"))

    monkeypatch.setattr(class_cache.subprocess, "run", builder)
    monkeypatch.setattr(class_cache, "_same_installation", refused)
    target = tmp_path / "spark-4.3.0-0123abcd-0123456789ab.jsa"
    assert class_cache.build(target) is True and target.read_bytes() == b"archive"
    assert "could not remove an earlier JVM class cache" in caplog.text
    assert "could not build" not in caplog.text


def test_only_an_existing_archive_reaches_the_driver_jvm(tmp_path: Path) -> None:
    master = parse_master("local[2]")
    archive = tmp_path / "a.jsa"
    conf = spark_conf(SparkSettings(), master, None, archive)
    assert "SharedArchiveFile" not in conf["spark.driver.extraJavaOptions"]
    archive.write_bytes(b"x")
    opts = spark_conf(SparkSettings(), master, None, archive)["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in opts.split()
    assert "-Xlog:cds=off" in opts.split()  # a mismatched archive is ignored quietly
    assert "SharedArchiveFile" not in spark_conf(
        SparkSettings(), master, None, archive).get("spark.executor.extraJavaOptions", "")


def test_a_failed_build_is_logged_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fails(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "java: out of memory (test)")

    monkeypatch.setattr(class_cache.subprocess, "run", fails)
    target = tmp_path / "c" / "x.jsa"
    assert class_cache.build(target) is False
    assert not target.exists() and not list(target.parent.glob("*.jsa"))
    assert "could not build the JVM class cache" in caplog.text and "out of memory" in caplog.text


def test_starts_that_find_no_archive_build_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four starts at once on a fresh machine: one builds, the others wait for its archive."""
    builds: list[str] = []

    envs: list[object] = []

    def builder(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        builds.append(cmd[-1])
        envs.append(kwargs.get("env"))
        time.sleep(0.3)  # long enough for every other start to arrive meanwhile
        Path(cmd[-1]).write_bytes(b"archive")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(class_cache.subprocess, "run", builder)
    monkeypatch.setenv("PYSPARK_GATEWAY_SECRET", "not-for-the-builder")
    target = tmp_path / "c" / "x.jsa"
    with ThreadPoolExecutor(4) as pool:  # flock: separately opened files exclude each other
        results = list(pool.map(lambda _: class_cache.build(target), range(4)))
    assert results == [True] * 4
    assert len(builds) == 1 and target.read_bytes() == b"archive"
    # the builder starts its own JVM, never a spark-submit parent's gateway
    env = envs[0]
    assert isinstance(env, dict) and "PATH" in env and "PYSPARK_GATEWAY_SECRET" not in env


def test_no_archive_under_spark_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-submit starts the driver JVM before hoodline: no archive can apply to it, so none is
    looked for, built or announced."""
    monkeypatch.setenv("HOODLINE_CACHE_DIR", str(tmp_path))
    assert class_cache.archive_path() is not None
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert class_cache.jvm_started_by_spark_submit()
    assert class_cache.archive_path() is None


@pytest.mark.spark
def test_sessions_start_from_the_built_archive(spark: HoodlineSpark) -> None:
    """The shared test session built the archive (or found it) and its driver JVM maps it."""
    path = class_cache.archive_path()
    assert path is not None and path.is_file() and path.stat().st_size > 10_000_000
    jvm = spark.context._jvm
    assert jvm is not None
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={path}" in args
    flags = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert str(flags.getVMOption("SharedArchiveFile").getValue()) == str(path)
    # and loaded Spark's classes from it: a JVM that ignores the archive (it does so silently
    # when a jar is not the one it was built from) shares only the JDK's own ~1,200 classes
    # (~7,000 and more with the archive)
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    out = subprocess.run([jdk_tool("jcmd"), str(pid), "PerfCounter.print"],
                         capture_output=True, text=True, timeout=60, check=False)
    counters = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert "java.cls.sharedLoadedClasses" in counters, (out.returncode, out.stdout[-2000:],
                                                        out.stderr[-2000:])
    assert int(counters["java.cls.sharedLoadedClasses"]) > 4000, counters
