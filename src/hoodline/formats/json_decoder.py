"""Bulk JSON decoding of message values into a declared Arrow schema, isolating bad records.

The happy path is one vectorised parse: the values are joined with newlines and handed to
``pyarrow.json.read_json`` with the declared schema as explicit schema (undeclared fields ignored).
Only when that parse fails (or yields a different number of rows) is the batch bisected, so good
records still go on and every bad record is reported with its row index and a reason. No record
is ever dropped silently: every input row ends up either in ``records`` or in ``errors``.

Facts about pyarrow 26's JSON reader this module guards against (each has a test):

* a value that is exactly ``null`` crashes the process (segfault) and a top-level ``null`` between
  objects becomes a silent all-null row; empty / whitespace-only lines are skipped silently; two
  documents on one line become two rows. Values that do not start with ``{`` and end with ``}``
  are therefore rejected up front (vectorised regex) and every parse checks its row count.
* raw newlines inside a value would split it; such values (legal JSON whitespace, e.g.
  pretty-printed messages) are validated individually with :func:`json.loads`, which proves
  every raw newline is whitespace, and then parsed in bulk with newlines replaced by spaces.
* invalid UTF-8 in an undeclared field is not noticed by the reader; we validate UTF-8 first.

Differences from :func:`json.loads` (documented, reported as bad records): duplicate keys,
``NaN``/``Infinity`` and lone UTF-16 surrogates are refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from hoodline.errors import ConfigError

#: Reason codes of bad records.
UNPARSEABLE = "unparseable"
NOT_OBJECT = "not_object"
WRONG_TYPE = "wrong_type"
MISSING_KEY = "missing_key"
NULL_VALUE = "null_value"

REASONS = (UNPARSEABLE, NOT_OBJECT, WRONG_TYPE, MISSING_KEY, NULL_VALUE)

_OBJECT_SHAPE = r"^[ \t\r\n]*\{(?s:.*)\}[ \t\r\n]*$"
_MIN_BLOCK = 1 << 20
_DETAIL_MAX = 300


@dataclass(frozen=True)
class BadRecords:
    """Rows that could not be decoded: ``index`` (input row), ``reason`` code, ``detail`` text."""

    index: pa.Int64Array
    reason: pa.StringArray
    detail: pa.StringArray

    def __len__(self) -> int:
        return len(self.index)


@dataclass(frozen=True)
class DecodeResult:
    """Decoded rows (``records``, declared schema) with their input row indexes, plus bad rows."""

    records: pa.Table
    #: For each row of ``records``, its index in the input (ascending).
    row_index: pa.Int64Array
    errors: BadRecords


def _empty_bad() -> BadRecords:
    return BadRecords(
        pa.array([], pa.int64()), pa.array([], pa.string()), pa.array([], pa.string())
    )


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


class JsonDecoder:
    """Decode binary message values into ``schema``.

    ``required`` fields (record key fields) must be present and non-null; a row without them is a
    bad record with reason ``missing_key``. Undeclared fields are ignored.
    """

    def __init__(self, schema: pa.Schema, required: Sequence[str] = ()) -> None:
        missing = [name for name in required if schema.get_field_index(name) < 0]
        if missing:
            raise ConfigError(
                f"required (key) field(s) {', '.join(repr(m) for m in missing)} are not in the "
                f"declared schema (fields: {', '.join(schema.names)}); declare them in [schema]"
            )
        self.schema = schema
        self.required = tuple(required)
        self._parse_schema = _nullable(schema)
        self._parse_options = pj.ParseOptions(
            explicit_schema=self._parse_schema, unexpected_field_behavior="ignore"
        )

    # -- public ----------------------------------------------------------------------------------
    def decode(self, values: pa.Array | pa.ChunkedArray) -> DecodeResult:
        """Decode ``values`` (binary / large_binary / string, nulls allowed) in bulk."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type)
                                 else pa.binary())
        if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
            raise TypeError(f"message values must be binary, got {values.type}")
        n = len(values)
        all_idx = pa.array(np.arange(n, dtype=np.int64))

        bad_idx: list[pa.Array] = []
        bad_reason: list[pa.Array] = []
        bad_detail: list[pa.Array] = []

        # 1. nulls (no value) and values that are not {...} are bad before any parse.
        is_null = values.is_null()
        shaped = pc.fill_null(pc.match_substring_regex(values, _OBJECT_SHAPE), False)
        rejected = pc.and_(pc.invert(shaped), pc.invert(is_null))
        if pc.any(is_null).as_py():
            idx = pc.filter(all_idx, is_null)
            bad_idx.append(idx)
            bad_reason.append(pa.array([NULL_VALUE] * len(idx), pa.string()))
            bad_detail.append(pa.array(["message has no value (null)"] * len(idx), pa.string()))
        if pc.any(rejected).as_py():
            idx = pc.filter(all_idx, rejected)
            reasons, details = zip(
                *(self._classify_shape(values[i].as_py()) for i in idx.to_pylist()), strict=True
            )
            bad_idx.append(idx)
            bad_reason.append(pa.array(reasons, pa.string()))
            bad_detail.append(pa.array(details, pa.string()))

        candidates = pc.filter(all_idx, shaped)
        cand_values = pc.filter(values, shaped)

        # 2. values with raw newlines: validate alone (rare), then flatten their whitespace.
        has_newline = pc.match_substring_regex(cand_values, r"[\r\n]")
        if pc.any(has_newline).as_py():
            cand_values, candidates, nl_bad = self._flatten_newlines(
                cand_values, candidates, has_newline
            )
            if nl_bad is not None:
                bad_idx.append(nl_bad.index)
                bad_reason.append(nl_bad.reason)
                bad_detail.append(nl_bad.detail)

        # 3. bulk parse, bisecting only around failures.
        tables: list[pa.Table] = []
        good_idx: list[pa.Array] = []
        failures: list[tuple[int, str]] = []
        self._parse_range(cand_values, 0, len(cand_values), tables, good_idx, failures)
        if failures:
            pos = [p for p, _ in failures]
            reasons, details = zip(
                *(self._classify_single(cand_values[p].as_py(), err) for p, err in failures),
                strict=True,
            )
            bad_idx.append(pc.take(candidates, pa.array(pos, pa.int64())))
            bad_reason.append(pa.array(reasons, pa.string()))
            bad_detail.append(pa.array(details, pa.string()))

        records = (
            pa.concat_tables(tables) if tables else self._parse_schema.empty_table()
        )
        local_idx = (
            pa.concat_arrays(good_idx) if good_idx else pa.array([], pa.int64())
        )
        row_index = pc.take(candidates, local_idx)

        # 4. required (key) fields present and non-null.
        if self.required and records.num_rows:
            missing_mask = None
            for name in self.required:
                m = records.column(name).is_null()
                missing_mask = m if missing_mask is None else pc.or_(missing_mask, m)
            assert missing_mask is not None
            if pc.any(missing_mask).as_py():
                bad_rows = pc.filter(records, missing_mask)
                bad_idx.append(pc.filter(row_index, missing_mask))
                bad_reason.append(pa.array([MISSING_KEY] * bad_rows.num_rows, pa.string()))
                bad_detail.append(self._missing_details(bad_rows))
                keep = pc.invert(missing_mask)
                records = pc.filter(records, keep)
                row_index = pc.filter(row_index, keep)

        records = self._to_declared(records)
        errors = self._sorted_errors(bad_idx, bad_reason, bad_detail)
        assert records.num_rows + len(errors) == n, "decoder lost or duplicated records"
        return DecodeResult(records, _as_int64(row_index), errors)

    # -- bulk parse ------------------------------------------------------------------------------
    def _parse_range(
        self,
        values: pa.Array,
        lo: int,
        hi: int,
        tables: list[pa.Table],
        good_idx: list[pa.Array],
        failures: list[tuple[int, str]],
    ) -> None:
        if hi <= lo:
            return
        chunk = values.slice(lo, hi - lo)
        try:
            table = self._parse_lines(chunk)
            if table.num_rows != hi - lo:
                raise _RowCountMismatch(table.num_rows)
        except (pa.ArrowInvalid, _RowCountMismatch, UnicodeDecodeError) as exc:
            if hi - lo == 1:
                failures.append((lo, _error_text(exc)))
                return
            mid = (lo + hi) // 2
            self._parse_range(values, lo, mid, tables, good_idx, failures)
            self._parse_range(values, mid, hi, tables, good_idx, failures)
            return
        tables.append(table)
        good_idx.append(pa.array(np.arange(lo, hi, dtype=np.int64)))

    def _parse_lines(self, chunk: pa.Array) -> pa.Table:
        offsets = pa.array([0, len(chunk)], pa.int32())
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, chunk), b"\n")
        # Validate UTF-8 of the whole chunk (the reader skips undeclared fields' bytes).
        joined.cast(pa.large_string() if pa.types.is_large_binary(joined.type) else pa.string())
        buf = joined[0].as_buffer()
        assert buf is not None
        read_options = pj.ReadOptions(
            use_threads=False, block_size=max(_MIN_BLOCK, buf.size + 1)
        )
        return pj.read_json(
            pa.BufferReader(buf), read_options=read_options, parse_options=self._parse_options
        )

    # -- slow paths (bad or unusual rows only) ---------------------------------------------------
    def _flatten_newlines(
        self, values: pa.Array, idx: pa.Array, has_newline: pa.Array
    ) -> tuple[pa.Array, pa.Array, BadRecords | None]:
        ok_mask: list[bool] = []
        bad_pos: list[int] = []
        reasons: list[str] = []
        details: list[str] = []
        flags = has_newline.to_pylist()
        for pos, flag in enumerate(flags):
            if not flag:
                ok_mask.append(True)
                continue
            reason, detail = self._classify_json(values[pos].as_py())
            if reason is None:
                ok_mask.append(True)
            else:
                ok_mask.append(False)
                bad_pos.append(pos)
                reasons.append(reason)
                details.append(detail)
        bad = None
        if bad_pos:
            bad = BadRecords(
                _as_int64(pc.take(idx, pa.array(bad_pos, pa.int64()))),
                pa.array(reasons, pa.string()),
                pa.array(details, pa.string()),
            )
        mask = pa.array(ok_mask, pa.bool_())
        kept = pc.filter(values, mask)
        # Every raw CR/LF in a value json.loads accepted is whitespace: replace with spaces.
        kept = pc.replace_substring_regex(kept, r"[\r\n]", " ")
        return kept, pc.filter(idx, mask), bad

    def _classify_shape(self, raw: bytes) -> tuple[str, str]:
        reason, detail = self._classify_json(raw)
        if reason is not None:
            return reason, detail
        return UNPARSEABLE, "value is not a single JSON object"

    def _classify_json(self, raw: bytes) -> tuple[str | None, str]:
        """(None, "") when ``raw`` is one JSON object per :func:`json.loads`, else reason/detail."""
        try:
            doc = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            return UNPARSEABLE, _short(f"invalid JSON: {exc}")
        if not isinstance(doc, dict):
            return NOT_OBJECT, f"JSON value is a {type(doc).__name__}, not an object"
        return None, ""

    def _classify_single(self, raw: bytes, arrow_error: str) -> tuple[str, str]:
        reason, detail = self._classify_json(raw)
        if reason is not None:
            return reason, detail
        if "changed from" in arrow_error or "Failed to convert" in arrow_error:
            return WRONG_TYPE, _short(f"does not match the declared schema: {arrow_error}")
        return UNPARSEABLE, _short(arrow_error)

    def _missing_details(self, bad_rows: pa.Table) -> pa.Array:
        details = []
        nulls = {name: bad_rows.column(name).is_null().to_pylist() for name in self.required}
        for i in range(bad_rows.num_rows):
            names = [name for name in self.required if nulls[name][i]]
            details.append(f"key field(s) {', '.join(names)} missing or null")
        return pa.array(details, pa.string())

    # -- output ----------------------------------------------------------------------------------
    def _to_declared(self, records: pa.Table) -> pa.Table:
        records = records.select(self.schema.names)
        if records.schema.equals(self.schema):
            return records
        return records.cast(self.schema)

    @staticmethod
    def _sorted_errors(
        idx: list[pa.Array], reason: list[pa.Array], detail: list[pa.Array]
    ) -> BadRecords:
        if not idx:
            return _empty_bad()
        table = pa.table(
            {
                "index": _as_int64(pa.concat_arrays([_as_int64(a) for a in idx])),
                "reason": pa.concat_arrays(reason),
                "detail": pa.concat_arrays(detail),
            }
        ).sort_by("index")
        return BadRecords(
            _as_int64(table.column("index").combine_chunks()),
            table.column("reason").combine_chunks(),
            table.column("detail").combine_chunks(),
        )


class _RowCountMismatch(Exception):
    def __init__(self, rows: int) -> None:
        super().__init__(
            f"value parsed into {rows} rows; expected exactly one JSON object per message"
        )


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    if "Invalid UTF8" in text:
        return "invalid UTF-8"
    return text


def _as_int64(arr: pa.Array | pa.ChunkedArray) -> pa.Int64Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    out: pa.Int64Array = arr.cast(pa.int64())
    return out


def decode_raw(values: pa.Array | pa.ChunkedArray, column: str = "value") -> pa.Table:
    """Raw-bytes passthrough: the values as one binary column, nulls kept (no parsing)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        raise TypeError(f"message values must be binary, got {values.type}")
    return pa.table({column: values})


def iter_bad(errors: BadRecords) -> Iterable[tuple[int, str, str]]:
    """(index, reason, detail) tuples; for messages and tests, not for the hot path."""
    return zip(
        errors.index.to_pylist(), errors.reason.to_pylist(), errors.detail.to_pylist(), strict=True
    )
