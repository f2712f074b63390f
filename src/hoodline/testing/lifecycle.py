"""Plays the lifecycles of FLIP-27 / FLIP-537 in-process, for tests of sources and enumerators.

:class:`SourceLifecycleDriver` runs a :class:`~hoodline.runtime.SourceCoordinator` and one real
reader per subtask and offers the steps a job goes through: start, run the enumerator's async
calls, deliver assignments, poll readers, take and complete checkpoints, fail a single reader
(it restarts from the last completed checkpoint) and restart globally with the same or another
parallelism (readers restored from the last completed checkpoint, their split states
redistributed, registering with their reported splits for FLIP-537 sources).

It also models an exactly-once sink: batches emitted by a reader are *committed* when a
checkpoint taken after them completes and are discarded when their reader fails or the job
restarts first, so a test can compare :meth:`SourceLifecycleDriver.committed_table` with the
expected rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa

from hoodline.errors import SourceError
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import apply_reader_events
from hoodline.runtime.redistribution import redistribute_split_states
from hoodline.source.api import (
    InputStatus,
    ReaderOutput,
    Source,
    SourceEvent,
    SourceReader,
    SourceReaderContext,
    SourceSplit,
)
from hoodline.source.serialization import read_versioned, write_versioned

__all__ = ["RestorePoint", "SourceLifecycleDriver"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
CheckpointT = TypeVar("CheckpointT")


class _DriverReaderContext(SourceReaderContext):
    def __init__(self, driver: SourceLifecycleDriver[Any, Any], subtask_id: int) -> None:
        self._driver = driver
        self._subtask_id = subtask_id

    @property
    def subtask_id(self) -> int:
        return self._subtask_id

    @property
    def parallelism(self) -> int:
        return self._driver.parallelism

    @property
    def location(self) -> str:
        return self._driver.location

    def send_event_to_enumerator(self, event: SourceEvent) -> None:
        self._driver.coordinator.handle_source_event(self._subtask_id, event)

    def send_split_request(self) -> None:
        self._driver.coordinator.handle_split_request(self._subtask_id, self._driver.location)


class _TaggingOutput(ReaderOutput):
    """Collects a reader's batches; each batch is tagged later with its checkpoint id."""

    def __init__(self) -> None:
        self.untagged: list[pa.RecordBatch] = []

    def emit(self, batch: pa.RecordBatch, split_id: str | None = None) -> None:
        self.untagged.append(batch)


@dataclass
class RestorePoint:
    """What a restart restores from: the last completed checkpoint, per current subtask."""

    checkpoint_id: int
    enumerator_state: bytes
    reader_states: dict[int, list[bytes]]
    parallelism: int


@dataclass
class _PendingCheckpoint:
    checkpoint_id: int
    enumerator_state: bytes
    reader_states: dict[int, list[bytes]]
    parallelism: int
    aborted: bool = False


@dataclass
class _ReaderSlot(Generic[SplitT]):
    reader: SourceReader[SplitT]
    output: _TaggingOutput
    # batches already snapshotted, by checkpoint id, not yet committed
    tagged: dict[int, list[pa.RecordBatch]] = field(default_factory=dict)
    ended: bool = False


class SourceLifecycleDriver(Generic[SplitT, CheckpointT]):
    """Drives a source through checkpoints, failures and restarts (see module docs)."""

    def __init__(
        self,
        source: Source[SplitT, CheckpointT],
        parallelism: int,
        *,
        location: str = "localhost",
    ) -> None:
        self.source = source
        self.location = location
        self._parallelism = parallelism
        self._coordinator: SourceCoordinator[SplitT, CheckpointT] | None = None
        self._slots: dict[int, _ReaderSlot[SplitT]] = {}
        self._pending: dict[int, _PendingCheckpoint] = {}
        self._restore_point: RestorePoint | None = None
        self._next_checkpoint_id = 1
        self._committed: list[pa.RecordBatch] = []
        self.completed_checkpoints: list[int] = []

    # -- accessors ------------------------------------------------------------------------------

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def coordinator(self) -> SourceCoordinator[SplitT, CheckpointT]:
        if self._coordinator is None:
            raise SourceError("the lifecycle driver is not started; call start() first")
        return self._coordinator

    @property
    def restore_point(self) -> RestorePoint | None:
        return self._restore_point

    def reader(self, subtask_id: int) -> SourceReader[SplitT]:
        return self._slots[subtask_id].reader

    def owned_splits(self) -> dict[int, list[SplitT]]:
        """What each reader holds right now (its state as a snapshot would show it)."""
        return {
            i: slot.reader.snapshot_state(self._next_checkpoint_id)
            for i, slot in sorted(self._slots.items())
        }

    def committed_batches(self) -> list[pa.RecordBatch]:
        return list(self._committed)

    def committed_table(self, schema: pa.Schema | None = None) -> pa.Table:
        if not self._committed:
            return pa.table({}) if schema is None else schema.empty_table()
        return pa.Table.from_batches(self._committed, schema=schema)

    # -- lifecycle steps ------------------------------------------------------------------------

    def start(self) -> None:
        """Fresh start: a new enumerator and readers with no state."""
        if self._coordinator is not None:
            raise SourceError("already started; use global_restart() to restart")
        self._launch(None, {})

    def _launch(self, restore: RestorePoint | None, reader_states: dict[int, list[bytes]]) -> None:
        coordinator: SourceCoordinator[SplitT, CheckpointT] = SourceCoordinator(
            self.source, self._parallelism
        )
        self._coordinator = coordinator
        if restore is None:
            coordinator.start()
        else:
            coordinator.start(restore.enumerator_state, restore.checkpoint_id)
        for subtask in range(self._parallelism):
            self._start_reader(subtask, reader_states.get(subtask, []))
        self.deliver()

    def _start_reader(self, subtask: int, restored_state: list[bytes]) -> None:
        reader = self.source.create_reader(_DriverReaderContext(self, subtask))
        self._slots[subtask] = _ReaderSlot(reader, _TaggingOutput())
        serializer = self.source.split_serializer()
        restored = [read_versioned(serializer, b) for b in restored_state]
        reader.start()
        if self.coordinator.reassigns_on_recovery:
            self.coordinator.register_reader(subtask, self.location, restored)
        else:
            if restored:
                reader.add_splits(restored)
            self.coordinator.register_reader(subtask, self.location, restored)

    def run_async_calls(self) -> None:
        """Run every pending one-shot async call and every periodic call once, then deliver."""
        scheduler = self.coordinator.scheduler
        scheduler.run_all_one_shots()
        scheduler.run_all_periodic()
        scheduler.run_all_one_shots()
        self.deliver()

    def deliver(self) -> None:
        """Hand every queued coordinator event to its reader."""
        for subtask, slot in sorted(self._slots.items()):
            apply_reader_events(slot.reader, self.coordinator.take_reader_events(subtask))

    def poll(self, subtask_id: int, max_batches: int = 1, wait: float = 0.0) -> int:
        """Poll one reader up to ``max_batches`` batches; returns how many were emitted.

        With ``wait`` > 0 the reader may block that long when nothing is available (threaded
        readers). Events the reader sends are handled and resulting assignments delivered.
        """
        slot = self._slots[subtask_id]
        emitted = 0
        while emitted < max_batches:
            before = len(slot.output.untagged)
            status = slot.reader.poll_next(slot.output)
            emitted += len(slot.output.untagged) - before
            self.deliver()
            if status is InputStatus.END_OF_INPUT:
                slot.ended = True
                break
            if status is InputStatus.NOTHING_AVAILABLE:
                if wait <= 0 or not slot.reader.wait_available(wait):
                    break
        return emitted

    def read_to_end(self, timeout_polls: int = 100_000, wait: float = 0.01) -> None:
        """Poll every reader until all report END_OF_INPUT (bounded sources). The enumerator's
        pending one-shot calls (a bounded source's listing) run in between, as a runtime runs
        them while its readers wait."""
        for _ in range(timeout_polls):
            if all(slot.ended for slot in self._slots.values()):
                return
            self.coordinator.scheduler.run_all_one_shots()
            self.deliver()
            for subtask in sorted(self._slots):
                if not self._slots[subtask].ended:
                    self.poll(subtask, max_batches=64, wait=wait)
        raise SourceError(
            f"readers {[i for i, s in self._slots.items() if not s.ended]} did not reach "
            f"the end of their input after {timeout_polls} polling rounds"
        )

    def checkpoint(self) -> int:
        """Take a checkpoint of the enumerator and every reader; returns its id."""
        self.deliver()  # like Flink: assignments sent before the barrier reach the reader first
        cid = self._next_checkpoint_id
        self._next_checkpoint_id += 1
        enum_state = self.coordinator.checkpoint(cid)
        serializer = self.source.split_serializer()
        states: dict[int, list[bytes]] = {}
        for subtask, slot in sorted(self._slots.items()):
            states[subtask] = [
                write_versioned(serializer, s) for s in slot.reader.snapshot_state(cid)
            ]
            slot.tagged[cid] = slot.output.untagged
            slot.output.untagged = []
        self._pending[cid] = _PendingCheckpoint(cid, enum_state, states, self._parallelism)
        return cid

    def pending_checkpoints(self) -> list[int]:
        """Checkpoints taken that may still complete."""
        return sorted(c for c, p in self._pending.items() if not p.aborted)

    def complete_checkpoint(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completes: data up to it is committed."""
        pending = self._pending.get(checkpoint_id)
        if pending is None or pending.aborted:
            raise SourceError(f"checkpoint {checkpoint_id} is not pending (or was aborted)")
        self.coordinator.notify_checkpoint_complete(checkpoint_id)
        for slot in self._slots.values():
            for cid in sorted(c for c in slot.tagged if c <= checkpoint_id):
                self._committed.extend(slot.tagged.pop(cid))
            slot.reader.notify_checkpoint_complete(checkpoint_id)
        for cid in [c for c in self._pending if c <= checkpoint_id]:
            del self._pending[cid]
        self._restore_point = RestorePoint(
            checkpoint_id, pending.enumerator_state, pending.reader_states, pending.parallelism
        )
        self.completed_checkpoints.append(checkpoint_id)
        self.deliver()

    def fail_reader(self, subtask_id: int) -> None:
        """Reader ``subtask_id`` fails and restarts from the last completed checkpoint."""
        slot = self._slots.pop(subtask_id)
        slot.reader.close()
        for pending in self._pending.values():
            pending.aborted = True  # a failover aborts checkpoints in flight
        self.coordinator.reader_failed(subtask_id)
        point = self._restore_point
        restored = point.reader_states.get(subtask_id, []) if point is not None else []
        self._start_reader(subtask_id, restored)
        self.deliver()

    def global_restart(self, parallelism: int | None = None) -> None:
        """Stop everything and restart from the last completed checkpoint (or from scratch)."""
        self._shutdown()
        old = self._restore_point
        if parallelism is not None:
            self._parallelism = parallelism
        states: dict[int, list[bytes]] = {}
        if old is not None:
            states = redistribute_split_states(
                old.reader_states, self._parallelism, old_parallelism=old.parallelism
            )
            # a later single-reader failover restores the redistributed state of its subtask
            self._restore_point = RestorePoint(
                old.checkpoint_id, old.enumerator_state, states, self._parallelism
            )
        self._launch(self._restore_point, states)

    def _shutdown(self) -> None:
        for slot in self._slots.values():
            slot.reader.close()
        self._slots.clear()
        self._pending.clear()
        if self._coordinator is not None:
            self._coordinator.close()
        self._coordinator = None

    def close(self) -> None:
        self._shutdown()

    def __enter__(self) -> SourceLifecycleDriver[SplitT, CheckpointT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- convenience ----------------------------------------------------------------------------

    def checkpoint_and_complete(self) -> int:
        cid = self.checkpoint()
        self.complete_checkpoint(cid)
        return cid

    def assert_each_split_once(self, pending_ids: Sequence[str]) -> set[str]:
        """Check no split is held by two readers or both held and pending; return all ids."""
        seen: dict[str, str] = {}
        for subtask, splits in self.owned_splits().items():
            for split in splits:
                where = f"reader {subtask}"
                if split.split_id in seen:
                    raise AssertionError(
                        f"split '{split.split_id}' held by {seen[split.split_id]} and {where}"
                    )
                seen[split.split_id] = where
        for sid in pending_ids:
            if sid in seen:
                raise AssertionError(f"split '{sid}' pending in the enumerator and in {seen[sid]}")
            seen[sid] = "enumerator"
        return set(seen)
