"""The file source reader: a split reader over the format readers, on ``SourceReaderBase``.

* :class:`FileSplitReader` reads its splits one after the other, one record batch per fetch.
  It reads one batch ahead, so the fetch that returns a split's last batch also reports the split
  finished (a round that read a file to its end does not need another round to learn that).
  With a record limit (:class:`~hoodline.source.api.SupportsRecordLimit`, a round's budget) it
  cuts the batch that reaches the limit and fetches nothing more; the cut split stays unfinished
  and its state counts only the emitted rows.
  A file that cannot be read raises :class:`~hoodline.errors.FileSourceError` (naming the file,
  and the line / row group when known) unless ``errors.tolerance=all``: then the split is
  finished early and recorded as rejected.
* :class:`FileRecordEmitter` emits a batch and advances the split state by its row count, so a
  snapshot between polls holds exactly the number of rows emitted.
* :class:`FileSourceReader` asks the enumerator for work when it starts without splits and
  each time splits finish, and reports finished (and rejected) splits to the enumerator.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator, Mapping

import pyarrow as pa

from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.events import SplitsFinishedEvent
from hoodline.connectors.files.formats import read_split
from hoodline.connectors.files.rejections import RejectedFile
from hoodline.connectors.files.split import FileSourceSplit, FileSplitState
from hoodline.errors import FileSourceError
from hoodline.source.api import ReaderOutput, SourceReaderContext, SupportsRecordLimit
from hoodline.source.base import (
    RecordEmitter,
    RecordsBySplits,
    RecordsWithSplitIds,
    SourceReaderBase,
    SplitReader,
    SplitsChange,
)

log = logging.getLogger(__name__)


class FileSplitReader(SplitReader[pa.RecordBatch, FileSourceSplit]):
    """Reads assigned file splits in order; one batch per :meth:`fetch`."""

    def __init__(self, config: FileSourceConfig) -> None:
        self._config = config
        self._queue: deque[FileSourceSplit] = deque()
        self._current: FileSourceSplit | None = None
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._ahead: pa.RecordBatch | None = None  # the current split's next batch, read ahead
        self._failed: FileSourceError | None = None  # reading ahead failed: the split's end
        self._left: int | None = None  # records still to emit (None: no limit)
        self._lock = threading.Lock()
        self._rejections: dict[str, str] = {}  # split id -> reason (read by the poller)

    def limit(self, max_records: int) -> None:
        """Emit at most ``max_records`` more records (see module docs)."""
        self._left = max_records

    def handle_splits_changes(self, change: SplitsChange[FileSourceSplit]) -> None:
        self._queue.extend(change.splits)

    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        if self._left is not None and self._left <= 0:
            return RecordsBySplits()  # the budget is spent: the rest waits for the next round
        if self._current is None:
            if not self._queue:
                return RecordsBySplits()
            self._current = self._queue.popleft()
            self._batches = None
            self._ahead = None
            self._failed = None
        split = self._current
        try:
            if self._failed is not None:
                raise self._failed
            if self._batches is None:
                self._batches = read_split(split, self._config)
                self._ahead = next(self._batches, None)
            batch = self._ahead
            if batch is None:
                self._finish_current()
                return RecordsBySplits.finished_only([split.split_id])
            if self._left is not None and batch.num_rows > self._left:
                # the budget ends in this batch: emit its head only; the rest stays the next
                # batch (the split is not over) and nothing more is read
                batch, self._ahead = batch.slice(0, self._left), batch.slice(self._left)
                self._left = 0
                return RecordsBySplits({split.split_id: [batch]})
            try:
                self._ahead = next(self._batches, None)
            except FileSourceError as exc:
                # the batch read before the error goes out; the error ends the split next
                self._failed, self._ahead = exc, None
                self._count(batch)
                return RecordsBySplits({split.split_id: [batch]})
        except FileSourceError as exc:
            if not self._config.tolerate_errors:
                raise
            self._reject(split, str(exc))
            return RecordsBySplits.finished_only([split.split_id])
        self._count(batch)
        if self._ahead is None:  # that was the split's last batch
            self._finish_current()
            return RecordsBySplits({split.split_id: [batch]}, finished=[split.split_id])
        return RecordsBySplits({split.split_id: [batch]})

    def _count(self, batch: pa.RecordBatch) -> None:
        if self._left is not None:
            self._left -= batch.num_rows

    def _finish_current(self) -> None:
        batches, self._batches = self._batches, None
        self._ahead = None
        self._failed = None
        self._current = None
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # release the open file now, not whenever the generator is collected

    def _reject(self, split: FileSourceSplit, reason: str) -> None:
        log.error("file source: skipping %s: %s", split.describe(), reason)
        with self._lock:
            self._rejections[split.split_id] = reason
        self._finish_current()

    def take_rejection(self, split_id: str) -> str | None:
        """The rejection reason of a finished split (once), or None if it finished normally."""
        with self._lock:
            return self._rejections.pop(split_id, None)

    def close(self) -> None:
        self._finish_current()
        self._queue.clear()


class FileRecordEmitter(RecordEmitter[pa.RecordBatch, FileSplitState]):
    """Emits a batch, then counts its rows into the split state."""

    def emit_record(
        self, element: pa.RecordBatch, output: ReaderOutput, split_state: FileSplitState
    ) -> None:
        output.emit(element, split_state.split_id)
        split_state.records_emitted += element.num_rows


class FileSourceReader(
    SourceReaderBase[pa.RecordBatch, FileSourceSplit, FileSplitState], SupportsRecordLimit
):
    """Reader of :class:`~hoodline.connectors.files.source.FileSource` (see module docs)."""

    def __init__(
        self, config: FileSourceConfig, context: SourceReaderContext, *, threaded: bool = True
    ) -> None:
        self._split_reader = FileSplitReader(config)
        super().__init__(
            lambda: self._split_reader, FileRecordEmitter(), context, threaded=threaded
        )
        self._rejected: list[RejectedFile] = []

    @property
    def rejected_files(self) -> list[RejectedFile]:
        """Splits this reader skipped under ``errors.tolerance=all`` (also sent to enumerator)."""
        return list(self._rejected)

    def limit_records(self, max_records: int) -> None:
        self._split_reader.limit(max_records)

    def start(self) -> None:
        if not self.unfinished_split_ids():
            self.context.send_split_request()

    def initialized_state(self, split: FileSourceSplit) -> FileSplitState:
        return FileSplitState(split)

    def to_split(self, split_id: str, state: FileSplitState) -> FileSourceSplit:
        return state.to_split()

    def on_split_finished(self, finished: Mapping[str, FileSplitState]) -> None:
        rejected: list[RejectedFile] = []
        for sid, state in finished.items():
            reason = self._split_reader.take_rejection(sid)
            if reason is not None:
                rejected.append(RejectedFile(state.split.path, sid, reason, state.records_emitted))
        self._rejected.extend(rejected)
        self.context.send_event_to_enumerator(
            SplitsFinishedEvent(tuple(finished), tuple(rejected))
        )
        if not self.unfinished_split_ids():
            self.context.send_split_request()
