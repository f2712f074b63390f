"""Byte ranges copied out of one buffer: the same values whatever the order of the ranges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline import spans
from hoodline.spans import byte_spans, span_bytes


def _expected(buf: bytes, starts: list[int], lengths: list[int]) -> list[bytes]:
    return [buf[s:s + n] for s, n in zip(starts, lengths, strict=True)]


def _check(buf: bytes, starts: list[int], lengths: list[int]) -> None:
    arr = byte_spans(np.frombuffer(buf, np.uint8), np.asarray(starts, np.int64),
                     np.asarray(lengths, np.int64))
    arr.validate(full=True)
    assert arr.type == pa.binary() and arr.null_count == 0  # 32-bit offsets hold the positions
    want = _expected(buf, starts, lengths)
    assert arr.to_pylist() == want
    assert span_bytes(arr).tobytes() == b"".join(want)
    assert span_bytes(arr.slice(1)).tobytes() == b"".join(want[1:])


def test_ranges_in_buffer_order_with_gaps_and_empty_ones() -> None:
    buf = b"..hello..world!" + b"x" * 10
    _check(buf, [2, 9, 0, 14, 14], [5, 5, 0, 1, 0])


def test_overlapping_and_backward_ranges() -> None:
    buf = bytes(range(50))
    _check(buf, [10, 5, 5, 40, 0], [10, 20, 0, 10, 3])


def test_positions_past_32_bits_give_large_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer whose positions 32-bit offsets cannot hold gives ``large_binary`` values
    (the limit is lowered here: such a buffer is 2 GiB)."""
    monkeypatch.setattr(spans, "_INT32_MAX", 10)
    buf = bytes(range(30))
    for starts, lengths in (([2, 12, 20], [3, 4, 5]), ([20, 2, 2], [5, 8, 3])):  # tiled, gathered
        arr = byte_spans(np.frombuffer(buf, np.uint8), np.asarray(starts, np.int64),
                         np.asarray(lengths, np.int64))
        arr.validate(full=True)
        assert arr.type == pa.large_binary()
        assert arr.to_pylist() == _expected(buf, starts, lengths)


def test_no_ranges() -> None:
    arr = byte_spans(np.zeros(4, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(arr) == 0 and span_bytes(arr).size == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=200), st.data())
def test_any_ranges_inside_the_buffer(buf: bytes, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 30))
    ordered = data.draw(st.booleans())
    starts, lengths = [], []
    pos = 0
    for _ in range(n):
        if ordered:
            start = data.draw(st.integers(pos, len(buf)))
        else:
            start = data.draw(st.integers(0, len(buf)))
        length = data.draw(st.integers(0, len(buf) - start))
        if data.draw(st.booleans()):  # an empty range anywhere
            start, length = data.draw(st.integers(0, len(buf))), 0
        starts.append(start)
        lengths.append(length)
        if length:
            pos = start + length
    _check(buf, starts, lengths)
