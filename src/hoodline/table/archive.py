"""Archival: moving old instants out of the active timeline, as table version 6 does.

Java's ``HoodieTimelineArchiver`` (Hudi 0.14, timeline layout 1) keeps ``.hoodie`` small: once
more than ``hoodie.keep.max.commits`` completed commits are active, the oldest ones are archived
until ``hoodie.keep.min.commits`` remain, each instant with all its state files, and likewise
completed cleans and rollbacks (per action). What is never archived:

* a commit at or after the oldest pending write or pending compaction's completed predecessor
  (no holes in the timeline while something is in flight);
* the first savepoint and everything after it;
* on merge-on-read tables, the deltacommits compaction scheduling still counts
  (``hoodie.compact.inline.max.delta.commits`` since the last compaction);
* the earliest commit the last clean retains, and later ones;
* (hoodline) a replacecommit and everything after it, whose metadata hoodline does not convert.

``min`` grows to "commits the cleaner retains + 1" when configured lower (``ArchivalUtils``).

Archived instants become records of ``HoodieArchivedMetaEntry`` (one per state file: commit
metadata as the Avro ``HoodieCommitMetadata``, cleaner plans, clean/rollback metadata,
compaction plans) in Avro data blocks of ``hoodie.commits.archival.batch`` records, appended
as a new Hudi log file ``.hoodie/archived/.commits_.archive.<N>_1-0-1`` (block header: the
schema only). Then the state files are deleted, requested/inflight before completed, so a
reader never sees a pending instant whose completion was just removed. Readers count files
and log blocks of instants before the active timeline as committed
(:class:`~hoodline.table.fs_view.CommittedInstants`). Once enough small archive files have
gathered, they are merged into one (:mod:`~hoodline.table.archive_merge`).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from hoodline.errors import ConfigError
from hoodline.storage.ops import Entry, create_exclusive, list_dir, list_names
from hoodline.table.action_metadata import (
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    NAMESPACE,
    ROLLBACK_METADATA_SCHEMA,
    ActionBody,
    deserialize,
)
from hoodline.table.archive_merge import (
    MERGE_PLAN_NAME,
    archive_file_name,
    archive_version,
    finish_interrupted_merge,
    merge_small_files,
)
from hoodline.table.clean import earliest_retained_commit
from hoodline.table.commit_metadata import CHECKPOINT_KEYS
from hoodline.table.compaction_plan import COMPACTION_PLAN_SCHEMA, read_plan_record
from hoodline.table.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DATA_ACTIONS,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    Instant,
)
from hoodline.table.log.avro_codec import encode_datum
from hoodline.table.log.blocks import HeaderKey, LogBlock, LogBlockType, read_blocks
from hoodline.table.markers import Markers
from hoodline.table.table import HudiTable
from hoodline.table.timeline import STAGING_DIR, Timeline

log = logging.getLogger(__name__)

ARCHIVE_FOLDER = "archived"
_CONTENT_VERSION = 3
_ROLLING_STAT = "ROLLING_STAT"

_LONG: list[Any] = ["null", "long"]
_STR: list[Any] = ["null", "string"]
WRITE_STAT_FIELDS: dict[str, list[Any]] = {
    "fileId": _STR, "path": _STR, "prevCommit": _STR, "numWrites": _LONG, "numDeletes": _LONG,
    "numUpdateWrites": _LONG, "totalWriteBytes": _LONG, "totalWriteErrors": _LONG,
    "partitionPath": _STR, "totalLogRecords": _LONG, "totalLogFiles": _LONG,
    "totalUpdatedRecordsCompacted": _LONG, "numInserts": _LONG, "totalLogBlocks": _LONG,
    "totalCorruptLogBlock": _LONG, "totalRollbackBlocks": _LONG, "fileSizeInBytes": _LONG,
}
#: ``HoodieCommitMetadata`` (hudi-common 0.14 ``HoodieCommitMetadata.avsc``)
COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "partitionToWriteStats",
            "type": ["null", {"type": "map", "values": {"type": "array", "items": {
                "type": "record",
                "name": "HoodieWriteStat",
                "fields": [{"name": k, "type": t, "default": None}
                           for k, t in WRITE_STAT_FIELDS.items()],
            }}}],
            "default": None,
        },
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}],
         "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", "type": _STR, "default": None},
    ],
}


def _optional(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "type": ["null", schema], "default": None}


#: ``HoodieArchivedMetaEntry`` with the fields hoodline fills (Java resolves the others to null)
ARCHIVED_META_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieArchivedMetaEntry",
    "namespace": NAMESPACE,
    "fields": [
        _optional("hoodieCommitMetadata", COMMIT_METADATA_SCHEMA),
        _optional("hoodieCleanMetadata", CLEAN_METADATA_SCHEMA),
        _optional("hoodieRollbackMetadata", ROLLBACK_METADATA_SCHEMA),
        {"name": "commitTime", "type": _STR, "default": None},
        {"name": "actionType", "type": _STR, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        _optional("hoodieCompactionPlan", COMPACTION_PLAN_SCHEMA),
        _optional("hoodieCleanerPlan", CLEANER_PLAN_SCHEMA),
        {"name": "actionState", "type": _STR, "default": None},
        {"name": "stateTransitionTime", "type": _STR, "default": None},
    ],
}


@dataclass(frozen=True)
class ArchivalPolicy:
    """What to keep active (Java's archival and cleaning settings)."""

    min_commits: int = 20
    max_commits: int = 30
    cleaner_commits_retained: int = 10
    merge_on_read: bool = False
    #: deltacommits compaction scheduling counts (MOR)
    compact_max_delta_commits: int = 5
    #: merge small archive files (``hoodie.archive.merge.*``, :mod:`~.archive_merge`)
    merge_small_files: bool = True
    merge_batch: int = 10
    merge_small_file_bytes: int = 20 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.min_commits < self.max_commits:
            raise ConfigError(
                f"hoodie.keep.min.commits={self.min_commits} and hoodie.keep.max.commits="
                f"{self.max_commits} are invalid: need 1 <= min < max"
            )

    def bounds(self, completed_commits: int) -> tuple[int, int]:
        """(min, max) after Java's adjustment to the cleaner: min is at least the commits the
        cleaner retains + 1 (then max grows by the same amount)."""
        lo, hi = self.min_commits, self.max_commits
        if completed_commits > self.cleaner_commits_retained:
            needed = self.cleaner_commits_retained + 1
            if lo < needed:
                hi, lo = needed + (hi - lo), needed
        return lo, hi


def instants_to_archive(
    instants: Sequence[Instant], policy: ArchivalPolicy, clean_retains: str | None = None,
    checkpoint: str | None = None,
) -> list[Instant]:
    """The instants (latest states, ordered) to archive (pure policy, see module docs).
    ``clean_retains``: ``earliestCommitToRetain`` of the newest completed clean;
    ``checkpoint``: the newest commit carrying a writer's checkpoint, which stays (a backfill
    of more commits than ``hoodie.keep.max.commits`` archived it, and the pipeline then started
    over as on a new table: with ``latest-offset`` what was produced meanwhile was lost)."""
    commits = [i for i in instants if i.is_completed and i.action in DATA_ACTIONS]
    lo, hi = policy.bounds(len(commits))
    out: list[Instant] = []
    for action in (CLEAN, ROLLBACK):
        done = [i for i in instants if i.is_completed and i.action == action]
        if len(done) > hi:
            out += done[: len(done) - lo]
    if len(commits) > hi:
        limits = []
        pending = [i for i in instants if not i.is_completed
                   and i.action in (*DATA_ACTIONS, COMPACTION)]
        if pending:
            oldest = pending[0].timestamp
            before = [c.timestamp for c in commits if c.timestamp < oldest]
            limits.append(before[-1] if before else oldest)
        savepoints = [i.timestamp for i in instants if i.action == SAVEPOINT]
        if savepoints:
            limits.append(min(savepoints))
        if clean_retains:
            limits.append(clean_retains)
        replaced = [c.timestamp for c in commits if c.action == REPLACE_COMMIT]
        if replaced:
            limits.append(replaced[0])
        if policy.merge_on_read:
            limits.append(_oldest_for_compaction(commits, policy.compact_max_delta_commits))
        if checkpoint is not None:
            limits.append(checkpoint)
        limit = min(limits) if limits else None
        eligible = [c for c in commits if limit is None or c.timestamp < limit]
        out += eligible[: len(commits) - lo]
    return sorted(out, key=Instant.sort_key)


def _newest_checkpoint(timeline: Timeline) -> str | None:
    """The newest completed commit carrying a writer's checkpoint
    (:data:`~hoodline.table.commit_metadata.CHECKPOINT_KEYS`); None when none does."""
    found = timeline.latest_commit_with(*CHECKPOINT_KEYS)
    return found[0].timestamp if found is not None else None


def _oldest_for_compaction(commits: Sequence[Instant], max_delta_commits: int) -> str:
    """Java's ``CompactionUtils.getOldestInstantToRetainForCompaction``: the last compaction
    (or the first commit) while fewer than N deltacommits follow it, else the N-th newest."""
    last = max((i for i, c in enumerate(commits) if c.action == COMMIT), default=-1)
    deltas = [c for c in commits[last + 1:] if c.action == DELTA_COMMIT]
    if len(deltas) < max_delta_commits:
        return commits[last].timestamp if last >= 0 else commits[0].timestamp
    return deltas[len(deltas) - max_delta_commits].timestamp


def commit_metadata_record(data: bytes) -> dict[str, Any]:
    """A commit's JSON metadata as the Avro ``HoodieCommitMetadata`` (Java maps the fields by
    name, marks compactions COMPACT and blanks the rolling stats)."""
    md = json.loads(data) if data.strip() else {}
    stats: dict[str, list[dict[str, Any]]] = {}
    for part, entries in (md.get("partitionToWriteStats") or {}).items():
        if part is None:
            continue
        stats[str(part)] = [
            {k: _typed(e.get(k), t) for k, t in WRITE_STAT_FIELDS.items()} for e in entries or []
        ]
    extra = {str(k): str(v) for k, v in (md.get("extraMetadata") or {}).items() if v is not None}
    extra[_ROLLING_STAT] = ""
    operation = "COMPACT" if md.get("compacted") else str(md.get("operationType") or "UNKNOWN")
    return {"partitionToWriteStats": stats, "extraMetadata": extra, "version": 1,
            "operationType": operation}


def _typed(value: Any, avro_type: list[Any]) -> Any:
    if value is None:
        return None
    return int(value) if avro_type is _LONG else str(value)


def archived_entry(timeline: Timeline, state_file: Instant) -> dict[str, Any]:
    """The ``HoodieArchivedMetaEntry`` of one state file (``MetadataConversionUtils
    .createMetaWrapper``)."""
    data = timeline.read_instant_bytes(state_file)
    entry: dict[str, Any] = {
        "commitTime": state_file.timestamp,
        "actionType": state_file.action,
        "actionState": state_file.state.name,
        "version": 1,
    }
    if state_file.is_completed and not data:
        return entry  # an empty completed instant is archived without metadata
    source = str(timeline.path_of(state_file))
    action = state_file.action
    if action in (COMMIT, DELTA_COMMIT):
        entry["hoodieCommitMetadata"] = commit_metadata_record(data)
    elif action == CLEAN:
        if state_file.is_completed:
            entry["hoodieCleanMetadata"] = deserialize(ActionBody.CLEAN_METADATA, data, source)
        elif data:
            entry["hoodieCleanerPlan"] = deserialize(ActionBody.CLEANER_PLAN, data, source)
    elif action == ROLLBACK:
        if state_file.is_completed:
            entry["hoodieRollbackMetadata"] = deserialize(
                ActionBody.ROLLBACK_METADATA, data, source
            )
    elif action == COMPACTION:
        if state_file.state.name == "REQUESTED":
            entry["hoodieCompactionPlan"] = read_plan_record(data, source)
    return entry


_PAYLOADS = ("hoodieCommitMetadata", "hoodieCleanMetadata", "hoodieRollbackMetadata",
             "hoodieCompactionPlan", "hoodieCleanerPlan")


def _encode_entry(entry: dict[str, Any]) -> bytes:
    try:
        return encode_datum(entry, ARCHIVED_META_ENTRY_SCHEMA)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # e.g. a clean or rollback body hoodline 0.1 wrote as JSON without some fields
        log.warning("archiving %s %s (%s) without its metadata: %s", entry["commitTime"],
                    entry["actionType"], entry["actionState"], exc)
        bare = {k: v for k, v in entry.items() if k not in _PAYLOADS}
        return encode_datum(bare, ARCHIVED_META_ENTRY_SCHEMA)


def _archive_block(entries: list[dict[str, Any]]) -> LogBlock:
    parts = [_CONTENT_VERSION.to_bytes(4, "big"), len(entries).to_bytes(4, "big")]
    for e in entries:
        datum = _encode_entry(e)
        parts += [len(datum).to_bytes(4, "big"), datum]
    header = {HeaderKey.SCHEMA: json.dumps(ARCHIVED_META_ENTRY_SCHEMA)}
    return LogBlock(LogBlockType.AVRO_DATA, header, b"".join(parts))


def has_archived_instants(table: HudiTable) -> bool:
    """Whether any instant of the table was archived (by hoodline or Java)."""
    folder = table.meta_path / ARCHIVE_FOLDER
    return folder.is_dir() and any(folder.iterdir())


def archived_commit_with(table: HudiTable, key: str) -> tuple[str, dict[str, str]] | None:
    """The instant and extra metadata of the newest archived completed commit (or deltacommit)
    carrying ``key`` in its extra metadata; None when none does. hoodline's archival keeps the
    newest commit with a writer's checkpoint active, Java's does not: a pipeline's last
    checkpoint may be here after Java writers committed more than 'hoodie.keep.max.commits'.
    Reads every archive file, each block with the schema it names (Java's too)."""
    folder = table.meta_path / ARCHIVE_FOLDER
    best: tuple[str, dict[str, str]] | None = None
    # every file: a merge writes older instants into a file of a higher version
    for name in sorted(n for n in list_names(folder) if archive_version(n) is not None):
        try:
            entries = list(_archived_entries((folder / name).read_bytes()))
        except Exception as exc:  # a file this reader cannot decode: not a reason to stop
            log.warning("archive file '%s' was not read for a writer's checkpoint: %s: %s",
                        folder / name, type(exc).__name__, exc)
            continue
        for entry in entries:
            md = entry.get("hoodieCommitMetadata")
            if (entry.get("actionState") != "COMPLETED" or not isinstance(md, dict)
                    or entry.get("actionType") not in (COMMIT, DELTA_COMMIT)):
                continue
            extra = {str(k): str(v) for k, v in (md.get("extraMetadata") or {}).items()
                     if v is not None}
            ts = str(entry.get("commitTime"))
            if key in extra and (best is None or ts > best[0]):
                best = ts, extra
    return best


def _archived_entries(data: bytes) -> Iterator[dict[str, Any]]:
    """The ``HoodieArchivedMetaEntry`` records of an archive file, each block's read with the
    schema it names."""
    for block in read_blocks(data):
        if block.type is LogBlockType.AVRO_DATA:
            schema = fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
            yield from _block_records(bytes(block.content), schema)


def _block_records(content: bytes, schema: Any) -> Iterator[dict[str, Any]]:
    """The records of an Avro data block's content (version, count, size-prefixed datums)."""
    count = int.from_bytes(content[4:8], "big")
    pos = 8
    for _ in range(count):
        size = int.from_bytes(content[pos:pos + 4], "big")
        value = fastavro.schemaless_reader(io.BytesIO(content[pos + 4:pos + 4 + size]), schema,
                                           None)
        if isinstance(value, dict):
            yield value
        pos += 4 + size


def archive(
    table: HudiTable, policy: ArchivalPolicy, batch: int = 10
) -> list[Instant]:
    """Archive what :func:`instants_to_archive` picks; returns those instants (latest states).
    The caller holds the writer lock."""
    tl = table.timeline.reload()
    instants = tl.instants()
    commits = sum(1 for i in instants if i.is_completed and i.action in DATA_ACTIONS)
    # the last clean's body is read only when commits may be archived (not after every write)
    due = commits > policy.bounds(commits)[1]
    retains = earliest_retained_commit(table) if due else None
    chosen = instants_to_archive(instants, policy, retains,
                                 _newest_checkpoint(tl) if due else None)
    if not chosen:
        return []
    keys = {(i.timestamp, i.comparable_action) for i in chosen}
    files = [f for f in tl.instant_files() if (f.timestamp, f.comparable_action) in keys]
    entries = [archived_entry(tl, f) for f in files]
    folder = table.meta_path / ARCHIVE_FOLDER
    folder.mkdir(exist_ok=True)
    staging = table.meta_path / STAGING_DIR
    listing = list_dir(folder)
    if any(e.name == MERGE_PLAN_NAME for e in listing):
        finish_interrupted_merge(folder)  # before anything else, as Java
        listing = list_dir(folder)
    data = b"".join(
        _archive_block(entries[i:i + max(1, batch)]).serialize()
        for i in range(0, len(entries), max(1, batch))
    )
    name = archive_file_name([e.name for e in listing])
    create_exclusive(folder / name, data, staging)
    for ts in sorted({i.timestamp for i in chosen}):
        Markers(table, ts).delete_all()
    # requested/inflight before completed: no reader ever sees a pending instant whose
    # completion is already gone
    for f in sorted(files, key=lambda f: f.is_completed):
        tl.path_of(f).unlink(missing_ok=True)
    tl.reload()
    log.info("archived %d instants (%s … %s) into %s", len(chosen), chosen[0].timestamp,
             chosen[-1].timestamp, folder / name)
    if policy.merge_small_files:
        merge_small_files(folder, [*listing, Entry(name, False, len(data))],
                          policy.merge_batch, policy.merge_small_file_bytes, staging)
    return chosen
