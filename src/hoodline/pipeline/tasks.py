"""What a round's tasks run (engine-agnostic): one :class:`RoundJob` per round.

An engine (see :mod:`hoodline.pipeline.engine`) runs the job's stages and calls:

* :meth:`RoundJob.read` as reader task *i* (= reader subtask *i*): read the task's bounded plan,
  prepare the records with the connector's :class:`~hoodline.pipeline.plugin.RecordPreparer`,
  tag them with their file group when the index is BUCKET (a pure function of the key), and
  yield keyed record batches, :class:`ErrorRows` and finally the task's
  :class:`~hoodline.pipeline.plugin.ReadOutcome`.
* :meth:`RoundJob.assign` (BLOOM index, when :attr:`RoundJob.key_shuffle`): all records of a key
  are in one task (shuffled by partition and key); reduce them, look keys up and assign inserts
  to small files / new file groups (RFC-24).
* :meth:`RoundJob.write`: all records of a file group are in one task (shuffled by file group);
  reduce them per key (records of one key may come from several readers) and write each file
  group once; yields one serialized WriteStat per file group written.
* :meth:`RoundJob.read_and_write` instead of all three when :attr:`RoundJob.direct_write`
  (append-only writes, bulk_insert with the BLOOM index): no record needs another task, so reader
  task *i* writes its records into new file groups it owns -- no shuffle, as Hudi's append-mode
  writers do -- and reports as a writer too.

A task that hits an error that retrying cannot fix (``retryable`` False: an unreadable file, a
schema the table refuses, offsets gone ...) reports it as a :class:`TaskFailure` instead of
raising, so the engine does not retry the task and the driver stops with the typed error.
Retryable errors are raised: the engine may retry the task, and a failed job fails the round.
"""

from __future__ import annotations

import json
import pickle
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from hoodline import faults
from hoodline.errors import HoodlineError, PipelineError, SchemaChangedError, StorageError
from hoodline.faults import FaultPoint
from hoodline.log_format import ensure_task_logging
from hoodline.pipeline.plugin import PlanReading, ReadOutcome, ReadTask, RecordPreparer
from hoodline.pipeline.transform import SEQ, RecordSpec, resolve
from hoodline.pipeline.write_buffer import WriteBuffer
from hoodline.storage.paths import is_server_failure
from hoodline.table.fs_view import FileSystemView
from hoodline.table.properties import IndexType
from hoodline.table.write.client import tag_and_assign
from hoodline.table.write.file_writer import write_file_group
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.records import FILE_ID, file_group_parts

T = TypeVar("T")


@dataclass(frozen=True)
class ErrorRows:
    """Bad records of a reader task (``ERROR_SCHEMA``)."""

    batch: pa.RecordBatch


@dataclass(frozen=True)
class TaskFailure:
    """A task's non-retryable error, carried to the driver as data (pickled)."""

    payload: bytes
    text: str

    @classmethod
    def of(cls, error: HoodlineError) -> TaskFailure:
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        try:
            payload = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an error that does not pickle still stops the job, as text
            payload = b""
        return cls(payload, text)

    def to_bytes(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(data: bytes) -> TaskFailure:
        out = pickle.loads(data)
        if not isinstance(out, TaskFailure):
            raise PipelineError(f"task failure payload holds {type(out).__name__}")
        return out

    def error(self) -> HoodlineError:
        """The task's error (a PipelineError with its text when it cannot be rebuilt)."""
        if self.payload:
            try:
                err = pickle.loads(self.payload)
            except Exception:
                err = None
            if isinstance(err, HoodlineError):
                return err
        return PipelineError(f"a task failed: {self.text}")


#: what a storage error in a task adds: the settings may be the driver's only (its environment)
EXECUTOR_STORAGE_HINT = (
    " [in a task: on a cluster the executors need the storage settings too: the table's "
    "[table.storage], or the environment variables (the only settings the file source "
    "reads) passed on with spark.executorEnv.*]")


def _on_executors(err: StorageError) -> StorageError:
    """``err`` with :data:`EXECUTOR_STORAGE_HINT`."""
    return StorageError(f"{err}{EXECUTOR_STORAGE_HINT}", err.retryable)


def _guarded(items: Iterator[T]) -> Iterator[T | TaskFailure]:
    """Pass ``items`` through; a non-retryable hoodline error ends them as a TaskFailure, and so
    does a schema change (the task run again would meet it again: the driver plans the round
    anew with the newer schema). Other retryable errors fail the task, which the engine may
    run again. A storage error carries the executors' hint either way (an endpoint the
    executors could not reach was a task failure that named the driver's settings only)."""
    ensure_task_logging()
    try:
        yield from items
    except StorageError as exc:
        # not where the store failed on its side: the executors' settings were not at fault
        hinted = exc if is_server_failure(exc) else _on_executors(exc)
        if exc.retryable:
            raise hinted from exc
        yield TaskFailure.of(hinted)
    except HoodlineError as exc:
        if exc.retryable and not isinstance(exc, SchemaChangedError):
            raise
        yield TaskFailure.of(exc)


def _conform(schema: pa.Schema, tables: Iterable[pa.Table | pa.RecordBatch]) -> pa.Table:
    parts = []
    for t in tables:
        if t.num_rows == 0:
            continue
        tbl = t if isinstance(t, pa.Table) else pa.Table.from_batches([t])
        tbl = tbl.select(schema.names)
        parts.append(tbl.cast(schema) if tbl.schema != schema else tbl)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class RoundJob:
    """One round's work, as an engine runs it (picklable; see module docs)."""

    round_id: int
    #: reader subtask -> its bounded task (subtasks 0..n-1)
    tasks: Mapping[int, ReadTask]
    spec: RecordSpec
    preparer: RecordPreparer
    #: writer (and assigner) tasks
    writers: int
    #: the table's file groups as the driver listed them when it started the round's instant
    #: (loaded, so it pickles with them): every task tags and writes against this one listing
    #: instead of listing the table itself. Nothing else changes the file groups a round writes
    #: while it runs -- the writer lock keeps other writers out, cleaning and scheduling run
    #: between rounds, and a compaction finishing in the background only adds the base file of a
    #: slice the view already holds as pending. None: each task lists the table.
    layout: FileSystemView | None = None

    @property
    def readers(self) -> int:
        return len(self.tasks)

    @property
    def key_shuffle(self) -> bool:
        """Records go through a shuffle by (partition, key) to assigner tasks first (BLOOM)."""
        return self.spec.ctx.config.index_type is IndexType.BLOOM

    @property
    def combines(self) -> bool:
        """Records of one key are reduced to one per round (every operation but a bulk_insert
        without ``hoodie.combine.before.insert``, Hudi's default)."""
        ctx = self.spec.ctx
        return ctx.operation is not WriteOperation.BULK_INSERT or ctx.options.combine_before_insert

    @property
    def direct_write(self) -> bool:
        """Readers write their own records (no shuffle): bulk_insert with the BLOOM index needs
        no index lookup and fills no small files, and without combining no records of one key
        need to meet."""
        ctx = self.spec.ctx
        return (ctx.operation is WriteOperation.BULK_INSERT
                and ctx.config.index_type is IndexType.BLOOM and not self.combines)

    @property
    def writer_tasks(self) -> int:
        """Tasks that report as writers: the readers themselves with :attr:`direct_write`."""
        return self.readers if self.direct_write else self.writers

    @property
    def record_schema(self) -> pa.Schema:
        return self.spec.record_schema

    def view(self) -> FileSystemView:
        """The file groups the round writes against (:attr:`layout`, else listed now)."""
        return self.layout if self.layout is not None else self.spec.ctx.table().fs_view()

    # -- reader ---------------------------------------------------------------------------------
    def read(
        self, subtask: int
    ) -> Iterator[pa.RecordBatch | ErrorRows | ReadOutcome | TaskFailure]:
        """Reader task ``subtask``: keyed batches, error rows, then its outcome."""
        return _guarded(self._read(subtask))

    def _read(self, subtask: int) -> Iterator[pa.RecordBatch | ErrorRows | ReadOutcome]:
        task = self.tasks[subtask]
        spec = self.spec
        started = time.monotonic()
        view = None if self.key_shuffle else self.view()
        reading = PlanReading(task)
        for prepared in self.preparer.prepare(spec, task, self._first_read(reading)):
            if prepared.errors.num_rows:
                yield ErrorRows(prepared.errors)
            records = prepared.records
            if records.num_rows and view is not None:
                tagged = tag_and_assign(spec.ctx, records.drop_columns([FILE_ID]), view=view,
                                        threads=1)
                records = tagged.select(spec.record_schema.names)
            yield from records.combine_chunks().to_batches()
        outcome = reading.outcome
        if outcome is None:
            raise PipelineError(f"reader subtask {subtask}: the preparer stopped before the end")
        for rows in self.preparer.rejected(spec, task, outcome):
            yield ErrorRows(rows)
        outcome.seconds = time.monotonic() - started
        yield outcome

    @staticmethod
    def _first_read(
        reading: PlanReading,
    ) -> Iterator[tuple[pa.RecordBatch, str | None]]:
        first = True
        for item in reading:
            if first:
                first = False
                faults.reach(FaultPoint.READ)
            yield item

    # -- assigner (BLOOM) -------------------------------------------------------------------------
    def assign(
        self, batches: Iterable[pa.RecordBatch], task: int
    ) -> Iterator[pa.Table | TaskFailure]:
        """Assigner task ``task`` of :attr:`writers`: reduce per key, tag, assign inserts."""
        return _guarded(self._assign(batches, task))

    def _assign(self, batches: Iterable[pa.RecordBatch], task: int) -> Iterator[pa.Table]:
        schema = self.spec.record_schema
        records = _conform(schema, batches)
        if records.num_rows == 0:
            return
        if self.combines:
            records = resolve(records, self.spec.ctx.config.precombine_field)
        tagged = tag_and_assign(self.spec.ctx, records.drop_columns([FILE_ID]), task,
                                self.writers, view=self.view(), threads=1)
        yield tagged.select(schema.names)

    # -- writer ---------------------------------------------------------------------------------
    def write(
        self, batches: Iterable[pa.RecordBatch], task: int, attempt: int
    ) -> Iterator[bytes | TaskFailure]:
        """Writer task ``task``: write its file groups one at a time from a bounded buffer (see
        :mod:`.write_buffer`); one JSON WriteStat per file group written. ``attempt`` must be
        unique among all attempts of the job (it goes into the files' write token)."""
        return _guarded(self._write(batches, task, attempt))

    def _write(self, batches: Iterable[pa.RecordBatch], task: int, attempt: int) -> Iterator[bytes]:
        spec = self.spec
        schema = spec.record_schema
        with WriteBuffer(schema, spec.writer_buffer_bytes) as buffer:
            for batch in batches:
                if batch.num_rows:
                    buffer.append(_conform(schema, [batch]).combine_chunks().to_batches()[0])
            if buffer.rows:
                yield from self._write_groups(buffer.table(), task, attempt,
                                              reduce=self.combines)

    def _write_groups(
        self, records: pa.Table, task: int, attempt: int, *, reduce: bool
    ) -> Iterator[bytes]:
        """Write each file group of ``records`` (file group column filled) once; ``reduce``:
        one record per key first (records of a key may come from several readers)."""
        spec = self.spec
        view = self.view()
        ordering = spec.ctx.config.precombine_field
        written = False
        # readers send each file group's rows together: the groups are slices, not a copy
        for partition, file_id, rows in file_group_parts(records):
            if reduce:
                rows = resolve(rows, ordering)
            stat = write_file_group(spec.ctx, partition, file_id, rows.drop_columns([SEQ]),
                                    view.write_slice(partition, file_id), task, attempt)
            if stat is not None:
                written = True
                yield json.dumps(stat.to_dict()).encode()
        if written:
            faults.reach(FaultPoint.WRITE)

    # -- reader that writes (direct_write) --------------------------------------------------------
    def read_and_write(
        self, subtask: int, attempt: int
    ) -> Iterator[bytes | ErrorRows | ReadOutcome | TaskFailure]:
        """Reader task ``subtask`` writing its own records into new file groups (see
        :attr:`direct_write`): serialized WriteStats, error rows, then its outcome."""
        return _guarded(self._read_and_write(subtask, attempt))

    def _read_and_write(
        self, subtask: int, attempt: int
    ) -> Iterator[bytes | ErrorRows | ReadOutcome]:
        spec = self.spec
        schema = spec.record_schema
        outcome: ReadOutcome | None = None
        with WriteBuffer(schema, spec.writer_buffer_bytes) as buffer:
            for item in self._read(subtask):
                if isinstance(item, pa.RecordBatch):
                    buffer.append(item)
                elif isinstance(item, ErrorRows):
                    yield item
                else:
                    outcome = item
            if buffer.rows:
                records = buffer.table().drop_columns([FILE_ID])
                tagged = tag_and_assign(spec.ctx, records, subtask, self.readers,
                                        view=self.view(), threads=1)
                yield from self._write_groups(tagged.select(schema.names), subtask, attempt,
                                              reduce=False)
        if outcome is None:
            raise PipelineError(f"reader subtask {subtask} ended without its outcome")
        yield outcome
