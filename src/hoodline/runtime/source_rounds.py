"""The source side of a round-based runtime (the Spark driver), engine-agnostic.

Spark has no long-lived reader tasks, so the driver keeps *logical readers*: for every reader
subtask the splits it holds (with positions) between rounds. :class:`SourceRounds` combines them
with a :class:`~hoodline.runtime.coordinator.SourceCoordinator`:

1. :meth:`SourceRounds.plan_round` runs the enumerator's due async calls (discovery), applies the
   assignments to the logical readers and returns one :class:`ReaderPlan` per subtask. The
   runtime bounds every split to the round's end (connector specific, e.g. Kafka end offsets) and
   runs reader subtask *i* as task *i* on exactly those splits.
2. :meth:`SourceRounds.reads_done` records what a subtask's read left behind (the reader's
   ``snapshot_state``, turned back into continuing splits by the runtime).
3. :meth:`SourceRounds.checkpoint` gives a :class:`SourceCheckpoint` (enumerator state + every
   logical reader's splits, all as versioned bytes) to store with the commit;
   :meth:`SourceRounds.checkpoint_complete` after the commit landed. Checkpoint ids are allocated
   here and only ever increase (as in Flink): a round that failed after taking its checkpoint and
   is retried takes a new one with a new id.
4. :meth:`SourceRounds.round_failed` when a round fails: every reader restarts from the last
   completed checkpoint, splits assigned since go back to the enumerator, readers register again
   (reporting their splits for FLIP-537 sources).

A restarted job builds a new :class:`SourceRounds` from the last :class:`SourceCheckpoint` (also
with another parallelism: reader states are redistributed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from hoodline.errors import SourceError
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import (
    AddSplitsEvent,
    NoMoreSplitsEvent,
    ReaderEvent,
    SourceEventToReader,
)
from hoodline.runtime.redistribution import redistribute_split_states
from hoodline.source.api import Source, SourceEvent, SourceSplit
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    frame,
    read_versioned,
    unframe,
    write_versioned,
)

__all__ = ["ReaderPlan", "SourceCheckpoint", "SourceRounds"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
CheckpointT = TypeVar("CheckpointT")

_CHECKPOINT_MAGIC = b"HLSC"
_CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class SourceCheckpoint:
    """A source's part of a checkpoint: enumerator state and every reader's split states.

    All payloads are versioned bytes (``write_versioned`` of the source's serializers), so the
    checkpoint restores with later hoodline versions. :meth:`to_bytes` / :meth:`from_bytes` give a
    self-describing byte string (format version 1) to store e.g. in Hudi commit metadata.
    """

    checkpoint_id: int
    parallelism: int
    enumerator_state: bytes
    reader_states: dict[int, list[bytes]] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        w = BinaryWriter().write_long(self.checkpoint_id).write_int(self.parallelism)
        w.write_bytes(self.enumerator_state)
        w.write_int(len(self.reader_states))
        for subtask in sorted(self.reader_states):
            splits = self.reader_states[subtask]
            w.write_int(subtask).write_int(len(splits))
            for split in splits:
                w.write_bytes(split)
        return frame(_CHECKPOINT_MAGIC, _CHECKPOINT_VERSION, w.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> SourceCheckpoint:
        _, body = unframe(data, _CHECKPOINT_MAGIC, (_CHECKPOINT_VERSION,), "source checkpoint")
        r = BinaryReader(body, "source checkpoint")
        checkpoint_id = r.read_long()
        parallelism = r.read_int()
        enumerator_state = r.read_bytes()
        states: dict[int, list[bytes]] = {}
        for _ in range(r.read_int()):
            subtask = r.read_int()
            states[subtask] = [r.read_bytes() for _ in range(r.read_int())]
        r.expect_end()
        return cls(checkpoint_id, parallelism, enumerator_state, states)


@dataclass(frozen=True)
class ReaderPlan(Generic[SplitT]):
    """What reader subtask ``subtask_id`` works on this round.

    ``splits`` are the splits the logical reader holds (positions where the last round left
    them, unbounded); ``no_more_splits`` says the enumerator will send none (bounded sources: the
    reader's input ends once these are read); ``events`` are custom enumerator events for it.
    """

    subtask_id: int
    splits: tuple[SplitT, ...]
    no_more_splits: bool = False
    events: tuple[SourceEvent, ...] = ()


@dataclass
class _LogicalReader(Generic[SplitT]):
    splits: dict[str, SplitT] = field(default_factory=dict)
    no_more_splits: bool = False
    events: list[SourceEvent] = field(default_factory=list)

    def apply(self, events: Sequence[ReaderEvent]) -> None:
        for event in events:
            if isinstance(event, AddSplitsEvent):
                for split in event.splits:
                    if split.split_id in self.splits:
                        raise SourceError(
                            f"split '{split.split_id}' assigned to a reader that already holds it"
                        )
                    self.splits[split.split_id] = split
            elif isinstance(event, NoMoreSplitsEvent):
                self.no_more_splits = True
            elif isinstance(event, SourceEventToReader):
                self.events.append(event.event)


class SourceRounds(Generic[SplitT, CheckpointT]):
    """Coordinator plus logical readers for round-based execution (see module docs)."""

    def __init__(
        self,
        source: Source[SplitT, CheckpointT],
        parallelism: int,
        restore: SourceCheckpoint | None = None,
        *,
        location: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._parallelism = parallelism
        self._location = location
        self._coordinator: SourceCoordinator[SplitT, CheckpointT] = SourceCoordinator(
            source, parallelism, clock=clock
        )
        self._serializer = source.split_serializer()
        self._readers: dict[int, _LogicalReader[SplitT]] = {}
        self._restore: dict[int, list[SplitT]] = {i: [] for i in range(parallelism)}
        self._last_checkpoint_id = restore.checkpoint_id if restore is not None else 0
        if restore is None:
            self._coordinator.start()
        else:
            self._coordinator.start(restore.enumerator_state, restore.checkpoint_id)
            states = redistribute_split_states(
                restore.reader_states, parallelism, old_parallelism=restore.parallelism
            )
            self._restore = {
                i: [read_versioned(self._serializer, b) for b in states[i]]
                for i in range(parallelism)
            }
        for subtask in range(parallelism):
            self._register(subtask)
        self._deliver()

    @property
    def coordinator(self) -> SourceCoordinator[SplitT, CheckpointT]:
        return self._coordinator

    @property
    def parallelism(self) -> int:
        return self._parallelism

    def _register(self, subtask: int) -> None:
        restored = list(self._restore.get(subtask, []))
        reader: _LogicalReader[SplitT] = _LogicalReader()
        if not self._coordinator.reassigns_on_recovery:
            reader.splits = {s.split_id: s for s in restored}
        self._readers[subtask] = reader
        self._coordinator.register_reader(subtask, self._location, restored)

    def _deliver(self) -> None:
        for subtask, reader in self._readers.items():
            reader.apply(self._coordinator.take_reader_events(subtask))

    def plan_round(self) -> dict[int, ReaderPlan[SplitT]]:
        """Run due async calls, apply assignments and return every subtask's plan."""
        self._coordinator.run_async_calls()
        self._deliver()
        plans: dict[int, ReaderPlan[SplitT]] = {}
        for subtask, reader in sorted(self._readers.items()):
            plans[subtask] = ReaderPlan(
                subtask, tuple(reader.splits.values()), reader.no_more_splits, tuple(reader.events)
            )
            reader.events.clear()
        return plans

    def held_splits(self) -> dict[int, list[SplitT]]:
        """The splits every logical reader holds now."""
        return {i: list(r.splits.values()) for i, r in sorted(self._readers.items())}

    def reads_done(self, subtask_id: int, splits: Sequence[SplitT]) -> None:
        """Subtask ``subtask_id`` read its plan; ``splits`` are where it continues next round.

        Splits absent from ``splits`` are finished and leave the reader; unknown ids are refused.
        """
        reader = self._readers[subtask_id]
        unknown = [s.split_id for s in splits if s.split_id not in reader.splits]
        if unknown:
            raise SourceError(
                f"subtask {subtask_id} reported splits {unknown} it was not given; a read task "
                f"must report only the splits of its plan"
            )
        reader.splits = {s.split_id: s for s in splits}

    def checkpoint(self) -> SourceCheckpoint:
        """Snapshot enumerator and logical readers (after every ``reads_done`` of the round),
        under a new checkpoint id greater than every id taken before (also after failures)."""
        self._deliver()  # assignments made so far belong to this checkpoint's reader state
        self._last_checkpoint_id += 1
        checkpoint_id = self._last_checkpoint_id
        enum_state = self._coordinator.checkpoint(checkpoint_id)
        states = {
            i: [write_versioned(self._serializer, s) for s in r.splits.values()]
            for i, r in sorted(self._readers.items())
        }
        return SourceCheckpoint(checkpoint_id, self._parallelism, enum_state, states)

    def checkpoint_complete(self, checkpoint: SourceCheckpoint) -> None:
        """The commit holding ``checkpoint`` landed: it is the new restore point."""
        self._coordinator.notify_checkpoint_complete(checkpoint.checkpoint_id)
        self._restore = {
            i: [read_versioned(self._serializer, b) for b in checkpoint.reader_states.get(i, [])]
            for i in range(self._parallelism)
        }

    def round_failed(self) -> None:
        """The round failed: every reader restarts from the last completed checkpoint."""
        for subtask in range(self._parallelism):
            self._coordinator.reader_failed(subtask)
        for subtask in range(self._parallelism):
            self._register(subtask)
        self._deliver()

    def close(self) -> None:
        self._coordinator.close()
