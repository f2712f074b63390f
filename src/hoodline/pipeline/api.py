"""The public pipeline API: run a stream (Kafka or files -> Hudi table) as checkpoint rounds.

Example::

    from hoodline.pipeline.api import run_pipeline

    summary = run_pipeline("pipeline.toml", once=True, on_round=print)

or, keeping the Spark session across runs::

    with Pipeline(load_config("pipeline.toml")) as pipeline:
        summary = pipeline.run(once=False, on_round=show, stop=stop_event)

Each round reads a bounded slice of the source, writes it as one Hudi instant (the source
checkpoint rides in the commit's extra metadata) and reports a :class:`RoundReport` to
``on_round`` -- also for rounds that committed nothing. ``run`` returns a :class:`RunSummary`.

This module does not import pyspark; the Spark runtime is imported when a pipeline runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from hoodline.pipeline.config import PipelineConfig, load_config

if TYPE_CHECKING:
    from hoodline.spark.session import HoodlineSpark

__all__ = ["Pipeline", "RoundReport", "RunSummary", "run_pipeline"]


@dataclass(frozen=True)
class RoundReport:
    """What one round did (one report per round, also for rounds that committed nothing)."""

    #: Checkpoint round id (stored in the commit; increases by one per committed round).
    round_id: int
    #: The committed instant time, None when the round committed nothing.
    instant: str | None
    committed: bool
    records_read: int
    #: Upserted/inserted rows written to the table (after de-duplication).
    records_written: int
    records_deleted: int
    #: Bad records of this round (written to the error table with errors.tolerance = all).
    error_records: int
    files_written: int
    #: The slowest reader task's time reading and keying its plan.
    read_seconds: float
    #: The rest of the round's Spark job (shuffle by file group, writing files).
    write_seconds: float
    #: Error-table write + the commit of the instant.
    commit_seconds: float
    duration_seconds: float
    #: ``records_read / duration_seconds`` (0 for an empty round).
    records_per_second: float
    #: "topic-partition" -> records behind the end after this round (Kafka); {} for files.
    lag: dict[str, int] = field(default_factory=dict)
    #: Failed attempts (rolled back and retried) before this round succeeded.
    retries: int = 0


@dataclass(frozen=True)
class RunSummary:
    """What a whole ``run`` did."""

    rounds: int
    commits: int
    records_read: int
    records_written: int
    error_records: int
    last_instant: str | None
    #: "drained" (--once), "stopped" (stop event / Ctrl-C), "end-of-input" (bounded source).
    stopped_because: str


class Pipeline:
    """A configured pipeline bound to a Spark session (started on demand, stopped by
    :meth:`close` when the pipeline started it). Use as a context manager."""

    def __init__(self, config: PipelineConfig, spark: HoodlineSpark | None = None) -> None:
        self.config = config
        self._spark = spark
        self._owns_spark = spark is None
        self._closed = False

    @property
    def spark(self) -> HoodlineSpark:
        if self._spark is None:
            from hoodline.spark.session import settings_from_runtime, start_session

            app = f"hoodline-{self.config.table.name}"
            self._spark = start_session(settings_from_runtime(self.config.runtime, app_name=app))
        return self._spark

    def run(
        self,
        once: bool = False,
        on_round: Callable[[RoundReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> RunSummary:
        """Run rounds until ``stop`` is set (continuous), or -- with ``once`` -- until what the
        source held when the run started is committed. Raises :class:`BadRecordError` (bad
        record with tolerance none), :class:`RoundFailedError` (too many failed rounds in a
        row) or the restore errors (incompatible checkpoint, table locked by another writer)."""
        if self._closed:
            from hoodline.errors import PipelineError

            raise PipelineError("the pipeline is closed; create a new one")
        from hoodline.spark.runner import RoundRunner

        runner = RoundRunner(self.config, self.spark)
        return runner.run(once=once, on_round=on_round, stop=stop)

    def close(self) -> None:
        """Stop the Spark session if this pipeline started it."""
        if self._closed:
            return
        self._closed = True
        if self._owns_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def run_pipeline(
    config: PipelineConfig | str | Path,
    once: bool = False,
    on_round: Callable[[RoundReport], None] | None = None,
    stop: threading.Event | None = None,
) -> RunSummary:
    """Load ``config`` (a TOML path or a :class:`PipelineConfig`), run it, stop Spark."""
    cfg = config if isinstance(config, PipelineConfig) else load_config(config)
    with Pipeline(cfg) as pipeline:
        return pipeline.run(once=once, on_round=on_round, stop=stop)
