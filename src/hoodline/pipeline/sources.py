"""Sources as a round runtime needs them (engine-agnostic): build, bound a round, read a plan.

Driver side, a :class:`SourceAdapter` turns the :class:`~hoodline.runtime.SourceRounds` plans
into one picklable :class:`ReadTask` per reader subtask (splits bounded to this round's end), and
after the round turns what each task read back into continuing splits. Task side,
:func:`read_task` reads a task's plan with a fresh source reader and yields Arrow batches, then
reports a :class:`ReadOutcome` (split states, events for the enumerator, counts).

* Kafka: a round reads ``[position, end)`` of every held partition; ends come from the brokers'
  end offsets and a record budget (``round.max-records``, and ``round.max-bytes`` converted with
  the average message size seen so far), spread fairly (:func:`connectors.kafka.rounds.plan_round`).
  Deterministic: a retried task reads the same messages.
* Files: readers pull splits (the driver asks the enumerator for every reader holding none);
  a task reads its splits in order until its share of the record budget is reached (a batch is
  never cut), so a file may span rounds; split progress (records emitted) is checkpointed.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.connectors.files import FileSource, FileSourceSplit, SplitsFinishedEvent
from hoodline.connectors.kafka import KafkaPartitionSplit, KafkaSource, TopicPartition
from hoodline.connectors.kafka.rounds import after_round, plan_round
from hoodline.errors import ConfigError, SourceError
from hoodline.pipeline.config import PipelineConfig
from hoodline.runtime.source_rounds import ReaderPlan, SourceRounds
from hoodline.source.api import InputStatus, Source, SourceEvent, SourceReaderContext, SourceSplit
from hoodline.source.output import CollectingOutput

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
        pass  # the driver requests splits for readers that hold none (see FilesAdapter)


@dataclass(frozen=True)
class ReadTask:
    """One reader subtask's work for one round (picklable)."""

    subtask: int
    parallelism: int
    round_id: int
    source: Any  # Source; Any keeps this picklable without generic noise
    splits: tuple[Any, ...]
    #: Files: stop after this many records (whole batches); None = read the splits to the end.
    max_records: int | None = None

    @property
    def empty(self) -> bool:
        if not self.splits:
            return True
        if isinstance(self.splits[0], KafkaPartitionSplit):
            return all(s.stopping_offset == s.starting_offset for s in self.splits)
        return False


@dataclass
class ReadOutcome:
    """What a reader task reports back (pickled into the round's reader-state payload)."""

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
            raise SourceError(f"reader state payload holds {type(out).__name__}")
        return out


def _value_bytes(batch: pa.RecordBatch) -> int:
    if "value" in batch.schema.names:
        lengths = pc.binary_length(batch.column("value"))
        return int(pc.sum(lengths).as_py() or 0)
    return int(batch.nbytes)


def read_task(task: ReadTask) -> Iterator[tuple[pa.RecordBatch, str | None] | ReadOutcome]:
    """Read ``task``'s plan: yields (batch, split id) pairs, then one :class:`ReadOutcome`."""
    if task.empty:
        yield ReadOutcome(task.subtask, list(task.splits))
        return
    started = time.monotonic()
    ctx = TaskReaderContext(task.subtask, task.parallelism)
    source: Source[Any, Any] = task.source
    reader = source.create_reader(ctx)
    out = CollectingOutput()
    records = nbytes = 0
    deadline = time.monotonic() + READ_TIMEOUT_S
    budget = task.max_records
    try:
        reader.start()
        reader.add_splits(list(task.splits))
        reader.notify_no_more_splits()
        while True:
            status = reader.poll_next(out)
            for batch, sid in zip(out.batches, out.split_ids, strict=True):
                records += batch.num_rows
                nbytes += _value_bytes(batch)
                yield batch, sid
            out.clear()
            if status is InputStatus.END_OF_INPUT:
                break
            if budget is not None and records >= budget:
                break
            if status is InputStatus.NOTHING_AVAILABLE:
                if time.monotonic() >= deadline:
                    raise SourceError(
                        f"reader subtask {task.subtask} did not finish its round plan within "
                        f"{READ_TIMEOUT_S:.0f}s (splits {[str(s) for s in task.splits]})"
                    )
                reader.wait_available(0.05)
        states = reader.snapshot_state(task.round_id)
    finally:
        reader.close()
    yield ReadOutcome(task.subtask, list(states), list(ctx.events), records, nbytes,
                      time.monotonic() - started)


class SourceAdapter:
    """Driver-side glue between SourceRounds and one connector (see module docs)."""

    source_type = ""

    def __init__(self, source: Source[Any, Any]) -> None:
        self.source = source
        self._avg_bytes: float | None = None

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

    @property
    def identity(self) -> str:
        raise NotImplementedError

    def before_plan(self, rounds: SourceRounds[Any, Any]) -> None:
        """Called before :meth:`SourceRounds.plan_round` (e.g. split requests)."""

    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int,
        max_bytes: int,
    ) -> tuple[dict[int, ReadTask], dict[str, int]]:
        """Every subtask's bounded task, and the lag per partition after it ({} if unknown)."""
        raise NotImplementedError

    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        """The splits a logical reader holds after the round (finished ones dropped)."""
        raise NotImplementedError

    def drained(self) -> bool:
        """``--once``: everything that was available at the first round has been read."""
        return False

    def after_commit(self, rounds: SourceRounds[Any, Any]) -> None:
        """Checkpoint completion side effects (monitoring)."""

    def reset(self) -> None:
        """After a failed round: drop connections that may be broken."""

    def forward_events(
        self, rounds: SourceRounds[Any, Any], outcomes: Sequence[ReadOutcome]
    ) -> None:
        """Deliver the events reader tasks sent to the enumerator (before the checkpoint)."""
        for o in outcomes:
            for event in o.events:
                rounds.coordinator.handle_source_event(o.subtask, event)

    def close(self) -> None:
        pass


class KafkaAdapter(SourceAdapter):
    source_type = "kafka"
    source: KafkaSource

    def __init__(self, source: KafkaSource) -> None:
        super().__init__(source)
        self._client: Any = None
        self._targets: dict[TopicPartition, int] | None = None
        self._positions: dict[TopicPartition, int] = {}
        self._unassigned_plans = 0

    @property
    def identity(self) -> str:
        sub = self.source.config.subscription
        if sub.topics is not None:
            return "topics:" + ",".join(sorted(sub.topics))
        if sub.pattern is not None:
            return "pattern:" + sub.pattern
        parts = sorted(f"{tp.topic}:{tp.partition}" for tp in sub.partitions or ())
        return "partitions:" + ",".join(parts)

    def _latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self._client is None:
            self._client = self.source.metadata_client()
        ends: dict[TopicPartition, int] = self._client.latest_offsets(tps)
        return ends

    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int,
        max_bytes: int,
    ) -> tuple[dict[int, ReadTask], dict[str, int]]:
        held = {i: list(p.splits) for i, p in plans.items()}
        tps = sorted({s.topic_partition for splits in held.values() for s in splits})
        ends = self._latest(tps) if tps else {}
        budget = self.record_budget(max_records, max_bytes)
        if self._targets is None:
            if tps:
                self._targets = dict(ends)
            else:
                self._unassigned_plans += 1
        bounded = plan_round(held, ends, budget)
        lag: dict[str, int] = {}
        for splits in bounded.values():
            for s in splits:
                end = ends.get(s.topic_partition, s.stopping_offset or 0)
                lag[f"{s.topic}-{s.partition}"] = max(0, end - (s.stopping_offset or 0))
                self._positions[s.topic_partition] = s.stopping_offset or s.starting_offset
        tasks = {
            i: ReadTask(i, len(plans), round_id, self.source, tuple(bounded[i]))
            for i in plans
        }
        return tasks, lag

    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        read = {s.split_id: s for s in outcome.splits}
        out: list[SourceSplit] = []
        for s in held:
            assert isinstance(s, KafkaPartitionSplit)
            state = read.get(s.split_id)
            if state is None:  # the reader keeps finished splits: a missing one is a bug
                raise SourceError(
                    f"reader subtask {outcome.subtask} reported no state for split "
                    f"'{s.split_id}' of its plan; not committing (the round is retried)"
                )
            cont = after_round(s, state)
            if cont.stopping_offset is not None and cont.starting_offset >= cont.stopping_offset:
                continue
            out.append(cont)
        return out

    def drained(self) -> bool:
        if self._targets is None:  # no partition found (yet): give discovery a few rounds
            return self._unassigned_plans >= 3
        return all(self._positions.get(tp, 0) >= end for tp, end in self._targets.items())

    def after_commit(self, rounds: SourceRounds[Any, Any]) -> None:
        splits = [s for held in rounds.held_splits().values() for s in held]
        self.source.commit_offsets(splits)

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


class FilesAdapter(SourceAdapter):
    source_type = "files"
    source: FileSource

    def __init__(self, source: FileSource) -> None:
        super().__init__(source)
        self._idle_rounds = 0
        self._started = time.monotonic()

    @property
    def identity(self) -> str:
        cfg = self.source.config
        return f"{cfg.root}|{cfg.format}"

    def before_plan(self, rounds: SourceRounds[Any, Any]) -> None:
        for subtask, splits in rounds.held_splits().items():
            if not splits:
                rounds.coordinator.handle_split_request(subtask, None)

    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int,
        max_bytes: int,
    ) -> tuple[dict[int, ReadTask], dict[str, int]]:
        share = max(1, self.record_budget(max_records, max_bytes) // max(1, len(plans)))
        tasks = {
            i: ReadTask(i, len(plans), round_id, self.source, tuple(p.splits), share)
            for i, p in plans.items()
        }
        busy = any(p.splits for p in plans.values())
        self._idle_rounds = 0 if busy else self._idle_rounds + 1
        return tasks, {}

    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        finished: set[str] = set()
        for event in outcome.events:
            if isinstance(event, SplitsFinishedEvent):
                finished.update(event.split_ids)
        return [s for s in outcome.splits if s.split_id not in finished]

    def drained(self) -> bool:
        """Nothing held for two plans, and long enough running that every file present at the
        start passed its stability scans (continuous mode scans every monitor interval)."""
        cfg = self.source.config
        settle = cfg.monitor_interval * (cfg.stable_scans + 1) if cfg.continuous else 0.0
        return self._idle_rounds >= 2 and time.monotonic() - self._started >= settle


def build_adapter(config: PipelineConfig) -> SourceAdapter:
    """The source named by the pipeline configuration, wrapped for rounds."""
    options = dict(config.source.options)
    if config.source.type == "kafka":
        return KafkaAdapter(KafkaSource.from_options(options))
    if config.source.type == "files":
        schema = config.schema if config.source.format == "json" else None
        if "schema" in options:
            raise ConfigError(
                "[source.options] 'schema' is not used by pipelines: declare the record schema "
                "in [schema]"
            )
        if config.errors.tolerance == "all":
            options.setdefault("errors.tolerance", "all")
        return FilesAdapter(FileSource.from_options(options, schema=schema))
    raise ConfigError(f"source.type {config.source.type!r} is not supported")


def file_split_path(split_id: str | None) -> str:
    """The file path of a file split id (``path`` or ``path#...``)."""
    if split_id is None:
        return ""
    return split_id.split("#", 1)[0]


def first_rows(splits: Sequence[FileSourceSplit]) -> dict[str, int]:
    """Row number (within the split) of the first record a task will read, per split id."""
    return {s.split_id: s.records_to_skip for s in splits}
