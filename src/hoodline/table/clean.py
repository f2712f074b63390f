"""Cleaning: delete file slices no longer needed by the last N completed commits.

Policy ``KEEP_LATEST_COMMITS`` (Hudi's default): with ``E`` the oldest of the last ``N`` completed
commits, a file group keeps every version written at or after ``E`` plus the newest version
before ``E`` (so time travel to any retained commit still works); older versions are deleted
(a merge-on-read slice goes whole: its base file and its log files).
File groups replaced by a replacecommit older than ``E`` are deleted entirely. Files of
uncommitted instants are never touched (rollback owns them), nor slices holding a file a
savepoint lists (``<ts>.savepoint``, written by Java's savepoint command), as Java's cleaner.

Deletion happens inside a ``clean`` instant: ``.clean.requested`` and ``.clean.inflight`` hold
the plan (a ``HoodieCleanerPlan``: the files to delete by full path), then ``.clean`` a
``HoodieCleanMetadata`` listing the deleted files by name (Avro, as Java Hudi writes them; see
:mod:`hoodline.table.action_metadata`).
A clean interrupted by a crash is finished by :func:`finish_pending_cleans`.

**Incremental planning.** A file version becomes deletable only when its file group gets a newer
version (or is replaced) by a commit before the new earliest retained commit. So after a clean
planned through earliest retained commit ``E1`` (kept in memory on the :class:`HudiTable`, with
the instants pending then), the next clean, through ``E2``, looks only at the partitions that
commits in ``[E1, E2)`` wrote or replaced, and at those of the instants that were pending then
and completed since (an asynchronous compaction) -- as Java's incremental cleaning does. Every
partition is listed once per process and table (the first clean), and whenever savepoints
exist: on an object store a listing of every partition in every round was a request per
partition per round.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from hoodline.config.options import option
from hoodline.errors import TableError, TimelineError
from hoodline.table.action_metadata import ActionBody, deserialize, serialize
from hoodline.table.fs_view import (
    CommittedInstants,
    list_data_files,
    list_table_data_files,
    parse_base_file_name,
)
from hoodline.table.instant import CLEAN, REPLACE_COMMIT, SAVEPOINT, Instant, State
from hoodline.table.table import HudiTable

CLEANER_COMMITS_RETAINED = option(
    "hoodie.cleaner.commits.retained",
    int,
    10,
    "Number of most recent completed commits whose file versions cleaning keeps; older file "
    "versions are deleted (time travel and incremental reads reach back this far).",
    minimum=1,
)

POLICY = "KEEP_LATEST_COMMITS"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanProgress:
    """Where this process's last clean of a table planned through: its earliest retained
    commit, and the instants pending at that time (their files were not looked at)."""

    earliest: str
    pending: frozenset[str]


def _partitions_since(table: HudiTable, earliest: str) -> list[str] | None:
    """The partitions where versions may have become deletable since the last clean of this
    process (see module docs), or None: every partition."""
    progress = table.clean_progress
    tl = table.timeline
    if not isinstance(progress, CleanProgress) or tl.completed([SAVEPOINT]):
        return None
    start = tl.start()
    if start is not None and progress.earliest < start:
        return None  # commits since were archived: their partitions are not known here
    parts: set[str] = set()
    for inst in tl.completed_commits():
        ts = inst.timestamp
        if ts >= earliest or not (ts >= progress.earliest or ts in progress.pending):
            continue
        md = tl.read_commit_metadata(inst)
        parts.update(md.partition_to_write_stats)
        parts.update(md.partition_to_replace_file_ids)
    return sorted(parts)


def plan_clean(table: HudiTable, retain_commits: int) -> tuple[str | None, dict[str, list[str]]]:
    """``(earliest retained commit, {partition: [relative file paths to delete]})``."""
    if retain_commits < 1:
        raise TableError(f"retain_commits {retain_commits} must be >= 1")
    tl = table.timeline
    tl.reload()
    commits = tl.completed_commits()
    if len(commits) <= retain_commits:
        return None, {}
    earliest = commits[-retain_commits].timestamp
    committed = CommittedInstants.of(tl)  # archived slices too
    replaced_before: set[tuple[str, str]] = set()
    for inst in commits:
        if inst.action == REPLACE_COMMIT and inst.timestamp < earliest:
            md = tl.read_commit_metadata(inst)
            for part, ids in md.partition_to_replace_file_ids.items():
                replaced_before.update((part, fid) for fid in ids)
    savepointed = savepointed_files(table)

    def kept_by_savepoint(files: list[str]) -> bool:
        return any(os.path.basename(f) in savepointed for f in files)

    to_delete: dict[str, list[str]] = {}
    partitions = _partitions_since(table, earliest)
    # every partition: on an object store one listing of the table, not a request per partition
    listed = (list_table_data_files(table.base_path, table.config.is_partitioned)
              if partitions is None
              else {part: list_data_files(table.base_path, part) for part in partitions})
    for part, (bases, logs) in listed.items():
        # file group -> slice (base instant) -> its files: base file and log files
        versions: dict[str, dict[str, list[str]]] = {}
        for name, _size in bases:
            rel = f"{part}/{name}" if part else name
            fid, _tok, ts = parse_base_file_name(rel)
            if committed(ts):
                versions.setdefault(fid, {}).setdefault(ts, []).append(rel)
        for log, _nbytes in logs:
            if committed(log.base_instant):
                rel = f"{part}/{log.name}" if part else log.name
                versions.setdefault(log.file_id, {}).setdefault(log.base_instant, []).append(rel)
        doomed: list[str] = []
        for fid, slices in versions.items():
            newest_first = sorted(slices, reverse=True)
            if (part, fid) in replaced_before:
                doomed.extend(rel for ts in newest_first if not kept_by_savepoint(slices[ts])
                              for rel in slices[ts])
                continue
            older = [ts for ts in newest_first if ts < earliest]
            # keep the newest slice before the earliest retained commit, whole
            doomed.extend(rel for ts in older[1:] if not kept_by_savepoint(slices[ts])
                          for rel in slices[ts])
        if doomed:
            to_delete[part] = sorted(doomed)
    return earliest, to_delete


def savepointed_files(table: HudiTable) -> set[str]:
    """Names of the files the table's completed savepoints list."""
    tl = table.timeline
    names: set[str] = set()
    for inst in tl.completed([SAVEPOINT]):
        md = deserialize(ActionBody.SAVEPOINT_METADATA, tl.read_instant_bytes(inst),
                         str(tl.path_of(inst)))
        for part in (md.get("partitionMetadata") or {}).values():
            names.update(os.path.basename(str(f)) for f in part.get("savepointDataFile") or ())
    return names


def clean(table: HudiTable, retain_commits: int = 10) -> Instant | None:
    """Delete file versions not needed by the last ``retain_commits`` completed commits.

    Returns the completed clean instant, or None when there was nothing to delete. The caller
    must hold the writer lock.
    """
    started = time.monotonic()
    # a clean that failed part-way (its storage unreachable) is finished first, as Java's
    # cleaner does: it stayed pending, behind later completed cleans, until the next start
    finish_pending_cleans(table)
    earliest, to_delete = plan_clean(table, retain_commits)
    # as the plan saw the timeline (it reloaded it)
    pending = frozenset(i.timestamp for i in table.timeline.pending())
    progress = None if earliest is None else CleanProgress(earliest, pending)
    if earliest is None or not to_delete:
        table.clean_progress = progress
        return None
    ts = table.new_instant_time()
    plan = {
        "earliestInstantToRetain": {
            "timestamp": earliest,
            "action": "commit",
            "state": "COMPLETED",
        },
        "lastCompletedCommitTimestamp": table.timeline.completed_commits()[-1].timestamp,
        "policy": POLICY,
        "filePathsToBeDeletedPerPartition": {
            p: [{"filePath": str(table.absolute(f)), "isBootstrapBaseFile": False} for f in fs]
            for p, fs in to_delete.items()
        },
        "version": 2,
    }
    requested = table.timeline.create_requested(
        CLEAN, ts, serialize(ActionBody.CLEANER_PLAN, plan)
    )
    done = _execute(table, requested, plan, started)
    table.clean_progress = progress
    return done


def _execute(table: HudiTable, inst: Instant, plan: dict[str, Any], started: float) -> Instant:
    tl = table.timeline
    if inst.state is State.REQUESTED:
        inst = tl.transition_to_inflight(inst, serialize(ActionBody.CLEANER_PLAN, plan))
    partition_meta: dict[str, Any] = {}
    total = 0
    for part, entries in (plan.get("filePathsToBeDeletedPerPartition") or {}).items():
        ok: list[str] = []
        failed: list[str] = []
        patterns: list[str] = []
        for entry in entries:
            path = table.file_at(str(entry["filePath"]))  # full (hoodline 0.1: relative)
            name = path.name
            patterns.append(name)
            try:
                path.unlink()
                ok.append(name)
            except FileNotFoundError:
                ok.append(name)  # deleted by an earlier, interrupted attempt
            except OSError:
                failed.append(name)
        total += len(ok)
        partition_meta[part] = {
            "partitionPath": part,
            "policy": plan.get("policy", POLICY),
            "deletePathPatterns": patterns,
            "successDeleteFiles": ok,
            "failedDeleteFiles": failed,
            "isPartitionDeleted": False,
        }
    earliest = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
    metadata = {
        "startCleanTime": inst.timestamp,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": total,
        "earliestCommitToRetain": earliest or "",
        "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp") or "",
        "partitionMetadata": partition_meta,
        "version": 2,
        "bootstrapPartitionMetadata": {},
    }
    return tl.complete(inst, serialize(ActionBody.CLEAN_METADATA, metadata))


def earliest_retained_commit(table: HudiTable) -> str | None:
    """``earliestCommitToRetain`` of the newest completed clean (None if never cleaned).

    File versions needed by queries at earlier instants may have been deleted."""
    cleans = table.timeline.completed([CLEAN])
    if not cleans:
        return None
    tl = table.timeline
    last = cleans[-1]
    try:
        raw = tl.read_instant_bytes(last)
        value = deserialize(ActionBody.CLEAN_METADATA, raw, str(tl.path_of(last))).get(
            "earliestCommitToRetain")
    except TimelineError as exc:
        # damaged by hand or by a disk: the clean's plan (same instant) names what it kept
        requested = last.with_state(State.REQUESTED)
        try:
            plan = deserialize(ActionBody.CLEANER_PLAN, tl.read_instant_bytes(requested),
                               str(tl.path_of(requested)))
        except (TimelineError, FileNotFoundError):
            raise TimelineError(
                f"{exc}. It is the newest clean, whose metadata says which commits cleaning "
                f"kept whole (for time travel and archival), and its plan "
                f"'{tl.path_of(requested)}' is not readable either: restore the file from a "
                "copy ('hoodline table clean PATH --retain N' still cleans, N commits "
                "kept)") from None
        value = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
        log.warning("%s; the commits that clean kept are taken from its plan (restore the "
                    "file from a copy to silence this)", exc)
    return str(value) if value else None


def retention_of_last_clean(table: HudiTable) -> int | None:
    """How many completed commits the newest clean's ``earliestCommitToRetain`` keeps today
    (None if never cleaned): what the table's writers retained, as far as the table shows."""
    earliest = earliest_retained_commit(table)
    if earliest is None:
        return None
    kept = [i for i in table.timeline.completed_commits() if i.timestamp >= earliest]
    return max(1, len(kept))


def finish_pending_cleans(table: HudiTable) -> list[Instant]:
    """Complete clean instants interrupted by a crash (their plan is re-executed)."""
    done = []
    tl = table.timeline
    for inst in tl.pending([CLEAN]):
        requested = inst.with_state(State.REQUESTED)
        raw = tl.read_instant_bytes(requested)
        plan = deserialize(ActionBody.CLEANER_PLAN, raw, str(tl.path_of(requested)))
        done.append(_execute(table, inst, plan, time.monotonic()))
    return done
