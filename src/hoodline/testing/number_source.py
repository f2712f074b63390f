"""A small reference source over integer ranges, for tests and as a connector template.

A :class:`NumberSplit` is a range ``[start, end)`` of integers (``end`` None: unbounded). The reader
(built on :class:`~hoodline.source.base.SourceReaderBase`) emits Arrow batches with the columns
``split`` (string) and ``value`` (int64); its split state is the next value to read. Splits are
serialized in format version 2 and version-1 bytes (written by the first release, bounded ranges
only) still restore. Enumeration uses
:class:`~hoodline.testing.reference_enumerator.ReferenceEnumerator`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from hoodline.errors import SourceError
from hoodline.source.api import (
    Boundedness,
    ReaderOutput,
    Source,
    SourceReader,
    SourceReaderContext,
    SplitEnumerator,
    SplitEnumeratorContext,
    SupportsSplitReassignmentOnRecovery,
)
from hoodline.source.base import (
    RecordEmitter,
    RecordsBySplits,
    RecordsWithSplitIds,
    SourceReaderBase,
    SplitReader,
    SplitsChange,
)
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    unsupported_version,
)
from hoodline.testing.reference_enumerator import (
    ReferenceEnumerator,
    ReferenceEnumState,
    ReferenceEnumStateSerializer,
)

__all__ = [
    "NUMBER_SCHEMA",
    "NumberSource",
    "NumberSourceReader",
    "NumberSplit",
    "NumberSplitReader",
    "NumberSplitSerializer",
    "NumberSplitState",
    "ReassigningNumberSource",
]

NUMBER_SCHEMA = pa.schema([("split", pa.string()), ("value", pa.int64())])


@dataclass(frozen=True)
class NumberSplit:
    """Integers ``start`` (next to read) up to ``end`` (exclusive; None = never ends)."""

    split_id: str
    start: int
    end: int | None = None

    def __post_init__(self) -> None:
        if self.end is not None and self.end < self.start:
            raise SourceError(
                f"number split '{self.split_id}' has end {self.end} < start {self.start}"
            )


@dataclass
class NumberSplitState:
    """Mutable reading position of a :class:`NumberSplit`."""

    split_id: str
    next_value: int
    end: int | None


class NumberSplitSerializer(VersionedSerializer[NumberSplit]):
    """Version 1: id, start, end (bounded only). Version 2: id, start, optional end."""

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: NumberSplit) -> bytes:
        return (
            BinaryWriter()
            .write_str(obj.split_id)
            .write_long(obj.start)
            .write_optional_long(obj.end)
            .to_bytes()
        )

    def deserialize(self, version: int, data: bytes) -> NumberSplit:
        reader = BinaryReader(data, "number split")
        if version == 1:
            split = NumberSplit(reader.read_str(), reader.read_long(), reader.read_long())
        elif version == 2:
            split = NumberSplit(reader.read_str(), reader.read_long(), reader.read_optional_long())
        else:
            raise unsupported_version(self, version)
        reader.expect_end()
        return split


class NumberSplitReader(SplitReader[pa.RecordBatch, NumberSplit]):
    """Reads its splits round-robin, one batch of at most ``batch_size`` values per fetch.

    ``fail_on_value`` injects a failure when that value would be read (for error-path tests).
    """

    def __init__(self, batch_size: int, fail_on_value: int | None = None) -> None:
        self._batch_size = batch_size
        self._fail_on_value = fail_on_value
        self._positions: dict[str, list[int | None]] = {}  # split id -> [next, end]
        self._order: list[str] = []
        self._turn = 0

    def handle_splits_changes(self, change: SplitsChange[NumberSplit]) -> None:
        for split in change.splits:
            self._positions[split.split_id] = [split.start, split.end]
            self._order.append(split.split_id)

    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        result: RecordsBySplits[pa.RecordBatch] = RecordsBySplits()
        if not self._order:
            return result
        self._turn %= len(self._order)
        split_id = self._order[self._turn]
        self._turn += 1
        start, end = self._positions[split_id]
        assert start is not None
        stop = start + self._batch_size if end is None else min(end, start + self._batch_size)
        if self._fail_on_value is not None and start <= self._fail_on_value < stop:
            raise RuntimeError(f"injected failure at value {self._fail_on_value}")
        if stop > start:
            values = pa.array(np.arange(start, stop, dtype=np.int64))
            ids = pa.repeat(pa.scalar(split_id, pa.string()), stop - start)
            result.add(split_id, pa.RecordBatch.from_arrays([ids, values], schema=NUMBER_SCHEMA))
            self._positions[split_id][0] = stop
        if end is not None and stop >= end:
            result.finish(split_id)
            del self._positions[split_id]
            self._order.remove(split_id)
        return result


class _NumberEmitter(RecordEmitter[pa.RecordBatch, NumberSplitState]):
    def emit_record(
        self, element: pa.RecordBatch, output: ReaderOutput, split_state: NumberSplitState
    ) -> None:
        output.emit(element)
        if element.num_rows:
            split_state.next_value = int(element.column(1)[-1].as_py()) + 1


class NumberSourceReader(SourceReaderBase[pa.RecordBatch, NumberSplit, NumberSplitState]):
    """The reader of :class:`NumberSource`."""

    def __init__(
        self,
        context: SourceReaderContext,
        *,
        batch_size: int = 100,
        threaded: bool = True,
        fail_on_value: int | None = None,
    ) -> None:
        super().__init__(
            lambda: NumberSplitReader(batch_size, fail_on_value),
            _NumberEmitter(),
            context,
            threaded=threaded,
        )

    def initialized_state(self, split: NumberSplit) -> NumberSplitState:
        return NumberSplitState(split.split_id, split.start, split.end)

    def to_split(self, split_id: str, state: NumberSplitState) -> NumberSplit:
        return NumberSplit(split_id, state.next_value, state.end)


class NumberSource(Source[NumberSplit, ReferenceEnumState[NumberSplit]]):
    """Reads integer ranges; splits come from ``discover`` (a fixed list or a function).

    With ``discovery_interval`` (seconds) the enumerator re-runs discovery periodically and picks
    up new splits; otherwise it discovers once. Bounded sources signal no-more-splits to readers
    once everything discovered is assigned.
    """

    def __init__(
        self,
        discover: Sequence[NumberSplit] | Callable[[], Sequence[NumberSplit]],
        *,
        boundedness: Boundedness = Boundedness.BOUNDED,
        batch_size: int = 100,
        threaded: bool = True,
        discovery_interval: float | None = None,
        fail_on_value: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise SourceError(f"batch_size must be >= 1, got {batch_size}")
        self._discover = discover
        self._boundedness = boundedness
        self._batch_size = batch_size
        self._threaded = threaded
        self._discovery_interval = discovery_interval
        self._fail_on_value = fail_on_value

    @property
    def boundedness(self) -> Boundedness:
        return self._boundedness

    def _discover_now(self) -> Sequence[NumberSplit]:
        d = self._discover
        return list(d()) if callable(d) else list(d)

    def create_reader(self, context: SourceReaderContext) -> SourceReader[NumberSplit]:
        return NumberSourceReader(
            context,
            batch_size=self._batch_size,
            threaded=self._threaded,
            fail_on_value=self._fail_on_value,
        )

    def _enumerator(
        self,
        context: SplitEnumeratorContext[NumberSplit],
        state: ReferenceEnumState[NumberSplit] | None,
    ) -> ReferenceEnumerator[NumberSplit]:
        return ReferenceEnumerator(
            context,
            self._discover_now,
            discovery_interval=self._discovery_interval,
            bounded=self._boundedness is Boundedness.BOUNDED,
            reassign_on_recovery=isinstance(self, SupportsSplitReassignmentOnRecovery),
            state=state,
        )

    def create_enumerator(
        self, context: SplitEnumeratorContext[NumberSplit]
    ) -> SplitEnumerator[NumberSplit, ReferenceEnumState[NumberSplit]]:
        return self._enumerator(context, None)

    def restore_enumerator(
        self,
        context: SplitEnumeratorContext[NumberSplit],
        checkpoint: ReferenceEnumState[NumberSplit],
    ) -> SplitEnumerator[NumberSplit, ReferenceEnumState[NumberSplit]]:
        return self._enumerator(context, checkpoint)

    def split_serializer(self) -> VersionedSerializer[NumberSplit]:
        return NumberSplitSerializer()

    def enumerator_checkpoint_serializer(
        self,
    ) -> VersionedSerializer[ReferenceEnumState[NumberSplit]]:
        return ReferenceEnumStateSerializer(NumberSplitSerializer())


class ReassigningNumberSource(SupportsSplitReassignmentOnRecovery, NumberSource):
    """:class:`NumberSource` following FLIP-537: restored readers report, the enumerator decides."""
