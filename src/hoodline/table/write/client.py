"""Write client: insert / upsert / delete / bulk_insert into a copy-on-write or merge-on-read table.

Lifecycle::

    with WriteClient(table, {"hoodie.parquet.max.file.size": 64 << 20}) as client:
        ts = client.upsert(batch, extra_metadata={"my.checkpoint": "..."})

Opening takes the table's writer lock (a second live writer is refused) and rolls back instants
a dead writer left pending. Every operation validates the whole batch first — a bad batch raises
before an instant exists, leaving the table byte-for-byte unchanged — then runs one instant:
requested -> inflight -> tag (index) -> assign (bucket assigner) -> write file groups (marker
first) -> commit (write stats, operation, Avro schema and ``extra_metadata`` atomically).
If anything fails after the instant started, the instant is rolled back before the error is
re-raised (a crash instead leaves it for the next writer to roll back).

Operations (within a batch, duplicate keys are reduced by the ordering field; highest wins,
ties: the last record — for bulk_insert only with ``hoodie.combine.before.insert``, as in Hudi):

* ``upsert``: update existing keys, insert new ones; never two live rows for one key in a partition.
* ``insert``: like upsert — hoodline still looks keys up, so inserting an existing key updates it
  instead of creating a duplicate (Java Hudi's insert skips that lookup).
* ``delete``: remove keys (only key and partition columns are needed; unknown keys are ignored).
* ``bulk_insert``: for loading new data fast: sorted by partition and key, no index lookup, new
  file groups cut at the max file size, records written as given (duplicate keys of the batch
  included, unless ``hoodie.combine.before.insert``). Keys that already exist are *not*
  detected with the BLOOM index (duplicates, as in Hudi); with the BUCKET index a key always
  goes to its bucket's file group, so existing keys are updated.

Split API for distributed writers (Spark): :meth:`prepare` (validate, schema) or
:meth:`plan_schema` on the driver when the data lives on executors, :meth:`start_instant`,
:meth:`context` (picklable); per task :func:`prepare_for_schema` (the pipeline reduces its
records itself), :func:`tag_and_assign` and
:func:`~hoodline.table.write.file_writer.write_file_groups`, then :meth:`commit` with all tasks'
write stats (tasks that saw no data contribute none).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc

from hoodline import faults
from hoodline.errors import (
    CommitError,
    CommitOutcomeUnknownError,
    HoodlineError,
    InvalidRecordsError,
    TableError,
    UnsupportedTableError,
    WriterLockError,
)
from hoodline.faults import FaultPoint
from hoodline.table.archive import ArchivalPolicy, archive
from hoodline.table.background import BackgroundCompactor
from hoodline.table.clean import clean
from hoodline.table.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from hoodline.table.compaction import compact, finish_pending_compactions, schedule_compaction
from hoodline.table.fs_view import FileSystemView
from hoodline.table.index import make_index
from hoodline.table.instant import COMPACTION, Instant, State
from hoodline.table.keygen.adopt import detect_single_key_form
from hoodline.table.keygen.generator import check_key_generator_settings
from hoodline.table.lock import WriterLock
from hoodline.table.markers import Markers
from hoodline.table.metadata_table import remove_metadata_table
from hoodline.table.parallel import TaskRunner, resolve_threads
from hoodline.table.properties import (
    K_PAYLOAD_CLASS,
    IndexType,
    TableConfig,
    record_payload_class,
)
from hoodline.table.rollback import discard_lost_instant, rollback_instant, rollback_pending
from hoodline.table.schema import (
    arrow_to_avro_schema_json,
    avro_schema_json_to_arrow,
    check_evolution,
    nested_evolution,
    widens,
)
from hoodline.table.table import HudiTable
from hoodline.table.write.assigner import BucketAssigner
from hoodline.table.write.context import WriteContext
from hoodline.table.write.file_writer import stats_by_partition, write_file_groups
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.prepare import (
    check_required_columns,
    combines,
    conform_types,
    incoming_schema,
    prepare_deletes,
    prepare_upserts,
    require_rows,
    require_values,
)
from hoodline.table.write.profile import WriteProfile
from hoodline.table.write.records import (
    FILE_ID,
    Batch,
    as_table,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedBatch:
    """A validated, keyed, de-duplicated batch and the schema its commit will have."""

    #: a :class:`WriteOperation` or a string naming one (``"UPSERT"``, ``"upsert"``)
    operation: WriteOperation
    records: pa.Table
    data_schema: pa.Schema


def table_data_schema(table: HudiTable) -> pa.Schema | None:
    """Data columns of the latest commit's ``extraMetadata.schema`` (None for a new table)."""
    table.timeline.reload()
    avro = table.timeline.latest_schema()
    return avro_schema_json_to_arrow(avro) if avro else None


def normalize_schema(schema: pa.Schema, table_name: str) -> pa.Schema:
    """The schema as readers will see it (Arrow -> Avro -> Arrow), so files match the commit."""
    return avro_schema_json_to_arrow(arrow_to_avro_schema_json(schema, table_name))


def tag_and_assign(
    ctx: WriteContext,
    records: pa.Table,
    task_id: int = 0,
    num_tasks: int = 1,
    view: FileSystemView | None = None,
    threads: int | None = None,
    dictionary_file_ids: bool = False,
) -> pa.Table:
    """Give every record its file group: index lookup, then the bucket assigner for inserts.

    Runs on one task's share of the records; records with the same key must be in one task.
    Deletes of keys the table does not hold are dropped here. The BLOOM index and the
    assigner work on several partitions at once on ``threads`` threads (0: every core; None:
    ``hoodline.write.threads``); pass 1 when several tasks already run side by side.

    The file group column is a string column; with ``dictionary_file_ids`` a dictionary
    array, for a caller that passes the result straight to :func:`write_file_groups` (no id
    string per row is built, nor hashed again to group the rows)."""
    if records.num_rows == 0:
        return records.append_column(FILE_ID, pa.array([], pa.string()))
    table = ctx.table()
    if view is None:
        view = table.fs_view()
    config = ctx.config
    threads = resolve_threads(ctx.options.write_threads if threads is None else threads)
    if ctx.operation is WriteOperation.BULK_INSERT and config.index_type == IndexType.BLOOM:
        tagged = records.append_column(FILE_ID, pa.nulls(records.num_rows, pa.string()))
        use_small = False
    else:
        index = make_index(table.base_path, config, threads)
        tagged = index.tag(records, view, dictionary_file_ids)
        # merge-on-read: inserts go to base files, never into a group's logs, where the BLOOM
        # index (which reads base file footers) could not find them again: new file groups, or
        # the partition's small-file target rewritten into a new base file (merge_targets)
        use_small = True
    if config.index_type == IndexType.BLOOM:
        if ctx.operation is WriteOperation.DELETE:
            return tagged.filter(pc.is_valid(tagged.column(FILE_ID)))
        profile = WriteProfile(view, ctx.options, config.merge_on_read)
        assigner = BucketAssigner(profile, ctx.instant_ts, task_id, num_tasks, use_small, threads,
                                  dictionary_file_ids)
        tagged = assigner.assign(tagged)
    return tagged


def _operation(operation: str) -> WriteOperation:
    try:
        return WriteOperation.parse(operation)
    except ValueError as exc:
        raise TableError(f"unknown write operation '{operation}'; {exc}") from None


def prepare_for_schema(
    config: TableConfig,
    operation: WriteOperation,
    batch: Batch,
    data_schema: pa.Schema,
    options: WriteOptions,
    dictionary_partitions: bool = False,
    threads: int = 1,
) -> pa.Table:
    """Validate, key and de-duplicate (:func:`combines`) records for a commit of
    ``data_schema`` (``dictionary_partitions``, ``threads``: see :func:`prepare_upserts`)."""
    if operation is WriteOperation.DELETE:
        return prepare_deletes(batch, config)
    table = as_table(batch)
    check_required_columns(table, config)
    table = conform_types(table, data_schema)
    combine = combines(operation, options.combine_before_insert)
    return prepare_upserts(
        table, config, data_schema, operation, combine, dictionary_partitions, threads)


class WriteClient:
    """Single writer of one table (see module docs)."""

    def __init__(
        self,
        table: HudiTable | str | os.PathLike[str],
        options: Mapping[str, object] | WriteOptions | None = None,
    ) -> None:
        """The writer of ``table`` (a :class:`HudiTable` or its path), with write ``options``
        (``hoodie.*`` and ``hoodline.*`` keys, as a pipeline's ``[table.options]``). It takes
        the table's writer lock when opened: use it in a ``with`` block, or call :meth:`open`
        and :meth:`close`."""
        self.table = table if isinstance(table, HudiTable) else HudiTable.open(table)
        self.options = (
            options if isinstance(options, WriteOptions) else WriteOptions.from_mapping(options)
        )
        owner = self.options.lock_owner or f"hoodline@{socket.gethostname()}:{os.getpid()}"
        self._lock = WriterLock(
            self.table,
            owner=owner,
            heartbeat_interval=self.options.lock_heartbeat_seconds,
            expiry=self.options.lock_expiry_seconds,
        )
        self.repaired: list[Instant] = []
        #: runs table-service tasks (compaction's file groups); None: threads of this process
        self.task_runner: TaskRunner | None = None
        self._background = BackgroundCompactor(self._lock.lost_reason)
        self.archival_policy()  # refuses inconsistent hoodie.keep.* settings before writing
        config = self.table.config
        try:
            config.check_key_generator()
        except UnsupportedTableError:
            if not config.partition_fields:  # the properties lost them? (then named so)
                self.table.fs_view().file_groups()
            raise
        check_key_generator_settings(config)
        if config.index_type is IndexType.BUCKET and (
                set(config.bucket_hash_fields) != set(config.record_key_fields)):
            raise UnsupportedTableError(
                f"table '{self.table.base_path}' hashes its buckets by "
                f"{', '.join(config.bucket_hash_fields)} (hoodie.bucket.index.hash.field), a "
                f"part of its record key ({', '.join(config.record_key_fields)}); hoodline hashes "
                "the whole record key and would put records into other buckets than Java's "
                "writers: write this table with Java Hudi"
            )
        declared = config.merge_on_read or K_PAYLOAD_CLASS in config.extra
        if declared and self.options.payload_class.value != config.payload_class:
            raise TableError(
                f"table '{self.table.base_path}' merges records with payload class "
                f"{config.payload_class} (hoodie.compaction.payload.class), but the writer is "
                f"set to {self.options.payload_class.value}; readers and Java writers would merge "
                "differently from what this writer intends: set the writer's payload class to "
                "the table's"
            )

    # -- lifecycle ----------------------------------------------------------------------------
    def open(self) -> WriteClient:
        """Take the writer lock, remove Java's metadata table (hoodline does not maintain it)
        and roll back what a dead writer left pending."""
        self._lock.acquire()
        try:
            remove_metadata_table(self.table)
            self.repaired = rollback_pending(self.table)
            detect_single_key_form(self.table)
            recorded = record_payload_class(self.table.base_path, self.table.config)
            if recorded is not None:
                self.table.config = recorded
                log.info("table '%s' did not record its payload class: recorded %s",
                         self.table.base_path, recorded.payload_class)
            self.repaired += finish_pending_compactions(
                self.table, self.options, self.task_runner
            )
        except BaseException:
            self._lock.release()
            raise
        return self

    def close(self) -> None:
        """Wait for a compaction running in the background, then release the lock."""
        try:
            done = self._background.close()
            if done is not None:
                log.info("compaction %s completed", done.timestamp)
        finally:
            self._lock.release()

    def __enter__(self) -> WriteClient:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def lost_lock(self) -> str | None:
        """Why this writer no longer holds the table's writer lock -- who took it over -- found
        out now; None while it holds it (see :meth:`WriterLock.lost_reason`)."""
        return self._lock.lost_reason()

    def _require_open(self) -> None:
        lost = self._lock.lost
        if lost is not None:  # not "not open": it was, and another writer took the lock
            raise WriterLockError(f"{lost}; this writer stopped")
        if not self._lock.held:
            raise WriterLockError(
                f"the write client of '{self.table.base_path}' is not open; use "
                "'with WriteClient(...) as client:' or call open() first"
            )

    # -- operations -----------------------------------------------------------------------------
    def upsert(self, batch: Batch, extra_metadata: Mapping[str, str] | None = None) -> str:
        """Update the records whose keys the table has and insert the others, in one commit;
        returns its instant time. ``batch``: a pyarrow Table or RecordBatch, a pandas
        DataFrame or any Arrow stream, with the key, partition and ordering columns; keys that
        repeat in it are reduced to one (highest ordering value, else the last). A column the
        table lacks is added to it; ``extra_metadata`` is stored in the commit."""
        return self.write(batch, WriteOperation.UPSERT, extra_metadata)

    def insert(self, batch: Batch, extra_metadata: Mapping[str, str] | None = None) -> str:
        """Add the records without looking their keys up (a key the table has already is
        then there twice), in one commit; returns its instant time. See :meth:`upsert`."""
        return self.write(batch, WriteOperation.INSERT, extra_metadata)

    def delete(self, batch: Batch, extra_metadata: Mapping[str, str] | None = None) -> str:
        """Delete the records with the keys (and partition values) of ``batch``, in one
        commit; returns its instant time. Keys the table lacks are ignored."""
        return self.write(batch, WriteOperation.DELETE, extra_metadata)

    def bulk_insert(self, batch: Batch, extra_metadata: Mapping[str, str] | None = None) -> str:
        """Load a large batch into new files (sorted by key, no lookup, no small-file
        handling; keys repeat as in :meth:`insert`), in one commit; returns its instant time."""
        return self.write(batch, WriteOperation.BULK_INSERT, extra_metadata)

    def write(
        self, batch: Batch, operation: str, extra_metadata: Mapping[str, str] | None = None
    ) -> str:
        """Run one operation as one instant; returns the completed instant time."""
        self._require_open()
        # raises before anything is written; the partition paths and file ids are only
        # grouped by on this path: dictionary-encoded, no string of them per row
        prepared = self._prepare(batch, operation, dictionary=True)
        if extra_metadata:
            self._check_extra(extra_metadata)
        ts = self.start_instant()
        try:
            ctx = self.context(ts, prepared)
            view = self.table.write_view()
            tagged = tag_and_assign(ctx, prepared.records, view=view, dictionary_file_ids=True)
            stats = write_file_groups(ctx, tagged, view=view)
            faults.reach(FaultPoint.FILES_WRITTEN)
            self.commit(ctx, stats, extra_metadata)
        except BaseException as exc:
            lost = self._abort(ts)
            if lost is not None and isinstance(exc, Exception):
                # whatever failed (a file the new holder's rollback deleted, a file name it
                # wrote first, the commit's lock check), the lock taken over is the cause
                raise WriterLockError(
                    f"{lost}; this writer stopped: instant {ts} is not committed") from exc
            raise
        faults.reach(FaultPoint.COMMITTED)
        self.after_commit()
        return ts

    def after_commit(self) -> Instant | None:
        """Table services after a commit: an inline compaction when due (merge-on-read), then
        cleaning when automatic. Returns the compaction's commit, if one ran."""
        compacted = self.maybe_compact()
        if self.options.clean_automatic or self.options.archive_automatic:
            # a writer paused past its lock's expiry went on with them when it resumed, beside
            # the new holder (chaos review); one read of the lock (a GET and a LIST on S3)
            self._lock.ensure_held()
        if self.options.clean_automatic:
            clean(self.table, self.options.clean_commits_retained)
        if self.options.archive_automatic:
            archive(self.table, self.archival_policy(), self.options.archival_batch)
        return compacted

    def archival_policy(self) -> ArchivalPolicy:
        o = self.options
        return ArchivalPolicy(
            min_commits=o.keep_min_commits,
            max_commits=o.keep_max_commits,
            cleaner_commits_retained=o.clean_commits_retained,
            merge_on_read=self.table.config.merge_on_read,
            compact_max_delta_commits=o.compact_max_delta_commits,
            merge_small_files=o.archive_merge,
            merge_batch=o.archive_merge_batch,
            merge_small_file_bytes=o.archive_merge_small_file,
        )

    def maybe_compact(self) -> Instant | None:
        """With ``hoodie.compact.inline``: compact the file slices that have accumulated
        ``hoodie.compact.inline.max.delta.commits`` log files and enough log bytes (a bounded
        share of them, see :func:`~hoodline.table.compaction.plan_file_slices`); None when none
        has. With ``hoodline.compaction.async`` the compaction is only scheduled here and runs
        in the background; the return value is then the compaction that completed there since
        the last call, if any."""
        if not (self.table.config.merge_on_read and self.options.compact_inline):
            return None
        self._require_open()
        self._lock.ensure_held()
        o = self.options
        if o.compact_async:
            return self._compact_in_background()
        return compact(
            self.table, o, self.task_runner, o.compact_max_delta_commits, o.compact_log_size_ratio,
            o.compact_max_log_files, self._lock.ensure_held)

    def _compact_in_background(self) -> Instant | None:
        done = self._background.collect()
        if self._background.running is not None:
            return done
        tl = self.table.timeline
        tl.reload()  # the background thread completes compactions on its own timeline object
        pending = tl.pending([COMPACTION])
        o = self.options
        if pending:  # one that failed in the background: again
            instant: Instant | None = pending[0]
        else:
            instant = schedule_compaction(
                self.table, o.compact_max_delta_commits, o.compact_log_size_ratio,
                o.compact_max_log_files)
        if instant is not None:
            self._background.submit(self.table.base_path, instant, o, self.task_runner)
        return done

    def compact(self) -> Instant | None:
        """Compact every file slice with log files now (None: there were none)."""
        self._require_open()
        self._lock.ensure_held()
        return compact(self.table, self.options, self.task_runner,
                       holds_lock=self._lock.ensure_held)

    # -- split API ----------------------------------------------------------------------------
    def prepare(self, batch: Batch, operation: str) -> PreparedBatch:
        """Validate, key and de-duplicate ``batch``; work out the commit's schema. No I/O
        besides reading the timeline; raises InvalidRecordsError / SchemaEvolutionError."""
        return self._prepare(batch, operation)

    def _prepare(self, batch: Batch, operation: str, dictionary: bool = False) -> PreparedBatch:
        op = _operation(operation)
        table = as_table(batch)
        require_rows(table, op)
        if op is not WriteOperation.DELETE:
            check_required_columns(table, self.table.config)
            table = conform_types(table, table_data_schema(self.table))
        schema = self.plan_schema(incoming_schema(table), op)
        if op is not WriteOperation.DELETE:  # a delete writes no values
            require_values(table, schema)
        records = prepare_for_schema(
            self.table.config, op, table, schema, self.options, dictionary,
            resolve_threads(self.options.write_threads))
        return PreparedBatch(op, records, schema)

    def plan_schema(self, incoming: pa.Schema, operation: str) -> pa.Schema:
        """Driver side of a distributed write: the schema the commit will have when data of
        schema ``incoming`` is written (SchemaEvolutionError naming the column if refused)."""
        op = _operation(operation)
        config = self.table.config
        old = table_data_schema(self.table)
        if op is WriteOperation.DELETE:
            if old is not None:
                return old
            keys = [
                incoming.field(f)
                for f in dict.fromkeys((*config.record_key_fields, *config.partition_fields))
                if f in incoming.names
            ]
            return normalize_schema(pa.schema(keys), config.name)
        if old is not None:
            # narrower data is cast to the table's type; a promotion (int -> long, float ->
            # double) or new struct fields widen the table's column; data declaring a
            # required column optional makes it optional (check_evolution)
            incoming = pa.schema(
                [old.field(f.name).with_nullable(old.field(f.name).nullable or f.nullable)
                 if f.name in old.names
                 and not widens(old.field(f.name).type, f.type)
                 and nested_evolution(old.field(f.name).type, f.type) is None else f
                 for f in incoming]
            )
        evolved = check_evolution(old, incoming, config.record_key_fields)
        for name in config.partition_fields:
            if name not in evolved.names:
                raise InvalidRecordsError(f"partition column '{name}' is missing from the data")
        return normalize_schema(evolved, config.name)

    def start_instant(self) -> str:
        """Create ``<ts>.commit.requested`` and ``<ts>.inflight`` (``deltacommit`` states on a
        merge-on-read table); returns ``ts``. Checks the lock first: a writer that lost it
        between heartbeats must not start an instant under the new holder."""
        self._require_open()
        self._lock.ensure_held()
        self.table.timeline.reload()
        if not self.options.compact_async and self.table.timeline.pending([COMPACTION]):
            # a compaction that failed earlier in this process: inline compaction never lets a
            # write log against a pending compaction
            finish_pending_compactions(self.table, self.options, self.task_runner)
        ts = self.table.new_instant_time()
        requested = self.table.timeline.create_requested(self.table.write_action, ts)
        Markers(self.table, ts).begin()  # files come after inflight: its folder is there first
        self.table.timeline.transition_to_inflight(requested)
        return ts

    def context(self, instant_ts: str, prepared: PreparedBatch) -> WriteContext:
        return WriteContext(
            base_path=self.table.base_path,
            config=self.table.config,
            options=self.options,
            instant_ts=instant_ts,
            operation=_operation(prepared.operation),
            data_schema=prepared.data_schema,
        )

    def commit(
        self,
        ctx: WriteContext,
        stats: list[WriteStat],
        extra_metadata: Mapping[str, str] | None = None,
    ) -> str:
        """Complete the instant with all tasks' write stats (atomically with ``extra_metadata``).

        Files the markers list but no stat names (e.g. of a retried task attempt) are deleted
        first: a committed instant must not leave files readers would pick up twice."""
        self._require_open()
        self._lock.ensure_held()
        if extra_metadata:
            self._check_extra(extra_metadata)
        seen: dict[tuple[str, str], str] = {}
        for s in stats:
            other = seen.setdefault((s.partition_path, s.file_id), s.path)
            if other != s.path:
                raise CommitError(
                    f"file group '{s.file_id}' in partition '{s.partition_path}' was written "
                    f"twice in instant {ctx.instant_ts} ('{other}' and '{s.path}'); all records "
                    "of one file group must be written by one task (shuffle by file id after "
                    "tag_and_assign). Roll the instant back and retry."
                )
        markers = Markers(self.table, ctx.instant_ts)
        committed = {s.path for s in stats}
        marked = markers.require(committed)
        for rel in marked:
            if rel not in committed:
                (self.table.base_path / rel).unlink(missing_ok=True)
        metadata = CommitMetadata(
            partition_to_write_stats=stats_by_partition(stats),
            operation_type=ctx.operation,
            extra_metadata={
                SCHEMA_KEY: arrow_to_avro_schema_json(ctx.data_schema, ctx.config.name)
            },
        )
        inflight = Instant(ctx.instant_ts, self.table.write_action, State.INFLIGHT)
        try:
            self.table.timeline.complete(inflight, metadata, extra_metadata)
        except OSError as exc:  # the completed file may exist (link done, directory sync failed)
            raise CommitOutcomeUnknownError(
                f"writing the completed instant {ctx.instant_ts} of '{self.table.base_path}' "
                f"failed ({exc}); it may or may not have landed: re-read the timeline before "
                "rolling it back or retrying",
                ctx.instant_ts,
            ) from exc
        markers.delete_all()
        return ctx.instant_ts

    def rollback(self, instant_ts: str, *, completed_because: str | None = None) -> Instant:
        """Roll back a pending instant of this writer (deletes the files its markers list), or
        with ``completed_because`` the table's newest commit (see
        :func:`~hoodline.table.rollback.rollback_instant`)."""
        self._require_open()
        if completed_because is not None:  # a commit's data goes: only while the lock is ours
            self._lock.ensure_held()
        self.table.timeline.reload()
        inst = self.table.timeline.find(instant_ts, self.table.write_action)
        if inst is None:
            raise TableError(f"instant {instant_ts} is not on the timeline")
        return rollback_instant(self.table, inst, completed_because=completed_because)

    def repair(self) -> list[Instant]:
        """Finish what failed writes left pending (rollbacks cut short, instants never
        completed), as :meth:`open` does; only while this writer holds the lock."""
        self._require_open()
        self._lock.ensure_held()
        return rollback_pending(self.table)

    def clean(self, retain_commits: int | None = None) -> Instant | None:
        self._require_open()
        return clean(self.table, retain_commits or self.options.clean_commits_retained)

    # -- internals ------------------------------------------------------------------------------
    def discard_lost_instant(self, instant_ts: str) -> None:
        """After this writer lost the lock: delete the files it wrote for its instant
        ``instant_ts`` (see :func:`~hoodline.table.rollback.discard_lost_instant`: the new
        holder rolled the instant back before they existed, and archival would make them
        count as committed), warning about any it could not delete. Call it once nothing
        writes for the instant any more."""
        try:
            deleted, left = discard_lost_instant(self.table, instant_ts)
        except (OSError, HoodlineError) as exc:
            deleted, left = [], [f"(its markers under .hoodie/.temp/{instant_ts}: {exc})"]
        if deleted:
            log.info("deleted %d file(s) this writer wrote for its instant %s after it lost the "
                     "lock", len(deleted), instant_ts)
        if left:
            log.warning(
                "writer lost the lock of '%s'; these files it may have written for its "
                "instant %s after the new holder rolled it back are left: %s. Delete those "
                "whose log blocks or name carry %s (readers count them as committed once "
                "archival passes that instant)", self.table.base_path, instant_ts,
                ", ".join(left), instant_ts)

    def _abort(self, ts: str) -> str | None:
        """Roll the failed instant ``ts`` back; returns why the lock was lost instead, when it
        was (its new holder rolled the instant back when it opened the table; the files this
        writer wrote for it since are deleted here)."""
        lost = self._lock.lost_reason()
        if lost is not None:
            self.discard_lost_instant(ts)
            return lost
        try:
            self.table.timeline.reload()
            inst = self.table.timeline.find(ts, self.table.write_action)
            if inst is not None and inst.state is not State.COMPLETED:
                rollback_instant(self.table, inst)
        except Exception as exc:  # the write's own error is the one raised
            # the next writer to open the table rolls it back; say so, the write's error
            # follows (it was silent: code review)
            log.warning("the failed instant %s of '%s' could not be rolled back (%s: %s); "
                        "the next write to the table rolls it back, or run `hoodline table "
                        "rollback %s`", ts, self.table.base_path, type(exc).__name__, exc,
                        self.table.base_path)
        return None

    @staticmethod
    def _check_extra(extra: Mapping[str, str]) -> None:
        if SCHEMA_KEY in extra:
            raise TableError(
                f"extra metadata key '{SCHEMA_KEY}' is reserved for the table schema; "
                "use another key"
            )
        for k, v in extra.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TableError(
                    f"extra metadata must map strings to strings; got {k!r}: {type(v).__name__}"
                )
