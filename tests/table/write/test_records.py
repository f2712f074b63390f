"""Grouping records by file group (``hoodline.table.write.records``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from hoodline.table.write.records import (
    FILE_ID,
    PARTITION_PATH,
    code_waves,
    dictionary_codes,
    file_group_parts,
)


def _records(partitions: list[str], file_ids: list[str], start: int = 0) -> pa.RecordBatch:
    n = len(file_ids)
    return pa.record_batch({
        PARTITION_PATH: pa.array(partitions, pa.string()),
        FILE_ID: pa.array(file_ids, pa.string()),
        "id": pa.array(range(start, start + n), pa.int64()),
    })


def _expected(table: pa.Table) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for part, fid, i in zip(*(table.column(c).to_pylist() for c in (PARTITION_PATH, FILE_ID, "id")),
                            strict=True):
        out.setdefault((part, fid), []).append(i)
    return out


def test_groups_of_batches_grouped_by_file_group_are_slices_not_copies() -> None:
    """Each batch holds its file groups' rows together (as readers send them): every group is
    gathered from zero-copy slices, in input order, with no new Arrow allocation."""
    a = _records(["p1"] * 3 + ["p2"] * 2 + ["p1"], ["f1"] * 3 + ["f1"] * 2 + ["f2"])
    b = _records(["p1"] * 2 + ["p1"] * 2, ["f2", "f2", "f1", "f1"], start=100)
    table = pa.Table.from_batches([a, b])
    before = pa.total_allocated_bytes()
    parts = file_group_parts(table)
    assert pa.total_allocated_bytes() == before
    got = {(part, fid): rows.column("id").to_pylist() for part, fid, rows in parts}
    assert got == _expected(table)
    assert got[("p1", "f1")] == [0, 1, 2, 102, 103]  # input order within a group
    assert all(set(rows.column(FILE_ID).to_pylist()) == {fid} for _, fid, rows in parts)


def test_groups_of_interleaved_records_are_gathered_exactly() -> None:
    """Rows of a group spread through a batch are taken into file-group order (one copy),
    still in input order within each group."""
    rng = np.random.default_rng(7)
    n = 5000
    fids = [f"f{i}" for i in rng.integers(0, 6, n)]
    parts_col = [f"p{i}" for i in rng.integers(0, 3, n)]
    table = pa.Table.from_batches([_records(parts_col, fids)])
    before = pa.total_allocated_bytes()
    parts = file_group_parts(table)
    assert pa.total_allocated_bytes() > before  # gathered with a take
    got = {(part, fid): rows.column("id").to_pylist() for part, fid, rows in parts}
    assert got == _expected(table)
    assert [key for key, _ in sorted(got.items())] == sorted(got)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_code_waves_give_every_group_once_in_input_order_a_wave_at_a_time(threads: int) -> None:
    """Waves of whole rounds of ``threads`` groups, each about ``wave_bytes`` of input; windows
    smaller than a batch, batches of both kinds (rows grouped already, and interleaved); every
    group's rows exactly, in input order, and only in its own wave."""
    rng = np.random.default_rng(3)
    grouped = np.repeat(np.array([5, 1, 9, 3]), [40, 7, 30, 23])  # runs, not in code order
    mixed = rng.integers(0, 12, 700)
    batches = [pa.record_batch({"id": pa.array(range(start, start + len(c)), pa.int64()),
                                "code": pa.array(c, pa.int64())})
               for start, c in ((0, mixed[:300]), (300, grouped), (400, mixed[300:]))]
    table = pa.Table.from_batches(batches)
    codes = table.column("code").to_numpy()
    per_row = table.nbytes // table.num_rows
    waves = list(code_waves(table, codes, threads, wave_bytes=150 * per_row, window=64))
    assert len(waves) > 2
    seen = [code for wave in waves for code, _ in wave]
    assert seen == sorted(set(codes.tolist()))
    for wave in waves[:-1]:
        assert len(wave) % threads == 0
    for wave in waves:
        for code, rows in wave:
            assert rows.column("code").to_pylist() == [code] * rows.num_rows
            assert rows.column("id").to_pylist() == np.flatnonzero(codes == code).tolist()
    whole = list(code_waves(table, codes, threads, wave_bytes=0, window=64))
    assert len(whole) == 1 and [c for c, _ in whole[0]] == seen


def test_code_waves_of_grouped_batches_copy_nothing() -> None:
    codes = np.repeat(np.array([4, 0, 2]), [50, 30, 20])
    table = pa.table({"id": pa.array(range(100), pa.int64())})
    before = pa.total_allocated_bytes()
    waves = list(code_waves(table, codes, 2, wave_bytes=1))
    assert pa.total_allocated_bytes() == before
    assert [[(c, r.column("id")[0].as_py()) for c, r in w] for w in waves] == [
        [(0, 50), (2, 80)], [(4, 0)]]


def test_no_records_no_groups() -> None:
    assert file_group_parts(pa.Table.from_batches([_records([], [])])) == []


def _decoded(codes: np.ndarray, values: list[str]) -> list[str]:
    return [values[c] for c in codes]


def test_dictionary_codes_of_strings_group_equal_values() -> None:
    column = pa.chunked_array([["b", "a"], ["b", "c", "a"]], pa.string())
    codes, values = dictionary_codes(column)
    assert _decoded(codes, values) == ["b", "a", "b", "c", "a"]
    assert len(set(values)) == len(values) == 3


def test_dictionary_codes_of_a_dictionary_column_are_its_indices() -> None:
    # entries no row uses are allowed (a bucket index names every bucket of a partition)
    column = pa.DictionaryArray.from_arrays(
        pa.array([2, 0, 2, 2], pa.int32()), pa.array(["f0", "unused", "f2"]))
    codes, values = dictionary_codes(column)
    assert codes.tolist() == [2, 0, 2, 2] and codes.dtype == np.int64
    assert values == ["f0", "unused", "f2"]
    codes, values = dictionary_codes(pa.chunked_array([column]))
    assert _decoded(codes, values) == ["f2", "f0", "f2", "f2"]


@pytest.mark.parametrize("column", [
    # a value twice in the dictionary: its rows must still get one code
    pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], pa.int32()), pa.array(["x", "y", "x"])),
    # chunks with dictionaries of their own
    pa.chunked_array([
        pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["x", "y"])),
        pa.DictionaryArray.from_arrays(pa.array([0], pa.int32()), pa.array(["x"])),
    ]),
])
def test_dictionary_codes_of_other_dictionary_columns_decode_first(
    column: pa.Array | pa.ChunkedArray,
) -> None:
    codes, values = dictionary_codes(column)
    assert len(set(values)) == len(values)
    expected = column.to_pylist()
    assert _decoded(codes, values) == expected
    assert codes[0] == codes[2]


def test_groups_of_a_dictionary_file_id_column_match_the_string_column() -> None:
    ids = ["g2", "g1", "g2", "g1", "g2"]
    plain = pa.table(_records(["p"] * 5, ids))
    encoded = plain.set_column(
        plain.schema.get_field_index(FILE_ID), FILE_ID,
        pa.DictionaryArray.from_arrays(pa.array([2, 1, 2, 1, 2], pa.int32()),
                                       pa.array(["g0", "g1", "g2"])))

    def groups(table: pa.Table) -> list[tuple[str, str, list[int]]]:
        # groups come in code order, which differs between the two: compared as sets
        parts = file_group_parts(table)
        return sorted((p, f, rows.column("id").to_pylist()) for p, f, rows in parts)

    assert groups(encoded) == groups(plain) == [("p", "g1", [1, 3]), ("p", "g2", [0, 2, 4])]
