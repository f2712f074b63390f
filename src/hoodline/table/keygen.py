"""Record keys and partition paths, computed column-at-a-time with ``pyarrow.compute``.

Hudi's key generators, as hoodline writes them:

* **record key** of one field: the value as a string (``42``, ``abc``); of several fields Hudi's
  complex-key form ``f1:v1,f2:v2`` (``ComplexKeyGenerator``).
* **partition path** of zero fields: ``""`` (non-partitioned); of one or more fields, one folder
  level per field, joined with ``/``: ``f=v`` with hive-style partitioning (``region=eu/day=3``),
  the bare value otherwise (``eu/3``). With ``hoodie.datasource.write.partitionpath.urlencode``
  values are escaped like Hive/Hudi do (``%2F`` for ``/``); without it a value containing ``/``
  is refused (it would silently add a folder level readers then misparse).

Null or empty values are refused with :class:`~hoodline.errors.InvalidRecordsError` naming the
column, the first offending row and its value — hoodline never invents a default key or
partition (Java Hudi's ``__HIVE_DEFAULT_PARTITION__`` hides data-quality bugs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import InvalidRecordsError
from hoodline.table.properties import TableConfig

Batch: TypeAlias = "pa.Table | pa.RecordBatch"

#: Characters Hive/Hudi escape in partition values when URL encoding is on (``%`` goes first).
_ESCAPED_CHARS = "%\"#'*/:=?\\\x7f{[]^" + "".join(chr(c) for c in range(1, 32))


def _column(batch: Batch, name: str, role: str) -> pa.Array | pa.ChunkedArray:
    if name not in batch.schema.names:
        raise InvalidRecordsError(
            f"{role} column '{name}' is missing from the input; columns present: "
            f"{', '.join(batch.schema.names) or '(none)'}"
        )
    return batch.column(name)


def _is_supported_key_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or (pa.types.is_dictionary(t) and _is_supported_key_type(t.value_type))
    )


def first_true_index(mask: pa.Array | pa.ChunkedArray) -> int:
    """Row index of the first true value of a boolean mask (-1 if none)."""
    idx = pc.index(mask, pa.scalar(True))
    return int(idx.as_py())


def require_no_nulls(batch: Batch, name: str, role: str) -> pa.Array | pa.ChunkedArray:
    """The column, or :class:`InvalidRecordsError` naming the first row where it is null."""
    col = _column(batch, name, role)
    if col.null_count:
        row = first_true_index(pc.is_null(col))
        raise InvalidRecordsError(
            f"{role} column '{name}' is null in {col.null_count} of {len(col)} record(s), "
            f"first at row {row}; every record needs a {role} value"
        )
    return col


def value_strings(batch: Batch, name: str, role: str) -> pa.Array | pa.ChunkedArray:
    """The column rendered as strings (nulls refused, empty strings refused)."""
    col = require_no_nulls(batch, name, role)
    if not _is_supported_key_type(col.type):
        raise InvalidRecordsError(
            f"{role} column '{name}' has type {col.type}, which cannot be used as a {role}; "
            "use a string, integer, boolean, date, timestamp or decimal column"
        )
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return pc.cast(col, pa.string())  # numbers, dates, ... never render empty
    text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
    empty = pc.equal(pc.utf8_length(text), 0)
    if pc.any(empty).as_py():
        row = first_true_index(empty)
        raise InvalidRecordsError(
            f"{role} column '{name}' is an empty string at row {row}; "
            f"every record needs a non-empty {role} value"
        )
    return text


def _join(parts: Sequence[pa.Array | pa.ChunkedArray | pa.Scalar], sep: str) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*parts, sep)


def _escape_partition_values(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    out = values
    for ch in _ESCAPED_CHARS:
        out = pc.replace_substring(out, pattern=ch, replacement=f"%{ord(ch):02X}")
    return out


class KeyGenerator:
    """Computes ``_hoodie_record_key`` and ``_hoodie_partition_path`` for a batch."""

    def __init__(self, config: TableConfig) -> None:
        self.config = config

    @property
    def is_complex(self) -> bool:
        return len(self.config.record_key_fields) > 1

    def record_keys(self, batch: Batch) -> pa.Array | pa.ChunkedArray:
        fields = self.config.record_key_fields
        if len(fields) == 1:
            return value_strings(batch, fields[0], "record key")
        parts: list[pa.Array | pa.ChunkedArray | pa.Scalar] = []
        for name in fields:
            parts.append(
                _join([pa.scalar(f"{name}:"), value_strings(batch, name, "record key")], "")
            )
        return _join(parts, ",")

    def partition_paths(self, batch: Batch) -> pa.Array | pa.ChunkedArray:
        fields = self.config.partition_fields
        if not fields:
            return pa.array([""] * batch.num_rows, pa.string())
        levels: list[pa.Array | pa.ChunkedArray | pa.Scalar] = []
        for name in fields:
            values = value_strings(batch, name, "partition")
            if self.config.url_encode_partitions:
                values = _escape_partition_values(values)
            else:
                bad = pc.or_(
                    pc.match_substring(values, "/"),
                    pc.is_in(values, value_set=pa.array([".", ".."])),
                )
                if pc.any(bad).as_py():
                    row = first_true_index(bad)
                    raise InvalidRecordsError(
                        f"partition column '{name}' has value {values[row].as_py()!r} at row "
                        f"{row}, which is not a valid folder name ('/', '.' and '..' are not "
                        "allowed); clean the value or enable "
                        "'hoodie.datasource.write.partitionpath.urlencode' on the table"
                    )
            if self.config.hive_style_partitioning:
                values = _join([pa.scalar(f"{name}="), values], "")
            levels.append(values)
        if len(levels) == 1:
            return levels[0]
        return _join(levels, "/")
