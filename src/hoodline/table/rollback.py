"""Rolling back instants that never completed.

A failed (requested/inflight) data instant is rolled back by a ``rollback`` instant:

1. ``<rb>.rollback.requested`` holds the plan (a ``HoodieRollbackPlan``, Avro as Java writes it,
   see :mod:`hoodline.table.action_metadata`): the instant to roll back and the files to delete
   by full path,
   which are exactly the files its markers list (every data file is marked before it is written;
   on merge-on-read tables that includes the log files it appended: every write creates new log
   files, so deleting them removes exactly its blocks). When its marker folder is gone (deleted
   by hand, or the instant's commit had removed it), the partitions are listed instead, as Java's
   listing-based rollback does: the files are the base files named with the instant and the log
   files whose first block carries it. Files left behind would come back: once archival moves
   the active timeline past the instant, readers count them as committed;
2. ``<rb>.rollback.inflight``; the failed instant's inflight/requested files are removed (so it
   can no longer be completed);
3. the planned files are deleted (missing ones are fine);
4. ``<rb>.rollback`` is completed with a ``HoodieRollbackMetadata`` (deleted files per
   partition);
5. the failed instant's marker folder is removed.

Every step is idempotent; a crash anywhere is finished by :func:`rollback_pending`, which a
writer calls (holding the writer lock) before it writes.

:func:`rollback_pending` leaves alone what is not a failed write (as Java's eager rollback of
failed writes does): a pending clustering plan (a ``replacecommit.requested`` holding a
``HoodieRequestedReplaceMetadata`` of operation CLUSTER) belongs to the table service that
scheduled it, and a write whose Java writer still sends heartbeats
(``.hoodie/.heartbeat/<instant>`` touched within :data:`HEARTBEAT_EXPIRY_SECONDS`) is live:
hoodline refuses to open the table instead of rolling it back under its writer.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import fastavro

from hoodline.errors import HoodlineError, TableError, TimelineError, WriterLockError
from hoodline.storage.ops import remove_tree
from hoodline.table.action_metadata import ActionBody, deserialize, serialize
from hoodline.table.clean import finish_pending_cleans
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.compaction_plan import plan_problem
from hoodline.table.fs_view import list_data_files, list_table_data_files, parse_base_file_name
from hoodline.table.instant import (
    COMPACTION,
    DATA_ACTIONS,
    REPLACE_COMMIT,
    ROLLBACK,
    Instant,
    State,
)
from hoodline.table.log.blocks import first_block_instant
from hoodline.table.log.names import LogFileName
from hoodline.table.markers import Markers, instants_with_markers
from hoodline.table.table import HudiTable
from hoodline.table.timeline import STAGING_DIR

log = logging.getLogger(__name__)

HEARTBEAT_FOLDER = ".heartbeat"
#: how long after its last heartbeat a Java writer counts as alive: Java's defaults,
#: ``hoodie.client.heartbeat.interval_in_ms`` (60 s) x ``….tolerable.misses`` (2)
HEARTBEAT_EXPIRY_SECONDS = 120.0


def heartbeat_age(table: HudiTable, instant_ts: str, now: float) -> float | None:
    """Seconds since a writer last touched the heartbeat file of ``instant_ts`` (None: none)."""
    try:
        return now - (table.meta_path / HEARTBEAT_FOLDER / instant_ts).stat().st_mtime
    except FileNotFoundError:
        return None


def is_pending_clustering(table: HudiTable, instant: Instant) -> bool:
    """Whether a pending replacecommit is a clustering plan (not a failed write)."""
    if instant.action != REPLACE_COMMIT:
        return False
    try:
        data = table.timeline.read_instant_bytes(instant.with_state(State.REQUESTED))
    except TimelineError:
        return False
    if not data:  # insert_overwrite writes an empty requested file
        return False
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except (ValueError, EOFError, StopIteration, TypeError, KeyError):
        return False
    return bool(records) and isinstance(records[0], dict) and (
        str(records[0].get("operationType") or "").upper() == "CLUSTER"
    )


def _plan(table: HudiTable, instant: Instant, files: list[str]) -> dict[str, Any]:
    by_partition: dict[str, list[str]] = {}
    for f in files:
        part = f.rsplit("/", 1)[0] if "/" in f else ""
        by_partition.setdefault(part, []).append(str(table.absolute(f)))
    return {
        "instantToRollback": {"commitTime": instant.timestamp, "action": instant.action},
        "RollbackRequests": [
            {"partitionPath": p, "fileId": "", "latestBaseInstant": "",
             "filesToBeDeleted": sorted(fs), "logBlocksToBeDeleted": {}}
            for p, fs in sorted(by_partition.items())
        ],
        "version": 1,
    }


def _log_instant(table: HudiTable, rel: str) -> str | None:
    """The instant of the first whole block of the log file ``rel`` (every write creates new
    log files, so it is the instant that wrote the file); None while it holds no whole block.
    FileNotFoundError when it is gone."""
    return first_block_instant(table.absolute(rel).read_bytes())


def _written_by(table: HudiTable, rel: str, instant_ts: str) -> bool:
    """Whether ``rel`` is a file ``instant_ts`` wrote: a base file named with the instant, or a
    log file whose blocks carry it (or that holds no whole block yet: every write creates a new
    log file, so a torn one is the failed write's own)."""
    name = os.path.basename(rel)
    log = LogFileName.parse(name)
    if log is not None:
        try:
            first = _log_instant(table, rel)
        except FileNotFoundError:
            return True
        return first is None or first == instant_ts
    try:
        _fid, _tok, ts = parse_base_file_name(rel)
    except TableError:
        return False
    return ts == instant_ts


def _partitions_written(table: HudiTable, instant: Instant) -> list[str] | None:
    """The partitions a pending instant's inflight file names (Java writes its workload profile
    there before any data file); None when it names none (hoodline's inflight files are empty)
    or cannot be read: then every partition may hold its files."""
    try:
        data = table.timeline.read_instant_bytes(instant.with_state(State.INFLIGHT))
        metadata = CommitMetadata.from_json_bytes(data)
    except TimelineError:
        return None
    return sorted(metadata.partition_to_write_stats) or None


def _listed_files(table: HudiTable, instant: Instant) -> list[str]:
    """The files of ``instant`` found by listing, when its markers are gone (as Java's
    listing-based rollback): base files named with the instant, log files whose first block
    carries it. Log files of slices newer than the instant cannot be its own and are not read."""
    ts = instant.timestamp
    partitions = _partitions_written(table, instant)
    if partitions is None:
        listed = list_table_data_files(table.base_path, table.config.is_partitioned)
    else:
        listed = {part: list_data_files(table.base_path, part) for part in partitions}
    files: list[str] = []
    for part, (bases, logs) in sorted(listed.items()):
        prefix = f"{part}/" if part else ""
        files += [prefix + name for name, _size in bases
                  if _written_by(table, prefix + name, ts)]
        for log_name, _size in logs:
            if log_name.base_instant > ts:
                continue
            try:
                if _log_instant(table, prefix + log_name.name) == ts:
                    files.append(prefix + log_name.name)
            except FileNotFoundError:
                continue
    log.warning(
        "the markers of %s %s are missing ('%s'): listed %s of the table instead and found %d "
        "files of that instant to delete", instant.action, ts, Markers(table, ts).dir,
        "every partition" if partitions is None
        else f"the {len(partitions)} partitions its inflight file names", len(files))
    return files


def _files_to_delete(table: HudiTable, instant: Instant) -> list[str]:
    markers = Markers(table, instant.timestamp)
    if not markers.exists():
        # a requested instant has written nothing yet (Java plans no deletes for it either)
        return [] if instant.state is State.REQUESTED else _listed_files(table, instant)
    files = markers.marked_files()
    for f in files:
        # safety: a marker may only point at a file this very instant writes
        if not _written_by(table, f, instant.timestamp):
            raise TableError(
                f"marker of instant {instant.timestamp} points at '{f}', which is not a file of "
                "that instant; refusing to roll back (inspect .hoodie/.temp by hand)"
            )
    return files


def _execute(
    table: HudiTable, target: Instant, plan: dict[str, Any], rb_ts: str, started: float
) -> dict[str, Any]:
    partition_meta: dict[str, Any] = {}
    total = 0
    for req in plan.get("RollbackRequests") or []:
        part = req.get("partitionPath", "")
        ok: list[str] = []
        failed: list[str] = []
        for name in req.get("filesToBeDeleted") or []:
            # full paths (hoodline 0.1 wrote them relative to the table)
            path = table.file_at(str(name))
            try:
                path.unlink()
                ok.append(str(path))
            except FileNotFoundError:
                pass
            except OSError:
                failed.append(str(path))
        if failed:
            raise TableError(
                f"rollback of {target.timestamp} could not delete {failed}; fix permissions and "
                "reopen the table for writing to retry"
            )
        total += len(ok)
        partition_meta[part] = {
            "partitionPath": part,
            "successDeleteFiles": ok,
            "failedDeleteFiles": failed,
            "rollbackLogFiles": {},
            "logFilesFromFailedCommit": {},
        }
    return {
        "startRollbackTime": rb_ts,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": total,
        "commitsRollback": [target.timestamp],
        "partitionMetadata": partition_meta,
        "version": 1,
        "instantsRollback": [{"commitTime": target.timestamp, "action": target.action}],
    }


def _finish(
    table: HudiTable, rb: Instant, target: Instant, plan: dict[str, Any], started: float
) -> Instant:
    tl = table.timeline
    if rb.state is State.REQUESTED:
        rb = tl.transition_to_inflight(rb)
    # remove the target's state files *before* its data: a writer that (wrongly) still runs can
    # then no longer complete it (complete() needs the inflight file), and the plan in the
    # rollback's requested file lets a crash here be finished later
    tl.reload()
    pending_target = tl.find(target.timestamp, target.action)
    if pending_target is not None:
        if pending_target.is_completed:
            raise TimelineError(
                f"rollback {rb.timestamp} targets {pending_target}, which has completed meanwhile"
            )
        tl.delete_pending_files(pending_target)
    metadata = _execute(table, target, plan, rb.timestamp, started)
    done = tl.complete(rb, serialize(ActionBody.ROLLBACK_METADATA, metadata))
    Markers(table, target.timestamp).delete_all()
    return done


def rollback_instant(
    table: HudiTable, instant: Instant, *, completed_because: str | None = None
) -> Instant:
    """Roll back a requested/inflight instant; returns the completed rollback instant.

    A completed one only with ``completed_because`` (why its data must go: the table's newest
    commit, nothing written on top of it), or when its file cannot be read back.
    The caller must hold the table's writer lock (no live writer may still write ``instant``).
    """
    table.timeline.reload()
    current = table.timeline.find(instant.timestamp, instant.action)
    if current is None:
        raise TimelineError(f"instant {instant} is not on the timeline of '{table.base_path}'")
    written: list[str] | None = None
    if current.is_completed:
        current, written = _uncommit(table, current, completed_because)
    if current.action == COMPACTION:
        _require_unrunnable_compaction(table, current)
    started = time.monotonic()
    files = _files_to_delete(table, current) if written is None else written
    rb_ts = table.new_instant_time()
    plan = _plan(table, current, files)
    rb = table.timeline.create_requested(ROLLBACK, rb_ts, serialize(ActionBody.ROLLBACK_PLAN, plan))
    return _finish(table, rb, current, plan, started)


def _uncommit(
    table: HudiTable, done: Instant, because: str | None
) -> tuple[Instant, list[str] | None]:
    """Turn the table's newest commit into a pending instant (its completed file goes), to be
    rolled back as a failed write; returns that pending instant and the files its write stats
    name (None when its file cannot be read: they are listed). For a commit whose file cannot
    be read back (nothing reads past such a file, and nothing else gets it out), or one the
    caller gives a reason for (``because``); refused for any other, for one that later commits
    wrote on top of, and for one a later clean undermined (it deleted file versions the commit
    replaced): rolling those back loses data."""
    tl = table.timeline
    path = tl.path_of(done)
    damage = ""
    metadata: CommitMetadata | None = None
    try:
        metadata = CommitMetadata.from_json_bytes(tl.read_instant_bytes(done), str(path))
    except TimelineError as exc:
        damage = str(exc)
    damage = damage or because or ""
    if done.action not in DATA_ACTIONS or not damage:
        raise TimelineError(
            f"{done.action} {done.timestamp} completed; rolling back completed instants is not "
            "supported (only what a killed writer left pending, and the newest commit when its "
            "file cannot be read)"
        )
    newer = [f"{i.action} {i.timestamp}" for i in tl.completed_commits()
             if i.timestamp > done.timestamp]
    if newer:
        raise TimelineError(
            f"{done.action} {done.timestamp} cannot be rolled back: {damage}, and it is not the "
            f"table's newest commit: {', '.join(newer)} wrote on top of it and would lose data. "
            f"Restore '{path}' from a copy"
        )
    if not any(tl.exists(done.with_state(s)) for s in (State.REQUESTED, State.INFLIGHT)):
        raise TimelineError(
            f"{done.action} {done.timestamp} cannot be rolled back: {damage}, and its requested "
            f"and inflight files are gone too. Restore '{path}' from a copy"
        )
    written = None if metadata is None else sorted(
        s.path for stats in metadata.partition_to_write_stats.values() for s in stats
        if _written_by(table, s.path, done.timestamp))
    # groups it wrote a new base file version in, and that have no older version left
    bare = {_group_of(f) for f in (_listed_files(table, done) if written is None else written)
            if LogFileName.parse(os.path.basename(f)) is None}
    bare -= _groups_with_versions_before(table, {part for part, _fid in bare}, done.timestamp)
    for clean in tl.completed(["clean"]):
        if bare and clean.timestamp > done.timestamp:
            md = deserialize(ActionBody.CLEAN_METADATA, tl.read_instant_bytes(clean),
                             str(tl.path_of(clean)))
            gone = [str(f) for p in (md.get("partitionMetadata") or {}).values()
                    for f in p.get("successDeleteFiles") or []
                    if _group_of(f"{p.get('partitionPath')}/{os.path.basename(str(f))}")
                    in bare]
            if gone:
                raise TimelineError(
                    f"{done.action} {done.timestamp} cannot be rolled back: {damage}, and clean "
                    f"{clean.timestamp} deleted file versions it replaced (e.g. '{gone[0]}'). "
                    f"Restore '{path}' from a copy"
                )
    log.warning("removing %s (%s) to roll back %s %s", path, damage, done.action,
                done.timestamp)
    path.unlink()
    tl.reload()
    pending = tl.find(done.timestamp, done.action)
    if pending is None or pending.is_completed:
        raise TimelineError(f"{done} changed on the timeline while it was rolled back; retry")
    return pending, written


def _groups_with_versions_before(
    table: HudiTable, partitions: set[str], instant_ts: str
) -> set[tuple[str, str]]:
    """(partition, file id) of the file groups with a slice older than ``instant_ts``."""
    out: set[tuple[str, str]] = set()
    for part in partitions:
        bases, logs = list_data_files(table.base_path, part)
        out.update((part, fid) for fid, _tok, ts in (parse_base_file_name(n) for n, _ in bases)
                   if ts < instant_ts)
        out.update((part, n.file_id) for n, _ in logs if n.base_instant < instant_ts)
    return out


def _group_of(rel: str) -> tuple[str, str]:
    """(partition, file id) of a data file path relative to the table."""
    part, _, name = rel.rpartition("/")
    log_name = LogFileName.parse(name)
    return part, log_name.file_id if log_name is not None else parse_base_file_name(name)[0]


def _require_unrunnable_compaction(table: HudiTable, compaction: Instant) -> None:
    """Refuse to roll back a pending compaction unless its plan is unreadable (so nothing can
    finish it) and no write logged against it (rolling it back would hide those logs: a slice
    whose base instant is not on the timeline is not read). Java's CLI unschedules such a plan;
    hoodline rolls it back, which also deletes what an inflight one wrote."""
    damage = plan_problem(table.timeline, compaction)
    if damage is None:
        raise TimelineError(
            f"{compaction.describe()} is a pending compaction, which is finished, not rolled "
            "back: writes after it may have logged against its plan, and would be lost with it. "
            f"`hoodline table compact {table.base_path}` finishes it from its plan (so does "
            "the next writer of the table)"
        )
    ts = compaction.timestamp
    logged = [f"{part}/{name.name}" if part else name.name
              for part, (_bases, logs) in sorted(list_table_data_files(
                  table.base_path, table.config.is_partitioned).items())
              for name, _size in logs if name.base_instant == ts]
    if logged:
        raise TimelineError(
            f"{compaction.describe()} cannot be rolled back: {damage}, and {len(logged)} log "
            f"files were written against it (e.g. '{logged[0]}'), whose rows would be lost "
            f"with it. Restore '{table.timeline.path_of(compaction.with_state(State.REQUESTED))}'"
            " from a copy, then `hoodline table compact` finishes it"
        )
    log.warning("rolling back %s, whose plan is unreadable (%s)", compaction.describe(), damage)


def discard_lost_instant(table: HudiTable, instant_ts: str) -> tuple[list[str], list[str]]:
    """Delete the files a writer that lost the writer lock wrote for its instant ``instant_ts``;
    returns (deleted, left) as paths relative to the table. Best effort: call it once nothing of
    this writer writes any more (on a pipeline, once its tasks have stopped).

    The lock's new holder rolled the instant back when it took the lock, but a writer that was
    paused (SIGSTOP, a laptop asleep) wrote on when it resumed, and nobody rolls back an instant
    that is no longer on the timeline: once archival moved the active timeline past it, readers
    count its files as committed (instants older than the active timeline are, as in Java), and
    rolled-back data came back. Its markers name the files; only files of this instant are
    deleted -- a base file named with it, a log file whose first block carries it. A log file
    the markers name but another writer wrote (the same log version taken first) is left, and
    so is one without a whole block yet (it may be the new holder's, being written): ``left``.
    """
    deleted: list[str] = []
    left: list[str] = []
    markers = Markers(table, instant_ts)
    for rel in markers.marked_files():
        name = os.path.basename(rel)
        try:
            if LogFileName.parse(name) is not None:
                try:
                    first = _log_instant(table, rel)
                except FileNotFoundError:
                    continue
                if first != instant_ts:
                    if first is None:
                        left.append(rel)
                    continue
            elif not _written_by(table, rel, instant_ts):
                continue
            table.absolute(rel).unlink()
            deleted.append(rel)
        except FileNotFoundError:
            continue
        except (OSError, HoodlineError):
            left.append(rel)
    if not left:
        try:
            markers.delete_all()
        except (OSError, HoodlineError) as exc:
            log.debug("cannot remove the markers of %s: %s", instant_ts, exc)
    return deleted, left


def describe_repair(table: HudiTable, done: Instant) -> str:
    """What the completed instant ``done`` of a repair (:func:`rollback_pending`, a finished
    compaction) did, for people: a rollback names the instants it rolled back."""
    if done.action != ROLLBACK:
        if table.timeline.exists(Instant(done.timestamp, COMPACTION, State.REQUESTED)):
            return f"finished compaction {done.timestamp} (completed as a commit)"
        return f"completed {done.action} {done.timestamp}"
    try:
        metadata = deserialize(ActionBody.ROLLBACK_METADATA, table.timeline.read_instant_bytes(
            done), str(table.timeline.path_of(done)))
        targets = [f"{t['action']} {t['commitTime']}" for t in metadata["instantsRollback"]]
    except (KeyError, TypeError, TableError, OSError):  # unreadable: the instant alone
        return f"rollback {done.timestamp}"
    return f"rolled back {', '.join(targets)} (rollback {done.timestamp})"


def rolled_back(table: HudiTable, instant_ts: str) -> bool:
    """Whether a rollback instant on the active timeline (pending: its plan; completed: its
    metadata) names ``instant_ts``: the evidence that a write of that instant failed."""
    tl = table.timeline
    for rb in tl.instants():
        if rb.action != ROLLBACK or rb.timestamp <= instant_ts:
            continue
        try:
            if rb.is_completed:
                metadata = deserialize(ActionBody.ROLLBACK_METADATA, tl.read_instant_bytes(rb),
                                       str(tl.path_of(rb)))
                if instant_ts in (metadata.get("commitsRollback") or []):
                    return True
            elif str(_read_plan(table, rb)["instantToRollback"]["commitTime"]) == instant_ts:
                return True
        except (KeyError, TypeError, TableError, OSError):
            continue  # unreadable: no evidence
    return False


def _read_plan(table: HudiTable, rb: Instant) -> dict[str, Any]:
    source = str(table.timeline.path_of(rb.with_state(State.REQUESTED)))
    plan = deserialize(ActionBody.ROLLBACK_PLAN, table.timeline.read_instant_bytes(
        rb.with_state(State.REQUESTED)), source)
    try:
        target = plan["instantToRollback"]
        Instant(str(target["commitTime"]), str(target["action"]), State.INFLIGHT)
    except (KeyError, TypeError, TimelineError) as exc:
        raise TimelineError(
            f"rollback plan '{source}' names no instant to roll back ({exc!r})"
        ) from None
    return plan


def rollback_pending(
    table: HudiTable, clock: Callable[[], float] = time.time
) -> list[Instant]:
    """Repair a table left by a dead writer; returns the completed rollback/clean instants.

    Finishes interrupted rollbacks and cleans, rolls back every pending data instant, and
    removes leftovers (marker folders of completed instants, staging files). Call it holding the
    writer lock, before writing.
    """
    tl = table.timeline
    tl.reload()
    done: list[Instant] = []
    for rb in tl.pending([ROLLBACK]):
        plan = _read_plan(table, rb)
        t = plan["instantToRollback"]
        target = Instant(str(t["commitTime"]), str(t["action"]), State.INFLIGHT)
        done.append(_finish(table, rb, target, plan, time.monotonic()))
    done.extend(finish_pending_cleans(table))
    tl.reload()
    failed = []
    for inst in tl.pending(DATA_ACTIONS):
        if is_pending_clustering(table, inst):
            log.info("leaving clustering plan %s pending for the service that scheduled it",
                     inst.timestamp)
            continue
        age = heartbeat_age(table, inst.timestamp, clock())
        if age is not None and age < HEARTBEAT_EXPIRY_SECONDS:
            raise WriterLockError(
                f"instant {inst} of '{table.base_path}' is being written by another writer (its "
                f"heartbeat is {age:.0f} s old, live for {HEARTBEAT_EXPIRY_SECONDS:.0f} s); "
                "hoodline will not roll it back under it: stop that writer or wait for it to "
                "finish, then retry"
            )
        failed.append(inst)
    for inst in reversed(failed):
        done.append(rollback_instant(table, inst))
    tl.reload()
    completed = {i.timestamp for i in tl.instants() if i.is_completed}
    for ts in instants_with_markers(table.meta_path):
        if ts in completed:
            Markers(table, ts).delete_all()
    remove_tree(table.meta_path / STAGING_DIR)
    return done
