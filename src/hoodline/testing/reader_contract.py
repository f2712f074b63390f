"""A contract-test base class for source readers (like Flink's ``SourceReaderTestBase``).

Connector authors subclass :class:`SourceReaderContract` in a pytest test module, give it a way to
create a reader and bounded splits with known rows, and inherit the tests::

    class TestMyReaderContract(SourceReaderContract[MySplit]):
        def create_reader(self, context): ...
        def create_splits(self, num_splits, rows_per_split): ...   # may use self.tmp_path
        def split_serializer(self): ...
        def row_ids(self, table): ...   # one unique id per row, e.g. "file:line"

The inherited tests check that every row is read exactly once (one split, many splits, splits
added while reading), that the input ends only after no-more-splits, that empty splits finish,
that a snapshot taken mid-way restores without loss or duplicates (also through the split
serializer), and that ``close`` is idempotent. This module needs pytest.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa
import pytest

from hoodline.source.api import InputStatus, SourceReader, SourceReaderContext, SourceSplit
from hoodline.source.output import CollectingOutput
from hoodline.source.serialization import VersionedSerializer, read_versioned, write_versioned
from hoodline.testing.reader_context import RecordingReaderContext

__all__ = ["SourceReaderContract"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


class SourceReaderContract(ABC, Generic[SplitT]):
    """Inherit to run the reader contract tests against your reader (see module docs)."""

    #: How many splits the multi-split tests use and how many rows each split has.
    NUM_SPLITS = 4
    ROWS_PER_SPLIT = 30
    #: Upper bound in seconds for reading everything in one test.
    TIMEOUT = 30.0

    tmp_path: Path

    @pytest.fixture(autouse=True)
    def _contract_tmp_path(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path

    # -- to implement ---------------------------------------------------------------------------

    @abstractmethod
    def create_reader(self, context: SourceReaderContext) -> SourceReader[SplitT]:
        """A new reader."""

    @abstractmethod
    def create_splits(self, num_splits: int, rows_per_split: int) -> list[SplitT]:
        """Bounded splits with ``rows_per_split`` rows each, all rows distinct by :meth:`row_ids`.

        ``rows_per_split`` may be 0 (empty splits). Use ``self.tmp_path`` for files.
        """

    @abstractmethod
    def split_serializer(self) -> VersionedSerializer[SplitT]:
        """The source's split serializer."""

    @abstractmethod
    def row_ids(self, table: pa.Table) -> Sequence[object]:
        """One identifier per row of ``table`` (unique across all splits of a test)."""

    # -- helpers --------------------------------------------------------------------------------

    def new_reader(self) -> SourceReader[SplitT]:
        reader = self.create_reader(RecordingReaderContext())
        reader.start()
        return reader

    def poll_batches(
        self, reader: SourceReader[SplitT], output: CollectingOutput, max_batches: int | None
    ) -> InputStatus:
        """Poll until END_OF_INPUT, ``max_batches`` batches, or the timeout (then fail)."""
        deadline = time.monotonic() + self.TIMEOUT
        start = len(output.batches)
        while True:
            if max_batches is not None and len(output.batches) - start >= max_batches:
                return InputStatus.MORE_AVAILABLE
            status = reader.poll_next(output)
            if status is InputStatus.END_OF_INPUT:
                return status
            if status is InputStatus.NOTHING_AVAILABLE:
                if time.monotonic() > deadline:
                    return status
                reader.wait_available(0.05)

    def poll_until_idle(self, reader: SourceReader[SplitT], output: CollectingOutput) -> None:
        """Poll until nothing arrives for a while (for readers not told no-more-splits)."""
        quiet_since = time.monotonic()
        deadline = quiet_since + self.TIMEOUT
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.3:
            before = len(output.batches)
            status = reader.poll_next(output)
            assert status is not InputStatus.END_OF_INPUT, (
                "reader reported END_OF_INPUT before notify_no_more_splits"
            )
            if len(output.batches) != before:
                quiet_since = time.monotonic()
            elif status is InputStatus.NOTHING_AVAILABLE:
                reader.wait_available(0.02)

    def assert_exactly_once(self, output: CollectingOutput, expected_rows: int) -> None:
        ids = list(self.row_ids(output.to_table())) if output.batches else []
        dupes = [i for i, n in Counter(ids).items() if n > 1]
        assert not dupes, f"rows read more than once: {dupes[:10]}"
        assert len(ids) == expected_rows, f"read {len(ids)} rows, expected {expected_rows}"

    def read_all(self, splits: Sequence[SplitT]) -> CollectingOutput:
        output = CollectingOutput()
        reader = self.new_reader()
        try:
            reader.add_splits(list(splits))
            reader.notify_no_more_splits()
            status = self.poll_batches(reader, output, None)
            assert status is InputStatus.END_OF_INPUT, f"input did not end: {status}"
        finally:
            reader.close()
        return output

    # -- the contract ---------------------------------------------------------------------------

    def test_reads_one_split_exactly_once(self) -> None:
        splits = self.create_splits(1, self.ROWS_PER_SPLIT)
        self.assert_exactly_once(self.read_all(splits), self.ROWS_PER_SPLIT)

    def test_reads_many_splits_exactly_once(self) -> None:
        splits = self.create_splits(self.NUM_SPLITS, self.ROWS_PER_SPLIT)
        output = self.read_all(splits)
        self.assert_exactly_once(output, self.NUM_SPLITS * self.ROWS_PER_SPLIT)

    def test_emitted_batches_name_their_split(self) -> None:
        splits = self.create_splits(self.NUM_SPLITS, self.ROWS_PER_SPLIT)
        output = self.read_all(splits)
        ids = {s.split_id for s in splits}
        assert output.batches
        assert all(sid in ids for sid in output.split_ids), output.split_ids

    def test_no_splits_then_no_more_splits_ends_input(self) -> None:
        reader = self.new_reader()
        try:
            output = CollectingOutput()
            assert reader.poll_next(output) is InputStatus.NOTHING_AVAILABLE
            reader.notify_no_more_splits()
            assert self.poll_batches(reader, output, None) is InputStatus.END_OF_INPUT
            assert output.num_rows == 0
        finally:
            reader.close()

    def test_input_ends_only_after_no_more_splits(self) -> None:
        splits = self.create_splits(2, self.ROWS_PER_SPLIT)
        reader = self.new_reader()
        try:
            output = CollectingOutput()
            reader.add_splits(splits)
            self.poll_until_idle(reader, output)
            self.assert_exactly_once(output, 2 * self.ROWS_PER_SPLIT)
            reader.notify_no_more_splits()
            assert self.poll_batches(reader, output, None) is InputStatus.END_OF_INPUT
            self.assert_exactly_once(output, 2 * self.ROWS_PER_SPLIT)
        finally:
            reader.close()

    def test_splits_added_while_reading(self) -> None:
        first = self.create_splits(self.NUM_SPLITS, self.ROWS_PER_SPLIT)
        reader = self.new_reader()
        try:
            output = CollectingOutput()
            reader.add_splits(first[:1])
            self.poll_batches(reader, output, 1)
            reader.add_splits(first[1:])
            reader.notify_no_more_splits()
            assert self.poll_batches(reader, output, None) is InputStatus.END_OF_INPUT
            self.assert_exactly_once(output, self.NUM_SPLITS * self.ROWS_PER_SPLIT)
        finally:
            reader.close()

    def test_empty_split_finishes(self) -> None:
        empty = self.create_splits(1, 0)
        output = self.read_all(empty)
        assert output.num_rows == 0

    def test_snapshot_restore_midway_has_no_loss_or_duplicates(self) -> None:
        splits = self.create_splits(self.NUM_SPLITS, self.ROWS_PER_SPLIT)
        total = self.NUM_SPLITS * self.ROWS_PER_SPLIT
        serializer = self.split_serializer()
        output = CollectingOutput()
        reader = self.new_reader()
        try:
            reader.add_splits(splits)
            self.poll_batches(reader, output, 2)
            state = reader.snapshot_state(1)
        finally:
            reader.close()
        # rows emitted after the snapshot would be rolled back with the failed attempt
        restored = [read_versioned(serializer, write_versioned(serializer, s)) for s in state]
        assert {s.split_id for s in restored} <= {s.split_id for s in splits}
        rest = self.read_all(restored)
        combined = CollectingOutput()
        for batch in output.batches + rest.batches:
            combined.emit(batch)
        self.assert_exactly_once(combined, total)

    def test_snapshot_after_end_restores_to_nothing_new(self) -> None:
        splits = self.create_splits(2, self.ROWS_PER_SPLIT)
        reader = self.new_reader()
        output = CollectingOutput()
        try:
            reader.add_splits(splits)
            reader.notify_no_more_splits()
            assert self.poll_batches(reader, output, None) is InputStatus.END_OF_INPUT
            state = reader.snapshot_state(7)
        finally:
            reader.close()
        again = self.read_all(state)
        assert again.num_rows == 0, "restoring a fully read state re-read rows"

    def test_split_serializer_round_trips_reader_state(self) -> None:
        splits = self.create_splits(self.NUM_SPLITS, self.ROWS_PER_SPLIT)
        serializer = self.split_serializer()
        assert serializer.version >= 1
        for split in splits:
            data = serializer.serialize(split)
            assert serializer.deserialize(serializer.version, data) == split

    def test_close_is_idempotent(self) -> None:
        splits = self.create_splits(2, self.ROWS_PER_SPLIT)
        reader = self.new_reader()
        reader.add_splits(splits)
        output = CollectingOutput()
        self.poll_batches(reader, output, 1)
        reader.close()
        reader.close()
