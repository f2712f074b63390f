"""What ``errors.tolerance=all`` skips, recorded and retrievable, never silent: whole files (or
splits) that cannot be read, single JSON lines that are not a record of the declared schema, and
single CSV rows whose values do not convert to it or whose number of fields is wrong."""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa


@dataclass(frozen=True)
class RejectedFile:
    """One skipped file (or split of a file).

    ``rows_emitted`` says how many rows of the split had already been emitted before the error
    (they are not taken back); ``split_id`` equals ``path`` for whole-file splits.
    """

    path: str
    split_id: str
    reason: str
    rows_emitted: int = 0

    def __str__(self) -> str:
        return f"{self.split_id}: {self.reason} ({self.rows_emitted} rows emitted before)"


@dataclass(frozen=True)
class SourceRejection:
    """A rejection the enumerator made itself, before any reader saw the file: a processed
    file that changed later (``changed``; its ``split_id`` is ``path@mtime_ns`` of the new
    version), or a file whose splits could not be planned. ``mtime_ns`` is the modification
    time of the version rejected."""

    rejected: RejectedFile
    mtime_ns: int
    changed: bool


#: Schema of a *rejected-records batch*: lines of a JSON-lines file (or rows of a CSV file) that
#: could not be read as a record of the declared schema (``errors.tolerance=all``). The reader
#: emits such batches in file order between the batches of good rows, so every line keeps its
#: row position; the pipeline writes them to the error table. ``value`` holds the line's bytes
#: exactly as read (a CSV row: its values written back as a CSV line), ``reason`` a code of
#: :mod:`hoodline.formats.json_decoder`, ``detail`` names the line (CSV: row) number.
REJECTED_RECORDS_SCHEMA = pa.schema(
    [
        pa.field("value", pa.binary()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
    ],
    metadata={b"hoodline.rejected-records": b"1"},
)


#: What a strict read (``errors.tolerance = none``) says after naming a bad line or row.
STRICT_HINT = ("; fix the file (and write it again under a new name), or set [errors] "
               "tolerance = 'all' to write bad lines and rows to the error table and go on")


def rejected_records_batch(
    values: pa.Array, reasons: pa.Array, details: pa.Array
) -> pa.RecordBatch:
    """A rejected-records batch (see :data:`REJECTED_RECORDS_SCHEMA`)."""
    return pa.RecordBatch.from_arrays(
        [values.cast(pa.binary()), reasons.cast(pa.string()), details.cast(pa.string())],
        schema=REJECTED_RECORDS_SCHEMA,
    )


def is_rejected_records(batch: pa.RecordBatch) -> bool:
    """True for a batch of rejected records rather than rows of the declared schema."""
    metadata = batch.schema.metadata
    return metadata is not None and b"hoodline.rejected-records" in metadata


def rows_as_json(rows: pa.RecordBatch | pa.Table) -> list[bytes]:
    """Each row of a parsed file (a Parquet row the error table keeps in place of raw bytes)
    as a JSON object: bytes as base64 text, NaN and infinities as the strings Python spells
    them, times and decimals as their text, so every value is valid JSON (``b'\\x00'`` and a
    bare ``NaN`` were not)."""
    return [json.dumps(_jsonable(r), ensure_ascii=False, allow_nan=False).encode()
            for r in rows.to_pylist()]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):  # a map comes as a list of (key, value) pairs
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def runs(bad: npt.NDArray[np.bool_] | npt.NDArray[np.int8]) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, bad)`` of each run of consecutive rows alike in ``bad``, in order: a
    reader yields good batches and rejected-records batches in the rows' order, so a restart
    that skips the rows emitted before counts both."""
    cuts = np.flatnonzero(np.diff(bad.astype(np.int8))) + 1
    bounds = np.concatenate(([0], cuts, [len(bad)])).tolist()
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            yield int(lo), int(hi), bool(bad[lo])
