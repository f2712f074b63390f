"""Bad input: a clear error naming the column (and value/row), and the table byte-for-byte
unchanged — no instant, no data file, no marker, nothing."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from hoodline.errors import ConfigError, InvalidRecordsError, SchemaEvolutionError, TableError
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.table.write.helpers import rows, tree_digest


def _base() -> pa.Table:
    return rows([1, 2, 3])


CASES: list[tuple[str, str, Callable[[], object], type[Exception], str]] = [
    # (case id, operation, batch factory, error type, text the message must contain)
    ("empty batch", "upsert", lambda: _base().slice(0, 0), InvalidRecordsError, "empty batch"),
    (
        "missing key column",
        "upsert",
        lambda: _base().drop_columns(["id"]),
        InvalidRecordsError,
        "'id'",
    ),
    (
        "null key",
        "upsert",
        lambda: _base().set_column(0, "id", pa.array([1, None, 3], pa.int64())),
        InvalidRecordsError,
        "first at row 1",
    ),
    (
        "string values for the int key column",
        "upsert",
        lambda: _base().set_column(0, "id", pa.array(["a", "b", "c"])),
        InvalidRecordsError,
        "'id'",
    ),
    (
        "missing partition column",
        "upsert",
        lambda: _base().drop_columns(["region"]),
        InvalidRecordsError,
        "'region'",
    ),
    (
        "null partition",
        "upsert",
        lambda: _base().set_column(1, "region", pa.array(["eu", "us", None])),
        InvalidRecordsError,
        "row 2",
    ),
    (
        "slash in partition value",
        "upsert",
        lambda: _base().set_column(1, "region", pa.array(["eu", "a/b", "us"])),
        InvalidRecordsError,
        "'a/b'",
    ),
    (
        "missing ordering column",
        "upsert",
        lambda: _base().drop_columns(["ts"]),
        InvalidRecordsError,
        "'ts'",
    ),
    (
        "null ordering value",
        "upsert",
        lambda: _base().set_column(2, "ts", pa.array([1, 2, None], pa.int64())),
        InvalidRecordsError,
        "row 2",
    ),
    (
        "wrong type string for int",
        "upsert",
        lambda: _base().set_column(2, "ts", pa.array(["1", "2", "3"])),
        InvalidRecordsError,
        "'ts'",
    ),
    (
        "lossy type float for int",
        "upsert",
        lambda: _base().set_column(2, "ts", pa.array([1.5, 2.0, 3.0])),
        InvalidRecordsError,
        "'ts'",
    ),
    (
        "reserved meta column",
        "upsert",
        lambda: _base().append_column("_hoodie_commit_time", pa.array(["x", "y", "z"])),
        InvalidRecordsError,
        "'_hoodie_commit_time'",
    ),
    (
        "new non-nullable column",
        "upsert",
        lambda: _base().append_column(
            pa.field("n", pa.int64(), nullable=False), pa.array([1, 2, 3])
        ),
        SchemaEvolutionError,
        "'n'",
    ),
    ("dropped column", "upsert", lambda: _base().drop_columns(["v"]), SchemaEvolutionError, "'v'"),
    ("not an arrow batch", "upsert", lambda: {"id": [1]}, InvalidRecordsError, "dict"),
    (
        "delete with null key",
        "delete",
        lambda: _base().set_column(0, "id", pa.array([1, None, 3], pa.int64())),
        InvalidRecordsError,
        "'id'",
    ),
    ("delete empty batch", "delete", lambda: _base().slice(0, 0), InvalidRecordsError, "empty"),
    ("reserved extra metadata", "upsert-extra", lambda: _base(), TableError, "'schema'"),
    ("unknown operation", "merge", lambda: _base(), TableError, "merge"),
]


@pytest.mark.parametrize(("case", "op", "make", "error", "text"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_leaves_table_unchanged(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index_type: str,
    case: str,
    op: str,
    make: Callable[[], object],
    error: type[Exception],
    text: str,
) -> None:
    table = new_table(index_type)
    client = client_for(table)
    client.insert(_base())
    before = tree_digest(table.base_path)
    batch = make()
    with pytest.raises(error) as info:
        if op == "upsert-extra":
            client.upsert(batch, extra_metadata={"schema": "x"})  # type: ignore[arg-type]
        elif op in ("upsert", "delete"):
            getattr(client, op)(batch)
        else:
            client.write(batch, op)  # type: ignore[arg-type]
    assert text in str(info.value), f"{case}: message does not name it: {info.value}"
    assert tree_digest(table.base_path) == before, f"{case}: table changed"
    # and the client still works afterwards
    client.upsert(rows([9]))


def test_unknown_write_option_is_refused(new_table: Callable[..., HudiTable]) -> None:
    table = new_table("BLOOM")
    with pytest.raises(ConfigError, match=r"hoodie\.parquet\.max\.file\.sise"):
        WriteClient(table, {"hoodie.parquet.max.file.sise": 1})


def test_bad_first_batch_leaves_new_table_unchanged(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BUCKET")
    client = client_for(table)
    before = tree_digest(table.base_path)
    with pytest.raises(InvalidRecordsError, match="'id'"):
        client.insert(_base().set_column(0, "id", pa.array([None, None, None], pa.int64())))
    assert tree_digest(table.base_path) == before


def _not_null_v_with_nulls() -> pa.Table:
    base = _base()
    return pa.table([*base.columns[:-1], pa.array(["x", None, None])],
                    schema=base.schema.remove(len(base.schema) - 1).append(
                        pa.field("v", pa.string(), nullable=False)))


def test_nulls_in_a_column_declared_not_null_are_refused_unless_the_table_takes_nulls(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    """pyarrow builds a table holding nulls in a field its schema declares not null; written
    as the table's first batch, the Parquet writer refused it half-way with a bare ArrowInvalid.
    Refused before anything is written, naming the column; into a table whose column takes
    nulls it is written (the batch's declaration loses to the table's), and a delete writes no
    values."""
    table = new_table("BUCKET")
    client = client_for(table)
    before = tree_digest(table.base_path)
    with pytest.raises(InvalidRecordsError, match=r"column 'v' is declared not null but holds "
                       r"2 null\(s\) \(the first at row 1\)"):
        client.upsert(_not_null_v_with_nulls())
    assert tree_digest(table.base_path) == before
    client.insert(_base())
    client.upsert(_not_null_v_with_nulls())
    client.delete(_not_null_v_with_nulls())
