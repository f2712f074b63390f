"""The pipeline configuration file (TOML): what to read, which table to write, how to run.

Example::

    [source]
    type = "kafka"                  # kafka | files
    format = "json"                 # json | raw
    [source.options]                # handed to the connector's own options, unchanged
    topic = "events"
    properties.bootstrap.servers = "127.0.0.1:9092"
    properties.sasl.password = "..."            # masked wherever the config is shown

    [table]
    path = "/data/events"
    record-key = ["id"]
    partition-fields = ["day"]
    precombine-field = "ts"

    [schema]                        # declared Arrow types (see hoodline.config.arrow_types)
    id = "int64"
    day = "string"
    ts = "timestamp[ms]"

    [runtime]
    master = "local[2]"
    reader-parallelism = 2
    round.max-records = 100000

    [errors]
    tolerance = "all"               # none (default) | all

Nested TOML tables inside ``[source.options]``, ``[table.options]`` and ``[runtime.spark-conf]``
are flattened to dotted keys (``properties.bootstrap.servers = "x"`` is the key
``properties.bootstrap.servers``), so connector options read naturally in TOML. Every other key
is a declared option (see :data:`SECTIONS`); unknown keys and invalid values raise
:class:`ConfigError` naming the option (``table.bucket-count``) and the file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from hoodline.config import ConfigEnum, ConfigOption, ErrorTolerance, Options, option
from hoodline.config.arrow_types import format_type, schema_from_mapping
from hoodline.config.masking import MaskedDict, mask_secrets
from hoodline.config.units import ByteSize, Duration
from hoodline.errors import ConfigError
from hoodline.formats.registry import SchemaKind
from hoodline.pipeline.master import master_problem
from hoodline.pipeline.plugins import SourceType, plugin_class
from hoodline.storage.paths import shown_storage_options
from hoodline.table.keygen.kinds import (
    KeyGeneratorKind,
    PartitionKind,
    parse_partition_spec,
    timestamp_layout_problem,
)
from hoodline.table.keygen.timestamp import PREFIX as TIMESTAMP_PREFIX
from hoodline.table.keygen.timestamp import (
    TimestampKeyOptions,
    creation_defaults,
    timestamp_settings,
)
from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation


class ChangeDeletes(ConfigEnum):
    """What a Debezium delete event does to its row (``source.change-deletes``)."""

    #: the row is deleted from the table
    DELETE = "delete"
    #: the row stays, marked ``_event_op = 'd'`` (its before image): late duplicates of older
    #: changes can never bring it back or overwrite it; queries filter the marked rows out
    MARK = "mark"


#: file formats of the file source, which users write in [source] format by mistake
_FILE_FORMATS = frozenset(('jsonl', 'csv', 'parquet'))


class SourceFormat(ConfigEnum):
    """How message values are decoded (``source.format``)."""

    #: each value is one JSON object, parsed into the declared [schema]
    JSON = "json"
    #: the bytes pass through as a binary ``value`` column
    RAW = "raw"
    #: Avro in the Confluent wire format, writer schemas from the Schema Registry
    AVRO = "avro"
    #: JSON in the Confluent wire format, JSON Schemas from the Schema Registry
    JSON_SCHEMA = "json-schema"
    #: Protobuf in the Confluent wire format, schemas from the Schema Registry
    PROTOBUF = "protobuf"
    #: Debezium change events, JSON (plain or schemas-enabled)
    DEBEZIUM_JSON = "debezium-json"
    #: Debezium change events, Confluent Avro
    DEBEZIUM_AVRO = "debezium-avro"

    @classmethod
    def parse(cls, raw: object) -> SourceFormat:
        """As :meth:`ConfigEnum.parse`; a file format written here gets a pointer to where it
        belongs (the file source's own ``format`` option)."""
        try:
            return super().parse(raw)
        except ValueError as exc:
            if isinstance(raw, str) and raw.strip().lower() in _FILE_FORMATS:
                raise ValueError(
                    f"{exc}. '{raw}' is a file format: the file source takes it as "
                    f"[source.options] format = '{raw.strip().lower()}', and [source] format (how "
                    "Kafka message values are decoded) can be left out"
                ) from None
            raise

    @property
    def registry_kind(self) -> SchemaKind | None:
        """The Schema Registry schema type the values are written with; None when they carry
        no registry id."""
        return _REGISTRY_KINDS.get(self)

    @property
    def uses_registry(self) -> bool:
        """Values carry a Schema Registry id; the table's schema follows a subject."""
        return self.registry_kind is not None

    @property
    def change_events(self) -> bool:
        """Values are Debezium change events (see :mod:`hoodline.formats.debezium`)."""
        return self in (SourceFormat.DEBEZIUM_JSON, SourceFormat.DEBEZIUM_AVRO)


_REGISTRY_KINDS = {
    SourceFormat.AVRO: SchemaKind.AVRO, SourceFormat.DEBEZIUM_AVRO: SchemaKind.AVRO,
    SourceFormat.JSON_SCHEMA: SchemaKind.JSON, SourceFormat.PROTOBUF: SchemaKind.PROTOBUF,
}

# -- options ------------------------------------------------------------------------------------
SOURCE_TYPE = option(
    "source.type", SourceType, SourceType.KAFKA, "Where records come from."
)
SOURCE_FORMAT = option(
    "source.format",
    SourceFormat,
    SourceFormat.JSON,
    "How message values are decoded: `json` parses each value (one JSON object) into the "
    "declared [schema]; `raw` passes the bytes through as a binary `value` column; `avro` "
    "reads Avro in the Confluent wire format (magic byte, schema id, datum) with the writer "
    "schemas of the Schema Registry at `schema.registry.url` in [source.options] (other "
    "`schema.registry.*` keys go to confluent-kafka's registry client; secrets masked); "
    "`json-schema` and `protobuf` read those formats in the Confluent wire format the same "
    "way; "
    "`debezium-json` / `debezium-avro` read Debezium change events (c/r/u upsert the `after` "
    "image, d deletes the `before` key, ordered by the source's log position; columns "
    "`_event_op`, `_event_order`, `_event_ts_ms` added).",
)
SCHEMA_SUBJECT = option(
    "source.schema-subject",
    str,
    "",
    "With a Schema Registry format: the subject whose schema the table's columns follow "
    "(unless [schema] is declared). Default: `<topic>-value` (TopicNameStrategy) for a "
    "single-topic subscription.",
)
CHANGE_DELETES = option(
    "source.change-deletes",
    ChangeDeletes,
    ChangeDeletes.DELETE,
    "With a Debezium format: `delete` removes a deleted row from the table; `mark` keeps it as "
    "a row with `_event_op = 'd'` (its before image), so that no late duplicate of an older "
    "change can re-create or overwrite it (a deleted row otherwise leaves no ordering value "
    "behind); queries then filter `_event_op <> 'd'`.",
)
SCHEMA_MESSAGE = option(
    "source.schema-message",
    str,
    "",
    "With format = protobuf: the full name of the message the table follows (e.g. "
    "`shop.Order`). Default: the schema file's first message.",
)
SCHEMA_VERSION = option(
    "source.schema-version",
    str,
    "latest",
    "With a Schema Registry format: `latest` (the table follows the subject's newest version: a "
    "compatible new version adds its fields to the table in the next commit) or a version "
    "number to pin.",
    validator=lambda v: None if v == "latest" or (v.isascii() and v.isdigit() and int(v) > 0)
    else "give 'latest' or a version number (1, 2, ...)",
)

TABLE_PATH = option(
    "table.path", str, "",
    "Base path of the Hudi table (created on first use). Required. Until its first commit a "
    "table the pipeline created takes the pipeline file's settings (so a first run that failed, "
    "e.g. on a wrong record key, leaves nothing the next run must keep); after that its type, "
    "key, partitioning, index and ordering field stay as they are.",
    validator=lambda v: None if v.strip() else "give the table's base path",
)
TABLE_NAME = option(
    "table.name", str, "", "Table name stored in hoodie.properties (hoodie.table.name) when the "
    "table is created; default: last path element. An existing table keeps its name: a "
    "different one set here is refused."
)
RECORD_KEY = option(
    "table.record-key",
    tuple,
    (),
    "Record key field(s); records with equal keys in the same partition are the same row "
    "(upserts, deletes): the index is not global, so a record whose partition value changes "
    "leaves its old row in the old partition (partition by a value that does not change, or "
    "delete the old row). "
    "Required; must be declared in [schema] and must not be null (with several fields, one of "
    "them may be: Java's `f:__null__` / `f:__empty__` parts). Several fields make Java's key "
    "text `f1:v1,f2:v2`, without escaping, as Java writes it: values holding `,` and `:`, or "
    "the texts `__null__` and `__empty__` (a null's and an empty string's parts), can make "
    "two different records one key (the later replaces the earlier); pick key fields whose "
    "values cannot.",
    validator=lambda v: None if v else "give at least one key field",
)
PARTITION_FIELDS = option(
    "table.partition-fields", tuple, (), "Partition field(s), one folder level each; none = "
    "unpartitioned table. With table.key-generator = custom each entry is `name:simple` or "
    "`name:timestamp` (Java's CustomKeyGenerator syntax). Pick fields of few values (a day, a "
    "region): each value is a folder with its own files, and a round that writes 1,000 files "
    "or more of under 10 records on average gets a warning (once a run)."
)
KEY_GENERATOR = option(
    "table.key-generator",
    KeyGeneratorKind,
    KeyGeneratorKind.DEFAULT,
    "How record keys and partition paths are made, as Java Hudi's key generators do: default "
    "(Simple, Nonpartitioned or Complex by the number of key and partition fields), timestamp "
    "(TimestampBasedKeyGenerator: the one partition field read as a time and written with a "
    "date pattern, settings `hoodie.keygen.timebased.*` in [table.options]) or custom "
    "(CustomKeyGenerator: `name:simple` / `name:timestamp` partition fields). An existing table "
    "keeps its generator.",
)
PRECOMBINE_FIELD = option(
    "table.precombine-field",
    str,
    "",
    "Ordering field: among records with the same key in one round the highest value wins "
    "(ties: the last read; a record whose value is null or NaN is a bad record, "
    "'missing_key'). Against the row the table already holds, the payload class decides "
    "('hoodie.datasource.write.payload.class'): by default the incoming record replaces it "
    "whatever its value; DefaultHoodieRecordPayload keeps the stored row when its value is "
    "greater (late events do not overwrite newer data). Empty: the last record read wins. An "
    "existing table keeps its ordering field: left "
    "out, the table's is used; another one, or one for a table that has none, is refused.",
)
INDEX = option(
    "table.index",
    IndexType,
    IndexType.BUCKET,
    "Index locating existing records: BUCKET (file group = hash(key) % bucket-count, no lookup, "
    "fastest upserts) or BLOOM (bloom filters in base files; upserts tables written by others). "
    "An existing table keeps its index: left out, the table's is used; another one is refused.",
)
TABLE_TYPE = option(
    "table.type",
    TableType,
    TableType.COPY_ON_WRITE,
    "Table type of a new table: COPY_ON_WRITE (every round rewrites the file groups it touches; "
    "simplest to read) or MERGE_ON_READ (rounds append log files, compaction merges them into "
    "base files later; fastest upserts). An existing table keeps its type: left out, the table's "
    "is used; another one is refused.",
)
BUCKET_COUNT = option(
    "table.bucket-count", int, 4, "Buckets (file groups) per partition with index BUCKET. An "
    "existing table keeps its count: left out, the table's is used; another one is refused.",
    minimum=1, maximum=65536,
)
OPERATION = option(
    "table.operation",
    WriteOperation,
    WriteOperation.UPSERT,
    "Write operation: upsert (update or insert by key), insert (no lookup; duplicates possible), "
    "bulk_insert (insert without small-file handling), delete (every record deletes its key).",
)
DELETE_FIELD = option(
    "table.delete-field",
    str,
    "",
    "Boolean field flagging a record as a delete of its key (e.g. `_deleted`); empty: none. "
    "Kafka tombstones (null value, non-null key) are deletes too when the key maps to the "
    "record key: a JSON object with the key (and partition) fields, Confluent Avro, or for a "
    "single key field of an unpartitioned table also the plain value or a JSON string "
    "holding it; each message's key is read on its own, and one that gives no key goes to "
    "the error table (bad_tombstone_key).",
)

RUNTIME_MASTER = option(
    "runtime.master", str, "local[2]",
    "Spark master: local[N], local[*], local[N,F] or local-cluster[E,C,MB] (separate executor "
    "processes), or a cluster URL.",
    validator=master_problem,
)
MASTER_UI = option(
    "runtime.master-ui", str, "",
    "A standalone master's web UI (its JSON at /json/), asked when a round has waited 30 s "
    "without executors: a master restarted without recovery no longer knows the application, "
    "which then never gets an executor again, and the run stops saying so (else it would wait "
    "forever). Empty: http://<the master's host>:8080, Spark's default; a UI that does not "
    "answer leaves the round waiting, with a warning every 30 s.",
)
READER_PARALLELISM = option(
    "runtime.reader-parallelism", int, 2,
    "Reader subtasks = Spark tasks of the read stage; splits (Kafka partitions, files) are "
    "spread over them. Changing it on restart rebalances the splits.",
    minimum=1, maximum=4096,
)
WRITER_PARALLELISM = option(
    "runtime.writer-parallelism", int, 0,
    "Writer tasks (the file-group shuffle's partitions); 0 = Spark's default parallelism (the "
    "master's cores). Every writer task reports, also those that received no records.",
    minimum=0, maximum=4096,
)
JVM_CLASS_CACHE = option(
    "runtime.jvm-class-cache", bool, True,
    "Start the driver JVM from a class-data-sharing archive of Spark's classes (about 2.5 s "
    "faster starts). The archive is built once per Java and pyspark installation (about 30 s, "
    "on the first start that needs it; each virtualenv gets its own, ~90 MB, and pyspark or "
    "Java installed again replaces it) in $HOODLINE_CACHE_DIR, else ~/.cache/hoodline.",
)
SHUFFLE_FILES = option(
    "runtime.shuffle-files", bool, True,
    "On a local[N] master, reader tasks hand their records to the writer tasks as Arrow files "
    "in the session's temporary directory ($TMPDIR), removed when the round's job ends, and "
    "Spark's shuffle carries only the files' paths: the JVM copies no record bytes (about 1.2 s "
    "less CPU per 2M-message ingest). Other masters always use Spark's shuffle, as their "
    "executors need not share a disk.",
)
ROUND_MAX_RECORDS = option(
    "runtime.round.max-records", int, 1_000_000,
    "Most records read per round (checkpoint/commit), over all readers. Bigger rounds catch up "
    "on a backlog with fewer commits (copy-on-write rewrites each touched file group once per "
    "round); round.max-bytes bounds what a round holds in memory.", minimum=1,
)
ROUND_MAX_BYTES = option(
    "runtime.round.max-bytes", ByteSize, ByteSize(256 * 1024**2),
    "Most bytes read per round, over all readers (e.g. 256MiB): message values for Kafka, "
    "the records' in-memory (Arrow) size for files. Applied as a record budget from the "
    "average record size of the rounds before, so the first round of a run is bounded by "
    "round.max-records alone.", minimum=1,
)
ROUND_MIN_INTERVAL = option(
    "runtime.round.min-interval", Duration, Duration(1.0),
    "Shortest time between round starts; small values commit more often (more small files).",
    minimum=0.0,
)
ROUND_MAX_INTERVAL = option(
    "runtime.round.max-interval", Duration, Duration(30.0),
    "Longest a round waits for data before it commits what it has (latency bound).",
    minimum=0.001,
)
WRITER_BUFFER = option(
    "runtime.writer.buffer-bytes", ByteSize, ByteSize(256 * 1024**2),
    "Memory a writer task buffers for its file groups before spilling records to a local Arrow "
    "file (memory-mapped when the file groups are written): bounds writer memory independently "
    "of the round size.", minimum=1,
)
MAX_CONSECUTIVE_FAILURES = option(
    "runtime.max-consecutive-failures", int, 5,
    "Failed rounds in a row (each rolled back and retried) before the job stops with an error. "
    "Rounds that fail because the table's object store does not answer (or fails on its side) "
    "count only once the outage has lasted the store's `retry_timeout` ([table.storage], "
    "default 3 min).",
    minimum=1,
)
RETRY_BACKOFF = option(
    "runtime.retry-backoff", Duration, Duration(1.0),
    "Wait before retrying a failed round; doubles after each consecutive failure.",
    minimum=0.0,
)
RETRY_BACKOFF_MAX = option(
    "runtime.retry-backoff-max", Duration, Duration(60.0),
    "Upper bound of the retry wait.", minimum=0.0,
)

ERRORS_TOLERANCE = option(
    "errors.tolerance",
    ErrorTolerance,
    ErrorTolerance.NONE,
    "Bad records (unparseable, wrong type, missing key): `none` stops the job with an error "
    "naming the record's position; `all` writes them to the error table and goes on. Never "
    "silently dropped.",
)
ERRORS_TABLE_PATH = option(
    "errors.table-path", str, "",
    "Where bad records go with tolerance `all`; default: the table path + `_errors`.",
)

#: Declared options per section (the README's option tables are rendered from these).
SECTIONS: dict[str, tuple[ConfigOption[Any], ...]] = {
    "source": (SOURCE_TYPE, SOURCE_FORMAT, SCHEMA_SUBJECT, SCHEMA_VERSION, SCHEMA_MESSAGE,
               CHANGE_DELETES),
    "table": (
        TABLE_PATH, TABLE_NAME, RECORD_KEY, PARTITION_FIELDS, KEY_GENERATOR, PRECOMBINE_FIELD,
        TABLE_TYPE, INDEX, BUCKET_COUNT, OPERATION, DELETE_FIELD,
    ),
    "runtime": (
        RUNTIME_MASTER, MASTER_UI, READER_PARALLELISM, WRITER_PARALLELISM, JVM_CLASS_CACHE,
        SHUFFLE_FILES,
        ROUND_MAX_RECORDS, ROUND_MAX_BYTES,
        ROUND_MIN_INTERVAL, ROUND_MAX_INTERVAL, WRITER_BUFFER, MAX_CONSECUTIVE_FAILURES,
        RETRY_BACKOFF, RETRY_BACKOFF_MAX,
    ),
    "errors": (ERRORS_TOLERANCE, ERRORS_TABLE_PATH),
}
ALL_OPTIONS: tuple[ConfigOption[Any], ...] = tuple(o for opts in SECTIONS.values() for o in opts)

#: Sub-tables passed through as flat maps: (section, sub-table) -> what they are for.
PASSTHROUGH = {
    ("source", "options"): "the connector's own options (Kafka: properties.*, topic, scan.*)",
    ("table", "options"): "table-layer write options (hoodie.*)",
    ("table", "storage"): "object store settings of the table and its error table (endpoint, "
    "region, credentials, ...); none needed with the provider's standard environment",
    ("runtime", "spark-conf"): "extra spark.* settings for the Spark application",
}
_TOP_LEVEL = ("source", "table", "schema", "runtime", "errors")

# -- sections -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceSection:
    type: SourceType
    format: SourceFormat
    #: The connector's options, flat; secret values are masked in repr.
    options: Mapping[str, object] = field(default_factory=MaskedDict)
    #: format = avro: the registry subject the table follows ("": <topic>-value)
    schema_subject: str = ""
    #: format = avro: None = the subject's latest version, else the pinned version
    schema_version: int | None = None
    #: format = protobuf: the message the table follows ("": the file's first)
    schema_message: str = ""
    #: Debezium formats: delete rows or keep them marked
    change_deletes: ChangeDeletes = ChangeDeletes.DELETE


@dataclass(frozen=True)
class TableSection:
    path: str
    name: str
    record_key: tuple[str, ...]
    partition_fields: tuple[str, ...]
    precombine_field: str | None
    index: IndexType
    bucket_count: int
    table_type: TableType
    operation: WriteOperation
    delete_field: str | None
    options: Mapping[str, object] = field(default_factory=MaskedDict)
    key_generator: KeyGeneratorKind = KeyGeneratorKind.DEFAULT
    #: each partition field's type with the custom key generator (else empty)
    partition_kinds: tuple[PartitionKind, ...] = ()
    #: ``[table.storage]``: object store settings; secret values are masked in repr
    storage: Mapping[str, object] = field(default_factory=MaskedDict)
    #: ``table.name`` was set (else :attr:`name` is the path's last element, and an existing
    #: table's own name is kept)
    name_set: bool = False
    #: ``table.type`` / ``table.index`` / ``table.bucket-count`` were set (else an existing
    #: table's own are kept; a new table takes the defaults)
    type_set: bool = False
    index_set: bool = False
    bucket_count_set: bool = False

    @property
    def storage_options(self) -> dict[str, str]:
        """``[table.storage]`` as the object store takes them (strings)."""
        return {k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in self.storage.items()}


@dataclass(frozen=True)
class RuntimeSection:
    master: str
    reader_parallelism: int
    round_max_records: int
    round_max_bytes: int
    round_min_interval_s: float
    round_max_interval_s: float
    max_consecutive_failures: int
    retry_backoff_s: float
    retry_backoff_max_s: float
    spark_conf: Mapping[str, object] = field(default_factory=MaskedDict)
    writer_buffer_bytes: int = 256 * 1024**2
    writer_parallelism: int = 0
    jvm_class_cache: bool = True
    shuffle_files: bool = True
    #: ``runtime.master-ui`` ('' = the standalone master's host, port 8080)
    master_ui: str = ""

    def backoff_s(self, consecutive_failures: int) -> float:
        """Wait before the retry after ``consecutive_failures`` (>= 1) failed rounds."""
        if consecutive_failures < 1:
            return 0.0
        return float(min(self.retry_backoff_max_s,
                         self.retry_backoff_s * 2 ** (consecutive_failures - 1)))


@dataclass(frozen=True)
class ErrorsSection:
    tolerance: ErrorTolerance
    table_path: str


@dataclass(frozen=True)
class PipelineConfig:
    """A validated pipeline configuration. ``repr`` never shows secrets."""

    source: SourceSection
    table: TableSection
    #: Declared record schema (``value`` with ``source.format = raw``; empty with a registry
    #: format and no [schema]: the subject's schema is fetched when the pipeline starts).
    schema: pa.Schema
    runtime: RuntimeSection
    errors: ErrorsSection
    origin: str = "<dict>"

    def describe(self) -> dict[str, object]:
        """Flat ``section.key -> value`` view for logs/CLI, secrets masked."""
        out: dict[str, object] = {SOURCE_TYPE.key: self.source.type.config_text}
        if self.source.type is not SourceType.FILES or self.source.format is not SourceFormat.JSON:
            # a file source's format is its own option; the default message format would read
            # as if its CSV or Parquet files were taken for JSON
            out[SOURCE_FORMAT.key] = self.source.format.config_text
        if self.source.format.uses_registry:
            out[SCHEMA_SUBJECT.key] = self.source.schema_subject or "<topic>-value"
            out[SCHEMA_VERSION.key] = (str(self.source.schema_version)
                                       if self.source.schema_version else "latest")
        out.update({f"source.options.{k}": v for k, v in mask_secrets(self.source.options).items()})
        t = self.table
        out.update({
            TABLE_PATH.key: t.path, TABLE_NAME.key: t.name, RECORD_KEY.key: list(t.record_key),
            PARTITION_FIELDS.key: (
                [f"{n}:{k.value}" for n, k in zip(t.partition_fields, t.partition_kinds,
                                                  strict=True)]
                if t.partition_kinds else list(t.partition_fields)
            ),
            KEY_GENERATOR.key: t.key_generator.config_text,
            PRECOMBINE_FIELD.key: t.precombine_field or "", INDEX.key: t.index.config_text,
            TABLE_TYPE.key: t.table_type.config_text,
            BUCKET_COUNT.key: t.bucket_count, OPERATION.key: t.operation.config_text,
            DELETE_FIELD.key: t.delete_field or "",
        })
        out.update({f"table.options.{k}": v for k, v in mask_secrets(t.options).items()})
        out.update({f"table.storage.{k}": v for k, v in shown_storage_options(t.storage).items()})
        out.update({f"schema.{f.name}": format_type(f.type) for f in self.schema})
        r = self.runtime
        out.update({
            RUNTIME_MASTER.key: r.master, READER_PARALLELISM.key: r.reader_parallelism,
            WRITER_PARALLELISM.key: r.writer_parallelism,
            JVM_CLASS_CACHE.key: r.jvm_class_cache, SHUFFLE_FILES.key: r.shuffle_files,
            ROUND_MAX_RECORDS.key: r.round_max_records, ROUND_MAX_BYTES.key: r.round_max_bytes,
            ROUND_MIN_INTERVAL.key: r.round_min_interval_s,
            ROUND_MAX_INTERVAL.key: r.round_max_interval_s,
            WRITER_BUFFER.key: r.writer_buffer_bytes,
            MAX_CONSECUTIVE_FAILURES.key: r.max_consecutive_failures,
            RETRY_BACKOFF.key: r.retry_backoff_s, RETRY_BACKOFF_MAX.key: r.retry_backoff_max_s,
        })
        out.update({f"runtime.spark-conf.{k}": v for k, v in mask_secrets(r.spark_conf).items()})
        out.update({ERRORS_TOLERANCE.key: self.errors.tolerance.config_text,
                    ERRORS_TABLE_PATH.key: self.errors.table_path})
        return out


# -- loading ------------------------------------------------------------------------------------
def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a pipeline TOML file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read pipeline config {str(p)!r}: {exc.strerror}; give the path of a "
            f"pipeline TOML file (the examples/ folder of hoodline's repository has some, e.g. "
            f"examples/kafka-orders.toml; the README's option reference lists every setting)"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"pipeline config {str(p)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            f"give the path of a pipeline TOML file"
        ) from None
    return parse_config(text, origin=str(p))


def parse_config(text: str, origin: str = "<string>") -> PipelineConfig:
    """Validate a pipeline configuration given as TOML text."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from None
    return config_from_dict(doc, origin)


def config_from_dict(doc: Mapping[str, Any], origin: str = "<dict>") -> PipelineConfig:
    """Validate a pipeline configuration given as nested dicts (the parsed TOML)."""
    try:
        return _build(doc, origin)
    except ConfigError as exc:
        if origin and not str(exc).startswith(origin):
            raise ConfigError(f"{origin}: {exc}") from None
        raise


def _build(doc: Mapping[str, Any], origin: str) -> PipelineConfig:
    unknown = [k for k in doc if k not in _TOP_LEVEL]
    if unknown:
        raise ConfigError(
            f"unknown section(s) {', '.join(repr(u) for u in unknown)}; "
            f"known sections: {', '.join(_TOP_LEVEL)}"
        )
    for name in _TOP_LEVEL:
        if name in doc and not isinstance(doc[name], Mapping):
            kind = type(doc[name]).__name__
            raise ConfigError(f"'{name}' must be a table ([{name}]), not {kind}")

    flat: dict[str, dict[str, object]] = {}
    passthrough: dict[tuple[str, str], MaskedDict] = {}
    for section in SECTIONS:
        values: dict[str, object] = {}
        for key, value in dict(doc.get(section, {})).items():
            if (section, key) in PASSTHROUGH:
                if not isinstance(value, Mapping):
                    raise ConfigError(f"'{section}.{key}' must be a table ([{section}.{key}])")
                passthrough[(section, key)] = MaskedDict(_flatten(value, f"{section}.{key}"))
                continue
            if isinstance(value, Mapping):
                # dotted option keys written as TOML sub-tables (round.max-records = ...)
                for sub, v in _flatten(value, f"{section}.{key}").items():
                    values[f"{section}.{key}.{sub}"] = v
            else:
                values[f"{section}.{key}"] = value
        flat[section] = values
    opts = {s: _options(flat[s], SECTIONS[s]) for s in SECTIONS}

    src, tbl, run, err = opts["source"], opts["table"], opts["runtime"], opts["errors"]
    source = SourceSection(
        type=src.get(SOURCE_TYPE),
        format=src.get(SOURCE_FORMAT),
        options=passthrough.get(("source", "options"), MaskedDict()),
        schema_subject=src.get(SCHEMA_SUBJECT).strip(),
        schema_version=None if src.get(SCHEMA_VERSION) == "latest"
        else int(src.get(SCHEMA_VERSION)),
        schema_message=src.get(SCHEMA_MESSAGE).strip(),
        change_deletes=src.get(CHANGE_DELETES),
    )
    for required in (TABLE_PATH, RECORD_KEY):
        if not tbl.contains(required):
            raise ConfigError(f"option '{required.key}' is required: {required.description}")
    path = tbl.get(TABLE_PATH)
    record_key = tbl.get(RECORD_KEY)
    key_generator = tbl.get(KEY_GENERATOR)
    partition_fields, partition_kinds = _partition_fields(
        _names(tbl.get(PARTITION_FIELDS), PARTITION_FIELDS), key_generator
    )
    table = TableSection(
        path=path,
        name=tbl.get(TABLE_NAME) or _default_name(path),
        record_key=_names(record_key, RECORD_KEY),
        partition_fields=partition_fields,
        key_generator=key_generator,
        partition_kinds=partition_kinds,
        precombine_field=tbl.get(PRECOMBINE_FIELD) or None,
        index=tbl.get(INDEX),
        bucket_count=tbl.get(BUCKET_COUNT),
        table_type=tbl.get(TABLE_TYPE),
        operation=tbl.get(OPERATION),
        delete_field=tbl.get(DELETE_FIELD) or None,
        options=passthrough.get(("table", "options"), MaskedDict()),
        storage=passthrough.get(("table", "storage"), MaskedDict()),
        name_set=bool(tbl.get(TABLE_NAME)),
        type_set=tbl.contains(TABLE_TYPE),
        index_set=tbl.contains(INDEX),
        bucket_count_set=tbl.contains(BUCKET_COUNT),
    )
    spark_extra = passthrough.get(("runtime", "spark-conf"), MaskedDict())
    if "spark.master" in spark_extra:
        # it overrode runtime.master after hoodline had configured itself for that master
        raise ConfigError(
            "[runtime.spark-conf] spark.master: set the master with runtime.master (hoodline "
            "configures the session for the master it names); under spark-submit, give the "
            "same master to both"
        )
    runtime = RuntimeSection(
        master=run.get(RUNTIME_MASTER),
        reader_parallelism=run.get(READER_PARALLELISM),
        round_max_records=run.get(ROUND_MAX_RECORDS),
        round_max_bytes=int(run.get(ROUND_MAX_BYTES)),
        round_min_interval_s=float(run.get(ROUND_MIN_INTERVAL)),
        round_max_interval_s=float(run.get(ROUND_MAX_INTERVAL)),
        max_consecutive_failures=run.get(MAX_CONSECUTIVE_FAILURES),
        retry_backoff_s=float(run.get(RETRY_BACKOFF)),
        retry_backoff_max_s=float(run.get(RETRY_BACKOFF_MAX)),
        spark_conf=spark_extra,
        writer_buffer_bytes=int(run.get(WRITER_BUFFER)),
        writer_parallelism=run.get(WRITER_PARALLELISM),
        jvm_class_cache=run.get(JVM_CLASS_CACHE),
        shuffle_files=run.get(SHUFFLE_FILES),
        master_ui=run.get(MASTER_UI).strip(),
    )
    errors = ErrorsSection(
        tolerance=err.get(ERRORS_TOLERANCE),
        table_path=err.get(ERRORS_TABLE_PATH) or (path.rstrip("/") + "_errors"),
    )
    schema_doc = dict(doc.get("schema", {}))
    if source.change_deletes is ChangeDeletes.MARK and not source.format.change_events:
        raise ConfigError(
            f"option '{CHANGE_DELETES.key}' = 'mark' applies to the Debezium formats only "
            f"(source.format is '{source.format}'); remove it"
        )
    if source.format.change_events:
        table, schema = _change_event_table(table, schema_doc, source.format)
    elif source.format is SourceFormat.JSON or (source.format.uses_registry and schema_doc):
        schema = schema_from_mapping(schema_doc)
    elif source.format.uses_registry:
        schema = pa.schema([])  # the registry subject's, fetched when the pipeline starts
    elif schema_doc:
        raise ConfigError(
            f"[schema] is not used with {SOURCE_FORMAT.key} = '{source.format}'; remove it"
        )
    else:
        schema = pa.schema([("value", pa.binary())])
    _check_cross(source, table, schema, runtime, errors)
    config = PipelineConfig(source, table, schema, runtime, errors, origin)
    _check_table_options(config)
    _check_source(config)
    return config


def _check_table_options(config: PipelineConfig) -> None:
    """Validate ``[table.options]`` now, so that a misspelt or mistyped option stops the run
    with the file and section named, before anything starts."""
    from hoodline.table.write.options import WriteOptions

    try:
        WriteOptions.from_mapping(config.table.options)
    except ConfigError as exc:
        raise ConfigError(f"[table.options]: {exc}") from None


def _holds_bytes(kind: pa.DataType) -> bool:
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _holds_bytes(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_holds_bytes(f.type) for f in kind)
    return False


def _change_event_table(
    table: TableSection, schema_doc: dict[str, Any], fmt: SourceFormat
) -> tuple[TableSection, pa.Schema]:
    """Debezium formats: the declared row (+ the event columns), the source's log position as
    the ordering field and DefaultHoodieRecordPayload (a late older change never overwrites a
    newer stored row) unless set; deletes come from the events, not a delete field."""
    from hoodline.formats.debezium import EVENT_COLUMNS, EVENT_ORDER
    from hoodline.table.write.options import PAYLOAD_CLASS, PayloadClass

    reserved = [n for n in schema_doc if n in EVENT_COLUMNS.names]
    if reserved:
        raise ConfigError(
            f"[schema] declares {', '.join(repr(r) for r in reserved)}, which format "
            f"'{fmt}' adds itself (the change's op, order and time); remove it"
        )
    if table.delete_field:
        raise ConfigError(
            f"option '{DELETE_FIELD.key}' is not used with format '{fmt}': deletes are the "
            "change events with op 'd'; remove it"
        )
    if not schema_doc and fmt is SourceFormat.DEBEZIUM_JSON:
        raise ConfigError(
            f"format '{fmt}' needs [schema]: declare the columns of the captured table (the "
            "fields of the events' before/after images)"
        )
    schema = schema_from_mapping(schema_doc) if schema_doc else pa.schema([])
    blobs = [f.name for f in schema if _holds_bytes(f.type)]
    if blobs and fmt is SourceFormat.DEBEZIUM_JSON:
        raise ConfigError(
            f"[schema] declares {', '.join(repr(b) for b in blobs)} as binary, but Debezium's "
            "JSON events carry bytes as text (base64, or hex with binary.handling.mode = hex), "
            "which would be stored as the bytes of that text: declare them \"string\""
        )
    if len(schema):
        schema = pa.schema([*schema, *EVENT_COLUMNS])
    options = MaskedDict(table.options)
    options.setdefault(PAYLOAD_CLASS.key, PayloadClass.DEFAULT.value)
    return replace(table, precombine_field=table.precombine_field or EVENT_ORDER,
                   options=options), schema


def _check_source(config: PipelineConfig) -> None:
    """Validate ``[source.options]`` with the connector's own options now (no connection is
    made), so that a bad option stops the run before Spark starts."""
    try:
        plugin_class(config.source.type).from_config(config).close()
    except ConfigError as exc:
        if str(exc).startswith("[source]"):  # about [source] itself, not its options
            raise
        # an option of [source] written in [source.options] (schema-subject there read as an
        # unknown option, naming no section: subscription review)
        misplaced = [o.key.removeprefix("source.") for o in SECTIONS["source"]
                     if f"unknown option '{o.key.removeprefix('source.')}'" in str(exc)]
        hint = (f" ('{misplaced[0]}' is an option of [source] itself: move it there)"
                if misplaced else "")
        raise ConfigError(
            f"[source.options] ({config.source.type} source): {exc}{hint}") from None


def _options(values: dict[str, object], known: Iterable[ConfigOption[Any]]) -> Options:
    opts = Options(values, known=known)
    for opt in known:  # validate every given value now, not when first read
        if opts.contains(opt):
            opts.get(opt)
    return opts


def _flatten(table: Mapping[str, object], where: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            for sub, v in _flatten(value, f"{where}.{key}").items():
                out[f"{key}.{sub}"] = v
        elif isinstance(value, (str, int, float, bool, list)):
            out[key] = value
        else:
            raise ConfigError(
                f"option '{where}.{key}' has a value of unsupported type {type(value).__name__}; "
                "use a string, number, boolean or list"
            )
    return out


def _names(values: tuple[Any, ...], opt: ConfigOption[Any]) -> tuple[str, ...]:
    out = tuple(str(v).strip() for v in values)
    if any(not v for v in out):
        raise ConfigError(f"option '{opt.key}' contains an empty field name: {list(values)!r}")
    if len(set(out)) != len(out):
        raise ConfigError(f"option '{opt.key}' names a field twice: {list(values)!r}")
    return out


def _partition_fields(
    entries: tuple[str, ...], kind: KeyGeneratorKind
) -> tuple[tuple[str, ...], tuple[PartitionKind, ...]]:
    """Names and (custom generator) types of ``table.partition-fields``."""
    if kind is not KeyGeneratorKind.CUSTOM:
        typed = [e for e in entries if ":" in e]
        if typed:
            raise ConfigError(
                f"option '{PARTITION_FIELDS.key}' entry {typed[0]!r} has a type, which only the "
                f"custom key generator takes; set {KEY_GENERATOR.key} = 'custom' or remove it"
            )
        return entries, ()
    if not entries:
        raise ConfigError(
            f"option '{KEY_GENERATOR.key}' = 'custom' needs '{PARTITION_FIELDS.key}' such as "
            "['region:simple', 'ts:timestamp']"
        )
    specs = []
    for entry in entries:
        try:
            specs.append(parse_partition_spec(entry))
        except ValueError as exc:
            raise ConfigError(f"option '{PARTITION_FIELDS.key}': {exc}") from None
    names = _names(tuple(n for n, _ in specs), PARTITION_FIELDS)
    return names, tuple(k for _, k in specs)


def _check_key_generator(table: TableSection) -> None:
    kind = table.key_generator
    problem = timestamp_layout_problem(table.record_key, table.partition_fields)
    if kind is KeyGeneratorKind.TIMESTAMP and problem:
        raise ConfigError(f"option '{KEY_GENERATOR.key}' = 'timestamp': {problem}")
    uses_time = kind is KeyGeneratorKind.TIMESTAMP or PartitionKind.TIMESTAMP in (
        table.partition_kinds
    )
    settings = timestamp_settings(table.options)
    if uses_time:
        # what a new table would record; an existing table's recorded values must agree
        TimestampKeyOptions.from_settings(creation_defaults(settings), table.name)
    elif settings and any(k.startswith(TIMESTAMP_PREFIX) for k in settings):
        raise ConfigError(
            f"[table.options] set {sorted(settings)[0]}, but no partition field is a time: "
            f"set {KEY_GENERATOR.key} = 'timestamp' (or a 'name:timestamp' field with 'custom')"
        )


def _default_name(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "hoodline_table"


def _check_cross(
    source: SourceSection,
    table: TableSection,
    schema: pa.Schema,
    runtime: RuntimeSection,
    errors: ErrorsSection,
) -> None:
    _check_key_generator(table)
    if runtime.round_min_interval_s > runtime.round_max_interval_s:
        raise ConfigError(
            f"option '{ROUND_MIN_INTERVAL.key}' ({runtime.round_min_interval_s}s) must not "
            f"exceed '{ROUND_MAX_INTERVAL.key}' ({runtime.round_max_interval_s}s)"
        )
    if runtime.retry_backoff_s > runtime.retry_backoff_max_s:
        raise ConfigError(
            f"option '{RETRY_BACKOFF.key}' ({runtime.retry_backoff_s}s) must not exceed "
            f"'{RETRY_BACKOFF_MAX.key}' ({runtime.retry_backoff_max_s}s)"
        )
    if errors.table_path.rstrip("/") == table.path.rstrip("/"):
        raise ConfigError(
            f"option '{ERRORS_TABLE_PATH.key}' must differ from '{TABLE_PATH.key}' "
            f"({table.path!r})"
        )
    if source.format is SourceFormat.RAW or not len(schema):
        return  # raw: the message columns; registry formats: checked when the schema is fetched
    declared = {f.name: f for f in schema}
    checks: list[tuple[ConfigOption[Any], tuple[str, ...]]] = [
        (RECORD_KEY, table.record_key),
        (PARTITION_FIELDS, table.partition_fields),
        (PRECOMBINE_FIELD, (table.precombine_field,) if table.precombine_field else ()),
        (DELETE_FIELD, (table.delete_field,) if table.delete_field else ()),
    ]
    for opt, names in checks:
        for name in names:
            if name not in declared:
                raise ConfigError(
                    f"option '{opt.key}' names field {name!r}, which is not declared in "
                    f"[schema] (declared: {', '.join(declared)}); add it to [schema]"
                )
    for opt, names in checks[:3]:
        for name in names:
            t = declared[name].type
            if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
                raise ConfigError(
                    f"option '{opt.key}': field {name!r} has type {format_type(t)}; key, "
                    "partition and precombine fields must be scalar (string, integer, date, ...)"
                )
    if table.delete_field and not pa.types.is_boolean(declared[table.delete_field].type):
        raise ConfigError(
            f"option '{DELETE_FIELD.key}': field {table.delete_field!r} must be declared as bool "
            f"in [schema], not {format_type(declared[table.delete_field].type)}"
        )
