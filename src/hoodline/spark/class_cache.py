"""A class-data-sharing archive of the driver JVM's classes (JDK AppCDS), for faster starts.

Starting Spark loads some 20,000 classes from pyspark's jars; a JDK dynamic CDS archive holds
them pre-parsed and pre-verified, so a driver JVM that maps it starts about 2.5 s faster and runs
its first query about 1 s faster on this kind of machine (BENCHMARKS.md).

The archive is built once per installation -- Java binary, the jars folder and every jar in
it, which make up its file name (:func:`archive_name`) -- by :func:`build`: a separate Python
process starts a session with ``-XX:ArchiveClassesAtExit``, runs a small job shaped like a
round, stops Spark and waits until the JVM has exited and written the archive, which then moves
into place atomically, replacing the archives of what was installed there before. Starts that
find no archive build it one at a time (a lock file beside it): two pipelines started together on
a fresh machine build it once, and the second maps the first one's archive instead of competing
with it for the cores. The JVM checks the archive when it maps it and ignores it (silently: CDS
logging is off) when it does not match. Where the archive lives: ``$HOODLINE_CACHE_DIR``, else
``$XDG_CACHE_HOME/hoodline``, else ``~/.cache/hoodline``.

Under ``spark-submit`` the driver JVM is running before hoodline starts (PySpark connects to it
through ``PYSPARK_GATEWAY_PORT``): no archive can apply to it, so none is built or mapped.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hoodline.spark.java import java_binary, java_option

log = logging.getLogger(__name__)

#: JVM options that keep CDS messages off stderr (a mismatched archive is simply not used).
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")

#: Longest a build may take.
BUILD_TIMEOUT_S = 300.0


def cache_dir() -> Path:
    env = os.environ.get("HOODLINE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hoodline"


#: Set by ``spark-submit`` for the Python driver it starts: the driver JVM already runs.
GATEWAY_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


def jvm_started_by_spark_submit() -> bool:
    """True when PySpark will connect to a driver JVM that ``spark-submit`` already started."""
    return GATEWAY_ENV[0] in os.environ


#: The shape of the round job :func:`_train` runs: a new shape loads other classes, so it goes
#: into the archive's name (an archive of the old shape is not reused).
JOB_SHAPE = "rdd-envelopes-1"


def archive_path() -> Path | None:
    """Where the archive for this Java and this pyspark lives (None without a Java binary, and
    under ``spark-submit``, whose driver JVM runs already)."""
    import pyspark
    from pyspark import __version__ as pyspark_version

    java = java_binary()
    if java is None or jvm_started_by_spark_submit():
        return None

    return cache_dir() / archive_name(java, Path(pyspark.__file__).parent / "jars",
                                      pyspark_version)


def archive_name(java: Path, jars: Path, spark_version: str) -> str:
    """The archive's file name: ``spark-<version>-<installation>-<contents>.jsa``.

    The JVM maps an archive only when every jar on the class path is the one it was built from
    (same path, size and modification time) and ignores it otherwise, without a word: so the
    name covers the jars folder's path and each jar's size and time. (It covered names and
    sizes only: a second virtualenv with the same pyspark version, or pyspark installed again,
    took the first one's archive and started seconds slower on every start, for good.)"""
    folder = jars.resolve()
    where = hashlib.sha256(f"{java}|{folder}".encode()).hexdigest()[:8]
    what = hashlib.sha256()
    stat = java.stat()
    what.update(f"{stat.st_size}|{stat.st_mtime_ns}|{spark_version}|{JOB_SHAPE}".encode())
    for jar in sorted(folder.glob("*.jar")):
        jar_stat = jar.stat()
        what.update(f"|{jar.name}:{jar_stat.st_size}:{jar_stat.st_mtime_ns}".encode())
    return f"spark-{spark_version}-{where}-{what.hexdigest()[:12]}.jsa"


def _same_installation(path: Path) -> list[Path]:
    """Other archives (and their lock files) of the Java and jars folder ``path`` is for: made
    for an earlier pyspark or Java installed there, never to be mapped any more."""
    where = _installation(path.name)
    if where is None:
        return []
    return [p for p in path.parent.iterdir()
            if p.name not in (path.name, f".{path.name}.lock")
            and p.name.startswith(("spark-", ".spark-")) and _installation(p.name) == where]


def _installation(name: str) -> str | None:
    parts = name.removesuffix(".lock").removesuffix(".jsa").split("-")
    return parts[-2] if len(parts) >= 4 and name.endswith((".jsa", ".jsa.lock")) else None


def java_options(path: Path | None) -> list[str]:
    """Options that make a driver JVM map the archive (none when it does not exist)."""
    if path is None or not path.is_file():
        return []
    return [java_option(f"-XX:SharedArchiveFile={path}"), *QUIET]


def build(path: Path, timeout_s: float = BUILD_TIMEOUT_S) -> bool:
    """Build the archive at ``path`` in a separate process; True when it exists afterwards.
    Failures are logged, never raised: without the archive Spark only starts slower."""
    if path.is_file():
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    with _one_builder(path):
        if path.is_file():  # built by another start while this one waited
            return True
        return _build(path, timeout_s)


@contextmanager
def _one_builder(path: Path) -> Iterator[None]:
    """Held while ``path`` is built: one builder per archive across processes (released by the
    kernel when a builder dies)."""
    with open(path.parent / f".{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(path: Path, timeout_s: float) -> bool:
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".building-", suffix=".jsa")
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()
    try:
        # the builder starts its own JVM: never the gateway of a spark-submit parent
        env = {k: v for k, v in os.environ.items() if k not in GATEWAY_ENV}
        done = subprocess.run(
            [sys.executable, "-m", "hoodline.spark.class_cache", str(tmp)],
            capture_output=True, text=True, timeout=timeout_s, check=False, env=env,
        )
        if done.returncode != 0 or not tmp.is_file():
            log.warning("could not build the JVM class cache at %s (exit %s): %s", path,
                        done.returncode, done.stderr.strip().splitlines()[-1:] or "no output")
            return False
        os.replace(tmp, path)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("could not build the JVM class cache at %s: %s", path, exc)
        return False
    finally:
        tmp.unlink(missing_ok=True)
    try:
        for stale in _same_installation(path):  # ~90 MB each
            stale.unlink(missing_ok=True)
            log.info("removed the JVM class cache of an earlier installation: %s", stale)
    except OSError as exc:  # the new archive is in place: only space is not given back
        log.warning("could not remove an earlier JVM class cache beside %s: %s", path, exc)
    return True


def _train(target: Path) -> None:
    """Run in the builder process: load the classes a round uses, then exit the JVM cleanly so
    that it writes the archive to ``target``."""
    from hoodline.spark.job import RECORDS, per_subtask, target_partition
    from hoodline.spark.session import SparkSettings, start_session

    spark = start_session(SparkSettings(
        master="local[2]", app_name="hoodline-class-cache", class_cache=False,
        extra_conf={"spark.driver.extraJavaOptions":
                    " ".join([java_option(f"-XX:ArchiveClassesAtExit={target}"), *QUIET])},
    ))
    try:
        def envelopes(i: int):  # type: ignore[no-untyped-def]
            yield i, (RECORDS, i, b"x")

        # the shape of a round's job (see hoodline.spark.job)
        per_subtask(spark.context, 2, envelopes).partitionBy(2, target_partition).values(
        ).collect()
    finally:
        spark.stop()
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the gateway JVM exits when its stdin closes, writing the archive
        proc.stdin.close()
        proc.wait(timeout=BUILD_TIMEOUT_S)


if __name__ == "__main__":
    _train(Path(sys.argv[1]))
