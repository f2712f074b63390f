"""Make batches match the declared schema (column selection, order, types, nullability)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import FileSourceError


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
