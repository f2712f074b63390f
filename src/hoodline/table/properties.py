"""Table configuration <-> ``.hoodie/hoodie.properties``.

hoodline writes Hudi table version 6 with timeline layout 1, copy-on-write, and every key hudi-rs
(and Java Hudi) reads. hoodline's own settings live under the key Hudi uses for the same thing where
one exists (``hoodie.index.type``, ``hoodie.bucket.index.num.buckets``); unknown keys found in an
existing file are kept and written back unchanged.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hoodline.config.enums import ConfigEnum
from hoodline.errors import (
    TableError,
    TableNotFoundError,
    UnsupportedTableError,
)
from hoodline.storage import ops
from hoodline.storage.paths import ObjectPath, TablePath, parse_location
from hoodline.table.keygen.kinds import (
    KEYGEN_COMPLEX,
    KEYGEN_CUSTOM,
    KEYGEN_NON_PARTITIONED,
    KEYGEN_SIMPLE,
    KEYGEN_TIMESTAMP,
    KeyGeneratorKind,
    PartitionKind,
    kind_of_class,
    parse_partition_spec,
    short_name,
    timestamp_layout_problem,
)

log = logging.getLogger(__name__)

PROPERTIES_FILE = "hoodie.properties"
#: the copy Java Hudi writes while it changes ``hoodie.properties``, read when that is missing
BACKUP_FILE = "hoodie.properties.backup"
META_FOLDER = ".hoodie"

SUPPORTED_TABLE_VERSION = 6
SUPPORTED_TIMELINE_LAYOUT_VERSION = 1


class TableType(ConfigEnum):
    """``hoodie.table.type``: how a write changes a file group."""

    #: every write rewrites the touched file groups' base files (commit per write)
    COPY_ON_WRITE = "COPY_ON_WRITE"
    #: writes append log files to file groups; compaction merges them into new base files
    #: (deltacommit per write)
    MERGE_ON_READ = "MERGE_ON_READ"


class IndexType(ConfigEnum):
    """``hoodie.index.type``: how the writer finds the file group holding a record key."""

    #: file group = hash(key) % buckets of the partition: computed, no lookup.
    BUCKET = "BUCKET"
    #: bloom filters (and key ranges) in the base files' footers: looked up.
    BLOOM = "BLOOM"

class TimelineTimezone(ConfigEnum):
    """``hoodie.table.timeline.timezone``: the clock instant times are read from. Java's
    default (property absent) is LOCAL; hoodline creates tables with UTC."""

    UTC = "UTC"
    LOCAL = "LOCAL"


# keys (Hudi spelling)
K_NAME = "hoodie.table.name"
K_TYPE = "hoodie.table.type"
K_VERSION = "hoodie.table.version"
K_LAYOUT = "hoodie.timeline.layout.version"
K_RECORD_KEYS = "hoodie.table.recordkey.fields"
K_PARTITION_FIELDS = "hoodie.table.partition.fields"
K_PRECOMBINE = "hoodie.table.precombine.field"
K_HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
K_URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
K_DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
K_BASE_FORMAT = "hoodie.table.base.file.format"
K_POPULATE_META = "hoodie.populate.meta.fields"
K_KEYGEN_CLASS = "hoodie.table.keygenerator.class"
K_TIMEZONE = "hoodie.table.timeline.timezone"
K_INDEX_TYPE = "hoodie.index.type"
K_BUCKET_COUNT = "hoodie.bucket.index.num.buckets"
K_BUCKET_HASH_FIELD = "hoodie.bucket.index.hash.field"
K_CHECKSUM = "hoodie.table.checksum"
K_DATABASE = "hoodie.database.name"
#: the payload class Hudi readers and compaction merge log records with (kept in ``extra``)
K_PAYLOAD_CLASS = "hoodie.compaction.payload.class"
OVERWRITE_WITH_LATEST_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"

#: each partition field's type with the custom key generator (``region:simple,ts:timestamp``).
#: Table version 6 keeps only the names in ``hoodie.table.partition.fields`` (version 8 adds the
#: types there); hoodline records the types under its own key so later runs need not repeat them.
K_CUSTOM_PARTITIONS = "hoodline.keygen.custom.partition.fields"
#: with Java's ComplexKeyGenerator over one key field: whether keys carry the field name
#: (``id:5``, Java 0.14.0) or not (``5``, after HUDI-7001); read from the stored keys once
K_SINGLE_KEY_WITH_NAME = "hoodline.keygen.complex.single.key.with.field.name"

_OWN_KEYS = frozenset(
    {
        K_NAME, K_TYPE, K_VERSION, K_LAYOUT, K_RECORD_KEYS, K_PARTITION_FIELDS, K_PRECOMBINE,
        K_HIVE_STYLE, K_URL_ENCODE, K_DROP_PARTITION_COLUMNS, K_BASE_FORMAT, K_POPULATE_META,
        K_KEYGEN_CLASS, K_TIMEZONE, K_INDEX_TYPE, K_BUCKET_COUNT,
        K_BUCKET_HASH_FIELD, K_CHECKSUM, K_CUSTOM_PARTITIONS, K_SINGLE_KEY_WITH_NAME,
    }
)



def _split(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(p.strip() for p in value.split(",") if p.strip())


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class TableConfig:
    """What a table is: name, keys, partitioning, ordering field, type and index.

    ``partition_fields`` may name several columns: each adds one folder level
    (``a=1/b=2`` with hive-style partitioning, ``1/2`` without). ``extra`` carries properties
    hoodline does not interpret; they are written back unchanged.
    """

    name: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    precombine_field: str | None = None
    hive_style_partitioning: bool = True
    #: (a string naming a type is accepted and converted)
    table_type: TableType = TableType.COPY_ON_WRITE
    #: (a string naming an index type is accepted and converted)
    index_type: IndexType = IndexType.BUCKET
    bucket_count: int = 4
    url_encode_partitions: bool = False
    #: (a string is accepted and converted)
    timeline_timezone: TimelineTimezone = TimelineTimezone.UTC
    #: ``hoodie.table.keygenerator.class`` as the table's properties name it (None: not read
    #: from a file, or absent); see :meth:`check_key_generator`
    declared_key_generator: str | None = field(default=None, compare=False)
    #: which generator makes keys and partition paths (a string is accepted and converted); its
    #: date settings (``hoodie.keygen.timebased.*``) are kept in ``extra``
    key_generator: KeyGeneratorKind = KeyGeneratorKind.DEFAULT
    #: with the custom generator, each partition field's type (empty: not known, e.g. a table
    #: Java created; writers then need them from the pipeline)
    partition_kinds: tuple[PartitionKind, ...] = ()
    #: a table declared Complex with one key field: whether its keys read ``field:value``
    #: (None: not known yet; see :func:`hoodline.table.keygen.adopt.detect_single_key_form`)
    single_key_with_field_name: bool | None = None
    table_version: int = SUPPORTED_TABLE_VERSION
    timeline_layout_version: int = SUPPORTED_TIMELINE_LAYOUT_VERSION
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attr in ("record_key_fields", "partition_fields"):
            value = getattr(self, attr)
            if isinstance(value, str):  # tuple("id") is ('i', 'd'): a table keyed by i,d
                raise TableError(
                    f"table '{self.name}': {attr} must be a sequence of field names, e.g. "
                    f"({value!r},), not the string {value!r}"
                )
            object.__setattr__(self, attr, tuple(value))
        object.__setattr__(self, "extra", dict(self.extra))
        object.__setattr__(
            self, "partition_kinds", tuple(PartitionKind.parse(k) for k in self.partition_kinds)
        )
        kinds: tuple[tuple[str, type[ConfigEnum]], ...] = (
            ("table_type", TableType), ("index_type", IndexType),
            ("timeline_timezone", TimelineTimezone), ("key_generator", KeyGeneratorKind),
        )
        for attr, kind in kinds:
            value = getattr(self, attr)
            try:
                object.__setattr__(self, attr, kind.parse(value))
            except ValueError as exc:
                raise TableError(
                    f"table '{self.name}': {attr.replace('_', ' ')} '{value}' is not supported; "
                    f"{exc}"
                ) from None
        if self.merge_on_read and not self.extra.get(K_PAYLOAD_CLASS):
            # stored whatever it is, as Java's writers do: a reader that misses it picks its
            # own default (hudi-rs 0.5.0 merges log records by event time when a precombine
            # field is set, where Hudi's default payload lets the last write win)
            object.__setattr__(
                self, "extra", {**self.extra, K_PAYLOAD_CLASS: OVERWRITE_WITH_LATEST_PAYLOAD})
        self.validate()
        if (
            self.single_key_with_field_name is None
            and self.declared_key_generator is None
            and len(self.record_key_fields) == 1
            and self.key_generator_class == KEYGEN_COMPLEX
        ):  # a layout hoodline itself declares Complex (several partition fields): bare keys
            object.__setattr__(self, "single_key_with_field_name", False)

    def validate(self) -> None:
        """Raise :class:`TableError` naming the first bad setting."""
        if not self.name or any(c in self.name for c in "/\\\n="):
            raise TableError(f"table name '{self.name}' is invalid: use a non-empty plain name")
        if not self.record_key_fields:
            raise TableError(
                f"table '{self.name}' needs at least one record key field "
                f"('{K_RECORD_KEYS}' is empty)"
            )
        for f in (*self.record_key_fields, *self.partition_fields):
            if not f or "," in f:
                raise TableError(f"table '{self.name}': invalid field name '{f}'")
        if len(set(self.partition_fields)) != len(self.partition_fields):
            raise TableError(
                f"table '{self.name}': partition fields {list(self.partition_fields)} "
                "repeat a field"
            )
        self._validate_key_generator()
        if self.bucket_count < 1:
            raise TableError(
                f"table '{self.name}': bucket count {self.bucket_count} must be >= 1 "
                f"('{K_BUCKET_COUNT}')"
            )

    def _validate_key_generator(self) -> None:
        kind = self.key_generator
        problem = timestamp_layout_problem(self.record_key_fields, self.partition_fields)
        if kind is KeyGeneratorKind.TIMESTAMP and problem:
            raise TableError(f"table '{self.name}': {problem}")
        if kind is KeyGeneratorKind.CUSTOM:
            if not self.partition_fields:
                raise TableError(
                    f"table '{self.name}': the custom key generator needs partition fields"
                )
            if self.partition_kinds and len(self.partition_kinds) != len(self.partition_fields):
                raise TableError(
                    f"table '{self.name}': {len(self.partition_kinds)} partition field type(s) "
                    f"for partition fields {list(self.partition_fields)}"
                )
        elif self.partition_kinds:
            raise TableError(
                f"table '{self.name}': partition field types are for the custom key generator "
                f"only (this table's is {self.key_generator})"
            )

    @property
    def partition_field_kinds(self) -> tuple[PartitionKind, ...]:
        """How each partition field is written; :class:`UnsupportedTableError` for a custom
        generator whose field types are unknown."""
        if self.key_generator is KeyGeneratorKind.TIMESTAMP:
            return (PartitionKind.TIMESTAMP,)
        if self.key_generator is KeyGeneratorKind.CUSTOM:
            if not self.partition_kinds:
                raise UnsupportedTableError(
                    f"table '{self.name}' uses Java's CustomKeyGenerator, whose partition field "
                    "types the table does not record; name them in the pipeline as "
                    "table.partition-fields = ["
                    + ", ".join(f"'{f}:simple|timestamp'" for f in self.partition_fields)
                    + "] (as in the Java writers' hoodie.datasource.write.partitionpath.field)"
                )
            return self.partition_kinds
        return (PartitionKind.SIMPLE,) * len(self.partition_fields)

    @property
    def custom_partition_spec(self) -> str:
        """``region:simple,ts:timestamp`` (custom generator with known types; else empty)."""
        return ",".join(
            f"{name}:{kind.value}"
            for name, kind in zip(self.partition_fields, self.partition_kinds, strict=False)
        )

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def merge_on_read(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def payload_class(self) -> str:
        """``hoodie.compaction.payload.class`` (Hudi's default when the table does not say)."""
        return self.extra.get(K_PAYLOAD_CLASS) or OVERWRITE_WITH_LATEST_PAYLOAD

    @property
    def bucket_hash_fields(self) -> tuple[str, ...]:
        """The fields the BUCKET index hashes (``hoodie.bucket.index.hash.field``): the record
        key fields unless a Java writer set a subset."""
        declared = self.extra.get(K_BUCKET_HASH_FIELD)
        return _split(declared) if declared else self.record_key_fields

    @property
    def non_null_key_fields(self) -> tuple[str, ...]:
        """Key fields no record may leave null: the one field of a single-field key. A part of
        a multi-field key may be null or empty (Java writes ``f:__null__``), not all of them."""
        return self.record_key_fields if len(self.record_key_fields) == 1 else ()

    @property
    def complex_single_key(self) -> bool:
        """Declared Complex with one record key field (keys as Java's version wrote them)."""
        return (
            self.key_generator is KeyGeneratorKind.DEFAULT
            and len(self.record_key_fields) == 1
            and short_name(self.declared_key_generator or "") == short_name(KEYGEN_COMPLEX)
        )

    @property
    def key_generator_class(self) -> str:
        """The Java key generator making this table's keys (recorded for Java Hudi)."""
        if self.key_generator is KeyGeneratorKind.TIMESTAMP:
            return KEYGEN_TIMESTAMP
        if self.key_generator is KeyGeneratorKind.CUSTOM:
            return KEYGEN_CUSTOM
        if self.complex_single_key:
            return KEYGEN_COMPLEX
        if not self.partition_fields:
            return KEYGEN_NON_PARTITIONED
        if len(self.record_key_fields) == 1 and len(self.partition_fields) == 1:
            return KEYGEN_SIMPLE
        return KEYGEN_COMPLEX

    def check_key_generator(self) -> None:
        """Refuse (:class:`UnsupportedTableError`, naming the class) to write a table whose
        declared key generator makes other record keys or partition paths than hoodline's for
        this layout: writing would put a record Java wrote under one key next to a copy under
        another. hoodline writes Simple (one key, one partition field), Nonpartitioned,
        Complex (several key fields), TimestampBased and Custom keys exactly as Java Hudi
        does (the date settings of the last two are checked by the key generator itself)."""
        declared = self.declared_key_generator
        if not declared:
            return
        short = short_name(declared)
        own = short_name(self.key_generator_class)
        if short == own:  # also Complex over one key field, in the form its keys have
            return
        raise UnsupportedTableError(
            f"table '{self.name}' declares {K_KEYGEN_CLASS}={declared}; for its "
            f"{len(self.record_key_fields)} record key field(s) and "
            f"{len(self.partition_fields)} partition field(s) hoodline writes keys as {own}, "
            "which differ from that generator's; writing would duplicate records Java wrote. "
            "hoodline can read this table; write it with Java Hudi"
        )

    # -- serialisation --------------------------------------------------------------------------
    def to_properties(self) -> dict[str, str]:
        props: dict[str, str] = dict(self.extra)
        props.update(
            {
                K_NAME: self.name,
                K_TYPE: self.table_type,
                K_VERSION: str(self.table_version),
                K_LAYOUT: str(self.timeline_layout_version),
                K_RECORD_KEYS: ",".join(self.record_key_fields),
                K_PARTITION_FIELDS: ",".join(self.partition_fields),
                K_HIVE_STYLE: str(self.hive_style_partitioning).lower(),
                K_URL_ENCODE: str(self.url_encode_partitions).lower(),
                K_DROP_PARTITION_COLUMNS: "false",
                K_BASE_FORMAT: "PARQUET",
                K_POPULATE_META: "true",
                K_KEYGEN_CLASS: self.key_generator_class,
                K_TIMEZONE: self.timeline_timezone.value,
                K_INDEX_TYPE: self.index_type,
                K_BUCKET_COUNT: str(self.bucket_count),
                K_BUCKET_HASH_FIELD: ",".join(self.bucket_hash_fields),
            }
        )
        if self.precombine_field:
            props[K_PRECOMBINE] = self.precombine_field
        if self.partition_kinds:
            props[K_CUSTOM_PARTITIONS] = self.custom_partition_spec
        if self.single_key_with_field_name is not None:
            props[K_SINGLE_KEY_WITH_NAME] = str(self.single_key_with_field_name).lower()
        props[K_CHECKSUM] = str(table_checksum(self.name, props.get(K_DATABASE, "")))
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], source: str = "<properties>") -> TableConfig:
        """Build from parsed properties; raise :class:`UnsupportedTableError` for what hoodline
        cannot write (other table versions, layouts or types)."""
        name = props.get(K_NAME)
        if not name:
            raise UnsupportedTableError(f"'{source}' has no '{K_NAME}'; it is not a valid table")
        if K_TYPE not in props:  # every Hudi writer writes it: the file lost lines
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has no '{K_TYPE}': the file is truncated or "
                "damaged (Hudi writers always write it); restore it from a backup or copy")
        if K_VERSION not in props:  # Hudi 0.5 wrote none (Java reads it as version 0)
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has no '{K_VERSION}': a table of Hudi 0.5 "
                f"(version 0; hoodline supports version {SUPPORTED_TABLE_VERSION} only: upgrade "
                "it with Java Hudi), or the file lost lines (restore it from a backup or copy)")
        ttype = props.get(K_TYPE, "")
        if ttype not in tuple(TableType):
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has {K_TYPE}='{ttype}'; hoodline supports "
                f"{', '.join(TableType)} only"
            )
        version = props.get(K_VERSION, "")
        if version.strip() != str(SUPPORTED_TABLE_VERSION):
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has {K_VERSION}='{version}'; hoodline supports "
                f"table version {SUPPORTED_TABLE_VERSION} only"
            )
        layout = props.get(K_LAYOUT, "")
        if layout.strip() != str(SUPPORTED_TIMELINE_LAYOUT_VERSION):
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has {K_LAYOUT}='{layout}'; hoodline supports "
                f"timeline layout version {SUPPORTED_TIMELINE_LAYOUT_VERSION} only"
            )
        if _bool(props.get(K_DROP_PARTITION_COLUMNS), False):
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has {K_DROP_PARTITION_COLUMNS}=true; "
                "such tables cannot be read by hudi-rs and are not supported"
            )
        bucket_raw = props.get(K_BUCKET_COUNT, "4")
        try:
            buckets = int(bucket_raw)
        except ValueError:
            raise UnsupportedTableError(
                f"table '{name}' at '{source}' has {K_BUCKET_COUNT}='{bucket_raw}', not an integer"
            ) from None
        precombine = props.get(K_PRECOMBINE) or props.get("hoodie.table.ordering.fields") or None
        declared = props.get(K_KEYGEN_CLASS) or None
        partition_kinds: tuple[PartitionKind, ...] = ()
        if props.get(K_CUSTOM_PARTITIONS):
            try:
                specs = [parse_partition_spec(p) for p in _split(props[K_CUSTOM_PARTITIONS])]
            except ValueError as exc:
                raise UnsupportedTableError(
                    f"table '{name}' at '{source}': {K_CUSTOM_PARTITIONS}: {exc}"
                ) from None
            if [n for n, _ in specs] != list(_split(props.get(K_PARTITION_FIELDS))):
                raise UnsupportedTableError(
                    f"table '{name}' at '{source}': {K_CUSTOM_PARTITIONS}="
                    f"'{props[K_CUSTOM_PARTITIONS]}' does not name the partition fields "
                    f"'{props.get(K_PARTITION_FIELDS, '')}'"
                )
            partition_kinds = tuple(k for _, k in specs)
        try:
            table_type = TableType.parse(ttype)
            index_type = IndexType.parse(props.get(K_INDEX_TYPE) or IndexType.BLOOM)
            timezone = TimelineTimezone.parse(props.get(K_TIMEZONE) or TimelineTimezone.LOCAL)
        except ValueError as exc:
            raise UnsupportedTableError(f"table '{name}' at '{source}': {exc}") from None
        try:
            return cls(
                name=name,
                record_key_fields=_split(props.get(K_RECORD_KEYS)),
                partition_fields=_split(props.get(K_PARTITION_FIELDS)),
                precombine_field=precombine,
                hive_style_partitioning=_bool(props.get(K_HIVE_STYLE), False),
                table_type=table_type,
                index_type=index_type,
                bucket_count=buckets,
                url_encode_partitions=_bool(props.get(K_URL_ENCODE), False),
                timeline_timezone=timezone,
                declared_key_generator=declared,
                key_generator=kind_of_class(declared),
                partition_kinds=partition_kinds,
                single_key_with_field_name=(
                    _bool(props[K_SINGLE_KEY_WITH_NAME], False)
                    if props.get(K_SINGLE_KEY_WITH_NAME) else None
                ),
                extra={k: v for k, v in props.items() if k not in _OWN_KEYS} | _hash_fields(
                    props),
            )
        except TableError as exc:
            raise UnsupportedTableError(f"'{source}': {exc}") from None


def _hash_fields(props: Mapping[str, str]) -> dict[str, str]:
    """``hoodie.bucket.index.hash.field`` when it names other fields than the record key (a
    subset, set by Java writers; kept so that it is written back as it was), else nothing."""
    declared = props.get(K_BUCKET_HASH_FIELD, "")
    if set(_split(declared)) in (set(), set(_split(props.get(K_RECORD_KEYS)))):
        return {}
    return {K_BUCKET_HASH_FIELD: declared}


def table_checksum(name: str, database: str = "") -> int:
    """``hoodie.table.checksum`` as Java Hudi computes it: CRC32 of ``<database>.<name>``."""
    return zlib.crc32(f"{database}.{name}".encode())


# -- file format -------------------------------------------------------------------------------
def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=:#!" or (ch == " " and (is_key or i == 0)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def dumps_properties(props: Mapping[str, str], header: str = "Properties saved by hoodline") -> str:
    """Java ``.properties`` text, keys sorted (stable output)."""
    lines = [f"#{header}"]
    for key in sorted(props):
        lines.append(f"{_escape(key, True)}={_escape(props[key], False)}")
    return "\n".join(lines) + "\n"


def loads_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (comments, ``=``/``:``, escapes, continuation lines)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line ending in an odd number of backslashes continues on the next line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for entry in logical:
        key_chars: list[str] = []
        i = 0
        while i < len(entry):
            ch = entry[i]
            if ch == "\\" and i + 1 < len(entry):
                key_chars.append(_unescape_char(entry[i + 1]))
                i += 2
                continue
            if ch in "=: \t":
                break
            key_chars.append(ch)
            i += 1
        while i < len(entry) and entry[i] in " \t":
            i += 1
        if i < len(entry) and entry[i] in "=:":
            i += 1
        while i < len(entry) and entry[i] in " \t":
            i += 1
        value_chars: list[str] = []
        while i < len(entry):
            ch = entry[i]
            if ch == "\\" and i + 1 < len(entry):
                nxt = entry[i + 1]
                if nxt == "u" and i + 6 <= len(entry):
                    try:
                        value_chars.append(chr(int(entry[i + 2 : i + 6], 16)))
                        i += 6
                        continue
                    except ValueError:
                        pass
                value_chars.append(_unescape_char(nxt))
                i += 2
                continue
            value_chars.append(ch)
            i += 1
        props["".join(key_chars)] = "".join(value_chars)
    return props


def _unescape_char(ch: str) -> str:
    return {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(ch, ch)


def properties_path(base_path: str | os.PathLike[str] | TablePath) -> TablePath:
    return parse_location(base_path) / META_FOLDER / PROPERTIES_FILE


def read_table_config(base_path: str | os.PathLike[str] | TablePath) -> TableConfig:
    """Read ``<base>/.hoodie/hoodie.properties``, or Java Hudi's ``hoodie.properties.backup``
    when that file is missing or unreadable (as Java does; the next change of the
    configuration writes ``hoodie.properties`` again).

    Raises :class:`TableNotFoundError` when the path holds no table, :class:`TableError` when
    ``.hoodie`` holds a timeline but no readable configuration (never "no table": a pipeline
    would create one over it), :class:`UnsupportedTableError` for a version/type/layout
    hoodline cannot handle and :class:`~hoodline.errors.StorageError` when the object store
    refuses (a missing bucket too).
    """
    props, path = _read_properties(base_path)
    return TableConfig.from_properties(props, source=str(path))


def _read_properties(
    base_path: str | os.PathLike[str] | TablePath,
) -> tuple[dict[str, str], TablePath]:
    """The table's properties and the file they came from (see :func:`read_table_config`)."""
    path = properties_path(base_path)
    backup = path.parent / BACKUP_FILE
    problem = _load_properties(path)
    if isinstance(problem, dict):
        return problem, path
    if isinstance(path, ObjectPath) and problem == "does not exist":
        path.check_bucket()  # a missing bucket says so (StorageError), not "no table"
    copy = _load_properties(backup)
    if isinstance(copy, dict):
        log.warning("'%s' %s; the table's configuration is read from '%s' (the copy Java Hudi "
                    "keeps while it changes the file), and the next change of the "
                    "configuration writes '%s' again", path, problem, backup, PROPERTIES_FILE)
        return copy, backup
    if problem != "does not exist":
        raise TableError(
            f"'{path}' {problem}, and there is no readable '{BACKUP_FILE}' beside it: the "
            "table's configuration is damaged; restore the file from a backup (hoodline writes "
            "it in one step, so it was changed outside hoodline)"
        )
    instants = _timeline_files(path.parent)
    if instants:
        raise TableError(
            f"'{path}' does not exist, but '{path.parent}' holds a timeline of {instants} "
            f"instant file(s): the table's configuration file was deleted or lost; restore it "
            "from a backup. Do not create a new table here: it would not know the data "
            "already written"
        )
    ancestor = path.parent.parent
    for _ in range(8):  # a partition folder given?
        if ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
        if (ancestor / META_FOLDER / PROPERTIES_FILE).exists():
            raise TableNotFoundError(
                f"no Hudi table at '{base_path}': it is a folder inside the table at "
                f"'{ancestor}' (a partition?); give the table's own folder")
    raise TableNotFoundError(
        f"no Hudi table at '{base_path}': '{path}' does not exist; "
        "create the table first or check the path"
    )


def _load_properties(path: TablePath) -> dict[str, str] | str:
    """The properties in ``path``, or what makes it unusable as the table's properties."""
    if not path.is_file():
        return "does not exist"
    try:
        props = loads_properties(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({exc})"
    if K_NAME not in props:
        return f"is empty or truncated (it has no '{K_NAME}')"
    if K_CHECKSUM in props and props[K_CHECKSUM] != str(
        table_checksum(props[K_NAME], props.get(K_DATABASE, ""))
    ):
        return f"is damaged ('{K_CHECKSUM}' does not match the table's name)"
    return props


def _timeline_files(meta: TablePath) -> int:
    """How many instant files ``meta`` (a ``.hoodie`` folder) holds; 0 when it does not exist."""
    try:
        return sum(1 for p in meta.iterdir() if p.name[:17].isdigit())
    except OSError:  # no such folder (or a file on the way): no timeline
        return 0


def _replace_properties(path: TablePath, props: Mapping[str, str]) -> None:
    """Write ``props`` to ``path`` atomically (temp file + rename; one PUT on object stores)."""
    ops.replace(path, dumps_properties(props).encode("utf-8"))


def write_table_config(
    base_path: str | os.PathLike[str] | TablePath, config: TableConfig
) -> TablePath:
    """Write ``hoodie.properties`` atomically (temp file + rename)."""
    path = properties_path(base_path)
    _replace_properties(path, config.to_properties())
    return path


def update_properties(
    base_path: str | os.PathLike[str] | TablePath, changes: Mapping[str, str]
) -> TableConfig:
    """Set ``changes`` in ``hoodie.properties``, every other key as written (also ones
    hoodline does not know, as Java wrote them); returns the table's new config."""
    path = properties_path(base_path)
    props, _ = _read_properties(base_path)
    props.update(changes)
    _replace_properties(path, props)
    return TableConfig.from_properties(props, source=str(path))


def remove_properties(
    base_path: str | os.PathLike[str] | TablePath, keys: Iterable[str]
) -> TableConfig:
    """Remove ``keys`` from ``hoodie.properties``, every other key as written; returns the
    table's new config."""
    path = properties_path(base_path)
    props, _ = _read_properties(base_path)
    for key in keys:
        props.pop(key, None)
    _replace_properties(path, props)
    return TableConfig.from_properties(props, source=str(path))


def record_payload_class(
    base_path: str | os.PathLike[str] | TablePath, config: TableConfig
) -> TableConfig | None:
    """Store the payload class in the ``hoodie.properties`` of a merge-on-read table that lacks
    it (hoodline wrote none for the default payload before 2026-11-28: hudi-rs then merged its
    log records by event time, not as the default payload says); the new config, or None when
    nothing changed. Call with the writer lock held."""
    if not config.merge_on_read:
        return None
    path = properties_path(base_path)
    if loads_properties(path.read_text(encoding="utf-8")).get(K_PAYLOAD_CLASS):
        return None
    return update_properties(base_path, {K_PAYLOAD_CLASS: config.payload_class})
