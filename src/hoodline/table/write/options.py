"""Options of the table writer (Hudi key names where Hudi has the same setting)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hoodline.config import options as cfg
from hoodline.config.enums import ConfigEnum
from hoodline.errors import ConfigError
from hoodline.table.clean import CLEANER_COMMITS_RETAINED
from hoodline.table.keygen.timestamp import TIMESTAMP_OPTIONS
from hoodline.table.lock import LOCK_EXPIRY_SECONDS, LOCK_HEARTBEAT_SECONDS

MB = 1024 * 1024


class Compression(ConfigEnum):
    """Parquet compression codec of base files."""

    SNAPPY = "snappy"
    GZIP = "gzip"
    ZSTD = "zstd"
    NONE = "none"


class LogBlockFormat(ConfigEnum):
    """Data block format of merge-on-read log files (``hoodie.logfile.data.block.format``)."""

    #: Avro records, what Java Hudi writes by default (every Hudi reader reads them)
    AVRO = "avro"
    #: a whole Parquet file per block (compressed; Java Hudi reads it, hudi-rs too)
    PARQUET = "parquet"


class PayloadClass(ConfigEnum):
    """How an incoming record merges with the stored one of the same key (Hudi payload classes)."""

    #: the incoming record always replaces the stored one
    OVERWRITE_WITH_LATEST = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
    #: the stored record stays when its ordering (precombine) value is greater
    DEFAULT = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


MAX_FILE_SIZE = cfg.option(
    "hoodie.parquet.max.file.size",
    int,
    120 * MB,
    "Target maximum size in bytes of a base file. Inserts open new file groups once the "
    "estimated size of a file would exceed it; bulk_insert cuts files at this size.",
    minimum=1,
)
SMALL_FILE_LIMIT = cfg.option(
    "hoodie.parquet.small.file.limit",
    int,
    100 * MB,
    "Base files smaller than this many bytes are 'small': inserts fill them up to the max file "
    "size before new file groups are opened (BLOOM index). 0 disables small-file handling.",
    minimum=0,
)
RECORD_SIZE_ESTIMATE = cfg.option(
    "hoodie.copyonwrite.record.size.estimate",
    int,
    1024,
    "Average record size in bytes assumed until a commit has written enough data to measure it "
    "(total write bytes / records of a recent commit, as Hudi's WriteProfile does).",
    minimum=1,
)
RECORD_SIZE_ESTIMATION_THRESHOLD = cfg.option(
    "hoodie.record.size.estimation.threshold",
    float,
    1.0,
    "A commit is used to measure the average record size only if it wrote more than this "
    "fraction of the small-file limit in bytes (small commits are dominated by file overhead).",
    minimum=0.0,
)
RECORD_SIZE_LOOKBACK = cfg.option(
    "hoodline.write.record.size.lookback.commits",
    int,
    10,
    "How many recent commits are examined to estimate the average record size.",
    minimum=1,
)
BLOOM_FILTER_ENABLED = cfg.option(
    "hoodie.parquet.bloom.filter.enabled",
    bool,
    True,
    "Store a bloom filter of the record keys and the min/max record key in each base file's "
    "footer, as Java Hudi does by default. Tables with the BLOOM index always store them (the "
    "index reads them); others may turn this off to save the CPU time of hashing every key "
    "(a BLOOM index still finds keys in files without them, by reading the key column).",
)
BLOOM_FPP = cfg.option(
    "hoodie.index.bloom.fpp",
    float,
    0.000000001,
    "False-positive rate of the bloom filter stored in each base file's footer.",
    minimum=1e-12,
    maximum=0.5,
)
BLOOM_MIN_ENTRIES = cfg.option(
    "hoodline.index.bloom.min.entries",
    int,
    1000,
    "Each base file's bloom filter is sized for the keys it holds, but for at least this many, "
    "rounded up to steps of ~19 % (copy-on-write files are immutable, so the filter never "
    "needs to grow; a rewritten file that stays within its step keeps its old filter's bits "
    "and hashes only its new keys).",
    minimum=1,
)
BLOOM_ROW_ENTRIES = cfg.option(
    "hoodline.index.bloom.row.entries",
    int,
    60_000,
    "Tables whose index does not read the footer bloom filters (BUCKET): base files with more "
    "record keys than this get a DYNAMIC_V0 filter (the type Java Hudi writes by default), rows "
    "of this many keys each, every row sized for 'hoodie.index.bloom.fpp' (so the file's "
    "false-positive rate is its number of rows times that rate); files with fewer keys get one "
    "SIMPLE filter sized for their keys. A row's bits fit the CPU cache, which makes adding a "
    "key ~4x cheaper than in one filter sized for hundreds of thousands of keys, and a file "
    "rewritten with more keys (an append to a bucket, a compaction) keeps its old rows and "
    "hashes only its new keys. Tables with the BLOOM index keep one SIMPLE filter per file: "
    "looking keys up in it is faster (~2.6x for a file of 1.5M keys). 0: one SIMPLE filter "
    "for any number of keys.",
    minimum=0,
)
BLOOM_MAX_HASHES = cfg.option(
    "hoodline.index.bloom.max.hashes",
    int,
    16,
    "At most this many hash functions per key in the bloom filters hoodline writes. Hudi uses "
    "ceil(log2(1 / fpp)) of them (30 at fpp 1e-9), and every key costs one hash computation "
    "and one bit write per function, on every write of a file and every BLOOM index lookup. "
    "With fewer functions the filter gets the bits that keep the false-positive rate at "
    "'hoodie.index.bloom.fpp' (16 at fpp 1e-9: ~16 % more bits for about half the work). The "
    "count is stored in each filter, so Java Hudi and other readers read these filters as any "
    "other. 0: no cap (Hudi's own sizing).",
    minimum=0,
)
PARQUET_COMPRESSION = cfg.option(
    "hoodie.parquet.compression.codec",
    Compression,
    Compression.SNAPPY,
    "Compression codec of base files.",
)
PARQUET_ROW_GROUP_ROWS = cfg.option(
    "hoodline.parquet.row.group.rows",
    int,
    128 * 1024,
    "Maximum rows per parquet row group in base files.",
    minimum=1,
)
COPY_ROW_GROUPS = cfg.option(
    "hoodline.parquet.copy.row.groups",
    bool,
    True,
    "When a write keeps every row of a base file (new keys appended to a file group; a "
    "compaction whose logs brought only new keys), copy the old file's row groups of at least "
    "half 'hoodline.parquet.row.group.rows' rows byte for byte into the new base file instead "
    "of decoding and encoding their rows again; only their '_hoodie_file_name' is written anew "
    "(it names the new file, as Java Hudi rewrites it). Only files of Arrow's Parquet writer "
    "(hoodline's, pyarrow's) with the table's current schema are copied from; smaller row "
    "groups are encoded again with the new rows, so appends do not pile up small row groups. "
    "Off: every row is encoded again.",
)
CLEAN_AUTOMATIC = cfg.option(
    "hoodie.clean.automatic",
    bool,
    True,
    "Run a clean after every commit, keeping the file versions the last "
    "'hoodie.cleaner.commits.retained' commits need (on by default, as in Java Hudi: without "
    "it every replaced base file and every compacted log file stays, storage grows with every "
    "write and so does every listing of the table). Off: older versions stay until "
    "`hoodline table clean` or another writer cleans.",
)
#: declared by the clean module (table-meta); the writer reads it when cleaning automatically
CLEAN_COMMITS_RETAINED = CLEANER_COMMITS_RETAINED
PAYLOAD_CLASS = cfg.option(
    "hoodie.datasource.write.payload.class",
    PayloadClass,
    PayloadClass.OVERWRITE_WITH_LATEST,
    "How an incoming record merges with the stored one of the same key (Hudi payload class "
    "names). OverwriteWithLatestAvroPayload: the incoming record always replaces the stored one. "
    "DefaultHoodieRecordPayload: the stored record is kept when its ordering (precombine) value "
    "is greater than the incoming one's (late, out-of-order events do not overwrite newer data). "
    "Within one batch the highest ordering value always wins. Deletes: on copy-on-write tables "
    "a delete-flagged record older than the stored one does not delete it; on merge-on-read "
    "tables its ordering value goes into the delete log block, so it does not remove a newer "
    "record of an earlier log file (numeric, boolean and timestamp ordering fields), but it "
    "does remove the row of a base file (one a compaction wrote), as Java Hudi 0.14/0.15 and "
    "hudi-rs merge it. Deletes without an ordering value (WriteClient.delete, Kafka "
    "tombstones) always delete. A table that records its payload class "
    "('hoodie.compaction.payload.class': every merge-on-read table, and tables Java made with "
    "one) is written only with that class: set it again for such a table (left out, the "
    "default is refused, naming the table's).",
)
COMBINE_BEFORE_INSERT = cfg.option(
    "hoodie.combine.before.insert",
    bool,
    False,
    "bulk_insert: first reduce records of the batch that share a key (highest ordering value "
    "wins, ties the last record). Off, as in Hudi: bulk_insert writes the records as given, "
    "duplicate keys included. upsert, insert and delete always reduce.",
)
WRITE_THREADS = cfg.option(
    "hoodline.write.threads",
    int,
    0,
    "Threads of one write: file groups are written (old base files read, rows encoded, bloom "
    "filters built) and partitions looked up in the BLOOM index or sorted for new file groups "
    "in parallel. 0 uses every core of the machine; use 1 when the caller already runs several "
    "writers side by side.",
    minimum=0,
)
COMPACT_INLINE = cfg.option(
    "hoodie.compact.inline",
    bool,
    True,
    "Merge-on-read tables: after a write, compact in the same writer the file slices that have "
    "accumulated 'hoodie.compact.inline.max.delta.commits' log files holding "
    "'hoodline.compaction.log-size-ratio' times their base file's bytes (at most 1/N of the slices "
    "with logs per compaction, most log files first, so the work spreads over the writes). On "
    "by default in hoodline (Hudi's Spark writer defaults to off and relies on a separate "
    "compaction job); off: run `hoodline table compact` yourself, or reads keep merging ever "
    "more log files.",
)
ARCHIVE_AUTOMATIC = cfg.option(
    "hoodie.archive.automatic",
    bool,
    True,
    "After every commit (and clean), archive old instants out of .hoodie as Java Hudi does, so "
    "the active timeline stays between 'hoodie.keep.min.commits' and 'hoodie.keep.max.commits' "
    "commits instead of growing by three files per write. Archived instants move to "
    ".hoodie/archived/.commits_.archive.N_1-0-1; time travel reaches back to the oldest active "
    "commit.",
)
KEEP_MIN_COMMITS = cfg.option(
    "hoodie.keep.min.commits",
    int,
    20,
    "Archival leaves at least this many completed commits on the active timeline (raised to "
    "'hoodie.cleaner.commits.retained' + 1 when lower, as Java does).",
    minimum=1,
)
KEEP_MAX_COMMITS = cfg.option(
    "hoodie.keep.max.commits",
    int,
    30,
    "Archival runs once more than this many completed commits are active; must be greater "
    "than 'hoodie.keep.min.commits'.",
    minimum=2,
)
ARCHIVAL_BATCH = cfg.option(
    "hoodie.commits.archival.batch",
    int,
    10,
    "Archived instants per Avro data block of the archive log file.",
    minimum=1,
)
ARCHIVE_MERGE_ENABLE = cfg.option(
    "hoodie.archive.merge.enable",
    bool,
    True,
    "Merge small archive files into one once 'hoodie.archive.merge.files.batch.size' of them "
    "have gathered, as Java Hudi does on stores that cannot append (plan file "
    ".hoodie/archived/mergeArchivePlan, finished or undone by the next archival after a crash). "
    "hoodline never appends to an archive file, so without merging every archival adds a file: "
    "a pipeline committing every few seconds would add hundreds a day, each opened by every "
    "reader of the archived timeline. On by default in hoodline (Java's default is off, as it "
    "appends where it can).",
)
ARCHIVE_MERGE_BATCH = cfg.option(
    "hoodie.archive.merge.files.batch.size",
    int,
    10,
    "Small archive files (the newest ones, down to the first larger than "
    "'hoodie.archive.merge.small.file.limit.bytes') that must have gathered before they are "
    "merged.",
    minimum=2,
)
ARCHIVE_MERGE_SMALL_FILE = cfg.option(
    "hoodie.archive.merge.small.file.limit.bytes",
    int,
    20 * MB,
    "Archive files up to this many bytes are merged; a larger one (a merged file grown past "
    "it) is kept as it is, and only newer files are merged after it.",
    minimum=1,
)
COMPACT_ASYNC = cfg.option(
    "hoodline.compaction.async",
    bool,
    False,
    "Merge-on-read tables: run the compactions 'hoodie.compact.inline' schedules in the "
    "background of the writer (a pipeline: as Spark jobs in a low-priority pool) while the next "
    "writes go on, instead of before the next write. Writes to a file group whose compaction is "
    "pending log against the compaction instant, as Java Hudi's do; Java readers and hoodline "
    "merge them, but hudi-rs 0.5.0 reads such a file group as it was when the compaction was "
    "planned until the compaction completes, which is why it is off by default. A writer that "
    "closes waits for its running compaction; one a crash interrupted is finished when the next "
    "writer opens.",
)
COMPACT_LOG_SIZE_RATIO = cfg.option(
    "hoodline.compaction.log-size-ratio",
    float,
    2.0,
    "Merge-on-read tables: inline compaction also waits until a file slice's log files hold at "
    "least this multiple of its base file's bytes, so a base file is rewritten in proportion to "
    "what was written into it, however large the table grows. Avro log records take about 5x "
    "the bytes of the same rows in a compressed Parquet base file: 2.0 compacts once the logs "
    "hold roughly 40 % as many rows as the base. 0: the log-file count alone decides.",
    minimum=0.0,
)
COMPACT_MAX_LOG_FILES = cfg.option(
    "hoodline.compaction.max-log-files",
    int,
    100,
    "Merge-on-read tables: a file slice with this many log files is due for inline compaction "
    "whatever 'hoodline.compaction.log-size-ratio' says. With small rounds into a growing "
    "table the size ratio alone let a slice gather hundreds of log files (and every "
    "deltacommit list them all): 4,200 more files an hour in a review at 300 records/s. "
    "0: no bound.",
    minimum=0,
)
LOG_BLOCK_FORMAT = cfg.option(
    "hoodie.logfile.data.block.format",
    LogBlockFormat,
    LogBlockFormat.AVRO,
    "Merge-on-read tables: format of the data blocks in log files: avro (Java Hudi's default) or "
    "parquet (smaller, compressed with 'hoodie.parquet.compression.codec').",
)
COMPACT_MAX_DELTA_COMMITS = cfg.option(
    "hoodie.compact.inline.max.delta.commits",
    int,
    5,
    "Merge-on-read tables: N, the number of log files (writes into a file group since its last "
    "compaction) at which inline compaction takes a file slice.",
    minimum=1,
)
LOCK_OWNER = cfg.option(
    "hoodline.write.lock.owner",
    str,
    "",
    "Name recorded in the writer lock (default: host and process id).",
)

ALL_OPTIONS: tuple[cfg.ConfigOption[Any], ...] = (
    MAX_FILE_SIZE,
    SMALL_FILE_LIMIT,
    RECORD_SIZE_ESTIMATE,
    RECORD_SIZE_ESTIMATION_THRESHOLD,
    RECORD_SIZE_LOOKBACK,
    BLOOM_FILTER_ENABLED,
    BLOOM_FPP,
    BLOOM_MIN_ENTRIES,
    BLOOM_MAX_HASHES,
    BLOOM_ROW_ENTRIES,
    PARQUET_COMPRESSION,
    PARQUET_ROW_GROUP_ROWS,
    COPY_ROW_GROUPS,
    CLEAN_AUTOMATIC,
    CLEAN_COMMITS_RETAINED,
    PAYLOAD_CLASS,
    COMBINE_BEFORE_INSERT,
    WRITE_THREADS,
    COMPACT_INLINE,
    COMPACT_ASYNC,
    ARCHIVE_AUTOMATIC,
    KEEP_MIN_COMMITS,
    KEEP_MAX_COMMITS,
    ARCHIVAL_BATCH,
    ARCHIVE_MERGE_ENABLE,
    ARCHIVE_MERGE_BATCH,
    ARCHIVE_MERGE_SMALL_FILE,
    COMPACT_MAX_DELTA_COMMITS,
    COMPACT_LOG_SIZE_RATIO,
    COMPACT_MAX_LOG_FILES,
    LOG_BLOCK_FORMAT,
    LOCK_OWNER,
    LOCK_EXPIRY_SECONDS,
    LOCK_HEARTBEAT_SECONDS,
    *TIMESTAMP_OPTIONS,  # the table's key generator settings (kept in hoodie.properties)
)


@dataclass(frozen=True)
class WriteOptions:
    """Validated writer settings (picklable, so Spark tasks can carry them)."""

    max_file_size: int = MAX_FILE_SIZE.default
    small_file_limit: int = SMALL_FILE_LIMIT.default
    record_size_estimate: int = RECORD_SIZE_ESTIMATE.default
    record_size_estimation_threshold: float = RECORD_SIZE_ESTIMATION_THRESHOLD.default
    record_size_lookback: int = RECORD_SIZE_LOOKBACK.default
    bloom_filter_enabled: bool = BLOOM_FILTER_ENABLED.default
    bloom_fpp: float = BLOOM_FPP.default
    bloom_min_entries: int = BLOOM_MIN_ENTRIES.default
    bloom_max_hashes: int = BLOOM_MAX_HASHES.default
    bloom_row_entries: int = BLOOM_ROW_ENTRIES.default
    compression: Compression = PARQUET_COMPRESSION.default
    row_group_rows: int = PARQUET_ROW_GROUP_ROWS.default
    copy_row_groups: bool = COPY_ROW_GROUPS.default
    clean_automatic: bool = CLEAN_AUTOMATIC.default
    clean_commits_retained: int = CLEAN_COMMITS_RETAINED.default
    payload_class: PayloadClass = PAYLOAD_CLASS.default
    combine_before_insert: bool = COMBINE_BEFORE_INSERT.default
    write_threads: int = WRITE_THREADS.default
    compact_inline: bool = COMPACT_INLINE.default
    compact_async: bool = COMPACT_ASYNC.default
    archive_automatic: bool = ARCHIVE_AUTOMATIC.default
    keep_min_commits: int = KEEP_MIN_COMMITS.default
    keep_max_commits: int = KEEP_MAX_COMMITS.default
    archival_batch: int = ARCHIVAL_BATCH.default
    archive_merge: bool = ARCHIVE_MERGE_ENABLE.default
    archive_merge_batch: int = ARCHIVE_MERGE_BATCH.default
    archive_merge_small_file: int = ARCHIVE_MERGE_SMALL_FILE.default
    compact_max_delta_commits: int = COMPACT_MAX_DELTA_COMMITS.default
    compact_log_size_ratio: float = COMPACT_LOG_SIZE_RATIO.default
    compact_max_log_files: int = COMPACT_MAX_LOG_FILES.default
    log_block_format: LogBlockFormat = LOG_BLOCK_FORMAT.default
    lock_owner: str = LOCK_OWNER.default
    lock_expiry_seconds: float = LOCK_EXPIRY_SECONDS.default
    lock_heartbeat_seconds: float = LOCK_HEARTBEAT_SECONDS.default

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object] | None = None) -> WriteOptions:
        """Parse and validate; unknown keys raise :class:`~hoodline.errors.ConfigError`."""
        o = cfg.Options(raw or {}, known=ALL_OPTIONS)
        return cls(
            max_file_size=o.get(MAX_FILE_SIZE),
            small_file_limit=o.get(SMALL_FILE_LIMIT),
            record_size_estimate=o.get(RECORD_SIZE_ESTIMATE),
            record_size_estimation_threshold=o.get(RECORD_SIZE_ESTIMATION_THRESHOLD),
            record_size_lookback=o.get(RECORD_SIZE_LOOKBACK),
            bloom_filter_enabled=o.get(BLOOM_FILTER_ENABLED),
            bloom_fpp=o.get(BLOOM_FPP),
            bloom_min_entries=o.get(BLOOM_MIN_ENTRIES),
            bloom_max_hashes=o.get(BLOOM_MAX_HASHES),
            bloom_row_entries=o.get(BLOOM_ROW_ENTRIES),
            compression=o.get(PARQUET_COMPRESSION),
            row_group_rows=o.get(PARQUET_ROW_GROUP_ROWS),
            copy_row_groups=o.get(COPY_ROW_GROUPS),
            clean_automatic=o.get(CLEAN_AUTOMATIC),
            clean_commits_retained=o.get(CLEAN_COMMITS_RETAINED),
            payload_class=o.get(PAYLOAD_CLASS),
            combine_before_insert=o.get(COMBINE_BEFORE_INSERT),
            write_threads=o.get(WRITE_THREADS),
            compact_inline=o.get(COMPACT_INLINE),
            compact_async=o.get(COMPACT_ASYNC),
            archive_automatic=o.get(ARCHIVE_AUTOMATIC),
            keep_min_commits=o.get(KEEP_MIN_COMMITS),
            keep_max_commits=o.get(KEEP_MAX_COMMITS),
            archival_batch=o.get(ARCHIVAL_BATCH),
            archive_merge=o.get(ARCHIVE_MERGE_ENABLE),
            archive_merge_batch=o.get(ARCHIVE_MERGE_BATCH),
            archive_merge_small_file=o.get(ARCHIVE_MERGE_SMALL_FILE),
            compact_max_delta_commits=o.get(COMPACT_MAX_DELTA_COMMITS),
            compact_log_size_ratio=o.get(COMPACT_LOG_SIZE_RATIO),
            compact_max_log_files=o.get(COMPACT_MAX_LOG_FILES),
            log_block_format=o.get(LOG_BLOCK_FORMAT),
            lock_owner=o.get(LOCK_OWNER),
            lock_expiry_seconds=o.get(LOCK_EXPIRY_SECONDS),
            lock_heartbeat_seconds=o.get(LOCK_HEARTBEAT_SECONDS),
        )._checked()

    def _checked(self) -> WriteOptions:
        """Rules between options, named with their values (and which one is a default): they
        stopped a run only at its first archival, after Spark had started (walkthrough
        review)."""
        if self.keep_min_commits >= self.keep_max_commits:
            raise ConfigError(
                f"'{KEEP_MAX_COMMITS.key}' = {self.keep_max_commits} must be greater than "
                f"'{KEEP_MIN_COMMITS.key}' = {self.keep_min_commits}"
                f"{' (its default)' if self.keep_min_commits == KEEP_MIN_COMMITS.default else ''}"
                f"; raise the one or lower the other")
        return self
