"""The file split enumerator: discovery, bookkeeping and pull-based assignment (FLIP-27 + 537).

Assignment is *pull-based*, as in Flink's file source: a reader asks for work
(``handle_split_request``) when it starts and whenever it finished its splits; the enumerator
answers with up to ``assign.splits-per-request`` pending splits, oldest files first. Readers that
ask while nothing is pending wait until discovery finds files (continuous) or get
no-more-splits (bounded, once the listing is done).

Recovery (the source implements ``SupportsSplitReassignmentOnRecovery``): restored readers report
their in-progress splits (with progress) at registration and the enumerator decides, using its
global ``assignment`` (split id -> reader):

* after a restore from a checkpoint every recorded owner is stale (readers' states may have been
  redistributed to other subtasks when the parallelism changed), so the first reader that reports
  a split *claims* it; at a global restart each in-flight split is in exactly one reader state;
* otherwise a reported split is taken back only if the assignment says the reporter owns it
  (a split that has meanwhile gone to another reader, or back to pending, is ignored: FLIP-537
  case "single task failover before the first checkpoint after a restart");
* a claimed split is handed straight back to the reporting reader (stable assignment while the
  parallelism is unchanged; no split waits in limbo).

``add_splits_back`` (splits assigned after the last completed checkpoint to a failed reader) puts
the splits back to pending. Finished splits leave the assignment: a reader reports them with
:class:`SplitsFinishedEvent`; they are dropped from the checkpointed assignment at the next
snapshot and from memory when that checkpoint completes (until then a failed reader may still
re-report them from its older checkpoint).

Processed-file bookkeeping: a file version enters ``processed`` in the same step its splits enter
``pending``; a later scan never turns it into splits again. A processed file whose size or
modification time changes later is a bad input: with ``errors.tolerance = none`` it stops the
source (:class:`FileSourceError`), with ``all`` it is rejected once (its new content is not
read). The processed map grows with the number of files read (it is zlib-compressed in
checkpoints).

Rejections the enumerator makes itself (changed files, files whose splits cannot be planned) are
*unsettled* until a completed checkpoint holds them:
:meth:`FileSplitEnumerator.unsettled_rejections` lists them for the pipeline, which writes them to
the error table with the round whose checkpoint records them (readers report their own
rejections with their splits).

Bounded mode lists the directory once per start, also when restored from a checkpoint: a source
run again picks up the files that arrived since (files it read before are processed).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from hoodline.connectors.files.compression import describe_extensions
from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.discovery import DirectoryLister, FileEntry, StabilityTracker
from hoodline.connectors.files.events import SplitsFinishedEvent
from hoodline.connectors.files.location import exists
from hoodline.connectors.files.planning import plan_file
from hoodline.connectors.files.rejections import RejectedFile, SourceRejection
from hoodline.connectors.files.split import FileSourceSplit
from hoodline.connectors.files.state import FileEnumeratorState
from hoodline.errors import FileSourceError
from hoodline.source.api import (
    SourceEvent,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
)

log = logging.getLogger(__name__)

#: Most splits one request takes (a round's plan lists each of its reader's splits).
MAX_SPLITS_PER_REQUEST = 1000

#: Owner value of an assignment entry restored from a checkpoint: any reporter may claim it.
UNCLAIMED = -1


def _iso(mtime_ns: int) -> str:
    """A modification time for messages: UTC, to the microsecond."""
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class PlannedFile:
    """A newly eligible file version and its splits (or why it could not be planned)."""

    entry: FileEntry
    splits: tuple[FileSourceSplit, ...]
    error: str | None = None


class _Scanner:
    """The discovery callable run through ``call_async``; touches no enumerator state directly.

    It reads ``processed`` only through ``is_known`` (a lock-protected membership test) so
    already processed files are not re-planned, and keeps its own stability tracker.
    """

    def __init__(
        self,
        config: FileSourceConfig,
        is_known: Callable[[FileEntry], bool],
        stable_scans: int,
    ) -> None:
        self._config = config
        self._lister = DirectoryLister(config.root, config.glob, config.extensions)
        self._is_known = is_known
        self._tracker = StabilityTracker(stable_scans)
        self._lock = threading.Lock()
        self._told_unmatched = False

    def __call__(self) -> tuple[list[PlannedFile], list[FileEntry]]:
        """(new eligible files with their splits, every eligible file version seen)."""
        with self._lock:
            eligible = self._tracker.observe(self._lister.list())
            self._tell_unmatched()
            fresh = [e for e in eligible if not self._is_known(e)]
            fresh.sort(key=lambda e: (e.mtime_ns, e.path))
            planned = [self._plan(e) for e in fresh]
            return [p for p in planned if p is not None], eligible

    def settling(self) -> list[str]:
        """Files the last scan found that are not read yet and wait to be seen unchanged in
        'source.stable-scans' scans. Without the scan's lock (a round's report must not wait
        for a scan of a large folder): the tracker replaces, never changes, what it saw."""
        return [e.path for e in self._tracker.settling() if not self._is_known(e)]

    def _tell_unmatched(self) -> None:
        """Once per start: files the source does not read for their names' endings (an
        unexpected compression, another format) would otherwise be passed over without a
        word."""
        unmatched = self._lister.unmatched
        if self._told_unmatched or not unmatched:
            return
        self._told_unmatched = True
        shown = ", ".join(f"'{n}'" for n in unmatched[:3])
        more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
        log.warning(
            "file source: %d file(s) under '%s' are not read: their names do not end with %s "
            "(%s%s); set source.file.extensions to read them", len(unmatched),
            self._config.root, describe_extensions(self._config.extensions), shown, more)

    def _plan(self, entry: FileEntry) -> PlannedFile | None:
        try:
            return PlannedFile(entry, tuple(plan_file(entry, self._config)))
        except FileSourceError as exc:
            if not exists(entry.path):
                # deleted between listing and planning: never taken, so nothing is dropped;
                # should it come back it is discovered like any new file
                log.info("file source: '%s' vanished before it was taken", entry.path)
                return None
            return PlannedFile(entry, (), str(exc))


class FileSplitEnumerator(SplitEnumerator[FileSourceSplit, FileEnumeratorState]):
    """Enumerator of :class:`~hoodline.connectors.files.source.FileSource` (see module docs)."""

    def __init__(
        self,
        context: SplitEnumeratorContext[FileSourceSplit],
        config: FileSourceConfig,
        state: FileEnumeratorState | None = None,
    ) -> None:
        self._context = context
        self._config = config
        restored = state is not None
        state = state or FileEnumeratorState()
        self._lock = threading.Lock()  # guards _processed against the scanner's reads
        self._processed: dict[str, tuple[int, int]] = dict(state.processed)
        #: bytes a request takes splits up to (beyond ``assign.splits-per-request``); the
        #: pipeline sets each reader's share of ``runtime.round.max-bytes``, 0 keeps the option
        self.request_bytes = 0
        self._pending: OrderedDict[str, FileSourceSplit] = OrderedDict(
            (s.split_id, s) for s in state.pending
        )
        self._assignment: dict[str, int] = (
            {sid: UNCLAIMED for sid in state.assignment} if restored else {}
        )
        self._rejected: list[RejectedFile] = list(state.rejected)
        self._rejected_ids = {r.split_id for r in self._rejected}
        # Bounded: each start lists the directory, a restored one too. A pipeline run again
        # (``--once``, a scheduled job) reads the files that arrived since its last run; files
        # read before are in ``processed`` and are not read again.
        self._discovery_done = False
        self._waiting: OrderedDict[int, None] = OrderedDict()  # readers asking for work
        # finished split id -> checkpoint id of the first snapshot without it (None: not yet)
        self._finished: dict[str, int | None] = {}
        self._finished_owner: dict[str, int] = {}
        self._unclaimed_cleanup_after: int | None = None
        # the enumerator's own rejections -> id of the first checkpoint holding them (None: none
        # yet); dropped once a checkpoint holding them completes
        self._unsettled: dict[str, tuple[SourceRejection, int | None]] = {}
        self._scanner = _Scanner(
            config, self._is_known, config.stable_scans if config.continuous else 1
        )

    # -- inspection ------------------------------------------------------------------------------

    @property
    def rejected_files(self) -> list[RejectedFile]:
        """Files skipped under ``errors.tolerance=all`` (also kept in the checkpointed state)."""
        return list(self._rejected)

    def unsettled_rejections(self) -> list[SourceRejection]:
        """Rejections this enumerator made itself (changed files, files that could not be
        planned) that no completed checkpoint holds yet, oldest first. Each is in every state
        :meth:`snapshot_state` returns from the moment it is made."""
        return [r for r, _ in self._unsettled.values()]

    @property
    def pending_splits(self) -> list[FileSourceSplit]:
        return list(self._pending.values())

    def settling_files(self) -> list[str]:
        """Files found, not yet read, waiting to be seen unchanged (see :class:`_Scanner`)."""
        return self._scanner.settling()

    @property
    def processed_files(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            return dict(self._processed)

    @property
    def assignment(self) -> dict[str, int]:
        """Split id -> reader of splits handed out and not known finished (-1: unclaimed)."""
        return dict(self._assignment)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._config.continuous:
            self._context.call_async(
                self._scanner, self._on_scan, 0.0, self._config.monitor_interval
            )
        elif not self._discovery_done:
            self._context.call_async(self._scanner, self._on_scan)

    def close(self) -> None:
        pass

    # -- discovery -------------------------------------------------------------------------------

    def _is_known(self, entry: FileEntry) -> bool:
        """Taken before, in any version (changed versions are reported, never re-planned)."""
        with self._lock:
            return entry.path in self._processed

    def _on_scan(
        self,
        result: tuple[list[PlannedFile], list[FileEntry]] | None,
        error: BaseException | None,
    ) -> None:
        if error is not None:
            if isinstance(error, FileSourceError):
                raise error
            raise FileSourceError(
                f"scanning '{self._config.root}' failed: {type(error).__name__}: {error}"
            ) from error
        assert result is not None
        planned, eligible = result
        self._report_modified_files(eligible)
        for p in planned:
            self._add_planned(p)
        if not self._config.continuous:
            self._discovery_done = True
        self._serve_waiting()

    def _add_planned(self, p: PlannedFile) -> None:
        e = p.entry
        with self._lock:
            if e.path in self._processed:
                return  # already taken (an older version is reported by _report_modified_files)
            self._processed[e.path] = (e.size, e.mtime_ns)
        if p.error is not None:
            self._reject_or_raise(SourceRejection(RejectedFile(e.path, e.path, p.error, 0),
                                                  e.mtime_ns, changed=False))
            return
        for split in p.splits:
            self._pending[split.split_id] = split
        log.debug("discovered %s (%d split(s))", e.path, len(p.splits))

    def _report_modified_files(self, eligible: list[FileEntry]) -> None:
        with self._lock:
            changed = [
                e for e in eligible
                if e.path in self._processed and self._processed[e.path] != (e.size, e.mtime_ns)
            ]
        for e in changed:
            size, mtime = self._processed[e.path]
            reason = (
                f"file changed after it was read (size {size} -> {e.size} bytes, modified "
                f"{_iso(mtime)} -> {_iso(e.mtime_ns)}): a file is read once, so its new "
                "content is not read. Write new data to new files; a file that must change "
                "can be written again under a new name"
            )
            rejected = RejectedFile(e.path, f"{e.path}@{e.mtime_ns}", reason, 0)
            self._reject_or_raise(SourceRejection(rejected, e.mtime_ns, changed=True))

    def _reject_or_raise(self, rejection: SourceRejection) -> None:
        rejected = rejection.rejected
        if rejected.split_id in self._rejected_ids:
            return  # recorded before this start (a restored state holds it)
        if not self._config.tolerate_errors:
            move = (f"move the file out of '{self._config.root}' or " if rejection.changed
                    else "")
            named = "" if rejected.path in rejected.reason else f"'{rejected.path}': "
            raise FileSourceError(
                f"{named}{rejected.reason} (to go on without it, {move}set "
                "errors.tolerance = all, which records such files in the error table)"
            )
        log.warning("file source: skipping '%s': %s", rejected.path, rejected.reason)
        self._record_rejection(rejected)
        self._unsettled[rejected.split_id] = (rejection, None)

    def _record_rejection(self, rejection: RejectedFile) -> None:
        """Record ``rejection`` in the state (once)."""
        if rejection.split_id not in self._rejected_ids:
            self._rejected_ids.add(rejection.split_id)
            self._rejected.append(rejection)

    # -- assignment ------------------------------------------------------------------------------

    def handle_split_request(self, subtask_id: int, requester_location: str | None) -> None:
        self._waiting[subtask_id] = None
        self._serve_waiting()

    def _serve_waiting(self) -> None:
        registered = self._context.registered_readers()
        for subtask in list(self._waiting):
            if subtask not in registered:
                # A reader may ask before its registration is processed (it asks in start());
                # the request is served once it registers (add_reader). A stale request of a
                # failed reader at worst gives its successor one split more than it asked for.
                continue
            if self._pending:
                self._assign(subtask, self._batch())
                del self._waiting[subtask]
            elif self._discovery_done and not self._config.continuous:
                self._context.signal_no_more_splits(subtask)
                del self._waiting[subtask]
            else:
                break  # nothing to hand out now; keep everybody waiting in order

    def _batch(self) -> list[FileSourceSplit]:
        """The next pending splits for one request: ``assign.splits-per-request`` of them, and
        more while their bytes stay below :attr:`request_bytes`, up to
        :data:`MAX_SPLITS_PER_REQUEST`."""
        batch: list[FileSourceSplit] = []
        size = 0
        while self._pending and len(batch) < MAX_SPLITS_PER_REQUEST and (
                len(batch) < self._config.splits_per_request or size < self.request_bytes):
            split = self._pending.popitem(last=False)[1]
            batch.append(split)
            size += split.size_to_read
        return batch

    def _assign(self, subtask: int, splits: list[FileSourceSplit]) -> None:
        for split in splits:
            self._assignment[split.split_id] = subtask
            self._finished.pop(split.split_id, None)
            self._finished_owner.pop(split.split_id, None)
        self._context.assign_splits(SplitsAssignment({subtask: splits}))

    def add_splits_back(self, splits: Sequence[FileSourceSplit], subtask_id: int) -> None:
        for split in reversed(splits):
            sid = split.split_id
            self._assignment.pop(sid, None)
            self._finished.pop(sid, None)
            self._finished_owner.pop(sid, None)
            self._pending[sid] = split
            self._pending.move_to_end(sid, last=False)  # older work first
        self._serve_waiting()

    def add_reader(self, subtask_id: int) -> None:
        info = self._context.registered_readers().get(subtask_id)
        reported = list(info.reported_splits) if info is not None else []
        back: list[FileSourceSplit] = []
        for split in reported:
            sid = split.split_id
            if sid in self._pending:
                continue  # already given back; the pending copy has the same position
            owner = self._assignment.get(sid, self._finished_owner.get(sid))
            if owner is None:
                log.warning(
                    "reader %d reported split '%s' the enumerator has no record of; taking it "
                    "back rather than risking its loss", subtask_id, sid
                )
            elif owner not in (UNCLAIMED, subtask_id):
                continue  # moved to another reader since: ignore (FLIP-537)
            self._finished.pop(sid, None)
            self._finished_owner.pop(sid, None)
            back.append(split)
        if back:
            self._assign(subtask_id, back)
        self._serve_waiting()

    def handle_source_event(self, subtask_id: int, event: SourceEvent) -> None:
        if not isinstance(event, SplitsFinishedEvent):
            log.warning("file enumerator ignores event %r from reader %d", event, subtask_id)
            return
        for rejection in event.rejected:
            self._record_rejection(rejection)
        for sid in event.split_ids:
            owner = self._assignment.get(sid)
            if owner == subtask_id:
                del self._assignment[sid]
                self._finished[sid] = None
                self._finished_owner[sid] = subtask_id

    # -- checkpoints -----------------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> FileEnumeratorState:
        for sid, cp in self._finished.items():
            if cp is None:
                self._finished[sid] = checkpoint_id
        for sid, (rejection, cp) in self._unsettled.items():
            if cp is None:
                self._unsettled[sid] = (rejection, checkpoint_id)
        if self._unclaimed_cleanup_after is None and UNCLAIMED in self._assignment.values():
            self._unclaimed_cleanup_after = checkpoint_id
        with self._lock:
            processed = dict(self._processed)
        return FileEnumeratorState(
            processed=processed,
            pending=list(self._pending.values()),
            assignment=dict(self._assignment),
            rejected=list(self._rejected),
            discovery_done=self._discovery_done,
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        done = [sid for sid, cp in self._finished.items() if cp is not None and cp <= checkpoint_id]
        for sid in done:
            del self._finished[sid]
            self._finished_owner.pop(sid, None)
        for sid in [s for s, (_, cp) in self._unsettled.items()
                    if cp is not None and cp <= checkpoint_id]:
            del self._unsettled[sid]
        cleanup = self._unclaimed_cleanup_after
        if cleanup is not None and cleanup <= checkpoint_id:
            # Every reader registered before that checkpoint; an entry nobody claimed belongs to
            # a split that finished before the restored checkpoint's reader snapshots.
            for sid in [s for s, o in self._assignment.items() if o == UNCLAIMED]:
                del self._assignment[sid]
            self._unclaimed_cleanup_after = None
