"""Key generation, validation and in-batch de-duplication (pure, no I/O)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodline.errors import InvalidRecordsError
from hoodline.table.keygen.generator import KeyGenerator
from hoodline.table.properties import TableConfig
from hoodline.table.write import records
from hoodline.table.write.prepare import (
    conform_types,
    dedupe,
    prepare_deletes,
    prepare_upserts,
)
from hoodline.table.write.records import PARTITION_PATH, RECORD_KEY


def cfg(**kw: object) -> TableConfig:
    base: dict[str, object] = {"name": "t", "record_key_fields": ("id",)}
    base.update(kw)
    return TableConfig(**base)  # type: ignore[arg-type]


def test_single_and_complex_record_keys() -> None:
    t = pa.table({"id": [1, 2], "sub": ["a", "b"]})
    assert KeyGenerator(cfg()).record_keys(t).to_pylist() == ["1", "2"]
    keys = KeyGenerator(cfg(record_key_fields=("id", "sub"))).record_keys(t)
    assert keys.to_pylist() == ["id:1,sub:a", "id:2,sub:b"]


def test_partition_paths_hive_plain_nested_and_none() -> None:
    t = pa.table({"id": [1, 2], "r": ["eu", "us"], "d": pa.array([3, 4], pa.int16())})
    hive = KeyGenerator(cfg(partition_fields=("r", "d"))).partition_paths(t)
    assert hive.to_pylist() == ["r=eu/d=3", "r=us/d=4"]
    plain = KeyGenerator(cfg(partition_fields=("r",), hive_style_partitioning=False))
    assert plain.partition_paths(t).to_pylist() == ["eu", "us"]
    assert KeyGenerator(cfg()).partition_paths(t).to_pylist() == ["", ""]


def test_dates_and_record_batches_are_supported() -> None:
    import datetime as dt

    b = pa.record_batch({"id": ["k"], "day": pa.array([dt.date(2024, 5, 1)])})
    assert KeyGenerator(cfg(partition_fields=("day",))).partition_paths(b).to_pylist() == [
        "day=2024-05-01"
    ]


def test_url_encoding_escapes_slashes() -> None:
    t = pa.table({"id": [1], "r": ["a/b%c"]})
    kg = KeyGenerator(cfg(partition_fields=("r",), url_encode_partitions=True))
    assert kg.partition_paths(t).to_pylist() == ["r=a%2Fb%25c"]


@pytest.mark.parametrize(
    ("column", "values", "text"),
    [
        ("id", [1, None, 3], "first at row 1"),
        ("id", ["a", "", "c"], "empty string at row 1"),
        ("r", ["eu", "us", None], "first at row 2"),
        ("r", ["eu", "..", "x"], "'..' at row 1"),
    ],
)
def test_bad_keys_and_partitions_name_column_and_row(
    column: str, values: list[object], text: str
) -> None:
    t = pa.table({"id": [1, 2, 3], "r": ["eu", "us", "eu"]})
    t = t.set_column(t.schema.get_field_index(column), column, pa.array(values))
    kg = KeyGenerator(cfg(partition_fields=("r",)))
    with pytest.raises(InvalidRecordsError) as info:
        kg.record_keys(t)
        kg.partition_paths(t)
    assert f"'{column}'" in str(info.value) and text in str(info.value)


def test_unsupported_key_type_is_refused() -> None:
    t = pa.table({"id": [1.5]})
    with pytest.raises(InvalidRecordsError, match="'id' has type double"):
        KeyGenerator(cfg()).record_keys(t)


def _prepared(ids: list[int], ts: list[int], v: list[str], ordering: str | None = "ts") -> pa.Table:
    t = pa.table({"id": ids, "ts": ts, "v": v})
    return prepare_upserts(t, cfg(precombine_field=ordering), t.schema)


def test_dedupe_highest_ordering_wins_ties_last() -> None:
    out = _prepared([1, 2, 1, 1, 2, 3], [5, 1, 9, 9, 1, 0], ["a", "b", "c", "d", "e", "f"])
    got = {r["id"]: r["v"] for r in out.to_pylist()}
    assert got == {1: "d", 2: "e", 3: "f"}
    assert out.num_rows == 3


def test_dedupe_without_ordering_field_keeps_last() -> None:
    out = _prepared([1, 1, 2], [9, 1, 1], ["a", "b", "c"], ordering=None)
    assert {r["id"]: r["v"] for r in out.to_pylist()} == {1: "b", 2: "c"}


def test_dedupe_same_key_in_two_partitions_are_different_records() -> None:
    t = pa.table({RECORD_KEY: ["1", "1"], PARTITION_PATH: ["a", "b"], "x": [1, 2]})
    assert dedupe(t, None).num_rows == 2


def test_dedupe_keeps_unique_batches_untouched() -> None:
    out = _prepared([3, 1, 2], [1, 1, 1], ["a", "b", "c"])
    assert out["id"].to_pylist() == [3, 1, 2]
    assert out[RECORD_KEY].to_pylist() == ["3", "1", "2"]


def test_prepare_deletes_needs_only_keys() -> None:
    t = pa.table({"id": [1, 1, 2], "r": ["eu", "eu", "us"]})
    out = prepare_deletes(t, cfg(partition_fields=("r",), precombine_field="ts"))
    assert sorted(out[RECORD_KEY].to_pylist()) == ["1", "2"]


def test_conform_types_widens_losslessly_and_refuses_other_kinds() -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.large_string())])
    ok = conform_types(pa.table({"id": pa.array([1], pa.int32()), "s": ["x"]}), schema)
    assert ok.schema.field("id").type == pa.int64()
    assert ok.schema.field("s").type == pa.large_string()
    with pytest.raises(InvalidRecordsError, match="'id' has type string"):
        conform_types(pa.table({"id": ["1"], "s": ["x"]}), schema)
    narrow = pa.schema([("id", pa.int32())])
    with pytest.raises(InvalidRecordsError, match="'id'"):
        conform_types(pa.table({"id": pa.array([2**40], pa.uint64())}), narrow)
    # a promotion of the table's type is left as it is: it widens the table's column
    wider = conform_types(pa.table({"id": pa.array([2**40], pa.int64())}), narrow)
    assert wider.schema.field("id").type == pa.int64()


def test_all_distinct_is_exact_even_when_hashes_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = pa.chunked_array([pa.array(["a", "é", ""]), pa.array(["ab", "ba", "a\x00"])])
    assert records.all_distinct(keys)
    assert not records.all_distinct(pa.chunked_array([pa.array(["x", "y"]), pa.array(["x"])]))
    assert len(set(records.string_hashes64(keys).tolist())) == 6
    # every hash equal: the exact check decides
    monkeypatch.setattr(records, "string_hashes64", lambda v: np.zeros(len(v), np.uint64))
    assert records.all_distinct(keys)
    assert not records.all_distinct(pa.array(["x", "y", "x"]))


def test_partition_values_are_checked_once_but_errors_name_the_first_row() -> None:
    regions = pa.chunked_array([pa.array(["eu", "us"]), pa.array(["eu", "a/b", "a/b", ""])])
    t = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6]), "r": regions})
    with pytest.raises(InvalidRecordsError, match="empty string at row 5"):
        KeyGenerator(cfg(partition_fields=("r",), url_encode_partitions=True)).partition_paths(t)
    ok = t.slice(0, 5)
    with pytest.raises(InvalidRecordsError, match="'a/b' at row 3"):
        KeyGenerator(cfg(partition_fields=("r",))).partition_paths(ok)
    paths = KeyGenerator(cfg(partition_fields=("r",), url_encode_partitions=True))
    assert paths.partition_paths(ok).to_pylist() == ["r=eu", "r=us", "r=eu", "r=a%2Fb", "r=a%2Fb"]
    dictionary = ok.set_column(1, "r", pc.dictionary_encode(ok.column("r")))
    assert paths.partition_paths(dictionary).to_pylist() == paths.partition_paths(ok).to_pylist()
    none = KeyGenerator(cfg(partition_fields=())).partition_paths(ok)
    assert none.to_pylist() == [""] * 5


def test_prepared_records_with_dictionary_partition_paths_dedupe_per_partition() -> None:
    # the same key in two partitions is two records; in one partition the later one wins
    t = pa.table({"id": [1, 1, 2, 1], "r": ["a", "b", "a", "a"], "v": ["w", "x", "y", "z"]})
    config = cfg(partition_fields=("r",))
    plain = prepare_upserts(t, config, t.schema)
    encoded = prepare_upserts(t, config, t.schema, dictionary_partitions=True)
    assert pa.types.is_dictionary(encoded.schema.field(PARTITION_PATH).type)
    assert plain.schema.field(PARTITION_PATH).type == pa.string()
    rows = [(r[PARTITION_PATH], r["id"], r["v"]) for r in encoded.to_pylist()]
    assert rows == [(r[PARTITION_PATH], r["id"], r["v"]) for r in plain.to_pylist()]
    assert sorted(rows) == [("r=a", 1, "z"), ("r=a", 2, "y"), ("r=b", 1, "x")]


def test_keys_and_partition_paths_built_side_by_side_match_one_thread() -> None:
    """A large batch prepared on two threads gives the records of one, and a bad key or
    partition value still fails naming its row."""
    n = 300_000
    regions = np.array(["eu", "us", "ap"])[np.arange(n) % 3]
    t = pa.table({"id": np.arange(n), "r": pa.array(regions)})
    config = cfg(partition_fields=("r",))
    one = prepare_upserts(t, config, t.schema, threads=1)
    assert prepare_upserts(t, config, t.schema, threads=2).equals(one)
    assert one.column(PARTITION_PATH)[4].as_py() == "r=us"
    for column, values in (("id", pa.array([*range(n - 1), None])),
                           ("r", pa.array(["eu"] * (n - 1) + [None]))):
        bad = t.set_column(t.schema.get_field_index(column), column, values)
        with pytest.raises(InvalidRecordsError, match=f"'{column}'.*row {n - 1}"):
            prepare_upserts(bad, config, bad.schema, threads=2)
