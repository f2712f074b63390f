"""Which values fit a narrower column type: value by value, vectorised, nulls fit."""

from __future__ import annotations

from decimal import Decimal as D

import numpy as np
import pyarrow as pa

from hoodline.formats.narrowing import failing_rows, unfit_values


def test_lists_maps_and_structs_are_looked_into_and_null_rows_fit() -> None:
    """A null list whose slot still spans values (Arrow allows it) crashed the check (its
    flattened values and their parent rows were counted differently); a null struct whose
    hidden field does not fit was a failing row (review of the check)."""
    values = pa.array([D("1.5"), D("1.234"), D("2"), D("9.999")], pa.decimal128(38, 10))
    offsets = pa.array([0, 1, 2, 3, 4], pa.int32())
    lists = pa.ListArray.from_arrays(offsets, values, mask=pa.array([False, True, False, False]))
    dst = pa.list_(pa.decimal128(12, 2))
    rows, said = unfit_values(lists, dst) or (None, "")
    assert rows is not None and rows.tolist() == [False, False, False, True]
    assert said == "does not fit (digits would be lost in) an element (decimal128(12, 2)) of"
    assert unfit_values(lists.slice(1), dst)[0].tolist() == [False, False, True]  # type: ignore[index]
    maps = pa.array([[("a", D("1.5"))], None, [("b", D("1.234"))]],
                    pa.map_(pa.string(), pa.decimal128(38, 10)))
    found = unfit_values(maps, pa.map_(pa.string(), pa.decimal128(12, 2)))
    assert found is not None and found[0].tolist() == [False, False, True]
    hidden = pa.StructArray.from_arrays([pa.array([1_000, 1_001], pa.timestamp("us"))], ["t"],
                                        mask=pa.array([False, True]))
    to_ms = pa.struct([("t", pa.timestamp("ms"))])
    found = unfit_values(hidden, to_ms)
    assert found is None or not found[0].any()
    assert failing_rows(hidden, to_ms)[0].tolist() == [False, False]


def test_a_time_beyond_a_finer_units_years_is_found_without_casting_row_by_row() -> None:
    """9999-12-31 (an end-date sentinel) in milliseconds does not fit nanoseconds: the check
    found it only by casting halves of the column, ~130 µs per such row (13 s for 100k)."""
    end = 253_402_214_400_000  # 9999-12-31 in milliseconds
    col = pa.array(np.array([0, end, -end, 1_700_000_000_000]), pa.timestamp("ms"))
    found = unfit_values(col, pa.timestamp("ns"))
    assert found is not None
    assert found[0].tolist() == [False, True, True, False]
    assert found[1] == "is outside the years of"
    assert unfit_values(col, pa.timestamp("us")) is not None
    assert not unfit_values(col, pa.timestamp("us"))[0].any()  # type: ignore[index]


def test_dictionary_columns_are_checked_as_their_values() -> None:
    col = pa.array([1, 300, 1], pa.int64()).dictionary_encode()
    found = unfit_values(col, pa.int8())
    assert found is not None and found[0].tolist() == [False, True, False]


def test_unsigned_and_signed_integers_are_compared_in_their_own_type() -> None:
    """A uint64 column read into int64 raised while comparing with int64's negative minimum,
    refusing every record of the batch (Protobuf review)."""
    col = pa.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1, None], pa.uint64())
    found = unfit_values(col, pa.int64())
    assert found is not None
    assert found[0].tolist() == [False, False, False, True, True, False]
    signed = pa.array([-1, 0, 255, 256], pa.int64())
    found = unfit_values(signed, pa.uint8())
    assert found is not None and found[0].tolist() == [True, False, False, True]
    assert unfit_values(pa.array([1], pa.uint32()), pa.int64()) is None  # a widening
