"""local[N]: Python workers start from hoodline's worker daemon (pyspark from its compiled
installation, pyarrow and the task code loaded before forking)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from hoodline.spark.job import per_subtask
from hoodline.spark.session import HoodlineSpark
from hoodline.spark.worker_daemon import prefer_installed_pyspark

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_only_the_installed_pyspark_zips_leave_the_path(tmp_path: Path) -> None:
    site = tmp_path / "site"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    other = tmp_path / "other" / "py4j-0.10.9.9-src.zip"
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(other),
            str(site), "/x/hoodline.zip"]
    assert prefer_installed_pyspark(path) == [str(other), str(site), "/x/hoodline.zip"]
    # no installed pyspark next to the zips: nothing is dropped
    assert prefer_installed_pyspark([str(lib / "pyspark.zip"), "/nowhere"]) == [
        str(lib / "pyspark.zip"), "/nowhere"]


@pytest.mark.spark
def test_workers_are_forked_with_the_task_code_and_pyspark_from_its_installation(
    spark: HoodlineSpark,
) -> None:
    assert spark.context.getConf().get("spark.python.daemon.module") == (
        "hoodline.spark.worker_daemon")

    def probe(i: int) -> Iterator[pa.RecordBatch]:
        import pyspark

        import hoodline.pipeline.tasks as tasks  # a fresh import would come from the shipped zip

        yield pa.RecordBatch.from_pylist(
            [{"tasks": tasks.__file__ or "", "pyspark": pyspark.__file__ or ""}],
            schema=pa.schema([("tasks", pa.string()), ("pyspark", pa.string())]))

    rows = per_subtask(spark.session, 2, probe, "tasks string, pyspark string").toArrow()
    assert not any(".zip" in p for p in rows.column("tasks").to_pylist())  # preloaded
    assert not any(".zip" in p for p in rows.column("pyspark").to_pylist())


@pytest.mark.spark
def test_forked_workers_start_with_the_preloaded_objects_frozen(spark: HoodlineSpark) -> None:
    # pyspark's daemon runs a full gc.collect() after every task of a reused worker: the
    # daemon's preloads must be out of its reach before the fork (not frozen by hoodline's
    # stages here: a plain mapInArrow function)
    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"frozen": gc.get_freeze_count()}],
                                         schema=pa.schema([("frozen", pa.int64())]))

    rows = spark.session.range(0, 2, 1, numPartitions=2).mapInArrow(probe, "frozen long")
    frozen = rows.toArrow().column("frozen").to_pylist()
    assert len(frozen) == 2
    assert min(frozen) > 20_000, frozen  # pyarrow, numpy, pandas, pyspark, hoodline
