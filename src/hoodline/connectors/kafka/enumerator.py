"""The Kafka split enumerator with split reassignment on recovery (FLIP-537).

Every known partition split has exactly one owner reader in the *global assignment* and is in
exactly one place:

* **pending**: the enumerator holds the split (with its offset) until the owner reader is
  registered, then assigns it. New splits from discovery, splits added back after a reader failure
  and splits reported by a reader but owned by another one wait here. Pending splits are part of the
  checkpointed state, so a split reported at registration and checkpointed before it was assigned
  is not lost (the seed's split-loss scenario).
* **assigned**: a live reader holds it; its offset moves on in that reader's state.
* **awaiting report** (only after a restore): the split's offset is in some reader's restored state;
  the reader reports it when it registers.

Reader registration (``add_reader``) handles the reader's reported splits:

1. splits of topics/partitions that are no longer subscribed are dropped;
2. a split whose owner in the global assignment is this reader goes to this reader (deduplicated
   with a copy that was added back);
3. a split owned by another reader is ignored when that owner already holds it (pending or
   assigned). When nobody holds it yet (awaiting report, e.g. after the parallelism changed and
   state was redistributed) its copy goes to pending for the owner, *provisionally* while the
   owner has not registered: the owner's own report replaces it (a non-owner's copy may be stale),
   and it becomes definitive when the owner registers without reporting the split;
4. then all pending splits of the reader are assigned to it.

Once every reader registered, a known split that no reader reported is finished when the source is
bounded (finished bounded splits leave reader state). An unbounded split never finishes, so then
its checkpointed position is lost and the enumerator fails naming it rather than dropping it.

``add_splits_back`` returns splits to pending for their previous reader. With the same parallelism
a restart keeps every owner; with a changed parallelism a completely new global assignment is made
by the configured assigner. A known split is never initialized again: its offset comes from the
reader state or the enumerator's pending splits, never from the starting-offsets option.
Partitions discovered after the first discovery start at their earliest offset. The splits of a
topic that a ``topic-pattern`` matched and that was deleted are forgotten when the reader that
held them says so (:class:`~hoodline.connectors.kafka.events.PartitionsDeletedEvent`); a topic
created again under the name is then discovered as a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from hoodline.connectors.kafka.admin import KafkaMetadataClient
from hoodline.connectors.kafka.assigners import SplitAssigner, create_assigner
from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.events import PartitionsDeletedEvent
from hoodline.connectors.kafka.offsets import StartingOffsets
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import (
    KafkaBrokerUnavailableError,
    KafkaSourceError,
    KafkaTopicNotFoundError,
)
from hoodline.source.api import (
    SourceEvent,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
)

log = logging.getLogger(__name__)

#: Consecutive failed periodic discoveries tolerated (logged) before the enumerator fails.
MAX_DISCOVERY_FAILURES = 3


@dataclass(frozen=True)
class DiscoveryResult:
    """What one discovery found: new splits (with resolved offsets) and whether it was the first."""

    new_splits: tuple[KafkaPartitionSplit, ...]
    subscribed: frozenset[TopicPartition]
    initial: bool


class KafkaSourceEnumerator(SplitEnumerator[KafkaPartitionSplit, KafkaSourceEnumState]):
    """Discovers partitions, owns the global split assignment and assigns splits (see module)."""

    def __init__(
        self,
        config: KafkaSourceConfig,
        context: SplitEnumeratorContext[KafkaPartitionSplit],
        client_factory: Callable[[], KafkaMetadataClient],
        state: KafkaSourceEnumState | None = None,
    ) -> None:
        self._config = config
        self._context = context
        self._client_factory = client_factory
        self._client: KafkaMetadataClient | None = None
        self._assigner: SplitAssigner = create_assigner(config.split_assigner)
        self._subscription = config.subscription

        state = state or KafkaSourceEnumState()
        self._restored = bool(state.global_assignment or state.pending)
        self._restored_parallelism = state.parallelism
        self._owner: dict[TopicPartition, int] = dict(state.global_assignment)
        self._pending: dict[int, dict[TopicPartition, KafkaPartitionSplit]] = {}
        for reader, splits in state.pending.items():
            for split in splits:
                self._pending.setdefault(reader, {})[split.topic_partition] = split
                self._owner.setdefault(split.topic_partition, reader)
        pending_tps = {tp for bucket in self._pending.values() for tp in bucket}
        self._assigned: set[TopicPartition] = set()
        self._awaiting: set[TopicPartition] = set(self._owner) - pending_tps
        #: Pending splits that came from a non-owner's report while their owner had not registered
        #: yet: the owner's own report replaces them.
        self._provisional: set[TopicPartition] = set()
        #: Known splits held nowhere: not reported by any reader after all registered (finished
        #: bounded splits leave reader state). Kept known so they are never read again.
        self._finished: set[TopicPartition] = set()
        self._initial_discovery_finished = state.initial_discovery_finished
        self._unassigned_initial: set[TopicPartition] = set(state.unassigned_initial_partitions)
        self._known_snapshot: frozenset[TopicPartition] = frozenset(self._owner)
        self._registered_since_start: set[int] = set()
        self._no_more_splits_sent: set[int] = set()
        self._discovery_failures = 0
        self._started = False
        #: whether the first discovery of a restored run looked for the topics that joined
        self._joined_checked = False

    # --- introspection (tests, metrics) ------------------------------------------------------
    @property
    def global_assignment(self) -> dict[TopicPartition, int]:
        return dict(self._owner)

    def pending_splits(self) -> dict[int, list[KafkaPartitionSplit]]:
        return {r: sorted(b.values()) for r, b in sorted(self._pending.items()) if b}

    @property
    def awaiting_report(self) -> frozenset[TopicPartition]:
        return frozenset(self._awaiting)

    def reader_loads(self) -> list[int]:
        loads = [0] * self._context.parallelism
        for owner in self._owner.values():
            if 0 <= owner < len(loads):
                loads[owner] += 1
        return loads

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        parallelism = self._context.parallelism
        if self._restored:
            self._drop_unsubscribed(list(self._owner), reason="no longer subscribed at restart")
            if self._restored_parallelism != parallelism or any(
                not 0 <= o < parallelism for o in self._owner.values()
            ):
                self._rebalance(parallelism)
        self._known_snapshot = frozenset(self._owner)
        bounded = self._config.bounded
        interval = self._config.discovery_interval_s
        if bounded or interval <= 0:
            self._context.call_async(self._discover, self._on_discovery)
        else:
            self._context.call_async(self._discover, self._on_discovery, 0.0, interval)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _rebalance(self, parallelism: int) -> None:
        """A completely new global assignment (the parallelism changed or owners are unknown)."""
        new_owner = self._assigner.assign_all(self._owner, parallelism)
        log.info(
            "Kafka enumerator: parallelism %s -> %s, new global assignment of %d splits",
            self._restored_parallelism,
            parallelism,
            len(new_owner),
        )
        pending = [s for bucket in self._pending.values() for s in bucket.values()]
        self._owner = new_owner
        self._pending = {}
        for split in pending:
            self._put_pending(split)

    # --- discovery ---------------------------------------------------------------------------
    def _metadata(self) -> KafkaMetadataClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _discover(self) -> DiscoveryResult:
        """Runs off the coordinator thread: find partitions and resolve offsets for new ones."""
        client = self._metadata()
        initial = not self._initial_discovery_finished
        counts = client.topic_partition_counts()
        subscribed = self._subscription.select(
            counts, strict=initial, brokers=self._config.bootstrap_servers
        )
        if not initial and not self._joined_checked:
            self._joined_checked = True
            # a topic that joined the list at this restart must exist, as a new table's must
            # (a misspelt one was read as nothing, without a word: subscription review)
            # (the topics it held positions of are looked after where rounds are planned)
            self._subscription.check_exists(
                counts, brokers=self._config.bootstrap_servers,
                held=frozenset(tp.topic for tp in self._known_snapshot))
        if initial and not subscribed and self._subscription.pattern is not None:
            log.warning(
                "topic-pattern %r matches no topic on brokers %s yet; topics created later are "
                "read once partition discovery finds them (every %gs, option "
                "'scan.topic-partition-discovery.interval')",
                self._subscription.pattern,
                self._config.bootstrap_servers,
                self._config.discovery_interval_s,
            )
        known = self._known_snapshot
        new = sorted(tp for tp in subscribed if tp not in known)
        if not new:
            return DiscoveryResult((), frozenset(subscribed), initial)
        # The starting-offsets option applies to the first discovery only (and to partitions that
        # an old state found in it but never assigned); later partitions start at earliest.
        with_initializer = [tp for tp in new if initial or tp in self._unassigned_initial]
        initialized = set(with_initializer)
        from_earliest = [tp for tp in new if tp not in initialized]
        starts = self._config.starting_offsets.resolve(
            with_initializer, client, self._config.group_id
        )
        starts.update(StartingOffsets.earliest().resolve(from_earliest, client, None))
        stops = self._config.stopping_offsets.resolve(new, client)
        splits = tuple(
            KafkaPartitionSplit(tp.topic, tp.partition, starts[tp], stops[tp]) for tp in new
        )
        return DiscoveryResult(splits, frozenset(subscribed), initial)

    def _on_discovery(self, result: DiscoveryResult | None, error: BaseException | None) -> None:
        if error is not None or result is None:
            self._discovery_failures += 1
            if not self._initial_discovery_finished:
                # Until a first discovery succeeds every plan tries again (a runtime that retries
                # the round must not see an empty source), and fails the same way.
                self._context.call_async(self._discover, self._on_discovery)
                if error is not None and getattr(error, "retryable", True) is False:
                    raise error  # its message names the servers/topics and what to do
                raise KafkaSourceError(
                    f"first partition discovery of {self._subscription.describe()} failed: {error}"
                ) from error
            if isinstance(error, KafkaBrokerUnavailableError | KafkaTopicNotFoundError):
                # the client already retried for 'scan.broker-unavailable.timeout'; a topic
                # that joined the list and does not exist will not appear by retrying
                raise error
            log.warning(
                "Kafka partition discovery failed (%d in a row): %s",
                self._discovery_failures,
                error,
            )
            if self._discovery_failures >= MAX_DISCOVERY_FAILURES:
                raise KafkaSourceError(
                    f"partition discovery of {self._subscription.describe()} failed "
                    f"{self._discovery_failures} times in a row; last error: {error}"
                ) from error
            return
        self._discovery_failures = 0
        added: list[KafkaPartitionSplit] = []
        loads = self.reader_loads()
        for split in result.new_splits:
            tp = split.topic_partition
            if tp in self._owner:
                continue  # became known meanwhile (reported by a reader)
            owner = self._assigner.owner(tp, self._context.parallelism, loads)
            self._owner[tp] = owner
            loads[owner] += 1
            self._put_pending(split)
            self._unassigned_initial.discard(tp)
            added.append(split)
        if added and not result.initial:
            # partitions added to a topic (or a topic that joined the list): a data engineer
            # wants to see that they are read, and from where (reads go on meanwhile)
            log.warning("found %d new Kafka partition(s), read from now on: %s", len(added),
                        _describe_starts(added))
        elif added:
            log.info("Kafka enumerator discovered %d partition splits", len(added))
        self._initial_discovery_finished = True
        self._known_snapshot = frozenset(self._owner)
        self._assign_pending()

    # --- registration and failover ------------------------------------------------------------
    def add_reader(self, subtask_id: int) -> None:
        info = self._context.registered_readers().get(subtask_id)
        reported: Sequence[KafkaPartitionSplit] = info.reported_splits if info else ()
        self._registered_since_start.add(subtask_id)
        self._no_more_splits_sent.discard(subtask_id)
        kept = ignored = 0
        for split in reported:
            tp = split.topic_partition
            if not self._subscription.matches(tp):
                self._drop_unsubscribed([tp], reason=f"reported by reader {subtask_id}")
                continue
            owner = self._owner.get(tp)
            if owner is None:
                # Unknown to the enumerator (e.g. its state predates the reader's): adopt it.
                self._owner[tp] = self._assigner.owner(
                    tp, self._context.parallelism, self.reader_loads()
                )
                self._put_pending(split)
                kept += 1
            elif owner == subtask_id:
                self._awaiting.discard(tp)
                self._assigned.discard(tp)
                self._finished.discard(tp)
                bucket = self._pending.setdefault(subtask_id, {})
                if tp in self._provisional:
                    self._provisional.discard(tp)
                    if bucket.get(tp) != split:
                        log.info(
                            "reader %d (owner) reported %s; it replaces %s reported by a "
                            "non-owner reader",
                            subtask_id,
                            split,
                            bucket.get(tp),
                        )
                    bucket[tp] = split
                elif tp not in bucket:
                    bucket[tp] = split
                elif bucket[tp] != split:
                    log.debug("reader %d re-reported %s; keeping %s", subtask_id, split, bucket[tp])
                kept += 1
            elif tp in self._awaiting:
                self._awaiting.discard(tp)
                self._put_pending(split)
                if owner not in self._context.registered_readers():
                    self._provisional.add(tp)
                kept += 1
            else:
                ignored += 1
        if reported:
            log.info(
                "reader %d registered with %d splits: %d kept, %d owned by other readers",
                subtask_id,
                len(reported),
                kept,
                ignored,
            )
        # the owner has registered: copies of its splits that it did not report are definitive
        self._provisional = {tp for tp in self._provisional if self._owner.get(tp) != subtask_id}
        self._known_snapshot = frozenset(self._owner)
        self._settle_awaiting()
        self._assign_pending()

    def add_splits_back(self, splits: Sequence[KafkaPartitionSplit], subtask_id: int) -> None:
        for split in splits:
            tp = split.topic_partition
            if not self._subscription.matches(tp):
                self._drop_unsubscribed([tp], reason="added back")
                continue
            self._assigned.discard(tp)
            self._awaiting.discard(tp)
            self._finished.discard(tp)
            self._provisional.discard(tp)
            self._remove_pending(tp)
            owner = subtask_id if 0 <= subtask_id < self._context.parallelism else None
            if owner is None:
                owner = self._assigner.owner(tp, self._context.parallelism, self.reader_loads())
            self._owner[tp] = owner
            self._pending.setdefault(owner, {})[tp] = split
        self._no_more_splits_sent.discard(subtask_id)
        self._known_snapshot = frozenset(self._owner)
        self._assign_pending()

    def handle_split_request(self, subtask_id: int, requester_location: str | None) -> None:
        # Push-based: splits go to their owner as soon as it is registered.
        self._assign_pending()

    def handle_source_event(self, subtask_id: int, event: SourceEvent) -> None:
        if not isinstance(event, PartitionsDeletedEvent):
            log.warning("Kafka enumerator ignores event %r from reader %d", event, subtask_id)
            return
        self._forget(event.partitions)
        self._known_snapshot = frozenset(self._owner)
        log.info("Kafka enumerator forgot %d splits of deleted topics: %s",
                 len(event.partitions), ", ".join(map(str, sorted(event.partitions))))

    # --- checkpoints --------------------------------------------------------------------------
    def snapshot_state(self, checkpoint_id: int) -> KafkaSourceEnumState:
        return KafkaSourceEnumState(
            global_assignment=dict(self._owner),
            pending={r: tuple(sorted(b.values())) for r, b in self._pending.items() if b},
            initial_discovery_finished=self._initial_discovery_finished,
            parallelism=self._context.parallelism,
            unassigned_initial_partitions=frozenset(self._unassigned_initial),
        )

    # --- internals ----------------------------------------------------------------------------
    def _put_pending(self, split: KafkaPartitionSplit) -> None:
        tp = split.topic_partition
        owner = self._owner[tp]
        self._remove_pending(tp)
        self._pending.setdefault(owner, {})[tp] = split

    def _remove_pending(self, tp: TopicPartition) -> None:
        for bucket in self._pending.values():
            bucket.pop(tp, None)

    def _forget(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._owner.pop(tp, None)
            self._remove_pending(tp)
            self._assigned.discard(tp)
            self._awaiting.discard(tp)
            self._finished.discard(tp)
            self._provisional.discard(tp)
            self._unassigned_initial.discard(tp)

    def _drop_unsubscribed(self, tps: Iterable[TopicPartition], reason: str) -> None:
        dropped = [tp for tp in tps if not self._subscription.matches(tp)]
        self._forget(dropped)
        if dropped:
            log.info(
                "dropping %d splits of partitions no longer subscribed (%s): %s",
                len(dropped),
                reason,
                ", ".join(map(str, sorted(dropped))),
            )

    def _settle_awaiting(self) -> None:
        """Once every reader registered, unreported splits are held nowhere: finished when the
        source is bounded; lost (an error naming them) when it is unbounded."""
        if not self._awaiting:
            return
        if not set(range(self._context.parallelism)) <= self._registered_since_start:
            return
        if not self._config.bounded:
            lost = ", ".join(
                f"{tp} (owner reader {self._owner.get(tp)})" for tp in sorted(self._awaiting)
            )
            raise KafkaSourceError(
                f"Kafka split(s) {lost} are in the checkpointed global assignment but no reader "
                f"reported them after all {self._context.parallelism} readers registered, so "
                f"their read positions are lost (an unbounded split never finishes). Not guessing "
                f"a position, which would skip or re-read records: restore from a checkpoint "
                f"whose reader states hold these splits, or remove the partitions from the "
                f"subscription to drop them on purpose."
            )
        # a restart of a bounded source whose partitions an earlier run read to its end: a
        # second run read nothing of them and ended as if nothing was new (review)
        log.warning(
            "partition(s) %s were read to their end by an earlier bounded run "
            "(scan.bounded.mode) and are not read again: a bounded run keeps no position of "
            "the partitions it finished. For runs that each take in what is new, use "
            "scan.bounded.mode = 'unbounded' with `hoodline run --once` (it stops at what the "
            "topics held when it started, and the next run goes on from there); to read such a "
            "partition again, write to a new table",
            ", ".join(map(str, sorted(self._awaiting))),
        )
        self._finished |= self._awaiting
        self._awaiting.clear()

    def _assign_pending(self) -> None:
        registered = self._context.registered_readers()
        assignment: dict[int, list[KafkaPartitionSplit]] = {}
        for reader, bucket in self._pending.items():
            if reader in registered and bucket:
                assignment[reader] = sorted(bucket.values())
        if assignment:
            self._context.assign_splits(SplitsAssignment(assignment))
            for reader, splits in assignment.items():
                for split in splits:
                    self._pending[reader].pop(split.topic_partition, None)
                    self._assigned.add(split.topic_partition)
        self._signal_no_more_splits(registered)

    def _signal_no_more_splits(self, registered: Collection[int]) -> None:
        if not self._config.bounded or not self._initial_discovery_finished:
            return
        waiting_owners = {self._owner[tp] for tp in self._awaiting if tp in self._owner}
        for reader in registered:
            if reader in self._no_more_splits_sent or reader in waiting_owners:
                continue
            if self._pending.get(reader):
                continue
            self._context.signal_no_more_splits(reader)
            self._no_more_splits_sent.add(reader)


#: partitions named one by one in the new-partitions warning; more are counted
_NAMED_NEW_PARTITIONS = 10


def _describe_starts(splits: Sequence[KafkaPartitionSplit]) -> str:
    """``t-3 from offset 0, t-4 from offset 0 (and 2 more)``: new partitions and where each
    starts (later partitions start at their earliest offset)."""
    named = ", ".join(f"{s.topic_partition} from offset {s.starting_offset}"
                      for s in sorted(splits)[:_NAMED_NEW_PARTITIONS])
    more = len(splits) - _NAMED_NEW_PARTITIONS
    return named + (f" (and {more} more)" if more > 0 else "")
