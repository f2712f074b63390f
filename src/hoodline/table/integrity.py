"""Do the latest file slices hold what the completed commits recorded?

The file-system view is built from the folder listing (:mod:`hoodline.table.fs_view`), as Java's
is with its metadata table off: a committed file deleted or cut short by hand, a disk or a copy
tool is not seen there. A deleted newest base file makes the previous version the latest; a
deleted or truncated log file drops its blocks (a torn block is skipped, as for an uncommitted
append). A writer merging into such a slice commits the loss.

Every completed data instant's write stats name the files it wrote (``path``) and their size
(``fileSizeInBytes``). For each file group the commits of the active timeline last wrote, the
files of its latest slice are checked against them:

* the slice is the newest base file recorded for the group (a commit, a compaction's commit, a
  delta commit's small-file rewrite) with the log files recorded against it, plus the log files
  of a pending compaction of the group (logs of older slices may have been cleaned);
* a recorded file must be listed, at least as large as the newest commit that wrote it recorded
  (Java appends to log files, so a log file only grows);
* groups a completed replacecommit replaced are skipped (the cleaner deletes them), and so is
  what archived instants wrote, which the active timeline no longer records.

Damage the user accepted (:func:`accept_loss`) is not reported again: it is recorded, file by
file, in :data:`ACCEPTED_LOSSES` under ``.hoodie``.

Cost: the commit metadata of the active timeline, parsed once per instant
(:meth:`~hoodline.table.timeline.Timeline.read_commit_metadata`), then one dictionary look-up
per recorded write stat against the listing the view made anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hoodline.errors import TableError
from hoodline.storage.ops import replace
from hoodline.storage.paths import TablePath
from hoodline.table.fs_view import BASE_FILE_EXTENSION, FileSystemView
from hoodline.table.log.names import LogFileName

#: Accepted losses (JSON), relative to ``.hoodie``; Java and hudi-rs ignore ``.aux`` contents
ACCEPTED_LOSSES = ".aux/hoodline-accepted-losses.json"


@dataclass(frozen=True)
class RecordedFile:
    """A data file as the newest completed commit that wrote it recorded it."""

    path: str
    instant: str
    action: str
    size: int


@dataclass(frozen=True)
class Damage:
    """A recorded file of a latest slice that is missing (``found`` None) or shorter."""

    file: RecordedFile
    found: int | None

    def describe(self) -> str:
        f = self.file
        there = "is missing" if self.found is None else f"has {self.found:,} bytes"
        return (f"'{f.path}' {there}; {f.action} {f.instant} wrote it with "
                f"{f.size:,} bytes")


def _slice_instant(path: str) -> str | None:
    """The base instant of the slice a recorded file belongs to (None: not a file hoodline
    reads, e.g. another base file format). Not validated: a malformed name is never listed."""
    name = path.rpartition("/")[2]
    if name.endswith(BASE_FILE_EXTENSION):
        return name[: -len(BASE_FILE_EXTENSION)].rpartition("_")[2]
    log = LogFileName.parse(name)
    return None if log is None else log.base_instant


def latest_recorded_files(view: FileSystemView) -> list[RecordedFile]:
    """The files of each file group's latest slice as the active timeline's commits recorded
    them (see the module's text)."""
    timeline = view.timeline
    replaced = view.replaced
    #: (partition, file id) -> instant of its newest recorded base file
    newest_base: dict[tuple[str, str], str] = {}
    #: (partition, file id) -> path -> (slice instant, as the newest commit recorded it)
    kept: dict[tuple[str, str], dict[str, tuple[str, RecordedFile]]] = {}
    # newest commit first: older versions of a group are skipped before anything is built
    for inst in reversed(timeline.completed_commits()):
        metadata = timeline.read_commit_metadata(inst)
        for part, stats in metadata.partition_to_write_stats.items():
            for stat in stats:
                key = (part, stat.file_id)
                path = stat.path
                slice_ts = _slice_instant(path) if path and key not in replaced else None
                floor = newest_base.get(key)
                if slice_ts is None or (floor is not None and slice_ts < floor):
                    continue
                files = kept.setdefault(key, {})
                if path not in files:
                    files[path] = (slice_ts, RecordedFile(
                        path, inst.timestamp, inst.action, stat.file_size_in_bytes))
                    if floor is None and path.endswith(BASE_FILE_EXTENSION):
                        newest_base[key] = slice_ts
    return [rec for key, files in kept.items() for ts, rec in files.values()
            if ts >= newest_base.get(key, "")]


def find_damage(view: FileSystemView, accepted: frozenset[tuple[str, str]] = frozenset(),
                ) -> list[Damage]:
    """Recorded files of the latest slices that are missing or shorter than recorded, but
    those in ``accepted`` (``(path, instant)``); none for a time-travel view."""
    if view.as_of is not None:
        return []
    found: list[Damage] = []
    # (a configuration that lost its partition fields is named by the view's listing, before
    # every file would look missing: FileSystemView._check_unpartitioned_layout)
    for rec in latest_recorded_files(view):
        size = view.listed_size(rec.path)
        if (size is None or size < rec.size) and (rec.path, rec.instant) not in accepted:
            found.append(Damage(rec, size))
    return sorted(found, key=lambda d: d.file.path)


def _store(meta_path: TablePath) -> TablePath:
    return meta_path / ACCEPTED_LOSSES


def _entries(meta_path: TablePath) -> list[dict[str, object]]:
    store = _store(meta_path)
    try:
        entries = json.loads(store.read_bytes())
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and "path" in e and "instant" in e for e in entries):
            raise ValueError("expected a JSON list of objects with 'path' and 'instant'")
        return entries
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise TableError(f"'{store}' is not a list of accepted losses ({exc}); "
                         "restore it or remove it (its losses are then reported again)") from None


def accepted_losses(meta_path: TablePath) -> frozenset[tuple[str, str]]:
    """``(path, instant)`` of the damage accepted with :func:`accept_loss`."""
    return frozenset((str(e["path"]), str(e["instant"])) for e in _entries(meta_path))


def check_writable(view: FileSystemView, meta_path: TablePath) -> None:
    """Raise :class:`TableError` when a latest slice lacks what its commits recorded (a writer
    would merge into an older version or a torn log, and commit the loss)."""
    damage = find_damage(view, accepted_losses(meta_path))
    if not damage:
        return
    shown = "; ".join(d.describe() for d in damage[:5])
    more = f" (and {len(damage) - 5} more)" if len(damage) > 5 else ""
    base = str(view.base_path)
    raise TableError(
        f"the table at '{base}' lacks committed data: {shown}{more}. Writing now would merge "
        "into an older version of the file group and commit the loss. Restore the files from a "
        "backup or copy; or, to go on without their rows, accept each loss with "
        f"'hoodline table accept-loss {base} FILE'"
    )


def accept_loss(view: FileSystemView, meta_path: TablePath, paths: list[str]) -> list[Damage]:
    """Record that the damage of ``paths`` (relative to the table) is accepted: writers go on
    with the older version or the torn log. Each path must be damaged now."""
    entries = _entries(meta_path)
    accepted = frozenset((str(e["path"]), str(e["instant"])) for e in entries)
    damage = {d.file.path: d for d in find_damage(view, accepted)}
    before = {str(e["path"]) for e in entries}
    paths = [p for p in paths if p not in before or p in damage]  # accepted already: nothing to do
    unknown = [p for p in paths if p not in damage]
    if unknown:
        listed = ", ".join(f"'{p}'" for p in sorted(damage)) or "none"
        raise TableError(
            f"{', '.join(repr(p) for p in unknown)} is not a missing or shortened committed "
            f"file of the table; damaged now: {listed}")
    chosen = [damage[p] for p in paths]
    entries += [{"path": d.file.path, "instant": d.file.instant, "recordedSize": d.file.size,
                 "foundSize": d.found} for d in chosen]
    replace(_store(meta_path), json.dumps(entries, indent=2).encode())
    return chosen
