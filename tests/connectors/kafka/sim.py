"""Test helpers: an in-memory Kafka metadata fake and a job simulator for FLIP-537 lifecycles.

The simulator drives the real :class:`KafkaSource` enumerator through the framework's
:class:`SourceCoordinator`; readers are simulated as "hold splits, move offsets forward", so
exactly-once can be checked from a ledger of read offsets: reads become committed at a checkpoint
and are discarded when their reader fails or the job restarts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from hoodline.connectors.kafka.enumerator import KafkaSourceEnumerator
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import AddSplitsEvent, NoMoreSplitsEvent
from hoodline.runtime.redistribution import redistribute_split_states


class FakeMetadata:
    """Topics with partition counts and per-partition [earliest, end) offsets."""

    def __init__(self, topics: Mapping[str, int] | None = None) -> None:
        self.topics: dict[str, int] = dict(topics or {})
        self.earliest: dict[TopicPartition, int] = {}
        self.end: dict[TopicPartition, int] = {}
        self.committed: dict[str, dict[TopicPartition, int]] = {}
        self.calls: list[str] = []
        self.fail_next = 0

    def add_topic(self, name: str, partitions: int, records: int = 0) -> None:
        self.topics[name] = partitions
        for p in range(partitions):
            self.end[TopicPartition(name, p)] = records

    def produce(self, tp: TopicPartition, n: int) -> None:
        self.end[tp] = self.end.get(tp, 0) + n

    def _maybe_fail(self) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("fake broker down")

    def topic_partition_counts(self) -> dict[str, int]:
        self.calls.append("topics")
        self._maybe_fail()
        return dict(self.topics)

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("earliest")
        return {tp: self.earliest.get(tp, 0) for tp in tps}

    def topic_ids(self, topics: Collection[str]) -> dict[str, str]:
        return {}  # no ids: nothing to compare

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("latest")
        return {tp: self.end.get(tp, 0) for tp in tps}

    def stable_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("stable")
        return {tp: self.end.get(tp, 0) for tp in tps}  # no transactions here

    def offsets_for_timestamp(
        self, tps: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        self.calls.append("timestamp")
        # fake: record i of every partition has timestamp 1000 * i
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            off = -(-timestamp_ms // 1000)
            out[tp] = off if off < self.end.get(tp, 0) else None
        return out

    def committed_offsets(
        self, group_id: str, tps: Collection[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        self.calls.append("committed")
        group = self.committed.get(group_id, {})
        return {tp: group.get(tp) for tp in tps}

    def close(self) -> None:
        pass


def make_source(meta: FakeMetadata, **options: object) -> KafkaSource:
    raw: dict[str, object] = {"properties.bootstrap.servers": "127.0.0.1:1"}
    raw.update(options)
    return KafkaSource(KafkaSourceConfig.from_options(raw), metadata_client_factory=lambda _c: meta)


@dataclass
class Checkpoint:
    checkpoint_id: int
    enumerator_state: bytes
    reader_states: dict[int, list[KafkaPartitionSplit]]
    parallelism: int


@dataclass
class SimReader:
    held: dict[TopicPartition, KafkaPartitionSplit] = field(default_factory=dict)
    uncommitted: list[tuple[TopicPartition, int]] = field(default_factory=list)
    no_more_splits: bool = False


class DuplicateAssignment(AssertionError):
    pass


class SimJob:
    """A job of ``parallelism`` simulated readers around the real coordinator + enumerator."""

    def __init__(self, source: KafkaSource, parallelism: int, meta: FakeMetadata) -> None:
        self.source = source
        self.meta = meta
        self.parallelism = parallelism
        self.coordinator: SourceCoordinator[KafkaPartitionSplit, object] = SourceCoordinator(
            source, parallelism, clock=lambda: 0.0
        )
        self.readers: dict[int, SimReader] = {}
        self.committed: dict[TopicPartition, list[int]] = {}
        self.last_checkpoint: Checkpoint | None = None
        self.next_checkpoint_id = 1
        self.assign_log: list[tuple[int, KafkaPartitionSplit]] = []
        #: offset of the first assignment of each partition (where exactly-once reading starts)
        self.base: dict[TopicPartition, int] = {}
        #: readers that failed and have not registered again yet
        self.down: set[int] = set()

    # --- lifecycle -----------------------------------------------------------------------------
    def start(
        self,
        restore: Checkpoint | None = None,
        register: Collection[int] | None = None,
        reader_states: Mapping[int, list[KafkaPartitionSplit]] | None = None,
    ) -> None:
        """Start (or restore) the coordinator and register readers (default: all)."""
        self.last_checkpoint = restore
        if restore is not None:
            self.next_checkpoint_id = restore.checkpoint_id + 1
            self.coordinator.start(restore.enumerator_state, restore.checkpoint_id)
            if reader_states is None:
                reader_states = redistribute_split_states(
                    restore.reader_states, self.parallelism, restore.parallelism
                )
        else:
            self.coordinator.start()
        self._restored_states = {
            i: list((reader_states or {}).get(i, [])) for i in range(self.parallelism)
        }
        # the restored per-reader state is also what a failed reader comes back with until the
        # first checkpoint of this run completes
        if restore is not None:
            self.last_checkpoint = Checkpoint(
                restore.checkpoint_id,
                restore.enumerator_state,
                self._restored_states,
                self.parallelism,
            )
        for r in sorted(register if register is not None else range(self.parallelism)):
            self.register(r)

    def register(self, r: int) -> None:
        self.down.discard(r)
        reported = self._restored_state(r)
        self.readers[r] = SimReader()
        self.coordinator.register_reader(r, reported_splits=reported)
        self.deliver()

    def _restored_state(self, r: int) -> list[KafkaPartitionSplit]:
        if self.last_checkpoint is None:
            return []
        return list(self.last_checkpoint.reader_states.get(r, []))

    def discover(self) -> None:
        self.coordinator.scheduler.run_all_one_shots()
        self.coordinator.scheduler.run_all_periodic()
        self.deliver()

    def deliver(self) -> None:
        for r, events in self.coordinator.take_all_reader_events().items():
            reader = self.readers.get(r)
            for ev in events:
                assert reader is not None, f"event for unregistered reader {r}"
                if isinstance(ev, AddSplitsEvent):
                    for split in ev.splits:
                        tp = split.topic_partition
                        for other, rd in self.readers.items():
                            if tp in rd.held:
                                raise DuplicateAssignment(
                                    f"{tp} assigned to reader {r} while reader {other} holds it"
                                )
                        reader.held[tp] = split
                        self.assign_log.append((r, split))
                        self.base.setdefault(tp, split.starting_offset)
                elif isinstance(ev, NoMoreSplitsEvent):
                    reader.no_more_splits = True

    def read(self, r: int, max_records: int = 1_000_000) -> int:
        """Reader ``r`` reads what is available of its splits (up to their stop)."""
        reader = self.readers[r]
        n = 0
        for tp, split in list(reader.held.items()):
            end = self.meta.end.get(tp, 0)
            if split.stopping_offset is not None:
                end = min(end, split.stopping_offset)
            take = max(0, min(end - split.starting_offset, max_records))
            for off in range(split.starting_offset, split.starting_offset + take):
                reader.uncommitted.append((tp, off))
            reader.held[tp] = split.with_starting_offset(split.starting_offset + take)
            n += take
        return n

    def read_all(self) -> int:
        return sum(self.read(r) for r in list(self.readers))

    def checkpoint(self) -> Checkpoint:
        cid = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        data = self.coordinator.checkpoint(cid)
        states = {r: sorted(rd.held.values()) for r, rd in self.readers.items()}
        for i in range(self.parallelism):
            # a reader that has not registered yet still has its restored state
            states.setdefault(i, self._restored_state(i))
        self.coordinator.notify_checkpoint_complete(cid)
        for rd in self.readers.values():
            for tp, off in rd.uncommitted:
                self.committed.setdefault(tp, []).append(off)
            rd.uncommitted.clear()
        self.last_checkpoint = Checkpoint(cid, data, states, self.parallelism)
        return self.last_checkpoint

    def fail_reader(self, r: int, reregister: bool = True) -> None:
        """Reader ``r`` fails and restarts from the last completed checkpoint."""
        self.coordinator.reader_failed(r)
        self.readers.pop(r, None)
        if reregister:
            self.register(r)
        else:
            self.down.add(r)

    def bring_up(self) -> None:
        for r in sorted(self.down):
            self.register(r)

    def restart(
        self,
        parallelism: int | None = None,
        source: KafkaSource | None = None,
        register: Collection[int] | None = None,
        reader_states: Mapping[int, list[KafkaPartitionSplit]] | None = None,
    ) -> SimJob:
        """Global restart from the last completed checkpoint (uncommitted reads are lost)."""
        assert self.last_checkpoint is not None, "no checkpoint to restart from"
        self.coordinator.close()
        job = SimJob(source or self.source, parallelism or self.parallelism, self.meta)
        job.committed = self.committed
        job.base = self.base
        job.start(self.last_checkpoint, register=register, reader_states=reader_states)
        return job

    # --- views ---------------------------------------------------------------------------------
    @property
    def enumerator(self) -> KafkaSourceEnumerator:
        enum = self.coordinator.enumerator
        assert isinstance(enum, KafkaSourceEnumerator)
        return enum

    def holdings(self) -> dict[int, set[TopicPartition]]:
        return {r: set(rd.held) for r, rd in sorted(self.readers.items())}

    def held_counts(self) -> list[int]:
        return [
            len(self.readers[r].held) if r in self.readers else 0 for r in range(self.parallelism)
        ]

    def position(self, tp: TopicPartition) -> int | None:
        for rd in self.readers.values():
            if tp in rd.held:
                return rd.held[tp].starting_offset
        for splits in self.enumerator.pending_splits().values():
            for s in splits:
                if s.topic_partition == tp:
                    return s.starting_offset
        for r in self.down:
            for s in self._restored_state(r):
                if s.topic_partition == tp:
                    return s.starting_offset
        return None

    def check_invariants(self) -> None:
        """Every known split is held by exactly one reader or pending; positions contiguous."""
        known = set(self.enumerator.global_assignment)
        seen: dict[TopicPartition, str] = {}
        for r, rd in self.readers.items():
            for tp in rd.held:
                assert tp not in seen, f"{tp} held by reader {r} and {seen[tp]}"
                seen[tp] = f"reader {r}"
        for r, splits in self.enumerator.pending_splits().items():
            for s in splits:
                tp = s.topic_partition
                assert tp not in seen, f"{tp} pending for {r} and held by {seen[tp]}"
                seen[tp] = f"pending {r}"
        owners = self.enumerator.global_assignment
        for r in sorted(self.down):
            # a failed reader comes back with its checkpointed splits; the enumerator keeps
            # them for it (they are neither pending nor moved to another reader meanwhile)
            for s in self._restored_state(r):
                tp = s.topic_partition
                if tp in seen or tp not in owners:
                    continue
                assert owners[tp] == r, f"{tp} of down reader {r} now owned by {owners[tp]}"
                seen[tp] = f"down reader {r}"
        awaiting = self.enumerator.awaiting_report
        assert not awaiting, f"splits awaiting a report after all readers registered: {awaiting}"
        assert set(seen) == known, (
            f"known but nowhere: {sorted(known - set(seen))}; "
            f"held but unknown: {sorted(set(seen) - known)}"
        )
        # no offset goes backwards or skips: position = committed + uncommitted reads of holder
        for tp in known:
            pos = self.position(tp)
            committed = self.committed.get(tp, [])
            if tp not in self.base:
                continue  # never assigned yet: still at its initial offset
            expected = self.base[tp] + len(committed)
            for rd in self.readers.values():
                expected += sum(1 for t, _ in rd.uncommitted if t == tp)
            assert pos == expected, f"{tp}: position {pos}, expected {expected}"

    def check_exactly_once(self) -> None:
        for tp, offs in self.committed.items():
            base = self.base[tp]
            assert offs == list(range(base, base + len(offs))), f"{tp}: committed {offs[:20]}..."
