"""local[N]: Python workers start from hoodline's worker daemon (pyspark from its compiled
installation, pyarrow and the task code loaded before forking)."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark import cloudpickle

from hoodline.spark.job import per_subtask
from hoodline.spark.session import HoodlineSpark
from hoodline.spark.worker_daemon import prefer_installed_pyspark

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_only_the_installed_pyspark_zips_and_jars_leave_the_path(tmp_path: Path) -> None:
    site = tmp_path / "site"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    core_jar = site / "pyspark" / "jars" / "spark-core_2.13-4.3.0.jar"
    other = tmp_path / "other" / "py4j-0.10.9.9-src.zip"
    other_jar = tmp_path / "other" / "tools.jar"
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(other),
            str(core_jar), str(other_jar), str(site), "/x/hoodline.zip"]
    assert prefer_installed_pyspark(path) == [str(other), str(other_jar), str(site),
                                              "/x/hoodline.zip"]
    # no installed pyspark next to the zips: nothing is dropped
    assert prefer_installed_pyspark([str(lib / "pyspark.zip"), "/nowhere"]) == [
        str(lib / "pyspark.zip"), "/nowhere"]


@pytest.mark.spark
def test_workers_are_forked_with_the_task_code_and_pyspark_from_its_installation(
    spark: HoodlineSpark,
) -> None:
    assert spark.context.getConf().get("spark.python.daemon.module") == (
        "hoodline.spark.worker_daemon")

    def probe(i: int) -> Iterator[tuple[str, str]]:
        import pyspark

        import hoodline.pipeline.tasks as tasks  # a fresh import would come from the shipped zip

        yield tasks.__file__ or "", pyspark.__file__ or ""

    files = per_subtask(spark.context, 2, probe).collect()
    assert len(files) == 2
    assert not any(".zip" in tasks for tasks, _ in files)  # preloaded
    assert not any(".zip" in pyspark for _, pyspark in files)


@pytest.mark.spark
def test_workers_keep_no_finder_of_sparks_jars(spark: HoodlineSpark) -> None:
    """Spark puts its core jar (no Python inside) on the workers' path, and pyspark's worker
    invalidates every cached import finder before each task: a finder of that 40 MB jar re-read
    its directory every time. The daemon drops the installation's jars and their finders."""

    def probe(i: int) -> Iterator[list[str]]:
        yield [entry for entry in [*sys.path, *sys.path_importer_cache]
               if entry.endswith(".jar")]

    found = per_subtask(spark.context, 2, probe).collect()
    assert found == [[], []]


@pytest.mark.spark
def test_forked_workers_start_with_the_preloaded_objects_frozen(spark: HoodlineSpark) -> None:
    # pyspark's daemon runs a full gc.collect() after every task of a reused worker: the
    # daemon's preloads must be out of its reach before the fork (not frozen by hoodline's
    # stages here: a plain Spark function)
    frozen = spark.context.parallelize(range(2), 2).map(lambda _: gc.get_freeze_count()).collect()
    assert len(frozen) == 2
    assert min(frozen) > 20_000, frozen  # pyarrow, numpy, pyspark, hoodline


def test_preloaded_workers_convert_numpy_without_loading_pandas() -> None:
    # pyarrow imports pandas on its first conversion of a numpy array, of a Python list and of an
    # Arrow array to numpy, only to recognise pandas objects: the daemon settles those checks
    # first (~55 MiB less and ~0.5 s less CPU in every worker); pandas itself stays usable
    # through pyarrow afterwards. A fresh interpreter, as a daemon is.
    script = """
import sys
from hoodline.spark.worker_daemon import preload
preload()
import numpy as np
import pyarrow as pa
pa.array(np.arange(3))
pa.Table.from_pydict({"a": np.arange(3)})
np.asarray(pa.compute.binary_length(pa.array([b"ab", b"c"])))
pa.array([1.5, None]).to_numpy(zero_copy_only=False)
print("pandas loaded:", "pandas" in sys.modules)
frame = pa.table({"a": [1, 2]}).to_pandas()
import pandas as pd
kind = pa.array(pd.Series(["x", "y"], dtype="category")).type
print("to_pandas:", len(frame), "category:", kind)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.splitlines() == [
        "pandas loaded: False",
        "to_pandas: 2 category: dictionary<values=string, indices=int8, ordered=0>",
    ]


def test_a_pyarrow_without_the_pandas_shim_leaves_the_workers_as_they_were() -> None:
    # the shim is pyarrow's private object: without it the daemon still starts, and pyarrow
    # loads pandas itself on its first conversion of a Python value, as it always did
    script = """
import sys
import pyarrow.lib
del pyarrow.lib._pandas_api
from hoodline.spark.worker_daemon import preload
preload()
print("started")
pyarrow.lib.array([0]).to_numpy()
print("pandas loaded on the first conversion:", "pandas" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.splitlines() == ["started", "pandas loaded on the first conversion: True"]
