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
  are therefore rejected up front (vectorised prefix/suffix test) and every parse checks its
  row count.
* raw newlines inside a value would split it; such values (legal JSON whitespace, e.g.
  pretty-printed messages) are validated individually with :func:`json.loads`, which proves
  every raw newline is whitespace, and then parsed in bulk with newlines replaced by spaces.
* invalid UTF-8 in an undeclared field is not noticed by the reader; we validate UTF-8 first.

Value formats per declared type: numbers for integer/floating types; ``true``/``false`` for bool;
ISO-8601 strings for timestamps and dates (``"2024-03-01"``, ``"2024-03-01T10:00:00Z"``);
numbers or numeric strings for decimals (more fractional digits than the scale are refused).

Differences from :func:`json.loads` (documented, reported as bad records): lone UTF-16
surrogates are refused; so are a key twice in one object and ``NaN``/``Infinity``/``-Infinity``
when they are in a declared field (pyarrow's reader takes ``NaN`` as a float: the float columns
are checked after the parse, and those rows refused as json.loads refuses them). In fields the
schema does not declare, which are not read, both are let through, by every path a record may
take; a number too big for a ``float32`` field (which pyarrow would read as infinity) is a
wrong type, one too big for a double is refused by the reader.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
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
#: a partition value the table's key generator cannot read as a time
UNREADABLE_PARTITION = "unreadable_partition"

_OBJECT_SHAPE = r"^[ \t\r\n]*\{(?s:.*)\}[ \t\r\n]*$"
_MIN_BLOCK = 1 << 20
_FANOUT = 8
#: Failed rows in one decode after which the pending rows are checked with json.loads first.
_DENSE_FAILURES = 8
#: bytes scanned at a time for raw newlines (see _rows_with_newline)
_SCAN_CHUNK = 1 << 18
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


def _parse_type(t: pa.DataType) -> pa.DataType:
    # pyarrow's reader only takes day numbers for dates; we want ISO strings ("2024-03-01"):
    # read them as timestamps and cast to the declared date type afterwards.
    if pa.types.is_date(t):
        return pa.timestamp("ms")
    return t


def parse_schema(schema: pa.Schema) -> pa.Schema:
    """The schema to hand ``pyarrow.json`` for ``schema``: every field nullable (required keys
    are checked separately, with a clear reason) and dates read from ISO strings (as timestamps,
    cast to the declared date type afterwards). Shared by every JSON reader of hoodline, so
    messages and files accept the same value formats."""
    for f in schema:
        odd = [t for t in _leaf_types(f.type)
               if pa.types.is_map(t) or pa.types.is_fixed_size_binary(t)]
        if odd:
            raise ConfigError(
                f"schema field '{f.name}' is declared {f.type}: JSON values cannot be read as "
                f"{odd[0]}; declare a map as a struct of its keys, fixed-size bytes as binary "
                "(pyarrow's JSON reader converts neither)")
    return pa.schema(
        [pa.field(f.name, _parse_type(f.type), nullable=True) for f in schema],
        metadata=schema.metadata,
    )


def _short(text: str) -> str:
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."


_CHANGED = re.compile(r"Column\(/([^)]*)\) changed from (\w+) to (\w+)")
_TWICE = re.compile(r"Column\(/([^)]*)\) was specified twice")
_IN_ROW = re.compile(r" in row \d+")
#: pyarrow's conversion errors, which do not name the field: "Failed to convert JSON to int64,
#: couldn't parse:1e30", "... to decimal128(5, 2): 1.234 requires scale 3", and for decimal
#: strings "The string 'x' is not a valid decimal128 number"
_CONVERT = re.compile(
    r"Failed to convert JSON to (.+?)(?:, couldn't parse:(.*)|: (\S+) (requires .*))$", re.S)
_NOT_VALID = re.compile(r"The string '(.*)' is not a valid (\w+) number$", re.S)
#: the longest value quoted in a detail
_VALUE_MAX = 80
_INTEGER_ALIAS = re.compile(r"u?int(8|16|32|64)")


def _one_record_error(arrow_error: str) -> str:
    """pyarrow's error for one record parsed alone, without its "in row 0" (the row of that
    one-record parse, not of the file or batch) and with its column change or repeated key in
    words."""
    text = _IN_ROW.sub("", arrow_error.removeprefix("JSON parse error: "))
    text = _TWICE.sub(_twice, text)
    return _CHANGED.sub(
        lambda m: f"field '{m.group(1)}' holds {_article(m.group(3))} {m.group(3)} where the "
                  f"schema wants {_article(m.group(2))} {m.group(2)}", text)


def _twice(m: re.Match[str]) -> str:
    *outer, key = m.group(1).split("/")
    where = f" of field '{'/'.join(outer)}'" if outer else ""
    return f"key '{key}' appears twice in the object{where}; send each key once"


#: the fraction of a second in an ISO-8601 time, and the digits each timestamp unit keeps
_SECOND_FRACTION = re.compile(r"\d:\d\d[.,](\d+)")
_FRACTION_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _is_time(text: str) -> bool:
    """Whether ``text`` is an ISO-8601 time Arrow reads (with an offset, or without)."""
    for zone in ("UTC", None):
        try:
            pa.array([text]).cast(pa.timestamp("ns", tz=zone))
            return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return False


def _shown(value: object) -> str:
    """A decoded JSON value as JSON text for a detail, cut to ``_VALUE_MAX`` characters."""
    return _clipped(json.dumps(value, ensure_ascii=False))


def _clipped(text: str) -> str:
    return text if len(text) <= _VALUE_MAX else text[: _VALUE_MAX - 3] + "..."


def _article(type_text: str) -> str:
    return "an" if type_text[:1] in ("a", "e", "i", "o") else "a"


def _leaf_types(t: pa.DataType) -> Iterator[pa.DataType]:
    """The types of a field's values that are no list or struct (the type itself if none)."""
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _leaf_types(t.field(i).type)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _leaf_types(t.value_type)
    else:
        yield t


def _infinite_at(value: object, path: str = "") -> str | None:
    """The path ('a/b/0') of the first number of a decoded JSON value that overflowed to
    infinity, or None."""
    if isinstance(value, float) and math.isinf(value):
        return path or None
    items: Iterable[tuple[object, object]] = (
        value.items() if isinstance(value, dict) else
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        found = _infinite_at(item, f"{path}/{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON (JSON has no NaN or Infinity: send null, or a "
                     "finite number)")


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
        self._parse_schema = parse_schema(schema)
        self._parse_options = pj.ParseOptions(
            explicit_schema=self._parse_schema, unexpected_field_behavior="ignore"
        )
        #: fields holding floats (also in lists and structs): checked for NaN and infinity
        self._float_fields = [str(f.name) for f in self._parse_schema
                              if any(pa.types.is_floating(t) for t in _leaf_types(f.type))]
        #: top-level date fields (read as timestamps): a time of day there would be cut off
        self._date_fields = [str(f.name) for f in schema if pa.types.is_date(f.type)]

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

        # The checks before the parse work on the value buffer itself (numpy, no per-value
        # Python): one pass over the first/last bytes, one over the data for CR/LF.
        offsets, data = _layout(values)
        valid = None if values.null_count == 0 else np.asarray(values.is_valid())

        # 1. nulls (no value) and values that are not {...} are bad before any parse.
        shaped_np = _object_shaped(values, offsets, data, valid)
        all_shaped = bool(shaped_np.all())
        if valid is not None:
            idx = pa.array(np.flatnonzero(~valid))
            bad_idx.append(idx)
            bad_reason.append(pa.array([NULL_VALUE] * len(idx), pa.string()))
            bad_detail.append(pa.array(["message has no value (null)"] * len(idx), pa.string()))
        rejected_np = ~shaped_np if valid is None else ~shaped_np & valid
        if rejected_np.any():
            idx = pa.array(np.flatnonzero(rejected_np))
            reasons, details = zip(
                *(self._classify_shape(values[i].as_py()) for i in idx.to_pylist()), strict=True
            )
            bad_idx.append(idx)
            bad_reason.append(pa.array(reasons, pa.string()))
            bad_detail.append(pa.array(details, pa.string()))

        if all_shaped:
            candidates, cand_values = all_idx, values
        else:
            shaped = pa.array(shaped_np, pa.bool_())
            candidates = pc.filter(all_idx, shaped)
            cand_values = pc.filter(values, shaped)

        # 2. values with raw newlines: validate alone (rare), then flatten their whitespace.
        newline_rows = _rows_with_newline(offsets, data)
        if newline_rows.size:
            flags = np.zeros(n, dtype=bool)
            flags[newline_rows] = True
            if not all_shaped:
                flags = flags[shaped_np]
            if flags.any():
                cand_values, candidates, nl_bad = self._flatten_newlines(
                    cand_values, candidates, flags
                )
                if nl_bad is not None:
                    bad_idx.append(nl_bad.index)
                    bad_reason.append(nl_bad.reason)
                    bad_detail.append(nl_bad.detail)

        # 3. invalid UTF-8 anywhere (also in undeclared fields) makes a record bad.
        if len(cand_values) and not is_utf8(cand_values):
            problems = _utf8_problems(cand_values)
            valid_utf8 = pa.array([p is None for p in problems], pa.bool_())
            invalid = pc.invert(valid_utf8)
            idx = pc.filter(candidates, invalid)
            bad_idx.append(idx)
            bad_reason.append(pa.array([UNPARSEABLE] * len(idx), pa.string()))
            bad_detail.append(pa.array([p for p in problems if p is not None], pa.string()))
            candidates = pc.filter(candidates, valid_utf8)
            cand_values = pc.filter(cand_values, valid_utf8)

        # 4. bulk parse; on failure, narrow down to the bad records (see _parse_all).
        tables, good_idx, failures = self._parse_all(cand_values)
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

        # 4b. no NaN or infinity in a float column (see _nonfinite_floats).
        if self._float_fields and records.num_rows:
            odd = self._nonfinite_floats(records, cand_values, local_idx)
            if odd is not None:
                odd_mask, odd_reasons, odd_details = odd
                bad_idx.append(pc.filter(row_index, pa.array(odd_mask)))
                bad_reason.append(pa.array(odd_reasons, pa.string()))
                bad_detail.append(pa.array(odd_details, pa.string()))
                keep = pa.array(~odd_mask)
                records = records.filter(keep)
                row_index = pc.filter(row_index, keep)

        # 4c. a date field given a time of day other than midnight UTC ("2024-03-01T23:30:00
        # -05:00" was stored as 2024-03-02 without a word; data-types review).
        for name in self._date_fields:
            if not records.num_rows:
                break
            timed = timed_date_rows(records.column(name))
            if timed.any():
                declared = self.schema.field(name).type
                bad_idx.append(pc.filter(row_index, pa.array(timed)))
                bad_reason.append(pa.array([WRONG_TYPE] * int(timed.sum()), pa.string()))
                bad_detail.append(pa.array(
                    [f"does not match the table's schema: field '{name}' holds a time of day "
                     f"({v} UTC), which is not "
                     f"{_article(str(declared))} {declared} (an ISO-8601 date such as "
                     "\"2024-03-01\"); declare the field a timestamp to keep the time"
                     for v in pc.filter(records.column(name), pa.array(timed)).to_pylist()],
                    pa.string()))
                keep = pa.array(~timed)
                records = records.filter(keep)
                row_index = pc.filter(row_index, keep)

        # 5. required (key) fields present and non-null.
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
    def _parse_all(
        self, values: pa.Array, checked: bool = False
    ) -> tuple[list[pa.Table], list[pa.Array], list[tuple[int, str]]]:
        """Parse all ``values``; returns good tables + their positions, and failed positions.

        The values are joined once; any row range is a zero-copy slice of that buffer. A failing
        range is narrowed down using the reader's "in row N" hint when it gives one (the rows
        before N are parsed again on their own, row N is tried alone, the rest continues), else
        by splitting it into ``_FANOUT`` parts. Rows are only declared bad after failing alone.

        Each bad row costs about three reader calls (~0.2 ms each however short the range), so
        dense bad rows are slow to narrow down. Once ``_DENSE_FAILURES`` rows failed, the rows
        still pending are first checked with :func:`json.loads` one by one (a few microseconds
        each): rows that are not one JSON object fail there, and the others are parsed together
        (``checked``; a value of the wrong type is still found by narrowing).
        """
        n = len(values)
        tables: list[tuple[int, pa.Table, pa.Array]] = []  # (first row, table, its rows)
        failures: list[tuple[int, str]] = []
        if n == 0:
            return [], [], []
        lengths = np.asarray(pc.binary_length(values), dtype=np.int64)
        line_end = np.cumsum(lengths + 1) - 1  # each line is followed by one newline
        line_start = line_end - lengths
        joined = pc.binary_join(
            pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), values),
            pa.scalar(b"\n", values.type),
        )
        buf = _only_value(joined)

        stack = [(0, n)]
        while stack:
            lo, hi = stack.pop()
            if hi <= lo:
                continue
            start, end = int(line_start[lo]), int(line_end[hi - 1])
            try:
                table = self._read(buf.slice(start, end - start))
                if table.num_rows != hi - lo:
                    raise _RowCountMismatch(table.num_rows)
            except (pa.ArrowInvalid, _RowCountMismatch) as exc:
                if hi - lo == 1:
                    failures.append((lo, str(exc)))
                    continue
                if not checked and len(failures) >= _DENSE_FAILURES:
                    pending, stack = [(lo, hi), *stack], []
                    objects = np.sort(np.concatenate(
                        [self._objects(values, a, b, failures) for a, b in pending]))
                    if len(objects):
                        rows = pa.array(objects)
                        sub_tables, sub_idx, sub_fail = self._parse_all(values.take(rows), True)
                        for t, idx in zip(sub_tables, sub_idx, strict=True):
                            at = pc.take(rows, idx)
                            tables.append((int(at[0].as_py()), t, at))
                        failures += [(int(objects[i]), err) for i, err in sub_fail]
                    continue
                hint = _row_hint(exc)
                if hint is not None and 0 <= hint < hi - lo:
                    bad = lo + hint
                    stack.extend([(bad + 1, hi), (bad, bad + 1), (lo, bad)])
                else:
                    step = max(1, -(-(hi - lo) // _FANOUT))
                    stack.extend(
                        (a, min(a + step, hi)) for a in reversed(range(lo, hi, step))
                    )
                continue
            tables.append((lo, table, pa.array(np.arange(lo, hi, dtype=np.int64))))
        tables.sort(key=lambda t: t[0])
        failures.sort()
        # Ranges are taken left to right (the lower part of a split is pushed last), so every
        # range parsed before the json.loads check lies before every row the check kept: the
        # tables' rows ascend.
        return [t for _, t, _ in tables], [rows for _, _, rows in tables], failures

    def _objects(
        self, values: pa.Array, lo: int, hi: int, failures: list[tuple[int, str]]
    ) -> npt.NDArray[np.int64]:
        """Rows ``lo .. hi-1`` that are one JSON object per :func:`json.loads`; the others go
        to ``failures``."""
        keep: list[int] = []
        for pos, raw in enumerate(values.slice(lo, hi - lo).to_pylist(), start=lo):
            reason, detail = self._classify_json(raw, constants=True)
            if reason is None:
                keep.append(pos)
            else:
                failures.append((pos, detail))
        return np.array(keep, dtype=np.int64)

    def _read(self, buf: pa.Buffer) -> pa.Table:
        return _read_json(buf, self._parse_options)

    # -- slow paths (bad or unusual rows only) ---------------------------------------------------
    def _flatten_newlines(
        self, values: pa.Array, idx: pa.Array, has_newline: npt.NDArray[np.bool_]
    ) -> tuple[pa.Array, pa.Array, BadRecords | None]:
        kept, kept_idx, bad = self._checked_alone(values, idx, np.flatnonzero(has_newline))
        # Every raw CR/LF in a value json.loads accepted is whitespace: replace with spaces.
        kept = pc.replace_substring_regex(kept, r"[\r\n]", " ")
        return kept, kept_idx, bad

    def _checked_alone(
        self, values: pa.Array, idx: pa.Array, positions: npt.NDArray[np.intp]
    ) -> tuple[pa.Array, pa.Array, BadRecords | None]:
        """``values`` (input rows ``idx``) without those of ``positions`` that are not one JSON
        object per :meth:`_classify_json`, and those as bad records."""
        bad_pos: list[int] = []
        reasons: list[str] = []
        details: list[str] = []
        for pos in positions.tolist():
            reason, detail = self._classify_json(values[pos].as_py(), constants=True)
            if reason is not None:
                bad_pos.append(pos)
                reasons.append(reason)
                details.append(detail)
        if not bad_pos:
            return values, idx, None
        bad = BadRecords(
            _as_int64(pc.take(idx, pa.array(bad_pos, pa.int64()))),
            pa.array(reasons, pa.string()),
            pa.array(details, pa.string()),
        )
        keep = np.ones(len(values), dtype=bool)
        keep[bad_pos] = False
        mask = pa.array(keep, pa.bool_())
        return pc.filter(values, mask), pc.filter(idx, mask), bad

    def _nonfinite_floats(
        self, records: pa.Table, values: pa.Array, local_idx: pa.Array
    ) -> tuple[npt.NDArray[np.bool_], list[str], list[str]] | None:
        """Rows of ``records`` with a float that is NaN or infinite (None when there are
        none), with reasons and details. pyarrow's reader takes ``NaN``, ``Infinity``,
        ``-Infinity`` (and ``Inf``, ``-NaN``) as numbers; such a row is refused as
        :meth:`_classify_json` refuses it. A number too big for a float32 column (pyarrow reads
        1e39 as inf there) is a wrong type. Costs one vectorised look at each float column;
        ``values[local_idx]`` are the rows' bytes, read again for the rows found only."""
        masks = {name: nonfinite_rows(records.column(name)) for name in self._float_fields}
        odd = np.zeros(records.num_rows, dtype=bool)
        for mask in masks.values():
            odd |= mask
        if not odd.any():
            return None
        reasons: list[str] = []
        details: list[str] = []
        positions = np.asarray(local_idx)
        for row in np.flatnonzero(odd).tolist():
            reason, detail, doc = self._load(values[int(positions[row])].as_py())
            if reason is None:
                name = next(n for n, m in masks.items() if m[row])
                field_type = self._parse_schema.field(name).type
                kind = next(t for t in _leaf_types(field_type) if pa.types.is_floating(t))
                limit = f"{kind} (up to about {float(np.finfo(kind.to_pandas_dtype()).max):.1e})"
                if pa.types.is_floating(field_type):
                    held = f"holds {_shown(doc.get(name))}, which is too big for {limit}"
                else:
                    held = f"holds a number too big for {limit}: {_shown(doc.get(name))}"
                reason, detail = WRONG_TYPE, (
                    f"does not match the table's schema: field '{name}' {held}")
            reasons.append(reason)
            details.append(_short(detail))
        return odd, reasons, details

    def _classify_shape(self, raw: bytes) -> tuple[str, str]:
        reason, detail = self._classify_json(raw)
        if reason is not None:
            return reason, detail
        return UNPARSEABLE, "value is not a single JSON object"

    def _classify_json(self, raw: bytes, constants: bool = False) -> tuple[str | None, str]:
        """(None, "") when ``raw`` is one JSON object per :func:`json.loads`, else reason/detail.

        ``constants``: ``NaN``/``Infinity`` let through, for the checks whose rows go on to the
        bulk parse: there, as in every other row, they are refused in declared fields only
        (:meth:`_nonfinite_floats`; pyarrow refuses them in other types), so a record's fate
        does not depend on the path it took."""
        reason, detail, _ = self._load(raw, constants)
        return reason, detail

    def _load(
        self, raw: bytes, constants: bool = False
    ) -> tuple[str | None, str, dict[str, object]]:
        """:meth:`_classify_json`, plus the object when it is one."""
        try:
            # decoded here, not by json.loads: it would sniff UTF-16/32 from the first bytes
            # (b"\xff\xfe{..." read as UTF-16 with a byte order mark)
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return UNPARSEABLE, _not_utf8(raw, exc), {}
        try:
            doc = json.loads(text, parse_constant=float if constants else _reject_constant)
        except ValueError as exc:
            if not text.strip():  # an empty message: not a JSON error a producer can look for
                return UNPARSEABLE, ("invalid JSON: the value is empty" if not text else
                                     "invalid JSON: the value holds only white space"), {}
            return UNPARSEABLE, _short(f"invalid JSON: {exc}"), {}
        except RecursionError:
            return UNPARSEABLE, "invalid JSON: nested too deeply to read", {}
        if not isinstance(doc, dict):
            return NOT_OBJECT, f"JSON value is {_json_kind(doc)}, not an object", {}
        return None, "", doc

    def _classify_single(self, raw: bytes, arrow_error: str) -> tuple[str, str]:
        reason, detail, doc = self._load(raw)
        if reason is not None:
            return reason, detail
        if any(m in arrow_error for m in ("changed from", "Failed to convert", "is not a valid")):
            return WRONG_TYPE, _short(f"does not match the table's schema: "
                                      f"{self._wrong_type(raw, doc, arrow_error)}")
        if "too big to be stored in double" in arrow_error:
            path = _infinite_at(doc)
            if path is not None:  # json.loads read it as infinity; pyarrow's reader refuses it
                return UNPARSEABLE, _short(
                    f"field '{path}' holds a number beyond the range of a double (about "
                    "±1.8e308); such numbers cannot be read, in any field")
        return UNPARSEABLE, _short(_one_record_error(arrow_error))

    def _wrong_type(self, raw: bytes, doc: dict[str, object], arrow_error: str) -> str:
        """What is wrong with a record pyarrow refused for a value of the wrong type, naming
        the field (pyarrow's conversion errors do not) and showing the value."""
        text = _one_record_error(arrow_error)
        changed = _CHANGED.search(arrow_error)
        if changed:
            # pyarrow names a field inside a struct 'after/qty': shown as the others, 'after.qty'
            name = changed.group(1).replace("/", ".").replace(".[]", "[]")
            text = text.replace(f"Column(/{changed.group(1)})", f"Column({name})").replace(
                f"field '{changed.group(1)}'", f"field '{name}'")
            try:
                declared: pa.DataType | None = _type_at(self.schema, name)
            except (KeyError, AttributeError, TypeError):  # not a field of the schema
                declared = None
            value = _value_at(doc, name)
            if (declared is not None and (pa.types.is_timestamp(declared)
                                          or pa.types.is_date(declared))
                    and changed.group(2) == "string" and value is not _ABSENT):
                # read from text: a number there is most often epoch time
                return (f"field '{name}' holds {_article(changed.group(3))} {changed.group(3)} "
                        f"({_shown(value)}) where the schema wants {_article(str(declared))} "
                        f"{declared}, given as ISO-8601 text such as \"2024-03-01T10:00:00Z\"; "
                        "for epoch numbers declare the field int64")
            return f"{text}: {_shown(value)}" if value is not _ABSENT else text
        convert = _CONVERT.search(arrow_error)
        if convert:
            type_text, value, number, requires = convert.groups()
            name = self._failing_field(raw, doc, lambda t: str(t) == type_text)
            if name is None:
                return text
            if requires is not None:
                return (f"field '{name}' holds {_clipped(number)}, which {requires} but the "
                        f"schema's type is {type_text}")
            return self._not_convertible(name, type_text, value)
        not_valid = _NOT_VALID.search(arrow_error)
        if not_valid:
            value, kind = not_valid.groups()
            name = self._failing_field(raw, doc, lambda t: str(t).startswith(f"{kind}("))
            if name is None:
                return text
            return (f"field '{name}' holds {_shown(value)}, which is not {_article(kind)} {kind} "
                    "number")
        return text

    def _not_convertible(self, name: str, type_text: str, value: str) -> str:
        declared = _type_at(self.schema, name)
        if pa.types.is_date(declared):  # read as a timestamp (see parse_schema)
            return (f"field '{name}' holds {_shown(value)}, which is not {_article(str(declared))} "
                    f"{declared} (an ISO-8601 date such as \"2024-03-01\")")
        leaf = pa.type_for_alias(type_text) if _INTEGER_ALIAS.fullmatch(type_text) else None
        if leaf is not None:
            info = np.iinfo(leaf.to_pandas_dtype())
            return (f"field '{name}' holds {_clipped(value)}, which is not {_article(type_text)} "
                    f"{type_text} (an integer from {info.min} to {info.max})")
        if type_text.startswith("timestamp"):
            fraction = _SECOND_FRACTION.search(value)
            digits = _FRACTION_DIGITS.get(getattr(declared, "unit", ""), 9)
            if (fraction is not None and len(fraction.group(1)) > digits
                    and _is_time(value[:fraction.start(1) + digits].rstrip(".,")
                                 + value[fraction.end(1):])):
                # not "no ISO-8601 time" for a time that is one (data-types review); only
                # when the digits are what is wrong (a month 13 is not)
                places = f"{digits} digit{'s' if digits != 1 else ''}" if digits else "none"
                return (f"field '{name}' holds {_shown(value)}, with "
                        f"{len(fraction.group(1))} digits after the second's point: the "
                        f"table's {type_text} column takes {places}; send fewer digits"
                        + (" or declare the field with a finer unit" if digits < 9 else ""))
            return (f"field '{name}' holds {_shown(value)}, which is not {_article(type_text)} "
                    f"{type_text} (an ISO-8601 date or time such as \"2024-03-01T10:00:00Z\")")
        return (f"field '{name}' holds {_clipped(value)}, which is not {_article(type_text)} "
                f"{type_text}")

    def _failing_field(
        self, raw: bytes, doc: dict[str, object], holds: Callable[[pa.DataType], bool]
    ) -> str | None:
        """The field of ``raw`` (``doc`` as decoded) that pyarrow cannot convert: among those
        present whose types (or types inside lists and structs) ``holds`` takes, the one
        alone; else the first that fails parsed on its own (each try: one reader call)."""
        present: list[pa.Field] = [f for f in self._parse_schema if doc.get(f.name) is not None]
        typed = [f for f in present if any(holds(t) for t in _leaf_types(f.type))]
        if len(typed) == 1:
            return _inside(raw, typed[0], doc[typed[0].name], holds, ())
        for field in [*typed, *(f for f in present if f not in typed)]:
            if not _parses(raw, [], field):
                return _inside(raw, field, doc[field.name], holds, ())
        return None

    def _missing_details(self, bad_rows: pa.Table) -> pa.Array:
        return missing_fields_text(bad_rows, self.required, REQUIRED_MISSING)

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


def _json_kind(doc: object) -> str:
    """The JSON name of a decoded value's type, with its article ("an array", "null")."""
    if doc is None:
        return "null"
    if isinstance(doc, bool):
        return "a boolean"
    if isinstance(doc, int | float):
        return "a number"
    if isinstance(doc, str):
        return "a string"
    return "an array"


class _RowCountMismatch(Exception):
    def __init__(self, rows: int) -> None:
        super().__init__(
            f"value parsed into {rows} rows; expected exactly one JSON object per message"
        )


def _layout(values: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Zero-copy numpy views of a binary array: ``n + 1`` offsets (int64) into ``data`` (uint8)."""
    n = len(values)
    _, off_buf, data_buf = values.buffers()
    large = pa.types.is_large_binary(values.type)
    off_dtype = np.dtype(np.int64 if large else np.int32)
    if off_buf is None or n == 0:  # an empty array may come without buffers
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(
            off_buf, off_dtype, count=n + 1, offset=values.offset * off_dtype.itemsize
        ).astype(np.int64, copy=False)
    data = np.empty(0, np.uint8) if data_buf is None else np.frombuffer(data_buf, np.uint8)
    return offsets, data


def _object_shaped(
    values: pa.Array,
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    valid: npt.NDArray[np.bool_] | None,
) -> npt.NDArray[np.bool_]:
    """True where a value is ``{...}`` (surrounding JSON whitespace allowed); False for nulls.

    Fast path: first byte ``{`` and last byte ``}``, read through the offsets; only the rare
    values failing it (leading/trailing whitespace, or bad) go through the regex.
    """
    starts, ends = offsets[:-1], offsets[1:]
    nonempty = ends > starts
    if valid is not None:
        nonempty &= valid
    if not data.size:
        fast = np.zeros(len(starts), dtype=bool)
    else:
        first = data[np.where(nonempty, starts, 0)]
        last = data[np.where(nonempty, ends - 1, 0)]
        fast = nonempty & (first == ord("{")) & (last == ord("}"))
    slow = ~fast if valid is None else ~fast & valid
    if not slow.any():
        return fast
    slow_idx = np.flatnonzero(slow)
    matched = pc.match_substring_regex(pc.take(values, pa.array(slow_idx)), _OBJECT_SHAPE)
    fast[slow_idx] = np.asarray(matched.fill_null(False))
    return fast


def _rows_with_newline(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], chunk: int = _SCAN_CHUNK
) -> npt.NDArray[np.intp]:
    """Rows (ascending, unique) whose bytes contain a raw CR or LF.

    One vectorised pass over the data for bytes below 14 (CR, LF and rarer control bytes such as
    tab), then an exact look at those few positions only. The pass runs ``chunk`` bytes at a
    time into one reused flag buffer that stays in the CPU cache: a flag array the size of the
    data (~50 MB for 250k messages) cost twice as much, mostly in writing and faulting it in.
    """
    region = data[offsets[0] : offsets[-1]]
    scratch = np.empty(min(chunk, len(region)), dtype=bool)
    found: list[npt.NDArray[np.intp]] = []
    for at in range(0, len(region), chunk):
        part = region[at : at + chunk]
        flags = scratch[: len(part)]
        np.less(part, 14, out=flags)
        if flags.any():
            found.append(np.flatnonzero(flags) + at)
    if not found:
        return np.empty(0, dtype=np.intp)
    low = np.concatenate(found)
    hits: npt.NDArray[np.intp] = low[(region[low] == ord("\n")) | (region[low] == ord("\r"))]
    if not hits.size:
        return hits
    rows: npt.NDArray[np.intp] = np.unique(
        np.searchsorted(offsets, hits + offsets[0], side="right") - 1
    )
    return rows


def _read_json(buf: pa.Buffer, parse_options: pj.ParseOptions) -> pa.Table:
    """One call of pyarrow's reader on ``buf`` (one block, however long, one thread)."""
    read_options = pj.ReadOptions(use_threads=False, block_size=max(_MIN_BLOCK, buf.size + 1))
    return pj.read_json(pa.BufferReader(buf), read_options=read_options,
                        parse_options=parse_options)


def timed_date_rows(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.bool_]:
    """Per row of a date field as :func:`parse_schema` reads it (a millisecond timestamp):
    whether it holds a time of day other than midnight UTC, which the date type would cut off."""
    millis = pc.fill_null(column.cast(pa.int64()), 0)
    if isinstance(millis, pa.ChunkedArray):
        millis = millis.combine_chunks()
    out: npt.NDArray[np.bool_] = millis.to_numpy(zero_copy_only=False) % 86_400_000 != 0
    return out


_ABSENT = object()


def _value_at(doc: dict[str, object], dotted: str) -> object:
    """The value of field 'a' or 'a.b' of a decoded JSON object; :data:`_ABSENT` if none."""
    value: object = doc
    for name in dotted.split("."):
        if not isinstance(value, dict) or name not in value:
            return _ABSENT
        value = value[name]
    return value


def _type_at(schema: pa.Schema, dotted: str) -> pa.DataType:
    """The type of field 'a' or 'a.b' (inside struct 'a') of ``schema``."""
    head, *rest = dotted.split(".")
    t = schema.field(head).type
    for name in rest:
        t = t.field(name).type
    return t


def _nest(path: Sequence[str], field: pa.Field) -> pa.Field:
    """``field`` inside the structs named by ``path``."""
    for name in reversed(path):
        field = pa.field(name, pa.struct([field]))
    return field


def _parses(raw: bytes, path: Sequence[str], field: pa.Field) -> bool:
    """Whether ``raw`` parses with ``field`` (inside the structs of ``path``) alone."""
    options = pj.ParseOptions(explicit_schema=pa.schema([_nest(path, field)]),
                              unexpected_field_behavior="ignore")
    try:
        _read_json(pa.py_buffer(raw), options)
    except pa.ArrowInvalid:
        return False
    return True


def _inside(raw: bytes, field: pa.Field, value: object,
            holds: Callable[[pa.DataType], bool], path: Sequence[str]) -> str:
    """The failing field's name, or 'field.child' down to the value inside its structs that
    does not convert (a Debezium event's 'after.qty', not 'after'; CDC review)."""
    here = [*path, field.name]
    if pa.types.is_struct(field.type) and isinstance(value, dict):
        children = [field.type.field(i) for i in range(field.type.num_fields)
                    if value.get(field.type.field(i).name) is not None]
        typed = [c for c in children if any(holds(t) for t in _leaf_types(c.type))]
        for child in [*typed, *(c for c in children if c not in typed)]:
            if not _parses(raw, here, child):
                return _inside(raw, child, value[child.name], holds, here)
    return ".".join(here)


def nonfinite_rows(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.bool_]:
    """Per row of ``column``: whether it holds a float (also in a list or struct) that is NaN
    or infinite."""
    if isinstance(column, pa.ChunkedArray):
        parts = [nonfinite_rows(c) for c in column.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    t = column.type
    if pa.types.is_floating(t):
        finite = pc.is_finite(column).fill_null(True)
        out: npt.NDArray[np.bool_] = ~finite.to_numpy(zero_copy_only=False)
        return out
    mask = np.zeros(len(column), dtype=bool)
    if pa.types.is_struct(t):
        for child in column.flatten():
            mask |= nonfinite_rows(child)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner = nonfinite_rows(pc.list_flatten(column))
        if inner.any():
            mask[np.asarray(pc.list_parent_indices(column))[inner]] = True
    return mask


_ROW_HINT = re.compile(r"in row (\d+)$")


def _row_hint(exc: BaseException) -> int | None:
    m = _ROW_HINT.search(str(exc).strip())
    return int(m.group(1)) if m else None


#: The detail of a record without a value for a field its record key, partition path or
#: ordering needs (the fields named in the braces).
REQUIRED_MISSING = ("field(s) {} missing or null (every record needs its record key, partition "
                    "and ordering fields)")


def missing_fields_text(rows: pa.Table, names: Sequence[str], template: str) -> pa.Array:
    """Per row of ``rows``: ``template`` with ``{}`` replaced by those of ``names`` that are null
    or absent in it (comma-separated). One text per distinct combination, vectorised."""
    combo = np.zeros(rows.num_rows, dtype=np.int64)
    for bit, name in enumerate(names):
        if name in rows.column_names:
            absent = np.asarray(rows.column(name).is_null(), dtype=bool)
        else:
            absent = np.ones(rows.num_rows, dtype=bool)
        combo |= absent.astype(np.int64) << bit
    codes, inverse = np.unique(combo, return_inverse=True)
    texts = [
        template.format(", ".join(n for bit, n in enumerate(names) if int(code) >> bit & 1))
        for code in codes.tolist()
    ]
    return pc.take(pa.array(texts, pa.string()), pa.array(inverse.reshape(-1)))


def is_utf8(values: pa.Array) -> bool:
    """Whether every value of a binary array is valid UTF-8 (Arrow's vectorised check)."""
    target = pa.large_string() if pa.types.is_large_binary(values.type) else pa.string()
    try:
        values.cast(target)
    except pa.ArrowInvalid:
        return False
    return True


def _utf8_problems(values: pa.Array) -> list[str | None]:
    """Per value: None when it is UTF-8, else what is wrong (slow path: only after the
    vectorised check failed)."""
    problems: list[str | None] = []
    for v in values.to_pylist():
        try:
            v.decode("utf-8")
            problems.append(None)
        except UnicodeDecodeError as exc:
            problems.append(_not_utf8(v, exc))
    return problems


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    """The detail of a value that is not UTF-8: the first bad byte and where it is."""
    return (f"invalid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8 "
            "text; send JSON encoded as UTF-8")


def _as_int64(arr: pa.Array | pa.ChunkedArray) -> pa.Int64Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    out: pa.Int64Array = arr.cast(pa.int64())
    return out


def iter_bad(errors: BadRecords) -> Iterable[tuple[int, str, str]]:
    """(index, reason, detail) tuples; for messages and tests, not for the hot path."""
    return zip(
        errors.index.to_pylist(), errors.reason.to_pylist(), errors.detail.to_pylist(), strict=True
    )


def _only_value(joined: pa.Array) -> pa.Buffer:
    """The bytes of the one value of ``joined`` (binary or large_binary, not null): a zero-copy
    view of its data buffer (``joined[0]`` would copy them into a scalar first)."""
    assert len(joined) == 1 and joined.null_count == 0
    offsets, data = _layout(joined)
    return pa.py_buffer(data[int(offsets[0]) : int(offsets[1])])
