"""A reference split enumerator that follows FLIP-537 (split reassignment on recovery).

It is deliberately small and generic over the split type, and serves as the model for connector
enumerators and as the enumerator of the property test:

* every known split has an *owner* subtask (global assignment). New splits go to the least
  loaded subtask; owners are sticky until the parallelism changes, then all splits are dealt
  round-robin (sorted by id) over the new subtasks.
* splits waiting for their owner to be registered are *pending*, per owner, and part of the
  checkpointed state (so splits reported at registration but not yet assigned are never lost).
* after a restore, splits not pending are *awaiting report*: the reader holding them reports them
  at registration and they go to their (possibly new) owner. A split re-reported by a restarted
  reader that no longer owns it is ignored (it moved to another reader).
* ``add_splits_back`` puts splits back as pending for their owner.

Without the FLIP-537 marker (``reassign_on_recovery=False``) restored readers keep their splits and
report nothing; only added-back and new splits are assigned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from hoodline.errors import SourceError
from hoodline.source.api import (
    SourceSplit,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
)
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    read_versioned,
    unsupported_version,
    write_versioned,
)

__all__ = ["ReferenceEnumState", "ReferenceEnumStateSerializer", "ReferenceEnumerator"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


@dataclass
class ReferenceEnumState(Generic[SplitT]):
    """Checkpointed state of :class:`ReferenceEnumerator`."""

    parallelism: int
    owners: dict[str, int] = field(default_factory=dict)
    pending: dict[int, dict[str, SplitT]] = field(default_factory=dict)
    awaiting_report: set[str] = field(default_factory=set)
    discovery_done: bool = False

    def pending_ids(self) -> set[str]:
        return {sid for per_owner in self.pending.values() for sid in per_owner}


class ReferenceEnumStateSerializer(VersionedSerializer[ReferenceEnumState[SplitT]]):
    """Version 1: parallelism, owners, pending splits without owner.
    Version 2: adds pending-per-owner, awaiting-report ids and the discovery-done flag.
    Splits are embedded as versioned split bytes, so split formats evolve independently."""

    def __init__(self, split_serializer: VersionedSerializer[SplitT]) -> None:
        self._splits = split_serializer

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: ReferenceEnumState[SplitT]) -> bytes:
        w = BinaryWriter().write_int(obj.parallelism).write_bool(obj.discovery_done)
        w.write_int(len(obj.owners))
        for sid, owner in sorted(obj.owners.items()):
            w.write_str(sid).write_int(owner)
        pending = [(o, s) for o in sorted(obj.pending) for s in obj.pending[o].values()]
        w.write_int(len(pending))
        for owner, split in pending:
            w.write_int(owner).write_bytes(write_versioned(self._splits, split))
        w.write_str_list(sorted(obj.awaiting_report))
        return w.to_bytes()

    def deserialize(self, version: int, data: bytes) -> ReferenceEnumState[SplitT]:
        r = BinaryReader(data, "reference enumerator state")
        if version == 1:
            parallelism = r.read_int()
            owners = {r.read_str(): r.read_int() for _ in range(r.read_int())}
            state: ReferenceEnumState[SplitT] = ReferenceEnumState(parallelism, owners)
            for _ in range(r.read_int()):
                split = read_versioned(self._splits, r.read_bytes())
                owner = owners.setdefault(split.split_id, 0)
                state.pending.setdefault(owner, {})[split.split_id] = split
        elif version == 2:
            parallelism = r.read_int()
            done = r.read_bool()
            owners = {r.read_str(): r.read_int() for _ in range(r.read_int())}
            state = ReferenceEnumState(parallelism, owners, discovery_done=done)
            for _ in range(r.read_int()):
                owner = r.read_int()
                split = read_versioned(self._splits, r.read_bytes())
                state.pending.setdefault(owner, {})[split.split_id] = split
            state.awaiting_report = set(r.read_str_list())
        else:
            raise unsupported_version(self, version)
        r.expect_end()
        return state


class ReferenceEnumerator(SplitEnumerator[SplitT, ReferenceEnumState[SplitT]]):
    """See the module documentation."""

    def __init__(
        self,
        context: SplitEnumeratorContext[SplitT],
        discover: Callable[[], Sequence[SplitT]],
        *,
        discovery_interval: float | None = None,
        bounded: bool = False,
        reassign_on_recovery: bool = True,
        state: ReferenceEnumState[SplitT] | None = None,
    ) -> None:
        self._ctx = context
        self._discover = discover
        self._interval = discovery_interval
        self._bounded = bounded
        self._reassign = reassign_on_recovery
        self._signalled: set[int] = set()
        p = context.parallelism
        if state is None:
            self._owners: dict[str, int] = {}
            self._pending: dict[int, dict[str, SplitT]] = {}
            self._awaiting: set[str] = set()
            self._discovery_done = False
            return
        self._owners = dict(state.owners)
        self._pending = {o: dict(s) for o, s in state.pending.items() if s}
        self._discovery_done = state.discovery_done
        self._awaiting = set()
        if self._reassign:
            self._awaiting = (set(self._owners) - state.pending_ids()) | set(state.awaiting_report)
        if state.parallelism != p or any(o >= p for o in self._owners.values()):
            self._rebalance()

    # -- helpers --------------------------------------------------------------------------------

    def _rebalance(self) -> None:
        """New parallelism: deal every known split round-robin (by id) over all subtasks."""
        p = self._ctx.parallelism
        self._owners = {sid: i % p for i, sid in enumerate(sorted(self._owners))}
        old = [s for per_owner in self._pending.values() for s in per_owner.values()]
        self._pending = {}
        for split in old:
            self._add_pending(self._owners[split.split_id], split)

    def _least_loaded(self) -> int:
        counts = [0] * self._ctx.parallelism
        for owner in self._owners.values():
            if owner < len(counts):
                counts[owner] += 1
        return counts.index(min(counts))

    def _add_pending(self, owner: int, split: SplitT) -> None:
        self._pending.setdefault(owner, {})[split.split_id] = split

    def _assign_pending(self) -> None:
        readers = self._ctx.registered_readers()
        for subtask in sorted(readers):
            splits = self._pending.pop(subtask, None)
            if splits:
                self._ctx.assign_splits(SplitsAssignment({subtask: list(splits.values())}))
            if (
                self._bounded
                and self._discovery_done
                and not self._awaiting
                and subtask not in self._signalled
            ):
                self._ctx.signal_no_more_splits(subtask)
                self._signalled.add(subtask)

    def _on_discovered(self, splits: Sequence[SplitT] | None, error: BaseException | None) -> None:
        if error is not None:
            raise SourceError(f"split discovery failed: {type(error).__name__}: {error}") from error
        for split in splits or ():
            if split.split_id in self._owners:
                continue
            owner = self._least_loaded()
            self._owners[split.split_id] = owner
            self._add_pending(owner, split)
        if self._bounded:
            self._discovery_done = True
        self._assign_pending()

    # -- SplitEnumerator ------------------------------------------------------------------------

    def start(self) -> None:
        if self._interval is None:
            self._ctx.call_async(self._discover, self._on_discovered)
        else:
            self._ctx.call_async(self._discover, self._on_discovered, 0.0, self._interval)

    def add_reader(self, subtask_id: int) -> None:
        self._signalled.discard(subtask_id)
        if self._reassign:
            info = self._ctx.registered_readers()[subtask_id]
            for split in info.reported_splits:
                sid = split.split_id
                if sid in self._awaiting:
                    self._awaiting.discard(sid)
                    self._add_pending(self._owners[sid], split)
                elif sid not in self._owners:
                    owner = self._least_loaded()
                    self._owners[sid] = owner
                    self._add_pending(owner, split)
                elif self._owners[sid] == subtask_id:
                    self._add_pending(subtask_id, split)
                # else: the split moved to another reader since; ignore the stale report
        self._assign_pending()

    def add_splits_back(self, splits: Sequence[SplitT], subtask_id: int) -> None:
        self._signalled.discard(subtask_id)
        for split in splits:
            owner = self._owners.setdefault(split.split_id, subtask_id)
            self._add_pending(owner, split)
        self._assign_pending()

    def snapshot_state(self, checkpoint_id: int) -> ReferenceEnumState[SplitT]:
        return ReferenceEnumState(
            parallelism=self._ctx.parallelism,
            owners=dict(self._owners),
            pending={o: dict(s) for o, s in self._pending.items() if s},
            awaiting_report=set(self._awaiting),
            discovery_done=self._discovery_done,
        )

    # -- introspection for tests ----------------------------------------------------------------

    def pending_splits(self) -> dict[int, list[SplitT]]:
        """Splits waiting for their owner, per owner."""
        return {o: list(s.values()) for o, s in self._pending.items() if s}

    def owners(self) -> dict[str, int]:
        """The global assignment: split id -> owner subtask."""
        return dict(self._owners)

    def awaiting_report(self) -> set[str]:
        """Restored splits whose holder has not reported them yet."""
        return set(self._awaiting)
