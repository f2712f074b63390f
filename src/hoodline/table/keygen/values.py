"""Key and partition columns checked and rendered as strings, column-at-a-time with
``pyarrow.compute``.

Hudi's Simple, Complex and Nonpartitioned key generators, as hoodline writes them:

* **record key** of one field: the value as a string (``42``, ``abc``); of several fields Hudi's
  complex-key form ``f1:v1,f2:v2`` (``ComplexKeyGenerator``).
* **partition path** of zero fields: ``""`` (non-partitioned); of one or more fields, one folder
  level per field, joined with ``/``: ``f=v`` with hive-style partitioning (``region=eu/day=3``),
  the bare value otherwise (``eu/3``). With ``hoodie.datasource.write.partitionpath.urlencode``
  values are escaped like Hive/Hudi do (``%2F`` for ``/``); without it a value containing ``/``
  is refused (it would silently add a folder level readers then misparse).

Null or empty values are refused with :class:`~hoodline.errors.InvalidRecordsError` naming the
column, the first offending row and its value — hoodline never invents a default key or
partition (Java Hudi's ``__HIVE_DEFAULT_PARTITION__`` hides data-quality bugs). The exception is
one field of a multi-field key, which Java writes as ``f:__null__`` / ``f:__empty__`` (a key
with all its fields null or empty is refused, by Java too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import InvalidRecordsError

Batch: TypeAlias = "pa.Table | pa.RecordBatch"

#: Characters Hive/Hudi escape in partition values when URL encoding is on (``%`` goes first).
_ESCAPED_CHARS = "%\"#'*/:=?\\\x7f{[]^" + "".join(chr(c) for c in range(0, 32))


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


def nan_rows(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray | None:
    """Rows of a floating-point column holding NaN (None for other types)."""
    if not pa.types.is_floating(col.type):
        return None
    return pc.fill_null(pc.is_nan(col), False)


def require_ordering(batch: Batch, name: str) -> pa.Array | pa.ChunkedArray:
    """The ordering (precombine) column, or :class:`InvalidRecordsError` naming the first row
    where it is null or NaN. NaN has no place among numbers that every reader agrees on (Java's
    ``Double.compareTo`` ranks it above every number, Arrow's comparisons say false), so a NaN
    ordering value would decide differently in every writer and reader."""
    col = require_no_nulls(batch, name, "ordering (precombine)")
    nan = nan_rows(col)
    if nan is not None and pc.any(nan).as_py():
        raise InvalidRecordsError(
            f"ordering (precombine) column '{name}' is NaN in {pc.sum(nan).as_py()} of "
            f"{len(col)} record(s), first at row {first_true_index(nan)}; NaN has no order "
            "among numbers: every record needs a number"
        )
    return col


def _require_key_type(col: pa.Array | pa.ChunkedArray, name: str, role: str) -> None:
    if not _is_supported_key_type(col.type):
        raise InvalidRecordsError(
            f"{role} column '{name}' has type {col.type}, which cannot be used as a {role}; "
            "use a string, integer, boolean, date, timestamp or decimal column"
        )


def _empty_string_error(name: str, role: str, row: int) -> InvalidRecordsError:
    return InvalidRecordsError(
        f"{role} column '{name}' is an empty string at row {row}; "
        f"every record needs a non-empty {role} value"
    )


def value_strings(batch: Batch, name: str, role: str) -> pa.Array | pa.ChunkedArray:
    """The column rendered as strings (nulls refused, empty strings refused)."""
    col = require_no_nulls(batch, name, role)
    _require_key_type(col, name, role)
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return pc.cast(col, pa.string())  # numbers, dates, ... never render empty
    text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
    empty = pc.equal(pc.utf8_length(text), 0)
    if pc.any(empty).as_py():
        raise _empty_string_error(name, role, first_true_index(empty))
    return text


#: what Java's ComplexKeyGenerator writes for a null or empty part of a multi-field key
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"


def key_part_strings(batch: Batch, name: str) -> tuple[pa.Array | pa.ChunkedArray, pa.Array]:
    """One field of a multi-field record key as Java renders it (``__null__`` / ``__empty__``
    for null or empty values), and per row whether the value was null or empty."""
    col = _column(batch, name, "record key")
    _require_key_type(col, name, "record key")
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    text = pc.cast(col, pa.string())
    empty = pc.fill_null(pc.equal(pc.utf8_length(text), 0), False)
    null = pc.is_null(text)
    text = pc.fill_null(pc.if_else(empty, EMPTY_KEY_PART, text), NULL_KEY_PART)
    missing = pc.or_(empty, null)
    return text, missing.combine_chunks() if isinstance(missing, pa.ChunkedArray) else missing


def key_part_missing(batch: Batch, name: str) -> pa.Array:
    """Per row, whether one field of a multi-field key is null or empty (no string rendering
    of the other values)."""
    col = _column(batch, name, "record key")
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    missing = col.is_null()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        missing = pc.or_(missing, pc.fill_null(pc.equal(pc.utf8_length(col), 0), False))
    return missing.combine_chunks() if isinstance(missing, pa.ChunkedArray) else missing


def distinct_value_strings(batch: Batch, name: str, role: str) -> tuple[pa.Array, pa.Array]:
    """:func:`value_strings` of the column's distinct values, and each row's index into them:
    a partition column holds few distinct values, so checking and rendering those is cheaper
    than doing it row by row."""
    col = require_no_nulls(batch, name, role)
    _require_key_type(col, name, role)
    text, indices = distinct_strings(col)
    row = first_row_of(indices, pc.equal(pc.utf8_length(text), 0))
    if row >= 0:
        raise _empty_string_error(name, role, row)
    return text, indices


def distinct_strings(col: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    """A column's distinct values rendered as strings, and each row's index into them (a
    null row's index is null). Raises Arrow's error for a type with no string form."""
    if pa.types.is_dictionary(col.type):  # chunks may have different dictionaries
        col = pc.cast(col, col.type.value_type)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    encoded = pc.dictionary_encode(arr)
    return pc.cast(encoded.dictionary, pa.string()), encoded.indices


def first_row_of(indices: pa.Array, bad_values: pa.Array) -> int:
    """First row whose index points at a value marked in ``bad_values`` (-1 if none)."""
    if not pc.any(bad_values).as_py():
        return -1
    bad = np.flatnonzero(np.asarray(bad_values.to_numpy(zero_copy_only=False), dtype=bool))
    return first_true_index(pc.is_in(indices, value_set=pa.array(bad, indices.type)))


def join_strings(
    parts: Sequence[pa.Array | pa.ChunkedArray | pa.Scalar], sep: str
) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(*parts, sep)


def escape_partition_values(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    out = values
    for ch in _ESCAPED_CHARS:
        out = pc.replace_substring(out, pattern=ch, replacement=f"%{ord(ch):02X}")
    return out
