"""What stops Spark from starting here, said before it starts: the Java that Spark's launcher
(``spark-class``) will run, found as it finds it (a missing or old one was a Py4J traceback,
``JAVA_GATEWAY_EXITED``), and a standalone master that does not answer (Spark retried for about
a minute, printing Java stack traces). No pyspark import: the CLI asks before it creates the
table."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

#: the oldest Java the bundled Spark (4.x) runs on
MIN_JAVA = 17

#: free bytes a temporary folder needs for Spark to start at all: with none its JVM died
#: writing the gateway's connection file and the Python side waited for it forever, with a few
#: MiB its file server failed in a Java stack trace
MIN_TEMP_FREE = 32 * 1024 * 1024


def java_binary() -> Path | None:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set (what spark-class runs), else the ``java``
    on PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return java.resolve() if java.exists() else None
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def java_major(java: Path) -> int | None:
    """The feature release of the Java installation holding ``java`` (from its ``release``
    file; None when it has none)."""
    try:
        text = (java.parent.parent / "release").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', text, re.MULTILINE)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # 1.8 -> 8


def java_option(option: str) -> str:
    """``option`` as one item of Spark's ``extraJavaOptions``, which Spark's launcher (the
    driver) and its workers (executors) split into words each its own way: double quotes with
    ``\\`` and ``"`` escaped read the same in both (paths with spaces or quotes)."""
    if re.search(r"[\s'\"\\]", option) is None:
        return option
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tmpdir_problem() -> str | None:
    """A TMPDIR that names no writable folder, with what to do; None otherwise. Python (and
    so hoodline and Spark's workers) silently fall back to /tmp then: a user who moved the
    temporary files off a small /tmp, as the full-folder message advises, would not know."""
    value = os.environ.get("TMPDIR", "")
    if not value:
        return None
    folder = Path(value)
    why = ("does not exist" if not folder.exists() else
           "is not a folder" if not folder.is_dir() else
           "is not writable" if not os.access(folder, os.W_OK | os.X_OK) else None)
    if why is None:
        return None
    return (f"TMPDIR is {value!r}, which {why}: Spark's and hoodline's temporary files would go "
            f"to {tempfile.gettempdir()} instead; create the folder (writable), or unset TMPDIR")


def temp_space_problem(min_free: int = MIN_TEMP_FREE) -> str | None:
    """A temporary folder Spark and hoodline write to on start (TMPDIR, SPARK_LOCAL_DIRS) with
    less than ``min_free`` bytes free, named with what to do; None when they have room."""
    folders = {tempfile.gettempdir(): "TMPDIR"}
    for local in filter(None, os.environ.get("SPARK_LOCAL_DIRS", "").split(",")):
        folders.setdefault(local, "SPARK_LOCAL_DIRS")
    for folder, variable in folders.items():
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue  # missing: Spark creates or reports it
        if free < min_free:
            return (f"the temporary folder {folder} ({variable}) has only {free / 2**20:.1f} MiB "
                    f"free; Spark and hoodline need at least {min_free // 2**20} MiB there to "
                    "start (and room for a round's records while it runs): free space, or set "
                    f"{variable} to a folder on a larger disk")
    return None


def java_problem() -> str | None:
    """What stops Spark from starting its JVM here, with what to do; None when Java is fine."""
    home = os.environ.get("JAVA_HOME")
    java = java_binary()
    if java is None:
        if home:
            return (f"JAVA_HOME is {home!r}, which holds no bin/java: set JAVA_HOME to a Java "
                    f"{MIN_JAVA} (or later) installation, or unset it to use the java on PATH")
        return (f"Spark needs Java {MIN_JAVA} or later, and there is no java on PATH and no "
                "JAVA_HOME: install a JDK (e.g. apt install openjdk-17-jdk-headless) and put its "
                "java on PATH or set JAVA_HOME")
    major = java_major(java)
    if major is not None and major < MIN_JAVA:
        return (f"Spark needs Java {MIN_JAVA} or later, but {java} is Java {major}: set "
                f"JAVA_HOME to a Java {MIN_JAVA}+ installation")
    return None


def start_problem(master_url: str) -> str | None:
    """What stops a session on ``master_url`` from starting (Java, then the master), with what
    to do; None when nothing does. Under spark-submit the JVM runs already: nothing to ask."""
    from hoodline.pipeline.master import unreachable_master
    from hoodline.spark.class_cache import jvm_started_by_spark_submit

    if jvm_started_by_spark_submit():
        return None
    problem = java_problem() or tmpdir_problem() or temp_space_problem()
    if problem is not None:
        return problem
    unreachable = unreachable_master(master_url)
    if unreachable is not None:
        return (f"the Spark master {master_url!r} (runtime.master) does not answer "
                f"({unreachable}): start it, or fix runtime.master")
    return None
