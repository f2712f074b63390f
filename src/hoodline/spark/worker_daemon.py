"""The Python worker daemon of ``local[N]`` masters (``spark.python.daemon.module``).

Spark starts one daemon per executor; the daemon forks a worker for every Python task slot and
the workers are reused across tasks. pyspark's own daemon imports only pyspark, so every forked
worker then imports pyarrow and hoodline's task code itself, and -- with a pip-installed pyspark
-- Spark puts its *zipped* copy of pyspark first on the workers' path, which Python compiles from
source at every daemon start (zipimport keeps no bytecode).

This daemon, for local masters only (the driver's own installation serves the workers):

* drops Spark's ``pyspark.zip`` / ``py4j-*.zip`` from ``sys.path`` when they belong to the
  installed pyspark package that is also importable (same installation, so same version), so
  pyspark loads from its compiled installation, and the installation's own jars that Spark
  puts there too (Spark's core jar holds no Python);
* imports pyarrow and the modules a round's tasks run before forking, so every worker starts
  with them loaded (copy-on-write), and freezes them out of the garbage collector
  (:mod:`.worker_gc`);
* then runs pyspark's daemon unchanged.

A session starts the daemon's imports earlier, while its JVM starts, in a zygote process: the
daemon Spark launches then only hands its pipes over to that zygote, which becomes the daemon
(:mod:`.worker_zygote`); it imports and forks by itself only when there is no usable zygote.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

from hoodline.spark import worker_zygote

#: What a round's tasks import (loaded once in the daemon, shared by the forked workers).
PRELOAD = (
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.ipc",
    "pyarrow.json",
    "pyarrow.parquet",
    "numpy",
    "hoodline.pipeline.tasks",
    "hoodline.spark.job",
    "hoodline.connectors.kafka.plugin",
    "hoodline.connectors.files.plugin",
)


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without the zips and jars of the installed pyspark (see module docs)."""
    plain = [p for p in path if not p.endswith((".zip", ".jar"))]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", plain)
    if spec is None or not spec.submodule_search_locations:
        return path
    home = next(iter(spec.submodule_search_locations))
    lib = os.path.join(home, "python", "lib") + os.sep
    jars = os.path.join(home, "jars") + os.sep
    return [p for p in path if not ((p.endswith(".zip") and p.startswith(lib))
                                    or (p.endswith(".jar") and p.startswith(jars)))]


def use_path(path: list[str]) -> None:
    """Make ``path`` the import path, forgetting the finders of the entries it drops: pyspark's
    worker calls ``importlib.invalidate_caches()`` before every task, and a cached finder of
    Spark's core jar (on the workers' path, 40 MB, no Python in it) re-read the jar's ~6,000
    entries each time (~27 ms per task)."""
    for entry in set(sys.path) - set(path):
        sys.path_importer_cache.pop(entry, None)
    sys.path[:] = path


def skip_pandas_probe() -> None:
    """Settle pyarrow's "is this a pandas object?" checks with pandas not loaded.

    pyarrow imports pandas in two places, each the first time it is asked, only to recognise
    pandas objects: its Python-side shim (``pyarrow.lib._pandas_api``, on the first conversion
    of a numpy array) and its C++ side (the first conversion of a Python sequence or of an Arrow
    array to numpy, e.g. ``np.asarray(array)``). That is ~55 MiB resident and ~0.5 s of CPU in
    every worker's first round, and the tasks never hand pyarrow pandas objects. Both checks are
    made once here while ``import pandas`` fails; pyarrow remembers the answers (so in the
    workers it does not take pandas' ``NA``/``NaT`` inside Python lists for nulls). pandas itself
    stays importable: what needs it through pyarrow (``Table.to_pandas``) imports it then.
    Nothing is done when pandas is loaded already, or when this pyarrow has no such shim
    (pyarrow's private ``_pandas_api``; pyarrow then imports pandas itself, as it always did)."""
    if "pandas" in sys.modules:
        return
    import pyarrow.lib

    shim = getattr(pyarrow.lib, "_pandas_api", None)
    if shim is None:
        return
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        _ = shim.have_pandas
        # the C++ side asks once per process, also when the import fails
        pyarrow.lib.array([0]).to_numpy()
    except Exception as exc:  # a changed shim must not stop the workers: pandas loads later
        print(f"hoodline worker daemon: pyarrow's pandas check failed ({exc!r}); "
              "pandas loads on first use", file=sys.stderr)
    finally:
        sys.meta_path.remove(blocker)


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import finder under which ``import pandas`` fails."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ImportError(f"{fullname} is not loaded while pyarrow checks for it")
        return None


def preload() -> None:
    """Import :data:`PRELOAD` and pyspark's daemon (pyarrow's pandas check settled first, see
    :func:`skip_pandas_probe`), then freeze them out of the garbage collector's reach
    (:mod:`.worker_gc`)."""
    skip_pandas_probe()
    for module in PRELOAD:
        __import__(module)
    import pyspark.daemon  # noqa: F401

    from hoodline.spark.worker_gc import freeze_loaded

    freeze_loaded()


def main(argv: list[str]) -> None:
    use_path(prefer_installed_pyspark(sys.path))
    if argv[:1] == ["--zygote"] and len(argv) == 2:
        sys.exit(worker_zygote.serve(int(argv[1]), preload))
    if worker_zygote.hand_over(sys.path):
        return
    preload()
    from pyspark import daemon

    os.environ[worker_zygote.STARTED_ENV] = "cold"
    daemon.manager()


if __name__ == "__main__":
    main(sys.argv[1:])
