"""The Java Spark's launcher will start, checked before Spark starts: no Java, a JAVA_HOME
without one, or an old one were a Py4J traceback (JAVA_GATEWAY_EXITED) of ~80 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.errors import SparkRuntimeError
from hoodline.spark.java import java_binary, java_major, java_problem
from hoodline.spark.session import SparkSettings, start_session


def _jdk(root: Path, version: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "java").write_text("#!/bin/sh\n")
    (root / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return root


def test_java_home_decides_as_in_spark_class(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_jdk(tmp_path / "jdk17", "17.0.15")))
    assert java_binary() == (tmp_path / "jdk17" / "bin" / "java").resolve()
    assert java_problem() is None
    monkeypatch.setenv("JAVA_HOME", str(_jdk(tmp_path / "jdk11", "11.0.2")))
    assert java_problem() == (
        f"Spark needs Java 17 or later, but {(tmp_path / 'jdk11' / 'bin' / 'java').resolve()} "
        "is Java 11: set JAVA_HOME to a Java 17+ installation")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert java_binary() is None  # not the java on PATH: spark-class would not take it
    assert java_problem() == (
        f"JAVA_HOME is '{tmp_path / 'nowhere'}', which holds no bin/java: set JAVA_HOME to a "
        "Java 17 (or later) installation, or unset it to use the java on PATH")


def test_no_java_at_all_says_what_to_install(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = java_problem()
    assert problem is not None and problem.startswith(
        "Spark needs Java 17 or later, and there is no java on PATH and no JAVA_HOME")


def test_java_versions_are_read_from_the_release_file(tmp_path: Path) -> None:
    assert java_major(_jdk(tmp_path / "a", "1.8.0_392") / "bin" / "java") == 8
    assert java_major(_jdk(tmp_path / "b", "21") / "bin" / "java") == 21
    (tmp_path / "c" / "bin").mkdir(parents=True)
    assert java_major(tmp_path / "c" / "bin" / "java") is None  # no release file: not checked


def test_the_session_refuses_to_start_without_java(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SparkRuntimeError, match="holds no bin/java"):
        start_session(SparkSettings(master="local[1]"))


def test_a_full_temporary_folder_is_named_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TMPDIR (or SPARK_LOCAL_DIRS) full, Spark's JVM died writing the gateway's
    connection file and `hoodline run` waited for it forever (large-table review). The folder,
    its free space and what to do are said first. (The disk here has room: the bar is raised
    above what it has free.)"""
    import shutil

    from hoodline.spark import java

    local = tmp_path / "local"
    local.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{local},{tmp_path / 'missing'}")
    free = shutil.disk_usage(tmp_path).free
    assert java.temp_space_problem(min_free=1) is None
    problem = java.temp_space_problem(min_free=free + 2**30)
    assert problem is not None and " MiB free; Spark and hoodline need at least " in problem
    assert "free space, or set TMPDIR to a folder on a larger disk" in problem
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what TMPDIR sets
    monkeypatch.setattr(java.temp_space_problem, "__defaults__", (free + 2**30,))
    with pytest.raises(SparkRuntimeError, match=rf"the temporary folder {tmp_path} \(TMPDIR\) "
                       r"has only [0-9.]+ MiB free"):
        start_session(SparkSettings(master="local[1]"))


def test_a_tmpdir_python_would_pass_over_is_named_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR that does not exist or cannot be written was passed over without a word (Python
    falls back to /tmp): everything the user had moved off a small /tmp went back there
    (first-contact review)."""
    from hoodline.spark import java

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert java.tmpdir_problem() is None
    missing = tmp_path / "big disk" / "tmp"
    monkeypatch.setenv("TMPDIR", str(missing))
    assert java.tmpdir_problem() == (
        f"TMPDIR is {str(missing)!r}, which does not exist: Spark's and hoodline's temporary "
        f"files would go to {__import__('tempfile').gettempdir()} instead; create the folder "
        "(writable), or unset TMPDIR")
    a_file = tmp_path / "file"
    a_file.write_text("")
    monkeypatch.setenv("TMPDIR", str(a_file))
    assert "which is not a folder" in (java.tmpdir_problem() or "")
    monkeypatch.setenv("TMPDIR", str(missing))
    with pytest.raises(SparkRuntimeError, match=r"TMPDIR is .*, which does not exist"):
        start_session(SparkSettings(master="local[1]"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(java.os, "access", lambda path, mode: False)  # root may write anywhere
    assert "which is not writable" in (java.tmpdir_problem() or "")
