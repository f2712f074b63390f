"""The split-based source API (FLIP-27) with the recovery contract of FLIP-537.

A :class:`Source` is a factory for the two halves of a source:

* the :class:`SplitEnumerator` runs once per job on the coordinator side (the Spark driver). It
  discovers :class:`SourceSplit` s and assigns them to readers through its
  :class:`SplitEnumeratorContext`; its state is checkpointed (serialized with the source's
  enumerator checkpoint serializer).
* a :class:`SourceReader` runs once per reader subtask. It reads the splits it is given and emits
  the records as :class:`pyarrow.RecordBatch` es into a :class:`ReaderOutput`; its checkpointed
  state is the list of its splits with their current positions
  (:meth:`SourceReader.snapshot_state`).

Recovery contract (FLIP-537): a source that mixes in :class:`SupportsSplitReassignmentOnRecovery`
has restored readers *report* their splits when they register (see
:attr:`ReaderInfo.reported_splits`); they do not read them until the enumerator assigns them again.
Without the marker a restored reader keeps its restored splits and registers with no reported
splits. In both cases splits assigned to a reader after the last completed checkpoint are given back
with :meth:`SplitEnumerator.add_splits_back` when that reader fails.

Everything here is engine-agnostic: the Spark runtime drives these objects in checkpoint rounds.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import pyarrow as pa

if TYPE_CHECKING:
    from hoodline.source.serialization import VersionedSerializer

__all__ = [
    "Boundedness",
    "CheckpointT",
    "InputStatus",
    "ReaderInfo",
    "ReaderOutput",
    "Source",
    "SourceEvent",
    "SourceReader",
    "SourceReaderContext",
    "SourceSplit",
    "SplitEnumerator",
    "SplitEnumeratorContext",
    "SplitT",
    "SplitsAssignment",
    "SupportsRecordLimit",
    "SupportsSplitReassignmentOnRecovery",
    "supports_reassignment_on_recovery",
]


class Boundedness(enum.Enum):
    """Whether a source ends (``BOUNDED``: the data available now) or runs forever."""

    BOUNDED = "bounded"
    CONTINUOUS_UNBOUNDED = "continuous_unbounded"


@runtime_checkable
class SourceSplit(Protocol):
    """A unit of work of a source (a file, a byte range, a Kafka partition ...).

    Splits are immutable values. ``split_id`` identifies the split across its whole life (the same
    split with a later position has the same id). A plain frozen dataclass with a ``split_id``
    field or property satisfies this protocol.
    """

    @property
    def split_id(self) -> str:
        """Stable identifier of this split."""
        ...


SplitT = TypeVar("SplitT", bound=SourceSplit)
CheckpointT = TypeVar("CheckpointT")
_T = TypeVar("_T")


class SourceEvent:
    """Base class of custom events between a source's enumerator and its readers.

    Subclass it (a frozen dataclass is a good fit). Events travel between the driver and tasks, so
    they must be picklable.
    """


@dataclass(frozen=True)
class ReaderInfo(Generic[SplitT]):
    """What the coordinator knows about a registered reader.

    ``reported_splits`` are the splits a restored reader reported at registration. They are only
    non-empty for sources with :class:`SupportsSplitReassignmentOnRecovery`; the enumerator then
    decides what to do with them in :meth:`SplitEnumerator.add_reader`.
    """

    subtask_id: int
    location: str = ""
    reported_splits: tuple[SplitT, ...] = ()


@dataclass(frozen=True)
class SplitsAssignment(Generic[SplitT]):
    """An incremental assignment: the splits in it are *added* to what each subtask already has."""

    assignment: Mapping[int, Sequence[SplitT]] = field(default_factory=dict)

    @classmethod
    def single(cls, split: SplitT, subtask_id: int) -> SplitsAssignment[SplitT]:
        """An assignment of one split to one subtask."""
        return cls({subtask_id: [split]})

    def is_empty(self) -> bool:
        return not any(self.assignment.values())


class InputStatus(enum.Enum):
    """What a :meth:`SourceReader.poll_next` call left behind."""

    #: More records can be polled right away.
    MORE_AVAILABLE = "more_available"
    #: Nothing to read now; wait with :meth:`SourceReader.wait_available` and poll again.
    NOTHING_AVAILABLE = "nothing_available"
    #: The reader has no more splits and will receive none: its input has ended.
    END_OF_INPUT = "end_of_input"


class ReaderOutput(ABC):
    """Where a reader emits its record batches."""

    @abstractmethod
    def emit(self, batch: pa.RecordBatch, split_id: str | None = None) -> None:
        """Accept one batch; ``split_id`` names the split it came from when known."""


class SplitEnumeratorContext(ABC, Generic[SplitT]):
    """The enumerator's view of the runtime.

    It tells the enumerator the parallelism and the registered readers, accepts its assignments,
    forwards events to readers and runs its async work (a managed threading model, so enumerators
    need no threads of their own). All enumerator methods and async *handlers* are called from a
    single coordinator thread; only the *callables* passed to :meth:`call_async` may run elsewhere.
    """

    @property
    @abstractmethod
    def parallelism(self) -> int:
        """Number of reader subtasks."""

    @abstractmethod
    def registered_readers(self) -> Mapping[int, ReaderInfo[SplitT]]:
        """Currently registered readers by subtask id."""

    @abstractmethod
    def assign_splits(self, assignment: SplitsAssignment[SplitT]) -> None:
        """Add splits to readers. Every target subtask must be registered."""

    def assign_split(self, split: SplitT, subtask_id: int) -> None:
        """Add one split to one reader."""
        self.assign_splits(SplitsAssignment.single(split, subtask_id))

    @abstractmethod
    def signal_no_more_splits(self, subtask_id: int) -> None:
        """Tell a reader it will get no further splits (bounded sources)."""

    @abstractmethod
    def send_event_to_reader(self, subtask_id: int, event: SourceEvent) -> None:
        """Send a custom event to one reader."""

    @abstractmethod
    def call_async(
        self,
        callable_: Callable[[], _T],
        handler: Callable[[_T | None, BaseException | None], None],
        initial_delay: float = 0.0,
        period: float | None = None,
    ) -> None:
        """Run ``callable_`` (maybe off the coordinator thread) and give its result to ``handler``.

        ``initial_delay`` and ``period`` are in seconds. With ``period`` set the call repeats every
        ``period`` seconds (e.g. split discovery); otherwise it runs once. The handler runs on the
        coordinator thread with ``(result, None)`` or ``(None, error)``; an error raised by the
        handler fails the coordinator.
        """


class SplitEnumerator(ABC, Generic[SplitT, CheckpointT]):
    """Discovers splits and assigns them to readers; the source of truth for assignment."""

    def start(self) -> None:
        """Start the enumerator (e.g. schedule periodic discovery). Default: nothing."""

    def handle_split_request(self, subtask_id: int, requester_location: str | None) -> None:
        """A reader asked for a split (pull-based assignment). Default: ignore."""

    def handle_source_event(self, subtask_id: int, event: SourceEvent) -> None:
        """A custom event from a reader. Default: ignore."""

    @abstractmethod
    def add_splits_back(self, splits: Sequence[SplitT], subtask_id: int) -> None:
        """Take back splits assigned to a failed reader after the last completed checkpoint.

        The splits go back to the enumerator's unassigned / pending splits.
        """

    @abstractmethod
    def add_reader(self, subtask_id: int) -> None:
        """A reader registered. Its :class:`ReaderInfo` (with reported splits) is in the context."""

    @abstractmethod
    def snapshot_state(self, checkpoint_id: int) -> CheckpointT:
        """The enumerator's state for checkpoint ``checkpoint_id``."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable. Default: nothing."""

    def close(self) -> None:
        """Release resources. Default: nothing."""


class SourceReaderContext(ABC):
    """The reader's view of the runtime."""

    @property
    @abstractmethod
    def subtask_id(self) -> int:
        """Index of this reader subtask (0-based)."""

    @property
    @abstractmethod
    def parallelism(self) -> int:
        """Number of reader subtasks."""

    @property
    def location(self) -> str:
        """Host (or other locality hint) this reader runs on."""
        return ""

    @abstractmethod
    def send_event_to_enumerator(self, event: SourceEvent) -> None:
        """Send a custom event to the enumerator."""

    @abstractmethod
    def send_split_request(self) -> None:
        """Ask the enumerator for a split (pull-based sources)."""


class SourceReader(ABC, Generic[SplitT]):
    """Reads the splits it is given and emits Arrow record batches.

    Drive it from one thread: :meth:`start`, then repeatedly :meth:`poll_next` (non-blocking);
    when it returns ``NOTHING_AVAILABLE`` wait with :meth:`wait_available`. Fetch errors surface
    from :meth:`poll_next`. :meth:`snapshot_state` may be called between polls.
    """

    def start(self) -> None:
        """Start the reader. Default: nothing."""

    @abstractmethod
    def poll_next(self, output: ReaderOutput) -> InputStatus:
        """Emit available batches (non-blocking) and say what is left."""

    @abstractmethod
    def wait_available(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until polling may yield data; True if it may."""

    @abstractmethod
    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        """The reader's splits, with their current positions, for checkpoint ``checkpoint_id``."""

    @abstractmethod
    def add_splits(self, splits: Sequence[SplitT]) -> None:
        """Add splits to read (from the enumerator, or restored from a checkpoint)."""

    @abstractmethod
    def notify_no_more_splits(self) -> None:
        """No further splits will come: once its splits are done the input ends."""

    def handle_source_events(self, event: SourceEvent) -> None:
        """A custom event from the enumerator. Default: ignore."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable. Default: nothing."""

    @abstractmethod
    def close(self) -> None:
        """Stop reading and release resources (threads, connections)."""

    def __enter__(self) -> SourceReader[SplitT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Source(ABC, Generic[SplitT, CheckpointT]):
    """Factory of a source's enumerator, readers and serializers.

    Configuration is given to the source's constructor (see :mod:`hoodline.config`). A source must
    be picklable: the Spark runtime ships it to the tasks that create readers.
    """

    @property
    @abstractmethod
    def boundedness(self) -> Boundedness:
        """Whether this source ends."""

    @abstractmethod
    def create_reader(self, context: SourceReaderContext) -> SourceReader[SplitT]:
        """A new reader with no splits; restored splits are added with ``add_splits``."""

    @abstractmethod
    def create_enumerator(
        self, context: SplitEnumeratorContext[SplitT]
    ) -> SplitEnumerator[SplitT, CheckpointT]:
        """A new enumerator starting from nothing."""

    @abstractmethod
    def restore_enumerator(
        self, context: SplitEnumeratorContext[SplitT], checkpoint: CheckpointT
    ) -> SplitEnumerator[SplitT, CheckpointT]:
        """An enumerator restored from a checkpointed state."""

    @abstractmethod
    def split_serializer(self) -> VersionedSerializer[SplitT]:
        """Serializer for splits (reader state, registration reports, assignments)."""

    @abstractmethod
    def enumerator_checkpoint_serializer(self) -> VersionedSerializer[CheckpointT]:
        """Serializer for the enumerator's checkpointed state."""


class SupportsSplitReassignmentOnRecovery:
    """Marker mixin for a :class:`Source` (FLIP-537).

    With it, restored readers do not read their restored splits; they report them at registration
    (:attr:`ReaderInfo.reported_splits`) and the enumerator reassigns them. The enumerator must
    therefore keep pending (reported or added-back but not yet assigned) splits in its checkpointed
    state, and keep a global assignment so a split re-reported by a restarted reader that has since
    moved to another reader is ignored.
    """


class SupportsRecordLimit(ABC):
    """Mixin for a :class:`SourceReader` that can stop after an exact number of records.

    A round-based runtime gives each reader a record budget (:class:`~hoodline.source.drive.
    BoundedRead`). A reader without this capability emits whole batches, so a round may read up
    to one batch more than its budget; one with it cuts the batch that reaches the budget and
    reads nothing after it. The records it did not emit stay in its split state (which counts
    only emitted records), so the next round continues exactly there.
    """

    @abstractmethod
    def limit_records(self, max_records: int) -> None:
        """Emit at most ``max_records`` records from now on (call before :meth:`start`)."""


def supports_reassignment_on_recovery(source: Source[Any, Any]) -> bool:
    """True if ``source`` follows the FLIP-537 contract."""
    return isinstance(source, SupportsSplitReassignmentOnRecovery)
