"""What decoding the payloads of one writer schema yields (the Avro, JSON Schema and Protobuf
payload codecs share it; :mod:`hoodline.formats.registry_decoder` drives them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["GroupResult", "PayloadCodec"]

I64 = npt.NDArray[np.int64]


def _none() -> I64:
    return np.zeros(0, dtype=np.int64)


@dataclass
class GroupResult:
    """Payloads of one writer schema decoded: ``table`` (the writer's columns; a codec may
    leave out those the reader lacks) holds the rows ``good`` (positions in the group), ``bad``
    the others with a reason and detail each."""

    table: pa.Table | None
    good: I64
    bad: I64 = field(default_factory=_none)
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


class PayloadCodec(Protocol):
    """Decodes the payloads (after the 5-byte frame header) of one writer schema."""

    #: the writer schema's columns, as the decoded tables have them
    arrow: pa.Schema

    def decode(self, data: npt.NDArray[np.uint8], starts: I64, ends: I64) -> GroupResult:
        """The payloads at ``data[starts[i]:ends[i]]``."""
        ...
