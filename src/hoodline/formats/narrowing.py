"""Which values of a column fit a narrower column type.

A value read into a column narrower than its own type (a declared ``[schema]`` or a table
column older than a widened writer schema) is kept when it converts without loss and is a bad
record otherwise, value by value: an Arrow cast refuses a whole column for one such value, and
a whole batch or file with it. Vectorised: one pass over the column, nulls always fit.
"""

from __future__ import annotations

import decimal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Problem", "cast_fitting", "failing_rows", "problem_text", "unfit_values"]

_TIME_UNITS = ("s", "ms", "us", "ns")

#: rows of a batch whose value of one field does not fit, and what to say of them: one text
#: for all, or one per row (a refusal naming the row's own value)
Problem = tuple[npt.NDArray[np.bool_], str | dict[int, str]]


def problem_text(problems: list[Problem], row: int) -> str:
    """What is wrong with ``row``: its problems' texts, joined."""
    return "; ".join(text if isinstance(text, str) else text[row]
                     for mask, text in problems if mask[row])


def _int_range(t: pa.DataType) -> np.iinfo:
    return np.iinfo(t.to_pandas_dtype())


def unfit_values(col: pa.Array | pa.ChunkedArray,
                 dst: pa.DataType) -> tuple[npt.NDArray[np.bool_], str] | None:
    """Rows of ``col`` whose value is no value of ``dst`` (nulls fit), and what to say of them
    (``"field 'x' has a value that <phrase> the table's T column"``); None when no value
    can be lost: an integer outside an integer column's range, or (floating point) not a
    whole number; a decimal with more digits after the point or before it than the column
    has; a double beyond a float's range (others are rounded, as JSON's are); a time finer
    than the column's unit."""
    src = col.type
    if pa.types.is_dictionary(src):
        col = pc.cast(col, src.value_type)
        src = col.type
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        return _unfit_in_struct(col, dst)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        entries = pa.struct([("key", dst.key_type), ("value", dst.item_type)])
        return _unfit_in_list(col, entries, "an entry")
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(t(src) for t in lists) and any(t(dst) for t in lists):
        return _unfit_in_list(col, dst.value_type, "an element")
    if pa.types.is_integer(dst) and (pa.types.is_integer(src) or pa.types.is_floating(src)):
        info = _int_range(dst)
        if pa.types.is_floating(src):
            low, high = pa.scalar(float(info.min), src), pa.scalar(float(info.max + 1), src)
            out = pc.or_(pc.or_(pc.less(col, low), pc.greater_equal(col, high)),
                         pc.not_equal(col, pc.floor(col)))  # NaN too: it equals nothing
            return np.asarray(pc.fill_null(out, False)), "is no whole number in the range of"
        have = _int_range(src)
        if have.min >= info.min and have.max <= info.max:
            return None  # a widening
        # bounds in the column's own type (a uint64 compared with int64's negative minimum
        # raised, refusing the batch: Protobuf review)
        low = pa.scalar(max(int(info.min), int(have.min)), src)
        high = pa.scalar(min(int(info.max), int(have.max)), src)
        return (np.asarray(pc.fill_null(pc.or_(pc.less(col, low), pc.greater(col, high)),
                                        False)),
                "is outside")
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        lost = pc.not_equal(pc.cast(pc.cast(col, dst, safe=False), src), col)
        whole = dst.precision - dst.scale
        if src.precision - src.scale > whole:
            bound = pa.scalar(decimal.Decimal(10) ** whole, src)
            lost = pc.or_(lost, pc.greater_equal(pc.abs(col), bound))
        return np.asarray(pc.fill_null(lost, False)), "does not fit (digits would be lost in)"
    if (pa.types.is_timestamp(src) and pa.types.is_timestamp(dst)
            and _TIME_UNITS.index(src.unit) < _TIME_UNITS.index(dst.unit)):
        # a finer unit holds fewer years (nanoseconds: 1677 to 2262); a 9999-12-31 end date
        # in milliseconds does not fit one
        factor = 1000 ** (_TIME_UNITS.index(dst.unit) - _TIME_UNITS.index(src.unit))
        bound = np.iinfo(np.int64).max // factor
        ticks = pc.cast(col, pa.int64())
        beyond = pc.or_(pc.greater(ticks, bound), pc.less(ticks, -bound))
        return np.asarray(pc.fill_null(beyond, False)), "is outside the years of"
    if pa.types.is_float64(src) and pa.types.is_float32(dst):
        over = pc.and_(pc.is_finite(col), pc.is_inf(pc.cast(col, dst, safe=False)))
        return np.asarray(pc.fill_null(over, False)), "is outside the range of"
    if (pa.types.is_timestamp(src) and pa.types.is_timestamp(dst)
            and _TIME_UNITS.index(src.unit) > _TIME_UNITS.index(dst.unit)):
        coarse = pc.cast(pc.cast(col, pa.timestamp(dst.unit, src.tz), safe=False), src)
        return (np.asarray(pc.fill_null(pc.not_equal(coarse, col), False)),
                "is more precise than")
    return None


def _one_chunk(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _unfit_in_struct(col: pa.Array | pa.ChunkedArray,
                     dst: pa.DataType) -> tuple[npt.NDArray[np.bool_], str] | None:
    """The rows of a struct column with a field whose value does not fit (a null struct
    fits), by the fields' own columns, which are aligned with the rows."""
    arr = _one_chunk(col)
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    out: npt.NDArray[np.bool_] | None = None
    said: list[str] = []
    for i in range(dst.num_fields):
        f = dst.field(i)
        if f.name not in names:
            continue
        found = unfit_values(pc.struct_field(arr, f.name), f.type)
        if found is None or not found[0].any():
            continue
        said.append(f"{found[1]} its field '{f.name}' ({f.type})")
        out = found[0] if out is None else out | found[0]
    if out is None:
        return None
    return out & np.asarray(arr.is_valid()), " or ".join(said) + " in"


def _unfit_in_list(col: pa.Array | pa.ChunkedArray, item: pa.DataType,
                   what: str) -> tuple[npt.NDArray[np.bool_], str] | None:
    """The rows of a list (or map) column with an element that does not fit ``item`` (a
    null list fits, whatever values its slot still spans)."""
    arr = _one_chunk(col)
    offsets = np.asarray(arr.offsets)
    # a map's values are its entries, a struct of key and value
    values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    found = unfit_values(values, item)
    if found is None:
        return None
    out = np.zeros(len(arr), dtype=bool)
    if found[0].any():
        parents = np.repeat(np.arange(len(arr)), np.diff(offsets))
        out[parents[found[0]]] = True
    return out & np.asarray(arr.is_valid()), f"{found[1]} {what} ({item}) of"


def failing_rows(col: pa.Array | pa.ChunkedArray,
                 dst: pa.DataType) -> tuple[npt.NDArray[np.bool_], dict[int, str]]:
    """Rows of ``col`` whose value Arrow's (safe) cast to ``dst`` refuses, and each one's
    refusal (naming its own value): for what :func:`unfit_values` has no rule for (a long
    beyond 2**53 into a double). Halves of the column are cast until each failing row stands
    alone: a few casts per bad row, rare by nature."""
    out = np.zeros(len(col), dtype=bool)
    said: dict[int, str] = {}
    todo = [(0, len(col))]
    while todo:
        lo, hi = todo.pop()
        try:
            # a copy of the rows, not a slice: a sliced list's cast looks at every value of
            # its child array, the other rows' too
            pc.take(col, pa.array(np.arange(lo, hi, dtype=np.int64))).cast(dst)
        except pa.ArrowInvalid as exc:
            if hi - lo == 1:
                out[lo] = True
                said[lo] = str(exc)
            else:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]  # the lower half first: the first row's error
    # a null row is no value (whatever its struct's hidden fields hold)
    valid = np.asarray(col.is_valid())
    return out & valid, {i: text for i, text in said.items() if valid[i]}


def cast_fitting(col: pa.Array | pa.ChunkedArray, dst: pa.DataType, name: str, *,
                 target: str, source: str,
                 ) -> tuple[pa.Array | pa.ChunkedArray, list[Problem]]:
    """``col`` cast to ``dst``, every value that does not fit null, and per kind of misfit
    its rows and what to say of them (``field 'x' has a value that ... <target> T column
    (<source> has S)``: ``target`` "the table's", ``source`` "the writer schema"): the rules of
    :func:`unfit_values` first, then :func:`failing_rows` for what Arrow refuses otherwise.
    Raises Arrow's error when the cast fails for another reason than values (no cast
    between the types)."""
    problems: list[Problem] = []
    found = unfit_values(col, dst)
    if found is not None and found[0].any():
        problems.append((found[0], f"field '{name}' has a value that {found[1]} {target} {dst} "
                                   f"column ({source} has {col.type})"))
        col_rest = pc.if_else(pa.array(found[0]), pa.scalar(None, col.type), col)
    else:
        col_rest = col
    try:
        return col_rest.cast(dst), problems
    except pa.ArrowInvalid:
        rows, refusals = failing_rows(col_rest, dst)
    if not rows.any():
        raise pa.ArrowInvalid(f"'{name}' does not convert to {dst}")
    problems.append((rows, {i: f"field '{name}' has a value that does not convert to {target} "
                               f"{dst} ({source} has {col.type}): {text}"
                            for i, text in refusals.items()}))
    return pc.if_else(pa.array(rows), pa.scalar(None, col.type), col_rest).cast(dst), problems
