"""The engine interface: what the round driver needs from whatever runs a round's tasks.

An :class:`Engine` runs one :class:`~hoodline.pipeline.tasks.RoundJob` per round:

1. reader tasks ``0..job.readers-1`` (task *i* = reader subtask *i*, also on retries) run
   ``job.read(i)``;
2. with ``job.key_shuffle`` their record batches are shuffled by (partition path, record key)
   into ``job.writers`` assigner tasks that run ``job.assign(batches, task)``;
3. the records are shuffled by file group into ``job.writers`` writer tasks that run
   ``job.write(batches, task, attempt)`` -- every one of them, also those that receive no
   records (an explicit empty result, RFC-13);

or, when ``job.direct_write``, reader task *i* runs ``job.read_and_write(i, attempt)`` instead
of all three and reports as writer *i* (``job.writer_tasks`` writers report in every case);

and hands everything the tasks reported to a :class:`RoundOutputBuilder`, whose
:meth:`~RoundOutputBuilder.build` checks that every task reported and returns the
:class:`RoundOutput` the driver commits. :meth:`Engine.wait_until_idle` blocks until no task of
a finished or failed job still runs (no zombie attempt may write after the driver decided).

``hoodline.spark`` implements it on Spark (:data:`ENGINES`); ``hoodline.testing`` has an
in-process engine for tests of the driver's policy without Spark.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeVar

import pyarrow as pa

from hoodline.errors import ConfigError, EngineJobError
from hoodline.pipeline.config import RuntimeSection
from hoodline.pipeline.errors_table import ERROR_SCHEMA, sort_errors
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import RoundJob, TaskFailure
from hoodline.table.commit_metadata import WriteStat

__all__ = ["ENGINES", "Engine", "RoundOutput", "RoundOutputBuilder", "default_engine"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class RoundOutput:
    """What a round's tasks reported, complete (every reader and every writer)."""

    #: reader subtask -> its outcome
    outcomes: dict[int, ReadOutcome]
    #: bad records of all readers, in source order (``ERROR_SCHEMA``)
    bad_records: pa.Table
    write_stats: list[WriteStat] = field(default_factory=list)


class RoundOutputBuilder:
    """Collects task reports of one job (in any order) and checks them for completeness."""

    def __init__(self, readers: int, writers: int) -> None:
        self.readers = readers
        self.writers = writers
        self._outcomes: dict[int, ReadOutcome] = {}
        self._bad: list[pa.RecordBatch] = []
        self._stats: list[WriteStat] = []
        self._writer_tasks: set[int] = set()
        self._failures: list[TaskFailure] = []

    def reader_outcome(self, subtask: int, outcome: ReadOutcome) -> None:
        if subtask in self._outcomes:
            raise EngineJobError(f"reader subtask {subtask} reported its state twice")
        if outcome.subtask != subtask:
            raise EngineJobError(
                f"reader task {subtask} reported the state of subtask {outcome.subtask}"
            )
        self._outcomes[subtask] = outcome

    def bad_records(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._bad.append(batch)

    def write_status(self, task: int, payload: bytes) -> None:
        self._stats.append(WriteStat.from_dict(json.loads(payload)))
        self._writer_tasks.add(task)

    def writer_done(self, task: int) -> None:
        """Writer ``task`` finished (with or without write statuses)."""
        self._writer_tasks.add(task)

    def failure(self, failure: TaskFailure) -> None:
        self._failures.append(failure)

    def build(self) -> RoundOutput:
        """The output; raises a task's non-retryable error, or :class:`EngineJobError` when a
        task did not report (nothing may be committed then)."""
        if self._failures:
            raise self._failures[0].error()
        if set(self._outcomes) != set(range(self.readers)):
            raise EngineJobError(
                f"split states came from reader subtasks {sorted(self._outcomes)}, expected "
                f"0..{self.readers - 1}; not committing"
            )
        if self._writer_tasks != set(range(self.writers)):
            raise EngineJobError(
                f"write results came from tasks {sorted(self._writer_tasks)}, expected "
                f"0..{self.writers - 1}; not committing"
            )
        bad = (pa.Table.from_batches(self._bad, schema=ERROR_SCHEMA) if self._bad
               else ERROR_SCHEMA.empty_table())
        return RoundOutput(dict(sorted(self._outcomes.items())), sort_errors(bad), self._stats)


class Engine(ABC):
    """Runs rounds' jobs (see module docs). Use as a context manager or call :meth:`close`."""

    @property
    @abstractmethod
    def default_parallelism(self) -> int:
        """Writer tasks when the pipeline does not set ``runtime.writer-parallelism``."""

    @abstractmethod
    def run_round(self, job: RoundJob) -> RoundOutput:
        """Run ``job`` to its end and return what its tasks reported. Raises a task's
        non-retryable error as it is, :class:`EngineJobError` (retryable) when the job failed
        or is incomplete."""

    @abstractmethod
    def wait_until_idle(self, timeout_s: float = 60.0) -> None:
        """Block until no task runs any more (EngineJobError after ``timeout_s``)."""

    def run_tasks(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Run ``fn`` on every item as one job (one task per item; ``fn`` and the items are
        picklable) and return the results in item order: table services such as compaction.
        This default runs them here, one after the other."""
        return [fn(item) for item in items]

    def check_alive(self) -> None:
        """Raise a non-retryable error when the engine can run no job any more (a process it
        needs died); called while rounds find nothing to do, when no job would notice."""
        return None

    def close(self) -> None:
        """Release the engine's resources (e.g. stop the Spark session it started)."""
        return None

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


#: The engine a pipeline runs on by default, by import path ("module:factory"); the factory
#: takes the pipeline's runtime section and an application name.
ENGINES: dict[str, str] = {"spark": "hoodline.spark.engine:SparkEngine.start"}
DEFAULT_ENGINE = "spark"


def default_engine(runtime: RuntimeSection, app_name: str) -> Engine:
    """Start the default engine for ``runtime`` (Spark with ``runtime.master``)."""
    target = ENGINES[DEFAULT_ENGINE]
    module, _, attr = target.partition(":")
    factory: object = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    if not callable(factory):
        raise ConfigError(f"engine factory {target} is not callable")
    engine = factory(runtime, app_name)
    if not isinstance(engine, Engine):
        raise TypeError(f"{target} returned {type(engine).__name__}, not an Engine")
    return engine
