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


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not on PATH; the test suite needs a Java 17 JDK (see README)")
    return path


@functools.cache
def _compiled(source: Path, classpath: str) -> Path:
    out = Path(tempfile.mkdtemp(prefix=f"{source.stem}-"))
    atexit.register(shutil.rmtree, out, True)
    done = subprocess.run(
        [_tool("javac"), *(f"-J{o}" for o in JVM_OPTIONS), "-cp", classpath, "-d", str(out),
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
        [_tool("java"), *JVM_OPTIONS, *options,
         "-cp", os.pathsep.join(filter(None, [str(classes), jars])), source.stem, *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )
