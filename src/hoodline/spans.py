"""Byte ranges of one buffer copied out into an Arrow binary array, vectorised.

The columnar decoders (Avro log blocks and Schema Registry values, Protobuf, the Confluent
framing) all end a field the same way: one byte range per record inside a block's buffer
becomes one value of a binary or string column.

When the ranges come in buffer order and do not overlap -- every decoder reading records one
after the other -- the ranges and the gaps between them tile the buffer: one Arrow array over
the buffer, with offsets ``start0, stop0, start1, stop1, ...``, holds the ranges at its even
positions, and one ``take`` copies them out in C++ (measured on the Avro log-block decode: 0.59 ->
0.28 s per 1M records, several string fields each). Ranges in any other order are gathered byte
by byte through bounded numpy index arrays.

The result has 32-bit offsets (``binary``) whenever they can hold its positions, as Arrow's
``string`` columns do: a string column then views it as it is (see the Avro log-block decode),
instead of a cast that copies every offset.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

#: bytes one numpy gather handles at a time (its index array is 8 bytes per byte)
_GATHER_BYTES = 1 << 20


#: the largest offset a ``binary`` array holds
_INT32_MAX = (1 << 31) - 1


def byte_spans(buf: U8, starts: I64, lengths: I64) -> pa.Array:
    """``buf[starts[i]:starts[i] + lengths[i]]`` for every ``i`` as a ``binary`` array (a
    ``large_binary`` one when 32-bit offsets cannot hold the positions) without nulls (the
    start of an empty range does not matter). ``buf`` is contiguous (e.g. ``np.frombuffer``).
    The caller has checked that every range lies inside ``buf`` and that no length is
    negative."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    stops = starts + lengths
    empty = lengths == 0
    if empty.any():  # an empty range may sit anywhere: put it where the previous one ended
        reached = np.maximum.accumulate(np.where(empty, 0, stops))
        starts = np.where(empty, reached, starts)
        stops = np.where(empty, reached, stops)
    if not (stops[:-1] <= starts[1:]).all():
        return _gathered(buf, starts, lengths)
    # the ranges and gaps hold positions of ``buf``; the result, at most its bytes
    small = len(buf) <= _INT32_MAX
    width = np.int32 if small else np.int64
    bounds = np.empty(2 * n, dtype=width)
    bounds[0::2] = starts
    bounds[1::2] = stops
    tiled = pa.Array.from_buffers(
        pa.binary() if small else pa.large_binary(), 2 * n - 1,
        [None, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    return pc.take(tiled, pa.array(np.arange(0, 2 * n, 2, dtype=width)))


def span_bytes(spans: pa.Array) -> U8:
    """The values of a :func:`byte_spans` array (or of any binary or string array, large or
    not, of its slice only) one after the other (no copy)."""
    _, offsets, data = spans.buffers()
    large = pa.types.is_large_binary(spans.type) or pa.types.is_large_string(spans.type)
    width = np.int64 if large else np.int32
    bounds = np.frombuffer(offsets, width)[spans.offset:spans.offset + len(spans) + 1]
    if data is None or len(bounds) == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(data, np.uint8)[int(bounds[0]):int(bounds[-1])]


def _gathered(buf: U8, starts: I64, lengths: I64) -> pa.Array:
    n = len(starts)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    a = 0
    while a < n:
        # rows a..b hold at most _GATHER_BYTES bytes (or one row, if it alone holds more)
        b = max(a + 1, int(np.searchsorted(offsets, offsets[a] + _GATHER_BYTES, "right")) - 1)
        b = min(b, n)
        lo, hi = int(offsets[a]), int(offsets[b])
        if hi > lo:
            shift = starts[a:b] - (offsets[a:b] - lo)
            data[lo:hi] = buf[np.repeat(shift, lengths[a:b]) + np.arange(hi - lo)]
        a = b
    if offsets[-1] <= _INT32_MAX:
        return pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    return pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
