"""Make batches match the declared schema (column selection, order, types, nullability)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.connectors.files.rejections import rejected_records_batch, rows_as_json, runs
from hoodline.errors import FileSourceError
from hoodline.formats.json_decoder import WRONG_TYPE
from hoodline.formats.narrowing import Problem, cast_fitting, problem_text


def conform(batch: pa.RecordBatch, schema: pa.Schema | None, where: str) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns, in order and types (vectorised casts).

    ``where`` names the file (and position) for error messages. Without a schema the batch is
    returned unchanged.
    """
    if schema is None or batch.schema.equals(schema):
        return batch
    columns: list[pa.Array] = []
    names = set(batch.schema.names)
    for field in schema:
        if field.name not in names:
            raise FileSourceError(
                f"{where}: column '{field.name}' of the declared schema is missing "
                f"(the file has {batch.schema.names}); fix the file or the 'schema' option"
            )
        column = batch.column(field.name)
        if not column.type.equals(field.type):
            try:
                column = pc.cast(column, field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise FileSourceError(
                    f"{where}: column '{field.name}' of type {column.type} cannot be converted "
                    f"to the declared type {field.type}: {exc}"
                ) from exc
        if not field.nullable and column.null_count:
            raise FileSourceError(
                f"{where}: column '{field.name}' is declared 'not null' but has "
                f"{column.null_count} null value(s)"
            )
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def skip_rows(batch: pa.RecordBatch, to_skip: int) -> tuple[pa.RecordBatch | None, int]:
    """Drop up to ``to_skip`` leading rows; returns (rest or None if empty, rows still to skip)."""
    if to_skip <= 0:
        return batch, 0
    if to_skip >= batch.num_rows:
        return None, to_skip - batch.num_rows
    return batch.slice(to_skip), 0


def conform_rows(batch: pa.RecordBatch, schema: pa.Schema | None, where: str,
                 first_row: int) -> Iterator[pa.RecordBatch]:
    """:func:`conform`, except that a value that does not fit its narrower declared type
    (nanoseconds in a ``timestamp[us]`` column, a decimal that would lose digits, an integer
    out of range) makes its row a bad record instead of failing the whole file (one such
    value rejected every row: data-types review). Yields, in row order, conformed batches and
    rejected-records batches (the row as JSON, ``wrong_type``, a detail naming the row,
    counted from ``first_row``, the field and why)."""
    try:
        yield conform(batch, schema, where)
        return
    except FileSourceError:
        if schema is None:
            raise
        problems = _unfit_rows(batch, schema)
        if not problems:
            raise
    bad = np.zeros(batch.num_rows, dtype=bool)
    for mask, _ in problems:
        bad |= mask
    for lo, hi, rejected in runs(bad):
        # a copy of the rows, not a slice: a sliced list's cast looks at every value of its
        # child array, the bad rows' too
        part = batch.take(pa.array(np.arange(lo, hi, dtype=np.int64)))
        if not rejected:
            yield conform(part, schema, where)
            continue
        details = [
            f"{where} row {first_row + lo + i} (counted from 0): "
            + problem_text(problems, lo + i)
            for i in range(hi - lo)]
        values = rows_as_json(part)
        yield rejected_records_batch(pa.array(values, pa.binary()),
                                     pa.array([WRONG_TYPE] * (hi - lo), pa.string()),
                                     pa.array(details, pa.string()))


def _unfit_rows(batch: pa.RecordBatch, schema: pa.Schema) -> list[Problem]:
    """Per declared column of another type than the file's: the rows whose value does not
    fit it, and what to say of them (only columns with such rows)."""
    out: list[Problem] = []
    for field in schema:
        if field.name not in batch.schema.names:
            continue
        column = batch.column(field.name)
        if column.type.equals(field.type):
            continue
        try:
            out += cast_fitting(column, field.type, field.name, target="the declared",
                                source="the file")[1]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue  # no value converts: the file fails, naming the column
    return out
