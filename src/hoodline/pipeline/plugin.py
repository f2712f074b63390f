"""The connector plug-in contract of the round driver (engine-agnostic).

A connector (Kafka, files, ...) joins the pipeline with one :class:`SourcePlugin`, registered by
source type in :mod:`hoodline.pipeline.plugins`. The driver never branches on the source type:

* **Driver side** (:class:`SourcePlugin`): build the FLIP-27 source from the pipeline
  configuration; turn every reader subtask's :class:`~hoodline.runtime.ReaderPlan` into one
  picklable :class:`ReadTask` bounded to this round (:meth:`SourcePlugin.bound`); after the
  round, turn what each task read back into the splits the logical reader continues with
  (:meth:`SourcePlugin.continuing`); say when ``--once`` has drained what was there at the start;
  side effects of a completed checkpoint (Kafka: offsets committed to the group).
* **Task side** (:class:`RecordPreparer`, shipped to the engine's tasks): decode the batches the
  source reader emitted into keyed records plus error rows carrying the record's source position
  (see :mod:`hoodline.pipeline.transform` for the shared keying helpers).

:class:`PlanReading` reads a task's plan with a fresh source reader (the same for every
connector).
"""

from __future__ import annotations

import logging
import pickle
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import HoodlineError, PipelineError
from hoodline.runtime.source_rounds import ReaderPlan, SourceRounds
from hoodline.source.api import Source, SourceEvent, SourceReaderContext, SourceSplit
from hoodline.source.drive import BoundedRead
from hoodline.table.commit_metadata import JAVA_POSITION_KEYS

if TYPE_CHECKING:
    from hoodline.pipeline.config import PipelineConfig
    from hoodline.pipeline.plugins import SourceType
    from hoodline.pipeline.transform import Prepared, RecordSpec

log = logging.getLogger(__name__)

#: Longest a reader task may take to read its bounded plan.
READ_TIMEOUT_S = 300.0


class TaskReaderContext(SourceReaderContext):
    """Reader context inside a task: events for the enumerator are kept and returned to the
    driver with the task's outcome; split requests are answered by the driver between rounds."""

    def __init__(self, subtask_id: int, parallelism: int) -> None:
        self._subtask_id = subtask_id
        self._parallelism = parallelism
        self.events: list[SourceEvent] = []

    @property
    def subtask_id(self) -> int:
        return self._subtask_id

    @property
    def parallelism(self) -> int:
        return self._parallelism

    def send_event_to_enumerator(self, event: SourceEvent) -> None:
        self.events.append(event)

    def send_split_request(self) -> None:
        pass  # the driver requests splits for readers that hold none (SourcePlugin.before_plan)


@dataclass(frozen=True)
class ReadTask:
    """One reader subtask's work for one round (picklable)."""

    subtask: int
    parallelism: int
    round_id: int
    source: Any  # Source; Any keeps this picklable without generic noise
    splits: tuple[Any, ...]
    #: Stop after this many records (exactly, for a reader that SupportsRecordLimit; else after
    #: whole batches); None = read the splits to their ends.
    max_records: int | None = None
    #: Nothing to read this round (the task reports its splits unchanged without a reader).
    empty: bool = False


@dataclass
class ReadOutcome:
    """What a reader task reports back: its split states, events for the enumerator, counts."""

    subtask: int
    splits: list[Any]
    events: list[SourceEvent] = field(default_factory=list)
    records: int = 0
    nbytes: int = 0
    #: Seconds the task spent reading (and keying) its plan.
    seconds: float = 0.0

    def to_bytes(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(data: bytes) -> ReadOutcome:
        out = pickle.loads(data)
        if not isinstance(out, ReadOutcome):
            raise PipelineError(f"reader state payload holds {type(out).__name__}")
        return out


def _value_bytes(batch: pa.RecordBatch) -> int:
    if "value" in batch.schema.names:
        lengths = pc.binary_length(batch.column("value"))
        return int(pc.sum(lengths).as_py() or 0)
    return int(batch.nbytes)


class PlanReading:
    """Read a task's plan with a fresh source reader: iterate (batch, split id) pairs; at the
    end :attr:`outcome` holds the split states, the events for the enumerator and counts."""

    def __init__(self, task: ReadTask) -> None:
        self.task = task
        self.outcome: ReadOutcome | None = None

    def __iter__(self) -> Iterator[tuple[pa.RecordBatch, str | None]]:
        task = self.task
        if task.empty:
            self.outcome = ReadOutcome(task.subtask, list(task.splits))
            return
        started = time.monotonic()
        ctx = TaskReaderContext(task.subtask, task.parallelism)
        source: Source[Any, Any] = task.source
        run = BoundedRead(
            source.create_reader(ctx),
            task.splits,
            checkpoint_id=task.round_id,
            timeout=READ_TIMEOUT_S,
            max_records=task.max_records,
        )
        nbytes = 0
        for batch, split_id in run:
            nbytes += _value_bytes(batch)
            yield batch, split_id
        self.outcome = ReadOutcome(task.subtask, list(run.split_states), list(ctx.events),
                                   run.records, nbytes, time.monotonic() - started)


@dataclass(frozen=True)
class RoundPlan:
    """Every reader subtask's bounded task for one round, and the lag after it."""

    tasks: dict[int, ReadTask]
    #: "topic-partition" -> records behind the end after this round ({} if unknown).
    lag: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return all(t.empty for t in self.tasks.values())


class RecordPreparer(ABC):
    """Task side of a connector: emitted batches -> keyed records + error rows (picklable)."""

    @abstractmethod
    def prepare(
        self, spec: RecordSpec, task: ReadTask, batches: Iterator[tuple[pa.RecordBatch, str | None]]
    ) -> Iterator[Prepared]:
        """Keyed records and error rows of ``batches`` (in source order)."""

    def rejected(
        self, spec: RecordSpec, task: ReadTask, outcome: ReadOutcome
    ) -> list[pa.RecordBatch]:
        """Error rows for input the source's reader of ``task`` skipped (e.g. unreadable
        files)."""
        return []


class SourcePlugin(ABC):
    """Driver side of a connector (see module docs). One instance per pipeline run."""

    #: The ``source.type`` it serves (stored with checkpoints and error rows).
    name: ClassVar[SourceType]

    def __init__(self, source: Source[Any, Any]) -> None:
        self.source = source
        self._avg_bytes: float | None = None

    @classmethod
    @abstractmethod
    def from_config(cls, config: PipelineConfig) -> SourcePlugin:
        """Build the connector's source from the pipeline configuration (ConfigError if bad)."""

    @property
    @abstractmethod
    def identity(self) -> str:
        """What must not change between runs for stored positions to mean the same records
        (Kafka: the subscription; files: the root directory and format). No secrets."""

    def identity_change(self, stored: str) -> str | None:
        """Whether positions a table stored under identity ``stored`` (another than
        :attr:`identity`) still apply to this source: ``None`` = they do not and the run is
        refused; else what changed, which the run names in a warning. Default: none do."""
        return None

    @abstractmethod
    def table_schema(self, config: PipelineConfig) -> pa.Schema:
        """The record schema the table gets (the declared one, or the connector's raw one)."""

    @abstractmethod
    def preparer(self, config: PipelineConfig) -> RecordPreparer:
        """The task-side record preparer."""

    @abstractmethod
    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int
    ) -> RoundPlan:
        """Every subtask's task for this round, bounded to ``max_records`` over all readers."""

    @abstractmethod
    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        """The splits a logical reader holds after the round (finished ones dropped)."""

    def preflight(self) -> None:
        """Checks that need no engine, run before it starts (``hoodline run``): fail in a moment
        on what would otherwise fail only after Spark's start. Default: none."""
        return None

    def before_plan(self, rounds: SourceRounds[Any, Any]) -> None:
        """Called before :meth:`SourceRounds.plan_round` (e.g. split requests)."""
        return None

    def adopt(self, instant: str, metadata: Mapping[str, str],
              resumed: Mapping[str, str] | None) -> bool:
        """Commit ``instant`` is the table's newest that carries the positions of one of Java
        Hudi's Kafka writers (``metadata``: its extra metadata, with
        :data:`~hoodline.table.commit_metadata.JAVA_POSITION_KEYS`), newer than any checkpoint
        of hoodline's (``resumed``: the extra metadata of the pipeline's older one, None if
        there is none). True: the source starts where that writer stopped (and says so).
        May raise ConfigError when the source cannot tell where to start. Default: False, with
        a warning that the source does not use them."""
        log.warning(
            "table commit %s carries the positions of a Java Hudi writer (%s), which the %s "
            "source does not use", instant,
            ", ".join(f"{k} = {metadata[k][:200]!r}" for k in JAVA_POSITION_KEYS
                      if k in metadata), self.name)
        return False

    def refusal(self, instant: str, metadata: Mapping[str, str],
                resumed: Mapping[str, str] | None) -> HoodlineError | None:
        """The error :meth:`adopt` would raise for these positions (asked before the engine
        starts, so a refused run ends in a moment), or None. Default: none."""
        return None

    def restored(self, metadata: Mapping[str, str]) -> None:
        """The extra metadata of the commit whose checkpoint the run resumes from (what
        :meth:`commit_metadata` stored with it). Default: not used."""
        return None

    def commit_metadata(self, rounds: SourceRounds[Any, Any]) -> dict[str, str]:
        """Entries the round's commit stores beside the checkpoint (what its positions refer
        to). Default: none."""
        return {}

    def files_waiting(self, rounds: SourceRounds[Any, Any]) -> int | None:
        """Files found and not yet read whole, now (the file source's backlog); None for sources
        of records."""
        return None

    def commit_pending(self, rounds: SourceRounds[Any, Any]) -> bool:
        """The source's driver side changed what no committed checkpoint records yet: input it
        skipped (error rows), splits it dropped (topics deleted). A round must commit, even
        with nothing to read. Default: never."""
        return False

    def source_errors(self, rounds: SourceRounds[Any, Any], round_id: int) -> list[pa.RecordBatch]:
        """Error rows for that input, written with round ``round_id``, whose checkpoint (taken
        before this call) records it. Default: none."""
        return []

    def drained(self) -> bool:
        """``--once``: everything that was available at the first round has been read."""
        return False

    def after_commit(self, rounds: SourceRounds[Any, Any]) -> None:
        """Side effects of a completed checkpoint (monitoring only; failures are logged)."""
        return None

    def reset(self) -> None:
        """After a failed round: drop connections that may be broken."""
        return None

    def close(self) -> None:
        """Release what the plug-in holds (clients); the source itself has no resources."""
        return None

    def observe(self, records: int, nbytes: int) -> None:
        """Bytes per record seen in a round (turns ``round.max-bytes`` into a record budget)."""
        if records > 0:
            avg = nbytes / records
            self._avg_bytes = avg if self._avg_bytes is None else 0.5 * (self._avg_bytes + avg)

    def record_budget(self, max_records: int, max_bytes: int) -> int:
        """The round's record budget: ``max_records``, lowered by ``max_bytes`` once the
        average record size is known."""
        if self._avg_bytes:
            return max(1, min(max_records, int(max_bytes / max(self._avg_bytes, 1.0))))
        return max_records

    def forward_events(
        self, rounds: SourceRounds[Any, Any], outcomes: Sequence[ReadOutcome]
    ) -> None:
        """Deliver the events reader tasks sent to the enumerator (before the checkpoint)."""
        for o in outcomes:
            for event in o.events:
                rounds.coordinator.handle_source_event(o.subtask, event)
