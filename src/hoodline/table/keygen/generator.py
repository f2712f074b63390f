"""``_hoodie_record_key`` and ``_hoodie_partition_path`` of a batch, with the table's generator.

* **record key** of one field: the value as a string (``42``, ``abc``); of several fields Hudi's
  complex-key form ``f1:v1,f2:v2``. Every generator hoodline writes makes keys this way.
* **partition path** of zero fields: ``""``; of one or more fields, one part per field joined with
  ``/``: the value (``simple`` fields, and every field of the default generator) or the value read
  as a time and written with the table's date pattern (``timestamp`` fields; the pattern may
  itself hold ``/``, one folder level each, as Java writes ``yyyy/MM/dd``). ``f=part`` with
  hive-style partitioning; with ``hoodie.datasource.write.partitionpath.urlencode`` parts are
  escaped like Hive/Hudi do (``%2F`` for ``/``). Without it a simple value holding ``/`` is
  refused (it would silently add a folder level readers then misparse).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import InvalidRecordsError, UnsupportedTableError
from hoodline.table.keygen.kinds import KeyGeneratorKind, PartitionKind
from hoodline.table.keygen.timestamp import TimestampKeyOptions, timestamp_settings
from hoodline.table.keygen.values import (
    Batch,
    distinct_strings,
    distinct_value_strings,
    escape_partition_values,
    first_row_of,
    first_true_index,
    join_strings,
    key_part_missing,
    key_part_strings,
    require_no_nulls,
    value_strings,
)
from hoodline.table.properties import TableConfig


@functools.lru_cache(maxsize=32)
def _timestamp_options(settings: tuple[tuple[str, str], ...], table: str) -> TimestampKeyOptions:
    """Parsed once per process and table settings (a generator is made for every batch)."""
    return TimestampKeyOptions.from_settings(dict(settings), table)


class KeyGenerator:
    """Computes ``_hoodie_record_key`` and ``_hoodie_partition_path`` for a batch."""

    def __init__(self, config: TableConfig, max_folder_bytes: int | None = None,
                 limit_is: str = "more than the file system takes") -> None:
        """``max_folder_bytes``: the longest folder name a partition value may make (a local
        file system's :data:`LOCAL_MAX_FOLDER_BYTES`, or what an object store's key leaves:
        :func:`object_store_folder_bytes`), ``limit_is`` says what it is; None: no limit."""
        self.config = config
        self.max_folder_bytes = max_folder_bytes
        self.limit_is = limit_is
        self.kinds = config.partition_field_kinds
        self._timestamp: TimestampKeyOptions | None = None
        if PartitionKind.TIMESTAMP in self.kinds:
            settings = tuple(sorted(timestamp_settings(config.extra).items()))
            self._timestamp = _timestamp_options(settings, config.name)

    def record_keys(self, batch: Batch) -> pa.Array | pa.ChunkedArray:
        fields = self.config.record_key_fields
        if len(fields) == 1 and not self._single_key_with_name():
            return value_strings(batch, fields[0], "record key")
        parts: list[pa.Array | pa.ChunkedArray | pa.Scalar] = []
        keyless: pa.Array | None = None
        for name in fields:
            text, missing = key_part_strings(batch, name)
            parts.append(join_strings([pa.scalar(f"{name}:"), text], ""))
            keyless = missing if keyless is None else pc.and_(keyless, missing)
        if keyless is not None and pc.any(keyless).as_py():
            row = first_true_index(keyless)
            raise InvalidRecordsError(
                f"record key fields {', '.join(fields)} are all null or empty at row {row} "
                f"({int(pc.sum(keyless).as_py())} record(s)); every record needs a key "
                "(Java refuses such keys too)"
            )
        return join_strings(parts, ",")

    def keyless_rows(self, batch: Batch) -> pa.Array | None:
        """With Java's complex keys: per row, whether every key field is null or empty (no key,
        as Java counts it); None for a plain single-field key (its nulls are refused as
        nulls)."""
        fields = self.config.record_key_fields
        if len(fields) == 1 and not self._single_key_with_name():
            return None
        out: pa.Array | None = None
        for name in fields:
            missing = key_part_missing(batch, name)
            out = missing if out is None else pc.and_(out, missing)
        return out

    def _single_key_with_name(self) -> bool:
        c = self.config
        if not c.complex_single_key:
            return False
        if c.single_key_with_field_name is None:
            raise UnsupportedTableError(
                f"table '{c.name}' is declared with Java's ComplexKeyGenerator over one key "
                f"field, whose keys read '{c.record_key_fields[0]}:<value>' or '<value>' "
                "depending on the Java version that wrote them; open it with a WriteClient, "
                "which reads the form from the stored keys"
            )
        return c.single_key_with_field_name

    def partition_paths(self, batch: Batch, dictionary: bool = False) -> pa.Array | pa.ChunkedArray:
        """Every row's partition path: strings, or with ``dictionary`` (and one partition
        field, or none) a dictionary array over the distinct paths, built without a string
        per row, for a caller that only groups rows by it (``dictionary_codes``)."""
        fields = self.config.partition_fields
        if not fields:
            if dictionary:
                return pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(batch.num_rows, dtype=np.int32)), pa.array([""]))
            return pc.fill_null(pa.nulls(batch.num_rows, pa.string()), "")
        levels: list[pa.Array | pa.ChunkedArray | pa.Scalar] = []
        for name, kind in zip(fields, self.kinds, strict=True):
            # rendered and checked once per distinct value, then spread over the rows
            if kind is PartitionKind.TIMESTAMP:
                values, indices = self._timestamp_parts(batch, name)
            else:
                values, indices = self._simple_parts(batch, name)
            if self.config.hive_style_partitioning:
                values = join_strings([pa.scalar(f"{name}="), values], "")
            if dictionary and len(fields) == 1:  # both are arrays of one chunk
                return pa.DictionaryArray.from_arrays(indices, pc.cast(values, pa.string()))
            levels.append(pc.take(values, indices))
        if len(levels) == 1:
            return levels[0]
        return join_strings(levels, "/")

    def unusable_rows(self, batch: Batch) -> list[UnusableValues]:
        """Rows whose (non-null) value cannot make their record key or partition path, field by
        field: bad records, for a pipeline's error table, where :meth:`record_keys` and
        :meth:`partition_paths` refuse the whole batch. A single-field key or a partition value
        that is an empty string; a partition value that makes no folder name, or one longer
        than file systems take; a timestamp partition value no input date format reads, or a
        time outside the years -9999 to 9999."""
        out: list[UnusableValues] = []
        fields = self.config.record_key_fields
        if len(fields) == 1 and not self._single_key_with_name():
            empty = _empty_strings(batch, fields[0])
            if empty is not None:
                out.append(UnusableValues("record key", fields[0], empty, _EMPTY + "record key",
                                          True))
        for name, kind in zip(self.config.partition_fields, self.kinds, strict=True):
            if name not in batch.schema.names:
                continue
            if kind is PartitionKind.TIMESTAMP:
                assert self._timestamp is not None
                mask = self._timestamp.unreadable(batch.column(name))
                if pc.any(mask).as_py():
                    out.append(UnusableValues(
                        "partition", name, mask,
                        "matches no input date format of the table's key generator, or is a "
                        "time outside the years -9999 to 9999 (a number in the wrong unit?)",
                        False))
                continue
            empty = _empty_strings(batch, name)
            if empty is not None:
                out.append(UnusableValues("partition", name, empty, _EMPTY + "partition", True))
            try:
                values, indices = distinct_strings(batch.column(name))
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                continue  # a type no partition path takes: refused when written
            for bad, why in self._folder_problems(values, name):
                rows = _any_or_none(pc.take(bad, indices))
                if rows is not None:
                    out.append(UnusableValues("partition", name, rows, why, False))
        return out

    def _simple_parts(self, batch: Batch, name: str) -> tuple[pa.Array, pa.Array]:
        values, indices = distinct_value_strings(batch, name, "partition")
        for bad, why in self._folder_problems(values, name):
            row = first_row_of(indices, bad)
            if row >= 0:
                value = _shorter(values[indices[row].as_py()].as_py())
                raise InvalidRecordsError(
                    f"partition column '{name}' has value {value} at row {row}, which {why}")
        if self.config.url_encode_partitions:
            return escape_partition_values(values), indices
        return values, indices

    def _folder_problems(self, values: pa.Array, name: str) -> list[tuple[pa.Array, str]]:
        """Per distinct value of a simple partition field: whether its folder (as written:
        URL-encoded and ``name=``-prefixed when the table says so) is no folder name, and
        whether it is longer than file systems take, each with what to say after the value.
        Without either check a bad value failed every retry of its round, whatever the
        error tolerance (a folder name of 270 bytes: 'File name too long'), or with URL
        encoding and without hive-style folders, '..' wrote outside the table."""
        encoded = self.config.url_encode_partitions
        folders = escape_partition_values(values) if encoded else values
        if self.config.hive_style_partitioning:
            folders = join_strings([pa.scalar(f"{name}="), folders], "")
        out = []
        # without encoding the value itself may hold no '/' nor be '.' or '..' (also with the
        # hive-style prefix: a plain rule to state); encoded, only a bare '.' or '..' is bad
        bad = pc.fill_null(pc.is_in(folders, value_set=pa.array([".", ".."])) if encoded
                           else _no_folder_name(values), False)
        if pc.any(bad).as_py():
            out.append((bad, (
                "is not a valid folder name ('.' and '..' are not allowed); clean the value"
                if encoded else
                f"is not a valid folder name ({_NOT_IN_FOLDER_NAMES}); clean the value or "
                "partition by another field (a table created with "
                "'hoodie.datasource.write.partitionpath.urlencode' by Java Hudi, or "
                "url_encode_partitions by the Python API, escapes such values)")))
        limit = self.max_folder_bytes
        if limit is None:
            return out
        long = pc.fill_null(pc.greater(pc.binary_length(folders), limit), False)
        if pc.any(long).as_py():
            out.append((long, (
                f"makes a folder name{' (URL-encoded)' if encoded else ''}"
                f"{' with its field name' if self.config.hive_style_partitioning else ''} "
                f"longer than {limit} bytes, {self.limit_is}; shorten the value or "
                "partition by another field")))
        return out

    def _timestamp_parts(self, batch: Batch, name: str) -> tuple[pa.Array, pa.Array]:
        assert self._timestamp is not None
        col = require_no_nulls(batch, name, "partition")
        if pa.types.is_dictionary(col.type):
            col = pc.cast(col, col.type.value_type)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        encoded = pc.dictionary_encode(arr)
        text = self._timestamp.partition_values(encoded.dictionary, name)
        if self.config.url_encode_partitions:
            return escape_partition_values(text), encoded.indices
        # the pattern's own '/' make folder levels; none may be empty, '.' or '..'
        levels = pc.split_pattern(text, "/")
        flat = pc.list_flatten(levels)
        bad_level = pc.or_(pc.equal(pc.utf8_length(flat), 0),
                           pc.is_in(flat, value_set=pa.array([".", ".."])))
        if pc.any(bad_level).as_py():
            first = int(pc.index(bad_level, True).as_py())
            parent = pc.list_parent_indices(levels)[first].as_py()
            raise InvalidRecordsError(
                f"partition column '{name}' writes path {text[parent].as_py()!r} with the "
                f"date pattern {self._timestamp.output_format.pattern!r}, which has an empty, "
                "'.' or '..' folder level; change 'hoodie.keygen.timebased.output.dateformat'"
            )
        return text, encoded.indices


@dataclass(frozen=True)
class UnusableValues:
    """Rows of a batch whose value of one field cannot make a key or partition path."""

    role: str  # "record key" or "partition"
    field: str
    rows: pa.Array  # per row (boolean)
    why: str  # what is wrong with the value, said after it
    empty: bool  # an empty value: missing, as a null would be; else unreadable


_EMPTY = "is an empty string; every record needs a non-empty "


def _text_column(batch: Batch, name: str) -> pa.Array | None:
    """The column if it holds strings (dictionary-decoded, one chunk), else None."""
    if name not in batch.schema.names:
        return None
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return None
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _any_or_none(mask: pa.Array) -> pa.Array | None:
    mask = pc.fill_null(mask, False)
    return mask if pc.any(mask).as_py() else None


def _empty_strings(batch: Batch, name: str) -> pa.Array | None:
    text = _text_column(batch, name)
    return None if text is None else _any_or_none(pc.equal(pc.utf8_length(text), 0))


_NOT_IN_FOLDER_NAMES = "'/', '.', '..' and the NUL character are not allowed"


#: the longest folder name (in UTF-8 bytes) local file systems take (ext4, XFS, APFS; NTFS
#: in characters)
LOCAL_MAX_FOLDER_BYTES = 255

#: an object store's longest key (S3, GCS: bytes; Azure: characters), and what a key needs
#: beside its partition path: the separators and the longest file name hoodline writes (a log
#: file's ``.{file id}_{instant}.log.{version}_{write token}``, under 100 bytes)
OBJECT_STORE_MAX_KEY_BYTES = 1024
_FILE_NAME_BYTES = 128


def object_store_folder_bytes(table_key: str) -> int:
    """The longest partition folder a table at ``table_key`` in an object store can take:
    what the store's key length leaves after the table's path and a file name (a partition
    path of several folders shares it; each is checked against it alone)."""
    return max(1, OBJECT_STORE_MAX_KEY_BYTES - len(table_key.encode()) - 2 - _FILE_NAME_BYTES)


def _no_folder_name(text: pa.Array) -> pa.Array:
    """Per value: whether it cannot be a folder name (a NUL no file system takes)."""
    return pc.or_(pc.or_(pc.match_substring(text, "/"), pc.match_substring(text, "\x00")),
                  pc.is_in(text, value_set=pa.array([".", ".."])))


def _shorter(value: object, chars: int = 80) -> str:
    """``repr`` of a value, cut to its start when long (a 300-byte value in one line)."""
    shown = repr(value)
    if len(shown) <= chars:
        return shown
    length = len(value.encode()) if isinstance(value, str) else len(shown)
    return f"{shown[:chars]}... ({length} bytes)"


def check_key_generator_settings(config: TableConfig) -> None:
    """:class:`~hoodline.errors.ConfigError` if the table's timestamp settings are incomplete or
    would make other paths than Java's (checked when a writer opens the table)."""
    if config.key_generator is not KeyGeneratorKind.DEFAULT:
        KeyGenerator(config)
