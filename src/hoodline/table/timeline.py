"""The active timeline in ``.hoodie/``: listing, atomic state transitions, commit metadata.

State files are created exclusively (:func:`hoodline.storage.ops.create_exclusive`: a staging
file hard-linked into place locally, a conditional PUT on an object store), so a completed
instant (or any state file) is never overwritten, not even by a racing writer, and readers never
see a half-written file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from hoodline.errors import TimelineError
from hoodline.storage.ops import create_exclusive, list_names, sync_dir
from hoodline.storage.paths import TablePath, parse_location
from hoodline.table.commit_metadata import SCHEMA_KEY, CommitMetadata
from hoodline.table.instant import (
    COMMIT,
    COMPACTION,
    DATA_ACTIONS,
    SAVEPOINT,
    Instant,
    State,
    is_valid_timestamp,
)

STAGING_DIR = ".temp/.hoodline-staging"


class Timeline:
    """The instants of one table (``<base>/.hoodie``). Call :meth:`reload` to see others' changes;
    every transition made through this object reloads by itself."""

    def __init__(self, meta_path: str | os.PathLike[str] | TablePath) -> None:
        self.meta_path = parse_location(meta_path)
        self._files: list[Instant] = []
        self._latest: list[Instant] = []
        #: parsed commit metadata by completed instant file name: a completed instant is never
        #: rewritten, so a round reads each once (dropped when the file leaves the timeline)
        self._metadata: dict[str, CommitMetadata] = {}
        self.reload()

    def __getstate__(self) -> dict[str, object]:
        # tasks that receive a view need the instants, not every parsed commit
        return {**self.__dict__, "_metadata": {}}

    # -- listing --------------------------------------------------------------------------------
    def reload(self) -> Timeline:
        names = list_names(self.meta_path)
        if not names and not self.meta_path.exists():
            raise TimelineError(
                f"timeline folder '{self.meta_path}' does not exist here (when a pipeline's "
                "driver found the table, this is a node that does not see its path: on a "
                "cluster the table must be on an object store or on a file system every node "
                "mounts at the same path)")
        self._set([i for i in (Instant.parse(n) for n in names) if i is not None])
        return self

    def _set(self, instants: list[Instant]) -> None:
        files = sorted(instants, key=Instant.sort_key)
        latest: dict[tuple[str, str], Instant] = {}
        for inst in files:
            # a compaction's requested/inflight files and its completed commit are one instant
            key = (inst.timestamp, inst.comparable_action)
            seen = latest.get(key)
            if seen is None or seen.state.value <= inst.state.value:
                latest[key] = inst
        self._files = files
        self._latest = sorted(latest.values(), key=Instant.sort_key)
        if self._metadata:
            names = {i.file_name for i in files}
            self._metadata = {n: md for n, md in self._metadata.items() if n in names}

    def _added(self, instant: Instant) -> None:
        """Record a state file this object just created (saves a directory listing)."""
        self._set([*self._files, instant])

    def instant_files(self) -> list[Instant]:
        """Every state file on disk (requested, inflight and completed of the same instant)."""
        return list(self._files)

    def instants(self) -> list[Instant]:
        """Each instant once, in its most advanced state, ordered."""
        return list(self._latest)

    def completed(self, actions: Iterable[str] | None = None) -> list[Instant]:
        wanted = set(actions) if actions is not None else None
        return [
            i for i in self._latest
            if i.is_completed and (wanted is None or i.action in wanted)
        ]

    def start(self) -> str | None:
        """Where the active timeline starts: the first completed data instant or pending
        compaction whose time is not a savepoint's (Java's ``getFirstNonSavepointCommit`` of the
        file-system view's timeline). Older instants were archived: their files and log blocks
        count as committed (``containsOrBeforeTimelineStarts``). None on an empty timeline."""
        savepoints = {i.timestamp for i in self.completed([SAVEPOINT])}
        for i in self._latest:
            written = i.is_completed and i.action in DATA_ACTIONS
            if (written or (i.action == COMPACTION and not i.is_completed)) and (
                i.timestamp not in savepoints
            ):
                return i.timestamp
        return None

    def completed_commits(self) -> list[Instant]:
        """Completed instants that make data visible (commit, deltacommit, replacecommit)."""
        return self.completed(DATA_ACTIONS)

    def last_completed_commit(self) -> Instant | None:
        done = self.completed_commits()
        return done[-1] if done else None

    def pending(self, actions: Iterable[str] | None = None) -> list[Instant]:
        """Instants not completed (requested or inflight), oldest first."""
        wanted = set(actions) if actions is not None else None
        return [
            i for i in self._latest
            if not i.is_completed and (wanted is None or i.action in wanted)
        ]

    def last_timestamp(self) -> str | None:
        """The newest timestamp of any instant in any state (feed to ``InstantTimeGenerator``)."""
        return self._files[-1].timestamp if self._files else None

    def is_completed_commit(self, timestamp: str) -> bool:
        return any(i.timestamp == timestamp for i in self.completed_commits())

    def find(self, timestamp: str, action: str | None = None) -> Instant | None:
        """The instant (latest state) with this timestamp, or None (a completed compaction is
        found as ``commit`` and as ``compaction``)."""
        for inst in self._latest:
            if inst.timestamp == timestamp and (
                action is None or action in (inst.action, inst.comparable_action)
                or (action == COMPACTION and inst.action == COMMIT and inst.is_completed)
            ):
                return inst
        return None

    def path_of(self, instant: Instant) -> TablePath:
        return self.meta_path / instant.file_name

    def exists(self, instant: Instant) -> bool:
        return self.path_of(instant).is_file()

    # -- transitions ----------------------------------------------------------------------------
    def _create(self, instant: Instant, data: bytes) -> None:
        target = self.path_of(instant)
        try:
            create_exclusive(target, data, self.meta_path / STAGING_DIR)
        except FileExistsError:
            raise TimelineError(
                f"instant file '{target}' already exists; instant files are never overwritten "
                "(another writer may be active)"
            ) from None

    def create_requested(self, action: str, timestamp: str, content: bytes = b"") -> Instant:
        """Start a new instant. ``timestamp`` must be newer than every instant on the timeline."""
        self.reload()
        if not is_valid_timestamp(timestamp):
            raise TimelineError(f"instant time '{timestamp}' is not a 17-digit timestamp")
        last = self.last_timestamp()
        if last is not None and timestamp <= last:
            raise TimelineError(
                f"instant time '{timestamp}' is not newer than the latest instant '{last}' on "
                f"'{self.meta_path}'; generate it with InstantTimeGenerator.next(after=...)"
            )
        inst = Instant(timestamp, action, State.REQUESTED)
        self._create(inst, content)
        self._added(inst)
        return inst

    def transition_to_inflight(self, instant: Instant, content: bytes = b"") -> Instant:
        requested = instant.with_state(State.REQUESTED)
        inflight = instant.with_state(State.INFLIGHT)
        self.reload()
        if not self.exists(requested):
            raise TimelineError(
                f"cannot move {instant} to inflight: '{self.path_of(requested)}' does not exist"
            )
        if self.exists(instant.with_state(State.COMPLETED)):
            raise TimelineError(f"cannot move {instant} to inflight: it is already completed")
        self._create(inflight, content)
        self._added(inflight)
        return inflight

    def complete(
        self,
        instant: Instant,
        metadata: CommitMetadata | bytes,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> Instant:
        """Complete an inflight instant, writing ``metadata`` as its body in one atomic step.

        ``extra_metadata`` are writer-owned keys (e.g. a source checkpoint) merged into the
        commit's ``extraMetadata`` so that they become visible together with the data. They may
        not replace ``schema``. Raises :class:`TimelineError` if the instant is not inflight or is
        already completed (the completed file is never overwritten).
        """
        inflight = instant.with_state(State.INFLIGHT)
        completed = Instant(instant.timestamp, instant.comparable_action, State.COMPLETED)
        self.reload()
        if self.exists(completed):
            raise TimelineError(f"instant {completed} is already completed; never overwritten")
        if not self.exists(inflight):
            raise TimelineError(
                f"cannot complete {instant}: '{self.path_of(inflight)}' does not exist "
                "(was it rolled back?)"
            )
        if isinstance(metadata, CommitMetadata):
            if extra_metadata:
                if SCHEMA_KEY in extra_metadata:
                    raise TimelineError(
                        f"extra metadata key '{SCHEMA_KEY}' is reserved for the table schema"
                    )
                merged = dict(metadata.extra_metadata)
                merged.update({str(k): str(v) for k, v in extra_metadata.items()})
                metadata = CommitMetadata(
                    partition_to_write_stats=metadata.partition_to_write_stats,
                    operation_type=metadata.operation_type,
                    extra_metadata=merged,
                    compacted=metadata.compacted,
                    partition_to_replace_file_ids=metadata.partition_to_replace_file_ids,
                )
            data = metadata.to_json_bytes()
        else:
            if extra_metadata:
                raise TimelineError("extra_metadata applies to CommitMetadata bodies only")
            data = metadata
        self._create(completed, data)
        self._added(completed)
        return completed

    def delete_pending_files(self, instant: Instant) -> None:
        """Remove the requested/inflight files of a pending instant (after it was rolled back).

        Inflight goes first so a crash in between leaves a requested instant, which is rolled back
        again (idempotently) by the next writer."""
        if self.exists(instant.with_state(State.COMPLETED)):
            raise TimelineError(f"refusing to delete state files of completed instant {instant}")
        for state in (State.INFLIGHT, State.REQUESTED):
            self.path_of(instant.with_state(state)).unlink(missing_ok=True)
        sync_dir(self.meta_path)
        self.reload()

    # -- contents -------------------------------------------------------------------------------
    def read_instant_bytes(self, instant: Instant) -> bytes:
        path = self.path_of(instant)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise TimelineError(f"instant file '{path}' does not exist") from None

    def read_commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Commit metadata of a completed data instant (parsed once per instant: callers must
        not change it)."""
        if instant.action not in DATA_ACTIONS:
            raise TimelineError(f"{instant} is not a data instant; it has no commit metadata")
        done = instant.with_state(State.COMPLETED)
        cached = self._metadata.get(done.file_name)
        if cached is None:
            data = self.read_instant_bytes(done)  # gone (archived meanwhile): said as it is
            try:
                cached = CommitMetadata.from_json_bytes(data, source=str(self.path_of(done)))
            except TimelineError as exc:
                commits = self.completed_commits()
                if commits and commits[-1].timestamp == instant.timestamp:
                    raise TimelineError(
                        f"{exc}. It is the table's newest commit: `hoodline table rollback "
                        f"{self.meta_path.parent} --instant {instant.timestamp}` removes it and "
                        "its files (a pipeline then writes that round again, from the "
                        "checkpoint of the commit before; other writers must write its data "
                        "again), or restore the file from a copy") from None
                raise TimelineError(
                    f"{exc}. {instant.action.capitalize()} {instant.timestamp} is not the "
                    "table's newest commit (later ones wrote on top of it): restore the file "
                    "from a copy") from None
            self._metadata[done.file_name] = cached
        return cached

    def latest_schema(self) -> str | None:
        """``extraMetadata.schema`` of the newest completed commit that has one."""
        for inst in reversed(self.completed_commits()):
            schema = self.read_commit_metadata(inst).schema
            if schema:
                return schema
        return None

    def latest_extra_metadata(self, key: str) -> tuple[Instant, str] | None:
        """The newest completed commit carrying ``key`` in ``extraMetadata``, with its value.

        Commits by other writers (without the key) are skipped, as Hudi's Streamer does when it
        looks for its checkpoint."""
        found = self.latest_commit_with(key)
        return None if found is None else (found[0], found[1].extra_metadata[key])

    def latest_commit_with(self, *keys: str) -> tuple[Instant, CommitMetadata] | None:
        """The newest completed commit carrying one of ``keys`` in ``extraMetadata``, with its
        whole metadata (see :meth:`latest_extra_metadata`)."""
        for inst in reversed(self.completed_commits()):
            metadata = self.read_commit_metadata(inst)
            if any(key in metadata.extra_metadata for key in keys):
                return inst, metadata
        return None
