"""Merging small archive files, as Java Hudi's ``hoodie.archive.merge.*`` does.

Every archival writes a new archive log file (hoodline never appends, and Java cannot on object
stores), so a table committing every few seconds gains hundreds of small files in
``.hoodie/archived`` a day, and every reader of the archived timeline (Java's
``HoodieArchivedTimeline``, the Hudi CLI, incremental reads past the active timeline) opens each.
Java's ``HoodieTimelineArchiver`` therefore merges them when ``hoodie.archive.merge.enable`` is
set and the file system cannot append:

* candidates: the archive files from the newest version down, up to the first one larger than
  ``hoodie.archive.merge.small.file.limit.bytes``; merged only once there are at least
  ``hoodie.archive.merge.files.batch.size`` of them;
* a plan first, ``.hoodie/archived/mergeArchivePlan`` (an Avro ``HoodieMergeArchiveFilePlan``
  container: the candidates' full paths and the merged file's name, the next archive version),
  then the merged file, then the candidates are deleted, then the plan;
* a plan found at the next archival means that sequence was cut short: if every candidate is
  still there, the merged file (if written) is removed; otherwise the merged file is whole and
  the remaining candidates are removed. Then the plan goes. A plan that cannot be parsed was cut
  short itself, before anything else: it is removed.

The merged file holds the candidates' log blocks in archival order, each block as it was (Java
re-batches the records; any number of blocks is a valid archive file). The plan's name does not
match ``.commits_.archive*``, so readers never take it for an archive file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from hoodline.errors import TimelineError
from hoodline.storage.ops import Entry, create_exclusive, list_names
from hoodline.storage.paths import TablePath
from hoodline.table.action_metadata import NAMESPACE, avro_container, avro_record
from hoodline.table.log.blocks import read_blocks

log = logging.getLogger(__name__)

#: Java's ``HoodieArchivedTimeline.MERGE_ARCHIVE_PLAN_NAME``
MERGE_PLAN_NAME = "mergeArchivePlan"

MERGE_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieMergeArchiveFilePlan",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "candidate", "type": ["null", {"type": "array", "items": "string"}],
         "default": None},
        {"name": "mergedArchiveFileName", "type": ["null", "string"], "default": None},
    ],
}

#: ``.commits_.archive.<version>_<token>``: a log file of file id "commits", base instant ""
_ARCHIVE_NAME = re.compile(r"^\.commits_\.archive\.(\d+)_.+$")
_WRITE_TOKEN = "1-0-1"


def archive_version(name: str) -> int | None:
    """The version of an archive file's name; None for any other name."""
    m = _ARCHIVE_NAME.match(name)
    return int(m.group(1)) if m else None


def archive_file_name(existing: Sequence[str]) -> str:
    """The next archive log file's name (version = the highest existing + 1)."""
    versions = [v for n in existing if (v := archive_version(n)) is not None]
    return f".commits_.archive.{max(versions, default=0) + 1}_{_WRITE_TOKEN}"


def merge_candidates(listing: Sequence[Entry], small_file_bytes: int) -> list[Entry]:
    """The archive files of ``listing`` from the newest version down to (not including) the
    first larger than ``small_file_bytes``, oldest first (Java's ``getMergeCandidates``)."""
    archives = sorted(((v, e) for e in listing if not e.is_dir
                       if (v := archive_version(e.name)) is not None),
                      key=lambda ve: ve[0], reverse=True)
    out: list[Entry] = []
    for _version, entry in archives:
        if entry.size > small_file_bytes:
            break
        out.append(entry)
    out.reverse()
    return out


def merge_small_files(
    folder: TablePath, listing: Sequence[Entry], batch: int, small_file_bytes: int,
    staging_dir: TablePath,
) -> str | None:
    """Merge the small archive files of ``folder`` (its current ``listing``) when there are at
    least ``batch`` of them; returns the merged file's name, or None when nothing was due. The
    caller holds the writer lock and has finished any interrupted merge
    (:func:`finish_interrupted_merge`)."""
    candidates = merge_candidates(listing, small_file_bytes)
    if len(candidates) < max(2, batch):
        return None
    merged = archive_file_name([e.name for e in listing])
    data = _merged_bytes(folder, [e.name for e in candidates])
    if data is None:
        return None
    plan = avro_container(MERGE_PLAN_SCHEMA, {
        "candidate": [str(folder / e.name) for e in candidates],
        "mergedArchiveFileName": merged,
    })
    create_exclusive(folder / MERGE_PLAN_NAME, plan, staging_dir)
    create_exclusive(folder / merged, data, staging_dir)
    for e in candidates:
        (folder / e.name).unlink(missing_ok=True)
    (folder / MERGE_PLAN_NAME).unlink(missing_ok=True)
    log.info("merged %d small archive files (%s … %s) into %s", len(candidates),
             candidates[0].name, candidates[-1].name, folder / merged)
    return merged


def _merged_bytes(folder: TablePath, names: Sequence[str]) -> bytes | None:
    """The log blocks of the archive files ``names`` in order, as one file; None (logged) when
    one of them holds bytes that are no whole block (a torn append of Java's): merging would
    drop them with the file, as Java's merge refuses to."""
    parts: list[bytes] = []
    for name in names:
        raw = (folder / name).read_bytes()
        blocks = [block.serialize() for block in read_blocks(raw)]
        if sum(len(b) for b in blocks) != len(raw):
            log.warning("archive file '%s' holds bytes that are no whole log block: small "
                        "archive files are not merged while it is among them", folder / name)
            return None
        parts += blocks
    return b"".join(parts)


def finish_interrupted_merge(folder: TablePath) -> None:
    """Complete or undo a merge whose plan is still in ``folder`` (a writer stopped inside it:
    Java's ``verifyLastMergeArchiveFilesIfNecessary``); nothing when there is no plan."""
    plan_path = folder / MERGE_PLAN_NAME
    try:
        raw = plan_path.read_bytes()
    except FileNotFoundError:
        return
    try:
        plan = avro_record(raw, str(plan_path), "HoodieMergeArchiveFilePlan")
    except TimelineError as exc:
        # cut short while the plan was written: nothing else of that merge happened
        log.warning("removing an unreadable archive merge plan: %s", exc)
        plan_path.unlink(missing_ok=True)
        return
    names = set(list_names(folder))
    # Java writes full paths (with a scheme); only archive files of this folder are touched
    candidates = [n for c in plan.get("candidate") or []
                  if archive_version(n := PurePosixPath(str(c)).name) is not None]
    merged = plan.get("mergedArchiveFileName")
    merged = merged if isinstance(merged, str) and archive_version(merged) is not None else None
    if not candidates:
        plan_path.unlink(missing_ok=True)
        return
    if all(c in names for c in candidates):
        # the merged file is this merge's only if it holds exactly the small files' blocks:
        # a writer that ignores plans (Java with merging off) may have archived into that name
        # since (review)
        if (merged is not None and merged in names
                and (folder / merged).read_bytes() == _merged_bytes(folder, candidates)):
            (folder / merged).unlink(missing_ok=True)
        log.warning("an archive merge was cut short before its small files were removed: "
                    "undone (%s)", merged)
    elif merged is not None and merged in names:
        for c in candidates:
            if c in names:
                (folder / c).unlink(missing_ok=True)
        log.warning("an archive merge was cut short while removing its small files: "
                    "completed (into %s)", merged)
    plan_path.unlink(missing_ok=True)
