"""The Confluent wire format's frame, read for many values at once (numpy over the buffer).

A framed value is the magic byte ``0``, the writer schema's id in the Schema Registry (4 bytes,
big-endian), then the payload (for Protobuf preceded by the message indexes). Values that are
null, shorter than 5 bytes or have another first byte are not framed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodline.formats.json_decoder import _layout

__all__ = ["NOT_WIRE_FORMAT", "NOT_WIRE_FORMAT_DETAIL", "Frames", "read_frames"]

#: Bad-record reason of values that are not framed.
NOT_WIRE_FORMAT = "not_wire_format"
NOT_WIRE_FORMAT_DETAIL = ("not in the Confluent wire format (magic byte 0, 4-byte schema id, "
                          "payload)")


@dataclass(frozen=True)
class Frames:
    """Per value: whether it is framed, its schema id (-1 if not), and where its bytes are."""

    framed: npt.NDArray[np.bool_]
    ids: npt.NDArray[np.int64]
    #: start (first byte of the frame) and end of each value in ``data``
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]


def read_frames(values: pa.Array) -> Frames:
    """The frames of binary ``values`` (one vectorised pass)."""
    n = len(values)
    offsets, data = _layout(values)
    starts, ends = offsets[:-1], offsets[1:]
    valid = np.ones(n, dtype=bool) if values.null_count == 0 else np.asarray(values.is_valid())
    framed = valid & (ends - starts >= 5)
    if framed.any():
        first = np.zeros(n, dtype=np.uint8)
        first[framed] = data[starts[framed]]
        framed &= first == 0
    ids = np.full(n, -1, dtype=np.int64)
    if framed.any():
        pos = starts[framed]
        head = data[pos[:, None] + np.arange(1, 5)[None, :]].astype(np.int64)
        ids[framed] = (head[:, 0] << 24) | (head[:, 1] << 16) | (head[:, 2] << 8) | head[:, 3]
    return Frames(framed, ids, starts, ends, data)


