"""File-system view: file groups and file slices built from completed commits only.

Mirrors how hudi-rs (and Java's ``HoodieFileGroup``) pick files:

* partitions are the leaf folders under the base path (``.hoodie`` excluded), or the base path
  itself for a non-partitioned table;
* every ``*.parquet`` file there must be a Hudi base file ``<fileId>_<writeToken>_<ts>.parquet``;
  log files are ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``;
* a file slice is (base instant, its base file if any, the log files naming that base instant);
  it is visible when the base instant is a completed commit/deltacommit at or before the query
  time, or older than the start of the active timeline (archived: :class:`CommittedInstants`);
  files of requested/inflight/rolled-back instants are ignored. A slice without a base file
  (a merge-on-read file group written only to logs so far) is visible from the deltacommit that
  created it;
* a slice lists every log file on disk for it; which *blocks* count is decided by the reader
  from each block's instant (an uncommitted write's blocks are skipped);
* file groups replaced by a completed replacecommit (at or before the query time) are hidden;
* the file slice of a group at a time is its newest visible slice;
* a file group in a pending compaction plan ``C`` (requested or inflight, at or before the
  query time) also has a slice at ``C`` holding the log files written against ``C`` (none at
  first; its base file, while the compaction runs, is partial and hidden). Writers append to
  that slice (:meth:`FileGroup.latest`); readers merge it with the slice the plan compacts
  (:meth:`FileGroup.latest_merged`), as Java's ``getLatestMergedFileSlicesBeforeOrOn`` does.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass

from hoodline.errors import TableError
from hoodline.storage.ops import Entry, list_dir
from hoodline.storage.paths import ObjectPath, TablePath, parse_location
from hoodline.table.compaction_plan import read_plan
from hoodline.table.instant import (
    COMPACTION,
    REPLACE_COMMIT,
    is_timestamp_string,
    is_valid_timestamp,
)
from hoodline.table.log.names import LogFileName
from hoodline.table.timeline import Timeline

BASE_FILE_EXTENSION = ".parquet"
#: Top-level folders that are never partitions (same list as hudi-rs).
NON_PARTITION_DIRS = frozenset({".hoodie", "_delta_log", "metadata"})
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"


def base_file_name(file_id: str, write_token: str, instant_ts: str) -> str:
    """``<fileId>_<writeToken>_<ts>.parquet``; no part may contain ``_``."""
    for label, part in (("file id", file_id), ("write token", write_token)):
        if not part or "_" in part or "/" in part:
            raise TableError(f"{label} '{part}' is invalid: must be non-empty without '_' or '/'")
    if not is_valid_timestamp(instant_ts):
        raise TableError(f"instant time '{instant_ts}' is not a 17-digit timestamp")
    return f"{file_id}_{write_token}_{instant_ts}{BASE_FILE_EXTENSION}"


def parse_base_file_name(name: str) -> tuple[str, str, str]:
    """``(file_id, write_token, instant_ts)`` of a base file name; :class:`TableError` otherwise."""
    base = os.path.basename(name)
    if not base.endswith(BASE_FILE_EXTENSION):
        raise TableError(f"'{name}' is not a parquet base file")
    parts = base[: -len(BASE_FILE_EXTENSION)].split("_")
    if len(parts) != 3 or not parts[0] or not parts[1] or not is_valid_timestamp(parts[2]):
        raise TableError(
            f"'{name}' is not a Hudi base file name '<fileId>_<writeToken>_<17-digit ts>.parquet'; "
            "foreign parquet files inside a table make every Hudi read fail: move it out"
        )
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class CommittedInstants:
    """Which instants' files and log blocks a reader counts (picklable, for workers): completed
    data instants at or before ``as_of``, and every instant older than ``start``, the start of
    the active timeline, because Java Hudi archives old completed instants out of ``.hoodie``
    (except instants still pending there: a failed write older than the first completed one is
    not committed, whatever its age)."""

    completed: frozenset[str]
    start: str | None
    as_of: str | None = None
    pending: frozenset[str] = frozenset()

    @classmethod
    def of(cls, timeline: Timeline, as_of: str | None = None) -> CommittedInstants:
        completed = frozenset(
            i.timestamp for i in timeline.completed_commits()
            if as_of is None or i.timestamp <= as_of
        )
        pending = frozenset(i.timestamp for i in timeline.pending())
        return cls(completed, timeline.start(), as_of, pending)

    def __call__(self, instant_ts: str) -> bool:
        if instant_ts in self.completed:
            return True
        return (self.start is not None and instant_ts < self.start
                and instant_ts not in self.pending
                and (self.as_of is None or instant_ts <= self.as_of))


@dataclass(frozen=True)
class FileSlice:
    """One version of a file group: its base file and log files (paths relative to the table
    base path; log files in Java's order)."""

    partition_path: str
    file_id: str
    base_instant: str
    #: None for a slice that has only log files
    base_file: str | None
    #: size of the base file (0 without one)
    file_size: int
    log_files: tuple[str, ...] = ()
    #: bytes of the log files together
    log_bytes: int = 0
    #: instant of the pending compaction of the file group: this slice is that compaction's
    #: (log files written against it), or, from :meth:`FileGroup.latest_merged`, the slice the
    #: compaction compacts merged with them
    pending_compaction: str | None = None

    @property
    def file_name(self) -> str:
        """The base file's name ("" for a log-only slice)."""
        return os.path.basename(self.base_file) if self.base_file else ""

    @property
    def log_names(self) -> list[LogFileName]:
        out = []
        for rel in self.log_files:
            parsed = LogFileName.parse(os.path.basename(rel))
            if parsed is not None:
                out.append(parsed)
        return out

    def next_log_version(self) -> int:
        """The version a new log file of this slice gets (every write opens a new file)."""
        return max((n.version for n in self.log_names), default=0) + 1


@dataclass(frozen=True)
class FileGroup:
    """All visible versions of one file id in one partition, oldest first."""

    partition_path: str
    file_id: str
    slices: tuple[FileSlice, ...]

    @property
    def latest(self) -> FileSlice:
        """The newest slice: the one a write appends to (a pending compaction's, if any)."""
        return self.slices[-1]

    @property
    def latest_merged(self) -> FileSlice:
        """What a reader reads: the newest slice, or while a compaction is pending, the slice
        it compacts with the log files written against the compaction appended (their blocks
        are all newer)."""
        last = self.slices[-1]
        if last.pending_compaction is None or len(self.slices) < 2:
            return last
        prev = self.slices[-2]
        return FileSlice(
            prev.partition_path,
            prev.file_id,
            prev.base_instant,
            prev.base_file,
            prev.file_size,
            prev.log_files + last.log_files,
            prev.log_bytes + last.log_bytes,
            last.pending_compaction,
        )


def list_partitions(base_path: TablePath, partitioned: bool) -> list[str]:
    """Partition paths relative to ``base_path`` (``""`` for a non-partitioned table): the
    folders outside ``.hoodie`` that hold ``.hoodie_partition_metadata`` (Java's rule: every
    writer puts it there first), or Hudi data files when no folder above is a partition (tables
    written without it). Any other folder is not the table's: a notebook's
    ``.ipynb_checkpoints`` or someone's ``old/`` inside a partition made that partition's own
    files disappear from the view, when partitions were the leaf folders (damaged-table
    review). On an object store from the keys under them, listed in key order: see
    ``_object_files``."""
    if not partitioned:
        return [""]
    return _partition_folders(_table_files(base_path))


def _is_partition(names: Iterable[str], in_partition: bool) -> bool:
    """Whether a folder whose files are ``names`` is a partition (see :func:`list_partitions`);
    ``in_partition``: a folder above it is one."""
    names = list(names)
    if any(n.startswith(PARTITION_METADATA_FILE) for n in names):
        return True
    return not in_partition and any(
        n.endswith(BASE_FILE_EXTENSION) or (n.startswith(".") and LogFileName.parse(n))
        for n in names)


def _table_files(base_path: TablePath) -> dict[str, list[Entry]]:
    """The files of a partitioned table by folder (relative), outside ``.hoodie`` and the
    other :data:`NON_PARTITION_DIRS`: every folder listed once, on an object store as
    :func:`_object_files` lists them."""
    if isinstance(base_path, ObjectPath):
        return _object_files(base_path)
    files: dict[str, list[Entry]] = {}

    def walk(rel: str) -> None:
        entries = list_dir(base_path / rel if rel else base_path)
        if rel:
            files[rel] = [e for e in entries if not e.is_dir]
        for name in sorted(e.name for e in entries if e.is_dir):
            if rel or name not in NON_PARTITION_DIRS:
                walk(f"{rel}/{name}" if rel else name)

    walk("")
    return files


def _object_files(base_path: ObjectPath) -> dict[str, list[Entry]]:
    """The files of a partitioned table on an object store by folder (relative), outside
    ``.hoodie`` and the other :data:`NON_PARTITION_DIRS`: one delimited listing of the table's
    top, then the keys of the partition folders in key order, a page of up to 1,000 keys per
    request, each stretch between two skipped folders from where it starts. Listing every
    key of the table listed the timeline too; listing each top-level folder on its own made a
    table partitioned by date cost a request per partition on every write."""
    _objects, top = base_path.listing()
    skipped = sorted(name for name in top if name in NON_PARTITION_DIRS)
    wanted = [name for name in top if name not in NON_PARTITION_DIRS]
    files: dict[str, list[Entry]] = {}
    start: str | None = None  # the stretch begins after the keys of this skipped folder
    for stop in [*skipped, None]:
        # (folders compared as their keys' prefixes: "a-b/" sorts before "a/")
        if any((start is None or f"{name}/" > f"{start}/")
               and (stop is None or f"{name}/" < f"{stop}/") for name in wanted):
            # keys under "name/" sort after every "name<c>" with c < "/" and before "name0"
            end = None if stop is None else stop + "/"
            for rel, size, mtime in base_path.walk_objects(
                    after=None if start is None else start + "0"):
                if end is not None and rel >= end:
                    break  # (pages are fetched as iterated: the skipped folder is not listed)
                folder, sep, file_name = rel.rpartition("/")
                if sep and folder.partition("/")[0] not in NON_PARTITION_DIRS:
                    files.setdefault(folder, []).append(Entry(file_name, False, size, mtime))
        start = stop
    return files


def _partition_folders(files: dict[str, list[Entry]]) -> list[str]:
    """The partitions among the folders of ``files`` (see :func:`list_partitions`)."""
    out: list[str] = []
    found: set[str] = set()
    for folder in sorted(files):  # a folder sorts before the folders under it
        parts = folder.split("/")
        above = any("/".join(parts[:i]) in found for i in range(1, len(parts)))
        if _is_partition((e.name for e in files[folder]), above):
            out.append(folder)
            found.add(folder)
    return out


def list_data_files(
    base_path: TablePath, partition: str
) -> tuple[list[tuple[str, int]], list[tuple[LogFileName, int]]]:
    """``(base files as (name, size), log files as (name, size))`` directly inside a partition
    folder, each list in file order (log files: Java's order)."""
    folder = base_path / partition if partition else base_path
    return _data_files(list_dir(folder))


def list_table_data_files(
    base_path: TablePath, partitioned: bool
) -> dict[str, tuple[list[tuple[str, int]], list[tuple[LogFileName, int]]]]:
    """Every partition's data files (as :func:`list_data_files` gives them), by partition: on an
    object store from one listing of the partition folders' keys; each folder listed once."""
    if not partitioned:
        return {"": list_data_files(base_path, "")}
    listed = _table_files(base_path)
    return {part: _data_files(listed[part]) for part in _partition_folders(listed)}


def _data_files(
    entries: Iterable[Entry],
) -> tuple[list[tuple[str, int]], list[tuple[LogFileName, int]]]:
    bases: list[tuple[str, int]] = []
    logs: list[tuple[LogFileName, int]] = []
    for e in entries:
        name = e.name
        if e.is_dir or name.startswith(PARTITION_METADATA_FILE):
            continue
        if name.endswith(BASE_FILE_EXTENSION):
            bases.append((name, e.size))
        elif name.startswith("."):
            log = LogFileName.parse(name)
            if log is not None:
                logs.append((log, e.size))
    return sorted(bases), sorted(logs)


class FileSystemView:
    """Committed file groups/slices of a table at a point in time (``as_of``; None = latest)."""

    def __init__(
        self,
        base_path: str | os.PathLike[str] | TablePath,
        timeline: Timeline,
        partitioned: bool,
        as_of: str | None = None,
    ) -> None:
        if as_of is not None and not is_timestamp_string(as_of):
            raise TableError(f"as-of instant '{as_of}' is not a 17-digit timestamp")
        self.base_path = parse_location(base_path)
        self.timeline = timeline
        self.partitioned = partitioned
        self.as_of = as_of
        self.committed = CommittedInstants.of(timeline, as_of)
        self._replaced: set[tuple[str, str]] = set()
        for inst in timeline.completed_commits():
            if as_of is not None and inst.timestamp > as_of:
                continue
            if inst.action == REPLACE_COMMIT:
                md = timeline.read_commit_metadata(inst)
                for part, ids in md.partition_to_replace_file_ids.items():
                    self._replaced.update((part, fid) for fid in ids)
        #: (partition, file id) -> instant of the pending compaction that plans it
        self._pending: dict[tuple[str, str], str] = {}
        for inst in timeline.pending([COMPACTION]):
            if as_of is None or inst.timestamp <= as_of:
                for op in read_plan(timeline, inst):
                    self._pending[(op.partition_path, op.file_id)] = inst.timestamp
        self._groups: dict[str, list[FileGroup]] | None = None
        #: size of every base and log file listed, by path relative to the base path
        self._sizes: dict[str, int] = {}

    @property
    def replaced(self) -> frozenset[tuple[str, str]]:
        """``(partition, file id)`` of the file groups completed replacecommits replaced."""
        return frozenset(self._replaced)

    def listed_size(self, rel_path: str) -> int | None:
        """The size of a data file the view listed (None: not in the table's folders)."""
        self._load()
        return self._sizes.get(rel_path)

    def is_visible(self, instant_ts: str) -> bool:
        """True when ``instant_ts`` is a completed data instant at or before the view's time, or
        an archived one (log blocks of other instants are skipped by readers)."""
        return self.committed(instant_ts)

    def partitions(self) -> list[str]:
        return list_partitions(self.base_path, self.partitioned)

    def _load(self) -> dict[str, list[FileGroup]]:
        if self._groups is not None:
            return self._groups
        groups: dict[str, list[FileGroup]] = {}
        sizes = self._sizes
        for part, (bases, logs) in list_table_data_files(self.base_path,
                                                         self.partitioned).items():
            by_id: dict[str, list[FileSlice]] = {}
            log_map: dict[tuple[str, str], list[str]] = {}
            log_size: dict[tuple[str, str], int] = {}
            for log, nbytes in logs:  # sorted: Java's log file order
                if (part, log.file_id) in self._replaced:
                    continue
                rel = f"{part}/{log.name}" if part else log.name
                sizes[rel] = nbytes
                key = (log.file_id, log.base_instant)
                log_map.setdefault(key, []).append(rel)
                log_size[key] = log_size.get(key, 0) + nbytes
            for name, size in bases:
                rel = f"{part}/{name}" if part else name
                file_id, _token, ts = parse_base_file_name(rel)
                sizes[rel] = size
                if not self.committed(ts) or (part, file_id) in self._replaced:
                    continue
                slice_logs = tuple(log_map.pop((file_id, ts), ()))
                nbytes = log_size.get((file_id, ts), 0)
                by_id.setdefault(file_id, []).append(
                    FileSlice(part, file_id, ts, rel, size, slice_logs, nbytes)
                )
            for (file_id, ts), rels in log_map.items():
                if self.committed(ts):  # a slice that has only log files
                    nbytes = log_size[(file_id, ts)]
                    by_id.setdefault(file_id, []).append(
                        FileSlice(part, file_id, ts, None, 0, tuple(rels), nbytes)
                    )
            for (ppart, file_id), ts in self._pending.items():
                if ppart == part and file_id in by_id:
                    key = (file_id, ts)
                    by_id[file_id].append(
                        FileSlice(part, file_id, ts, None, 0, tuple(log_map.get(key, ())),
                                  log_size.get(key, 0), ts)
                    )
            part_groups = []
            for file_id in sorted(by_id):
                slices = sorted(by_id[file_id], key=lambda s: s.base_instant)
                for a, b in itertools.pairwise(slices):
                    if a.base_instant == b.base_instant:
                        raise TableError(
                            f"partition '{part}' has two base files of file group '{file_id}' "
                            f"at instant {a.base_instant}: '{a.base_file}' and '{b.base_file}'; "
                            "Hudi readers fail on this, remove the one not in the commit metadata"
                        )
                part_groups.append(FileGroup(part, file_id, tuple(slices)))
            groups[part] = part_groups
        if not self.partitioned and not any(groups.values()):
            self._check_unpartitioned_layout()
        self._groups = groups
        return groups

    def _check_unpartitioned_layout(self) -> None:
        """An unpartitioned table without a data file whose newest commit wrote into partition
        folders: its configuration lost the partition fields, and every read would be empty."""
        # the newest commit that wrote a file (a round of error records or a checkpoint only
        # writes none: review)
        for commit in reversed(self.timeline.completed_commits()):
            metadata = self.timeline.read_commit_metadata(commit)
            written = [(part, stat.path) for part, stats in
                       metadata.partition_to_write_stats.items() for stat in stats if stat.path]
            for part, path in written:
                if part:
                    raise TableError(
                        f"the table at '{self.base_path}' is not partitioned by its "
                        "configuration (hoodie.properties names no "
                        f"'hoodie.table.partition.fields'), but its {commit.action} "
                        f"{commit.timestamp} wrote '{path}' in a partition folder: the "
                        "configuration file is damaged (the line was lost); restore "
                        "hoodie.properties from a backup or copy. Its files are not missing: "
                        "do not accept their loss")
            if written:
                return

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        groups = self._load()
        if partition is not None:
            return list(groups.get(partition, []))
        return [g for part in sorted(groups) for g in groups[part]]

    def latest_file_slices(self, partition: str | None = None) -> list[FileSlice]:
        """The slices a reader reads (:meth:`FileGroup.latest_merged`)."""
        return [g.latest_merged for g in self.file_groups(partition)]

    def write_slice(self, partition: str, file_id: str) -> FileSlice | None:
        """The slice a write to a file group appends to or replaces (:meth:`FileGroup.latest`);
        None for a group that does not exist yet."""
        for g in self.file_groups(partition):
            if g.file_id == file_id:
                return g.latest
        return None
