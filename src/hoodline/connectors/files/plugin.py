"""The file source's pipeline plug-in: split pulling (driver) and record preparation (tasks).

Driver side (:class:`FilesPlugin`): readers pull splits -- before every plan the driver asks the
enumerator for every reader holding none. The round's record budget is shared among the readers
that hold splits; a task reads its splits in order until its share is reached, exactly (the
reader cuts the batch that reaches it), so a file may span rounds; split progress (records
emitted) is checkpointed. ``--once`` stops after two plans in a row held nothing, once
every file present at the start had time to pass its stability scans.

Task side (:class:`FileRecords`): the source already decoded the rows into the declared
schema; rows whose key, partition or ordering field is null become error rows positioned by
file and row (error id ``file/<path>/<row>``), with the row as JSON for the raw value (Parquet
files; under tolerance all the source rejects such JSON lines and CSV rows with their text).
Lines of a JSON-lines file the source could not read as a record, and CSV rows whose values do
not convert, come as rejected-records batches (with ``errors.tolerance = all``) and become one
error row each, with the line's bytes (a CSV row's text) as the raw value. Files the source
skipped whole under its own ``errors.tolerance = all`` (unreadable Parquet and CSV files)
become one error row each; so do files the enumerator rejected (changed after they were read,
unreadable when planned), written by the driver with the round whose checkpoint records them.
An error row's ``day`` is the file version's modification date, the same in a replayed round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.connectors.files.discovery import require_directory
from hoodline.connectors.files.enumerator import FileSplitEnumerator
from hoodline.connectors.files.events import SplitsFinishedEvent
from hoodline.connectors.files.formats import (
    VANISHED,
    RawLines,
    records_before_split,
    refused_values,
)
from hoodline.connectors.files.location import stat
from hoodline.connectors.files.rejections import (
    RejectedFile,
    SourceRejection,
    is_rejected_records,
    rows_as_json,
)
from hoodline.connectors.files.source import FileSource
from hoodline.errors import ConfigError, FileSourceError
from hoodline.formats.json_decoder import BadRecords
from hoodline.pipeline.config import ROUND_MAX_BYTES, PipelineConfig, SourceFormat
from hoodline.pipeline.errors_table import build_error_batch
from hoodline.pipeline.plugin import (
    ReadOutcome,
    ReadTask,
    RecordPreparer,
    RoundPlan,
    SourcePlugin,
)
from hoodline.pipeline.plugins import SourceType
from hoodline.pipeline.transform import (
    Prepared,
    RecordSpec,
    delete_flags,
    empty_errors,
    key_records,
    required_fields,
    unkeyable_records,
    without_rows,
)
from hoodline.runtime.source_rounds import ReaderPlan, SourceRounds
from hoodline.source.api import SourceSplit

__all__ = ["FILE_CHANGED", "UNREADABLE_FILE", "FileRecords", "FilesPlugin"]

#: Reason code of a file the source skipped (tolerance all).
UNREADABLE_FILE = "unreadable_file"
#: Reason code of a file that changed after it was read (tolerance all): the change is not read.
FILE_CHANGED = "file_changed"


def _file_errors(
    round_id: int, bad: BadRecords, raw: pa.Array, file: str, rows: pa.Array, mtime_ns: int,
    *, version: str | None = None,
) -> pa.RecordBatch:
    """Error rows of one file version; its modification time is their ``day`` (so a round
    replayed on a later day rewrites the same rows). ``version`` (a changed file's split id)
    names the error instead of file and row."""
    n = len(raw)
    stamp = pa.array([mtime_ns // 1_000_000] * n, pa.int64()).cast(pa.timestamp("ms"))
    positions = pa.table({"file": pa.array([file] * n, pa.string()), "row": rows,
                          "timestamp": stamp})
    if version is not None:
        positions = positions.append_column("version", pa.array([version] * n, pa.string()))
    return build_error_batch(bad, raw, positions, source=FilesPlugin.name, id_prefix="file",
                             id_columns=("version",) if version is not None else ("file", "row"),
                             round_id=round_id)


#: What the error table keeps of records refused after they were read: their values, and where
#: each is for its detail (None: the detail as it is).
_Refused = tuple[list[bytes], list[str] | None]


@dataclass(frozen=True)
class FileRecords(RecordPreparer):
    """Decoded file rows -> keyed records and error rows (see module docs)."""

    def prepare(
        self, spec: RecordSpec, task: ReadTask, batches: Iterator[tuple[pa.RecordBatch, str | None]]
    ) -> Iterator[Prepared]:
        splits = {s.split_id: s for s in task.splits}
        first_row = {s.split_id: s.records_to_skip for s in task.splits}
        before: dict[str, int] = {}

        def records_before(sid: str) -> int:  # asked only for a batch with error rows
            if sid not in before:
                split = splits.get(sid)
                before[sid] = records_before_split(split) if split is not None else 0
            return before[sid]

        lines: dict[str, RawLines] = {}

        def refused(sid: str, rows: pa.Table, records: list[int]) -> _Refused:
            split = splits.get(sid)
            if split is None:
                return rows_as_json(rows), None
            reader = lines.setdefault(sid, RawLines(split))
            return refused_values(split, task.source.config, rows, records,
                                  records_before(sid), reader)

        try:
            for batch, split_id in batches:
                sid = split_id or ""
                start = first_row.get(sid, 0)
                first_row[sid] = start + batch.num_rows
                split = splits.get(sid)
                yield self.prepare_batch(
                    spec, batch, split.path if split is not None else sid, start,
                    split.mtime_ns if split is not None else 0, partial(records_before, sid),
                    partial(refused, sid))
        finally:
            for reader in lines.values():
                reader.close()

    @staticmethod
    def prepare_batch(
        spec: RecordSpec, batch: pa.RecordBatch, file: str, first_row: int, mtime_ns: int,
        records_before: Callable[[], int] = lambda: 0,
        refused: Callable[[pa.Table, list[int]], _Refused] = lambda rows, _r: (
            rows_as_json(rows), None),
    ) -> Prepared:
        """Keyed records and error rows of one batch a split of ``file`` emitted (rows numbered
        from ``first_row`` within the split; ``mtime_ns``: the file version's modification
        time); error rows number records within the file, from ``records_before()`` (the
        file's records before the split, counted only when there are error rows). Records
        refused for their key or partition values keep what ``refused`` gives for them (their
        bytes as read where the format has them, and where they are, for the detail)."""
        n = batch.num_rows
        seq = pa.array(np.arange(first_row, first_row + n, dtype=np.int64))
        if is_rejected_records(batch):
            rejected = BadRecords(pa.array(np.arange(n, dtype=np.int64)),
                                  batch.column("reason"), batch.column("detail"))
            return Prepared(spec.record_schema.empty_table(),
                            _file_errors(spec.round_id, rejected, batch.column("value"), file,
                                         pc.add(seq, records_before()), mtime_ns))
        data = pa.Table.from_batches([batch])
        bad = unkeyable_records(spec, data)
        errors = empty_errors()
        if len(bad):
            records = pc.take(seq, bad.index)
            values, where = refused(data.take(bad.index), records.to_pylist())
            detail = bad.detail if where is None else pc.binary_join_element_wise(
                pa.array(where, pa.string()), bad.detail, ": ")
            errors = _file_errors(
                spec.round_id,
                BadRecords(pa.array(np.arange(len(bad), dtype=np.int64)), bad.reason, detail),
                pa.array(values, pa.binary()), file, pc.add(records, records_before()), mtime_ns,
            )
        data, seq = without_rows(data, seq, bad)
        return Prepared(key_records(spec, data, delete_flags(spec, data), seq), errors)

    def rejected(
        self, spec: RecordSpec, task: ReadTask, outcome: ReadOutcome
    ) -> list[pa.RecordBatch]:
        mtimes = {s.split_id: s.mtime_ns for s in task.splits}
        out = []
        for event in outcome.events:
            if isinstance(event, SplitsFinishedEvent):
                for rej in event.rejected:
                    kept = (f"; {rej.rows_emitted} row(s) of it read before the error are "
                            "kept" if rej.rows_emitted else "")
                    out.append(_rejected_file(spec.round_id, rej, kept,
                                              mtimes.get(rej.split_id, 0)))
        return out


def _rejected_file(round_id: int, rej: RejectedFile, kept: str, mtime_ns: int) -> pa.RecordBatch:
    bad = BadRecords(pa.array([0], pa.int64()), pa.array([UNREADABLE_FILE], pa.string()),
                     pa.array([rej.reason[:300] + kept], pa.string()))
    return _file_errors(round_id, bad, pa.nulls(1, pa.binary()), rej.split_id,
                        pa.array([rej.rows_emitted], pa.int64()), mtime_ns)


def _source_rejection(round_id: int, rejection: SourceRejection) -> pa.RecordBatch:
    """The error row of a file the enumerator rejected: changed after it was read (reason
    ``file_changed``, no row, named by the new version), or unreadable when planned."""
    rej = rejection.rejected
    if not rejection.changed:
        return _rejected_file(round_id, rej, "", rejection.mtime_ns)
    bad = BadRecords(pa.array([0], pa.int64()), pa.array([FILE_CHANGED], pa.string()),
                     pa.array([rej.reason], pa.string()))
    return _file_errors(round_id, bad, pa.nulls(1, pa.binary()), rej.path,
                        pa.nulls(1, pa.int64()), rejection.mtime_ns, version=rej.split_id)


def _refuse_unseen(rejected: Sequence[RejectedFile], subtask: int) -> None:
    """A file a reader task did not find but this process (the driver, which discovered it)
    still sees was not deleted: the task ran where the source path is not visible. Rejecting
    it would skip it for good, as if it had been deleted."""
    for r in rejected:
        if VANISHED not in r.reason:
            continue
        try:
            stat(r.path)
        except OSError:
            continue  # gone here too: deleted, as the rejection says
        raise FileSourceError(
            f"reader task {subtask} did not find file '{r.path}', which the driver sees: the "
            "executors do not see the source path. On a cluster put the input on an object "
            "store or on a file system every node mounts at the same path"
        )


class FilesPlugin(SourcePlugin):
    """Driver side of the file source (see module docs)."""

    name = SourceType.FILES
    source: FileSource

    def __init__(self, source: FileSource, round_bytes: int = ROUND_MAX_BYTES.default) -> None:
        super().__init__(source)
        self._idle_rounds = 0
        self._started = time.monotonic()
        #: runtime.round.max-bytes: readers take files up to their share of it per round
        self._round_bytes = int(round_bytes)
        #: the enumerator of the rounds planned (its files not handed out are the backlog)
        self._enumerator: FileSplitEnumerator | None = None

    @classmethod
    def from_config(cls, config: PipelineConfig) -> FilesPlugin:
        options = dict(config.source.options)
        if "schema" in options:
            raise ConfigError(
                "'schema' is for FileSource in Python code; a pipeline declares the record "
                "schema in its [schema] section (same type names): move it there"
            )
        if config.source.format.uses_registry:
            raise ConfigError(
                f"source.format = '{config.source.format}' reads Kafka messages in the Confluent "
                "wire format; the file source reads its files' own format (format in "
                "[source.options]): use source.format = 'json' with type = 'files'"
            )
        if "errors.tolerance" in options:
            # one setting for the whole pipeline: the source's own used to win silently
            raise ConfigError(
                f"errors.tolerance = '{options['errors.tolerance']}': a "
                "pipeline sets the tolerance of bad records once, in [errors] tolerance "
                f"(now '{config.errors.tolerance.value}'), for its source and its error table "
                "alike: remove it from [source.options]"
            )
        options["errors.tolerance"] = config.errors.tolerance.value
        schema = config.schema if config.source.format is SourceFormat.JSON else None
        t = config.table
        # JSON lines without them are rejected by the reader, which still has their bytes
        required = required_fields(t.record_key, t.partition_fields, t.precombine_field)
        return cls(FileSource.from_options(options, schema=schema, required_fields=required),
                   config.runtime.round_max_bytes)

    @property
    def identity(self) -> str:
        cfg = self.source.config
        return f"{cfg.root}|{cfg.format}"

    def table_schema(self, config: PipelineConfig) -> pa.Schema:
        return config.schema

    def preparer(self, config: PipelineConfig) -> FileRecords:
        return FileRecords()

    def preflight(self) -> None:
        """The source directory exists (the same check the first listing makes)."""
        require_directory(self.source.config.root)

    def before_plan(self, rounds: SourceRounds[Any, Any]) -> None:
        """Readers without work ask for it, each for files up to its share of
        ``runtime.round.max-bytes`` (file sizes; see
        :attr:`FileSplitEnumerator.request_bytes`): one file per reader and round (with
        ``assign.splits-per-request`` = 1) read a folder of small files one round per file and
        reader, 20 files in 10 rounds."""
        held = rounds.held_splits()
        enumerator = _enumerator(rounds)
        asking = max(1, sum(1 for splits in held.values() if not splits))
        waiting = sum(s.size_to_read for s in enumerator.pending_splits)
        # the files waiting are spread over the readers that ask (a small backlog is not all
        # one reader's), each taking at most its share of the round; with none listed yet (the
        # first round), files listed later are handed out up to that share
        share = self._round_bytes // max(1, len(held))
        enumerator.request_bytes = min(share, -(-waiting // asking)) if waiting else share
        for subtask, splits in held.items():
            if not splits:
                rounds.coordinator.handle_split_request(subtask, None)
        self._enumerator = enumerator

    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int
    ) -> RoundPlan:
        busy_readers = [i for i, p in plans.items() if p.splits]
        share, extra = divmod(max_records, max(1, len(busy_readers)))
        budget = {i: max(1, share + (k < extra)) for k, i in enumerate(busy_readers)}
        tasks = {
            i: ReadTask(i, len(plans), round_id, self.source, tuple(p.splits), budget.get(i, 1),
                        empty=not p.splits)
            for i, p in plans.items()
        }
        busy = bool(busy_readers)
        self._idle_rounds = 0 if busy else self._idle_rounds + 1
        return RoundPlan(tasks)

    def files_waiting(self, rounds: SourceRounds[Any, Any]) -> int:
        """Files found and not read to their end: waiting to be seen unchanged, not handed to a
        reader yet, or held by one (each file once, however many splits it has). Counted
        before a round it left out the files readers held and had not finished (metrics
        review: 0 with 16 files unread)."""
        paths: set[str] = set()
        if self._enumerator is not None:
            paths.update(s.path for s in self._enumerator.pending_splits)
            # found and not yet seen unchanged in source.stable-scans scans (walkthrough
            # review: 'waiting=0 files' for ~20 s with files in the folder)
            paths.update(self._enumerator.settling_files())
        paths.update(s.path for held in rounds.held_splits().values() for s in held)
        return len(paths)

    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        finished: set[str] = set()
        for event in outcome.events:
            if isinstance(event, SplitsFinishedEvent):
                finished.update(event.split_ids)
                _refuse_unseen(event.rejected, outcome.subtask)
        return [s for s in outcome.splits if s.split_id not in finished]

    def commit_pending(self, rounds: SourceRounds[Any, Any]) -> bool:
        return bool(_enumerator(rounds).unsettled_rejections())

    def source_errors(self, rounds: SourceRounds[Any, Any], round_id: int) -> list[pa.RecordBatch]:
        """Files the enumerator rejected (changed after they were read; unreadable when
        planned) that the round's checkpoint records for the first time."""
        return [_source_rejection(round_id, r) for r in _enumerator(rounds).unsettled_rejections()]

    def drained(self) -> bool:
        """Nothing held for two plans, and long enough running that every file present at the
        start passed its stability scans (continuous mode scans every monitor interval)."""
        cfg = self.source.config
        settle = cfg.monitor_interval * (cfg.stable_scans + 1) if cfg.continuous else 0.0
        return self._idle_rounds >= 2 and time.monotonic() - self._started >= settle


def _enumerator(rounds: SourceRounds[Any, Any]) -> FileSplitEnumerator:
    enumerator = rounds.coordinator.enumerator
    if not isinstance(enumerator, FileSplitEnumerator):
        raise TypeError(f"the file source's rounds hold a {type(enumerator).__name__}")
    return enumerator
