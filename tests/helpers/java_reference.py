"""The tests' small Java reference programs (``fixtures/*.java``: Java's Avro, Hadoop's bloom
filters, Joda-Time, ``String.hashCode``), compiled once per test process and run with jars that
pyspark ships. A source-file launch (``java Program.java``) compiled the program again at every
run: ~1.5 s and 2.5 s of CPU each, paid by the tests beside it on the two shared cores."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pyspark
import pytest

from hoodline.spark.java import java_binary

#: The programs run for a moment: the optimising JIT compiler and a parallel collector would
#: only cost CPU (javac as well: about half its CPU)
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def pyspark_jars(*prefixes: str) -> list[Path]:
    """The jars inside pyspark whose names start with each of ``prefixes`` (one or more each)."""
    folder = Path(pyspark.__file__).parent / "jars"
    jars = sorted(folder.iterdir())
    picked: list[Path] = []
    for prefix in prefixes:
        found = [p for p in jars if p.name.startswith(prefix)]
        assert found, f"pyspark's jars lack {prefix}*: {folder}"
        picked += found
    return picked


def jdk_tool(name: str) -> str:
    """A tool (``java``, ``javac``, ``jcmd``) of the JDK whose ``java`` Spark runs
    (:func:`hoodline.spark.java.java_binary`)."""
    java = java_binary()
    tool = java.parent / name if java is not None else None
    if tool is None or not tool.is_file():
        pytest.fail(f"no {name} beside {java}; the test suite needs a Java 17 JDK (see README)")
    return str(tool)


@functools.cache
def _compiled(source: Path, classpath: str) -> Path:
    out = Path(tempfile.mkdtemp(prefix=f"{source.stem}-"))
    atexit.register(shutil.rmtree, out, True)
    done = subprocess.run(
        [jdk_tool("javac"), *(f"-J{o}" for o in JVM_OPTIONS), "-cp", classpath, "-d", str(out),
         str(source)],
        check=False, timeout=120, capture_output=True, text=True,
    )
    assert done.returncode == 0, f"javac {source.name}: {done.stderr[-3000:]}"
    return out


def run_java(
    source: Path, *args: str, classpath: Sequence[Path] = (), options: Sequence[str] = (),
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the public class of ``source`` (named as the file) with ``args``; output as text.
    The caller checks the return code (the error output says what failed)."""
    jars = os.pathsep.join(map(str, classpath))
    classes = _compiled(source.resolve(), jars)
    return subprocess.run(
        [jdk_tool("java"), *JVM_OPTIONS, *options,
         "-cp", os.pathsep.join(filter(None, [str(classes), jars])), source.stem, *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )
