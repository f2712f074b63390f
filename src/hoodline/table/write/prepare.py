"""Validate, key and de-duplicate an input batch before anything touches the table.

Everything here is pure (no I/O): a bad batch raises :class:`~hoodline.errors.InvalidRecordsError`
(or :class:`~hoodline.errors.SchemaEvolutionError`) before an instant is started, so the table is
left exactly as it was.

De-duplication within a batch (per partition path and record key): the record with the highest
ordering (precombine) value wins; on ties — or without an ordering field — the last one in the
batch wins. Vectorised: one ``sort_indices`` over (partition, key, ordering, position) and a
"last of each run" mask, skipped entirely when the keys are already unique.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.errors import InvalidRecordsError
from hoodline.table.keygen.generator import KeyGenerator
from hoodline.table.keygen.values import require_no_nulls, require_ordering
from hoodline.table.properties import TableConfig
from hoodline.table.schema import nested_evolution, widens
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.records import (
    INTERNAL_COLUMNS,
    IS_DELETE,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    Batch,
    align_to_schema,
    all_distinct,
    as_table,
)

_POS = "__hoodline_pos"


def require_rows(table: pa.Table, operation: WriteOperation) -> None:
    if table.num_rows == 0:
        raise InvalidRecordsError(
            f"{operation.config_text} got an empty batch (0 records); nothing to write — skip "
            "the call instead of committing an empty instant"
        )


def require_values(table: pa.Table, schema: pa.Schema) -> None:
    """No null in a column the schema to be written (the batch's, widened by the table's)
    declares not null: pyarrow builds such a batch, and the Parquet writer refused it half-way
    through the write with a bare ArrowInvalid."""
    for field in schema:
        if field.nullable or field.name not in table.column_names:
            continue
        column = table.column(field.name)
        if column.null_count:
            first = int(pc.index(column.is_null(), True).as_py())
            raise InvalidRecordsError(
                f"column '{field.name}' is declared not null but holds {column.null_count} "
                f"null(s) (the first at row {first}); fill them, or declare the field nullable "
                "(pa.field(name, type, nullable=True))"
            )


def _refuse_reserved(table: pa.Table) -> None:
    for name in table.schema.names:
        if name in META_COLUMNS or name in INTERNAL_COLUMNS or name.startswith("_hoodline_"):
            raise InvalidRecordsError(
                f"input column '{name}' is reserved for Hudi/hoodline metadata; drop it from the "
                "batch (hoodline fills the _hoodie_ meta columns itself)"
            )


def _check_duplicate_names(table: pa.Table) -> None:
    seen: set[str] = set()
    for name in table.schema.names:
        if name in seen:
            raise InvalidRecordsError(f"input has the column '{name}' more than once")
        seen.add(name)


def dedupe(table: pa.Table, ordering_field: str | None) -> pa.Table:
    """Keep one record per (partition path, record key): highest ordering value, ties last."""
    n = table.num_rows
    if n < 2:
        return table
    keys = table.column(RECORD_KEY)
    parts = table.column(PARTITION_PATH)
    if all_distinct(keys):  # keys unique overall: unique per partition too
        return table
    if pa.types.is_dictionary(parts.type):
        parts = pc.cast(parts, pa.string())
    combined = pc.binary_join_element_wise(parts, keys, "\x00")
    pos = pa.array(np.arange(n, dtype=np.int64))
    sort_cols = {PARTITION_PATH: parts, RECORD_KEY: keys}
    sort_keys = [(PARTITION_PATH, "ascending"), (RECORD_KEY, "ascending")]
    if ordering_field is not None:
        sort_cols["__ord"] = table.column(ordering_field)
        sort_keys.append(("__ord", "ascending"))
    sort_cols[_POS] = pos
    sort_keys.append((_POS, "ascending"))
    order = pc.sort_indices(pa.table(sort_cols), sort_keys=sort_keys)
    sorted_combined = pc.take(combined, order)
    if isinstance(sorted_combined, pa.ChunkedArray):
        sorted_combined = sorted_combined.combine_chunks()
    head = sorted_combined.slice(0, n - 1)
    tail = sorted_combined.slice(1)
    is_last = pa.concat_arrays([pc.not_equal(head, tail), pa.array([True])])
    winners = pc.filter(order, is_last)
    # restore input order among the winners (stable, predictable output)
    winners = pc.take(winners, pc.sort_indices(winners))
    return table.take(winners)


def check_required_columns(batch: Batch, config: TableConfig, with_ordering: bool = True) -> None:
    """Key, partition and (optionally) ordering columns exist and hold no nulls (one field of
    a multi-field key may be null: the key generator refuses keys without any)."""
    table = as_table(batch)
    for name in config.non_null_key_fields:
        require_no_nulls(table, name, "record key")
    for name in config.partition_fields:
        require_no_nulls(table, name, "partition")
    if with_ordering and config.precombine_field is not None:
        require_ordering(table, config.precombine_field)


#: rows from which :func:`prepare_upserts` builds keys and partition paths side by side
_ROWS_FOR_THREADS = 262_144


def prepare_upserts(
    batch: Batch,
    config: TableConfig,
    data_schema: pa.Schema,
    operation: WriteOperation = WriteOperation.UPSERT,
    combine: bool = True,
    dictionary_partitions: bool = False,
    threads: int = 1,
) -> pa.Table:
    """Data columns aligned to ``data_schema`` + ``_hoodie_record_key`` + partition path,
    de-duplicated unless ``combine`` is False (see :func:`combines`). The partition path is a
    string column; ``dictionary_partitions`` lets it come dictionary-encoded (see
    ``KeyGenerator.partition_paths``) for a caller that only groups by it. With ``threads`` > 1
    the keys and the partition paths of a large batch are built side by side (Arrow's kernels
    release the GIL).

    ``data_schema`` is the schema this commit will have (the table's schema, evolved by the
    batch); use :func:`incoming_schema` + the schema module to compute it.
    """
    table = as_table(batch)
    require_rows(table, operation)
    _check_duplicate_names(table)
    _refuse_reserved(table)
    keygen = KeyGenerator(config)
    if threads > 1 and table.num_rows >= _ROWS_FOR_THREADS:
        with ThreadPoolExecutor(1, thread_name_prefix="hoodline-prepare") as pool:
            later = pool.submit(keygen.partition_paths, table, dictionary_partitions)
            keys = keygen.record_keys(table)
            parts = later.result()
    else:
        keys = keygen.record_keys(table)
        parts = keygen.partition_paths(table, dictionary_partitions)
    if config.precombine_field is not None:
        require_ordering(table, config.precombine_field)
    aligned = align_to_schema(table, data_schema, "the input batch")
    out = aligned.append_column(pa.field(RECORD_KEY, pa.string(), nullable=False), keys)
    out = out.append_column(pa.field(PARTITION_PATH, parts.type, nullable=False), parts)
    return dedupe(out, config.precombine_field) if combine else out


def combines(operation: WriteOperation, combine_before_insert: bool) -> bool:
    """Whether records of one batch sharing a key are reduced to one before writing: always,
    but for bulk_insert only when asked (``hoodie.combine.before.insert``, off as in Hudi)."""
    return operation is not WriteOperation.BULK_INSERT or combine_before_insert


def prepare_deletes(batch: Batch, config: TableConfig) -> pa.Table:
    """Key + partition path (+ the key/partition field columns) of records to delete, deduped.

    Only the record key and partition fields are needed; other columns are ignored."""
    table = as_table(batch)
    require_rows(table, WriteOperation.DELETE)
    _check_duplicate_names(table)
    keygen = KeyGenerator(config)
    keys = keygen.record_keys(table)
    parts = keygen.partition_paths(table)
    fields = list(dict.fromkeys((*config.record_key_fields, *config.partition_fields)))
    out = table.select(fields)
    out = out.append_column(pa.field(RECORD_KEY, pa.string(), nullable=False), keys)
    out = out.append_column(pa.field(PARTITION_PATH, pa.string(), nullable=False), parts)
    out = out.append_column(IS_DELETE, pa.array(np.ones(out.num_rows, dtype=bool)))
    return dedupe(out, None)


def _family(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _family(t.value_type)
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_timestamp(t):
        # one kind whatever the zone: a table stores instants (Avro timestamp-*: UTC), and a
        # column without a zone is read as UTC wall time, one with another zone converted
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    return str(t)


def _other_kind(have: pa.DataType, want: pa.DataType) -> bool:
    """A column of type ``have`` cannot go into the table's ``want`` whatever its values: another
    kind of type (a string for a number, ...) that no promotion widens. A column of Arrow's
    ``null`` type (every value null: how pandas and ``pa.table`` type a column of Nones) goes
    into any type."""
    return (have != want and not pa.types.is_null(have) and not widens(want, have)
            and _family(have) != _family(want))


def _same_nesting(have: pa.DataType, want: pa.DataType) -> bool:
    """Both structs (or lists or maps): a cast by field name may take one into the other (the
    table's fields the data lacks read as null)."""
    return any(test(have) and test(want)
               for test in (pa.types.is_struct, pa.types.is_list, pa.types.is_map))


def _nested_conflict(have: pa.DataType, want: pa.DataType, path: str,
                     widening: bool) -> str | None:
    """A field inside the nested ``have`` (data) that cannot go into the same field of the
    table's ``want`` whatever its values: another kind of type, or with ``widening`` also a
    promotion (only top-level columns widen). Its dotted path and both types, else None.
    Fields only one side has are not conflicts (new ones evolve the table, missing ones read
    as null)."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        for i in range(have.num_fields):
            child = have.field(i)
            j = want.get_field_index(child.name)
            if j < 0:
                continue
            stored = want.field(j).type
            sub = f"{path}.{child.name}"
            if child.type == stored or pa.types.is_null(child.type):
                continue
            if _same_nesting(child.type, stored):
                found = _nested_conflict(child.type, stored, sub, widening)
                if found is not None:
                    return found
            elif _other_kind(child.type, stored) or (widening and widens(stored, child.type)):
                return f"'{sub}' is {child.type}, the table stores {stored}"
        return None
    if pa.types.is_list(have) and pa.types.is_list(want):
        return _nested_conflict(have.value_type, want.value_type, f"{path}[]", widening)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _nested_conflict(have.item_type, want.item_type, f"{path}{{}}", widening)
    return None


def type_conflicts(incoming: pa.Schema, table_schema: pa.Schema | None) -> list[str]:
    """The columns of ``incoming`` (a declared schema) that cannot go into the table's:
    another kind of type (:func:`_other_kind`), or inside a nested column another kind or a
    wider type, since only top-level columns widen (values would fail the round, not go to
    the error table). One text per column: name, both types."""
    if table_schema is None:
        return []
    stored = {f.name: f.type for f in table_schema}
    out = []
    for f in incoming:
        if f.name not in stored:
            continue
        if _same_nesting(f.type, stored[f.name]):
            nested = _nested_conflict(f.type, stored[f.name], f.name, widening=True)
            if nested is not None:
                out.append(f"{nested} (fields inside nested columns do not widen)")
        elif _other_kind(f.type, stored[f.name]):
            out.append(f"'{f.name}' is {f.type}, the table stores {stored[f.name]}")
    return out


def conform_types(batch: Batch, table_schema: pa.Schema | None) -> pa.Table:
    """Cast columns the table already has to the table's types when that is lossless and within
    the same kind of type (int32 -> int64, string -> large_string, timestamp unit, ...); a
    column that is a promotion of the table's (int -> long, float -> double) is left to widen
    the table.

    Anything else is refused with :class:`InvalidRecordsError` naming the column, both types and
    a sample value — hoodline never parses strings into numbers or truncates values silently."""
    table = as_table(batch)
    if table_schema is None:
        return table.replace_schema_metadata(None)
    for i, fld in enumerate(table.schema):
        if fld.name not in table_schema.names:
            continue
        want = table_schema.field(fld.name).type
        if fld.type == want or widens(want, fld.type):
            continue  # a promotion widens the table's column (check_evolution)
        grown = nested_evolution(want, fld.type)
        if grown is not None:
            if grown == fld.type:
                continue  # new struct fields: the table's column evolves (check_evolution)
            want = grown  # new fields, and some of the table's missing: those read as null
        col = table.column(i)
        if _other_kind(fld.type, want) and not _same_nesting(fld.type, want):
            # one value to show (not the whole column as Python objects, as it was)
            sample = next((v for v in col.drop_null().slice(0, 1).to_pylist()), None)
            raise InvalidRecordsError(
                f"column '{fld.name}' has type {fld.type} but the table stores {want} "
                f"(sample value {sample!r}); convert the column to {want} before writing"
            )
        nested = (_nested_conflict(fld.type, want, fld.name, widening=False)
                  if _same_nesting(fld.type, want) else None)
        if nested is not None:
            # a cast made an int field text ('5') where a top-level column is refused
            raise InvalidRecordsError(
                f"column '{fld.name}': {nested}; convert it to the table's {want} before "
                "writing"
            )
        try:
            cast = pc.cast(col, want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InvalidRecordsError(
                f"column '{fld.name}' ({fld.type}) cannot be stored as the table's {want} "
                f"without losing data: {exc}"
            ) from None
        table = table.set_column(i, pa.field(fld.name, want, fld.nullable), cast)
    return table.replace_schema_metadata(None)


def incoming_schema(batch: Batch) -> pa.Schema:
    """Schema of the data columns of an input batch (metadata stripped)."""
    return as_table(batch).schema.remove_metadata()
