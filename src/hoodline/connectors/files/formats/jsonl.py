"""JSON lines: one JSON object per line, read with pyarrow.json.

* With a declared schema the split is read in chunks of whole lines (four ``read.block-size``
  blocks), each parsed in bulk with the schema (fields outside it ignored). Values are read as
  the pipeline's JSON decoder reads Kafka messages
  (:func:`hoodline.formats.json_decoder.parse_schema`: dates as ISO strings), then cast to the
  declared types. A chunk is trusted only when every line is shaped ``{...}``, the chunk is
  valid UTF-8 and its rows match its lines one to one; any other chunk is decoded line by line
  with :class:`~hoodline.formats.json_decoder.JsonDecoder`, whose bad lines come out as
  rejected-records batches (:mod:`hoodline.connectors.files.rejections`) in file order. With
  ``isolate_records`` (``errors.tolerance=all``) they are emitted, so a bad line costs only
  itself and every line keeps its row position; without it the first one fails the split,
  naming its line and why. Both tolerances thus count rows the same way.
* Without a schema, pyarrow infers types from the data it has seen, and a streamed reader would
  fail when a later block contradicts the first (a field first seen in block 2, a column that
  was all null). So the whole split is parsed at once (``read_json``), which infers over all of
  it; memory is then bounded by the split size (see ``split.target-size``). Declare a schema for
  big files. On a parse error the split is scanned once more (error path only) to name the
  first offending line.

Blank lines are ignored, and so is a UTF-8 byte order mark at the start of a file. A compressed
file (``.gz``, ``.bz2``, ``.zst``) is one split, read from its decompressed text
(:mod:`~hoodline.connectors.files.compression`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.json as pj

from hoodline.connectors.files.compression import codec_of, open_decompressed
from hoodline.connectors.files.formats.byte_range import (
    align_range,
    count_lines_before,
)
from hoodline.connectors.files.formats.conform import conform, skip_rows
from hoodline.connectors.files.location import open_binary
from hoodline.connectors.files.rejections import (
    STRICT_HINT,
    is_rejected_records,
    rejected_records_batch,
    runs,
)
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.errors import FileSourceError
from hoodline.formats.json_decoder import (
    JsonDecoder,
    is_utf8,
    nonfinite_rows,
    parse_schema,
    timed_date_rows,
)

#: Chunks of the record-isolating reader hold this many blocks (``read.block-size``) of lines.
_BLOCKS_PER_CHUNK = 4
#: Lines a chunk that needs decoding line by line hands the JSON decoder at a time.
_DECODE_PIECE = 4096


def read_jsonl(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    use_threads: bool = True,
    isolate_records: bool = False,
    required: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Batches of the lines owned by ``split``, after skipping ``split.records_to_skip`` records.

    With ``isolate_records`` and a ``schema``, lines that are not a record of the schema come as
    rejected-records batches instead of failing the split (see the module docs); so do lines
    where a field of ``required`` is null or missing (a not-null field of the schema: also
    without ``isolate_records``, then failing the split)."""
    codec = codec_of(split.path)
    try:  # closed in finally
        if codec is None:
            f, size = open_binary(split.path), split.size
        else:
            f, size = open_decompressed(split.path, codec)
    except (OSError, pa.ArrowException) as exc:
        raise FileSourceError(f"{split.describe()} cannot be opened: {exc}") from exc
    try:
        if split.kind is SplitKind.BYTES:
            start, end = align_range(f, split.start, split.end, split.size)
        else:
            start, end = 0, size
        if start == 0 and _starts_with_bom(f, end):
            start = len(_UTF8_BOM)  # as Windows tools write it; JSON readers may skip it
        if end <= start:
            return
        to_skip = split.records_to_skip
        batches = (
            # ``required`` only when isolating: otherwise the caller names such a record itself
            _isolating_batches(f, start, end, split, schema, block_size, use_threads,
                               required if isolate_records else ())
            if schema is not None
            else _inferred_batches(f, start, end, block_size, use_threads)
        )
        try:
            for batch in batches:
                if is_rejected_records(batch) and not isolate_records:
                    reason, detail = batch.column("reason")[0], batch.column("detail")[0]
                    raise FileSourceError(f"file '{split.path}' {detail} ({reason}){STRICT_HINT}")
                rest, to_skip = skip_rows(batch, to_skip)
                if rest is not None and rest.num_rows:
                    yield rest  # rows already in the declared schema (or inferred)
        except FileSourceError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise FileSourceError(_describe_error(f, split, start, end, exc)) from exc
    finally:
        f.close()


_UTF8_BOM = b"\xef\xbb\xbf"


def _starts_with_bom(f: BinaryIO, end: int) -> bool:
    if end < len(_UTF8_BOM):
        return False
    f.seek(0)
    return f.read(len(_UTF8_BOM)) == _UTF8_BOM


def _inferred_batches(
    f: BinaryIO, start: int, end: int, block_size: int, use_threads: bool
) -> Iterator[pa.RecordBatch]:
    """No declared schema: the whole range at once, so pyarrow infers types over all of it."""
    if _only_whitespace(f, start, end):
        return
    read_options = pj.ReadOptions(use_threads=use_threads, block_size=block_size)
    f.seek(start)
    data = f.read(end - start)
    table = pj.read_json(pa.BufferReader(data), read_options=read_options)
    yield from table.to_batches()


#: (path, size, mtime, offset) -> (lines, blank lines) before the offset, in this process: the
#: reader's line numbers and the error rows' record numbers of a piece read over several rounds
#: would each read the file up to the piece again.
_LINES_BEFORE: OrderedDict[tuple[str, int, int, int], tuple[int, int]] = OrderedDict()
_LINES_BEFORE_KEPT = 1024


def counted_lines_before(split: FileSourceSplit, f: BinaryIO, start: int) -> tuple[int, int]:
    """:func:`count_lines_before` of ``split``'s file (open as ``f``) up to its line start
    ``start``, counted once per process and file version."""
    key = (split.path, split.size, split.mtime_ns, start)
    counted = _LINES_BEFORE.get(key)
    if counted is None:
        counted = count_lines_before(f, start)
        _LINES_BEFORE[key] = counted
        while len(_LINES_BEFORE) > _LINES_BEFORE_KEPT:
            _LINES_BEFORE.popitem(last=False)
    return counted


def records_before(split: FileSourceSplit) -> int:
    """Records of the file before ``split`` (the lines that are not blank before its first line
    start): its record numbers within the file start there. Reads the file up to there, so it is
    asked for only where a record's position is shown (error rows)."""
    if split.kind is not SplitKind.BYTES or split.start <= 0:
        return 0
    try:
        with open_binary(split.path) as f:
            start, _end = align_range(f, split.start, split.end, split.size)
            lines, blank = counted_lines_before(split, f, start)
    except OSError as exc:
        raise FileSourceError(f"{split.describe()} cannot be read: {exc}") from exc
    return lines - blank


class RawLines:
    """The lines (without their line break) of records of a split, and their line numbers in
    the file: for records refused after they were read (their bytes as read go to the error
    table). Records are numbered from the split's first (blank lines not counted); asked for in
    ascending order, as batch after batch refuses them, the split is read forward once (read
    from its start for each batch, a 120-MB file took 20 s more; code review). Close it."""

    def __init__(self, split: FileSourceSplit) -> None:
        self.split = split
        self._file: BinaryIO | None = None
        self._lines: Iterator[bytes] = iter(())
        self._record = 0  # the number of the next record the lines hold
        self._line_no = 0

    def take(self, records: Sequence[int]) -> dict[int, tuple[bytes, int]]:
        """Line and line number of each of ``records`` (those not found are left out)."""
        wanted = set(records)
        out: dict[int, tuple[bytes, int]] = {}
        if not wanted:
            return out
        if self._file is None or min(wanted) < self._record:
            self._open()
        last = max(wanted)
        for raw in self._lines:
            self._line_no += 1
            if self._line_no == 1 and raw.startswith(_UTF8_BOM):
                raw = raw[len(_UTF8_BOM):]
            text = raw.rstrip(b"\n").rstrip(b"\r")
            if not text.strip(b" \t\r"):
                continue
            record = self._record
            self._record += 1
            if record in wanted:
                out[record] = (text, self._line_no)
            if record >= last:
                break
        return out

    def _open(self) -> None:
        self.close()
        split = self.split
        codec = codec_of(split.path)
        try:
            f = (open_binary(split.path) if codec is None
                 else open_decompressed(split.path, codec)[0])
        except (OSError, pa.ArrowException) as exc:
            raise FileSourceError(f"{split.describe()} cannot be opened: {exc}") from exc
        self._file = f
        start = 0
        if split.kind is SplitKind.BYTES:
            start, _end = align_range(f, split.start, split.end, split.size)
        self._line_no = counted_lines_before(split, f, start)[0] if start else 0
        f.seek(start)
        self._lines = iter(f)
        self._record = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._lines = iter(())


def _isolating_batches(
    f: BinaryIO,
    start: int,
    end: int,
    split: FileSourceSplit,
    schema: pa.Schema,
    block_size: int,
    use_threads: bool,
    required: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Rows of ``schema`` and rejected-records batches of ``[start, end)``, in file order."""
    must_hold = list(dict.fromkeys([*(x.name for x in schema if not x.nullable), *required]))
    read_options = pj.ReadOptions(use_threads=use_threads, block_size=block_size)
    parse = pj.ParseOptions(
        explicit_schema=parse_schema(schema), unexpected_field_behavior="ignore"
    )
    where = split.describe()
    decoder: JsonDecoder | None = None
    first_line: int | None = None  # the split's first line number, counted when first needed
    lines_before = 0  # lines of the split before the current chunk
    for data in _line_chunks(f, start, end, block_size * _BLOCKS_PER_CHUNK):
        lines = _Lines(data)
        good = _parse_whole(data, lines, read_options, parse, schema, where, must_hold)
        if good is not None:
            yield from good
        else:
            if decoder is None:
                decoder = JsonDecoder(schema, required=must_hold)
            if first_line is None:
                first_line = counted_lines_before(split, f, start)[0] + 1
            yield from _decode_lines(lines, decoder, first_line + lines_before)
        lines_before += lines.count


def _line_chunks(f: BinaryIO, start: int, end: int, size: int) -> Iterator[memoryview]:
    """Consecutive pieces of ``[start, end)`` of about ``size`` bytes, each ending at a line end
    (a line longer than ``size`` makes its piece longer)."""
    pos = start
    while pos < end:
        want = min(size, end - pos)
        while True:
            f.seek(pos)
            data = f.read(want)
            if len(data) < want or pos + len(data) >= end:
                cut = len(data)
                break
            cut = data.rfind(b"\n") + 1
            if cut:
                break
            want = min(2 * want, end - pos)
        if not cut:
            return
        yield memoryview(data)[:cut]
        pos += cut


class _Lines:
    """Where the lines of a chunk are: ``[starts, ends)`` without the line break (and a CR before
    it), which are blank, and whether every other one is shaped as one JSON object."""

    def __init__(self, data: memoryview) -> None:
        self.bytes: npt.NDArray[np.uint8] = np.frombuffer(data, dtype=np.uint8)
        size = len(self.bytes)
        breaks = np.flatnonzero(self.bytes == 0x0A)
        starts = np.concatenate(([0], breaks + 1))
        ends = np.concatenate((breaks, [size]))
        if size and self.bytes[-1] == 0x0A:  # no line after the last break
            starts, ends = starts[:-1], ends[:-1]
        nonempty = ends > starts
        last = np.where(nonempty, ends - 1, 0)
        ends = ends - (nonempty & (self.bytes[last] == 0x0D))
        self.starts, self.ends = starts, ends
        self.count = len(starts)
        # an object on its line: '{' first and '}' last, so no object spans lines (and equal
        # counts of rows and lines mean one row per line)
        shaped = ends > starts
        shaped[shaped] = (self.bytes[starts[shaped]] == ord("{")) & (
            self.bytes[ends[shaped] - 1] == ord("}"))
        self.blank = np.zeros(self.count, dtype=bool)
        self.odd = False  # a non-blank line that is not shaped as one object
        for i in np.flatnonzero(~shaped).tolist():
            if bytes(data[starts[i] : ends[i]]).strip(b" \t\r"):
                self.odd = True
            else:
                self.blank[i] = True

    def values(self, kept: npt.NDArray[np.intp]) -> pa.Array:
        """The lines ``kept`` (ascending line indexes in the chunk) as a binary array."""
        if not len(kept):
            return pa.array([], pa.large_binary())
        s, e = self.starts[kept], self.ends[kept]
        offsets = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(e - s, out=offsets[1:])
        lo, hi = int(s[0]), int(e[-1])  # only the bytes of these lines' span are looked at
        mark = np.zeros(hi - lo + 1, dtype=np.int8)
        mark[s - lo] = 1
        mark[e - lo] -= 1
        inside = np.cumsum(mark[:-1], dtype=np.int64) > 0
        packed = self.bytes[lo:hi][inside]
        return pa.Array.from_buffers(
            pa.large_binary(), len(kept), [None, pa.py_buffer(offsets), pa.py_buffer(packed)]
        )


def _parse_whole(
    data: memoryview,
    lines: _Lines,
    read_options: pj.ReadOptions,
    parse: pj.ParseOptions,
    schema: pa.Schema,
    where: str,
    required: Sequence[str] = (),
) -> list[pa.RecordBatch] | None:
    """The chunk's rows in one bulk parse, or None when a line needs to be looked at alone: the
    parse failed, the rows do not match the lines one to one, a row breaks the schema or lacks
    a ``required`` field."""
    whole = pa.Array.from_buffers(  # the chunk as one value: no copy
        pa.large_binary(), 1,
        [None, pa.py_buffer(np.array([0, len(data)], dtype=np.int64)), pa.py_buffer(data)])
    if lines.odd or not is_utf8(whole):
        return None  # pyarrow lets invalid UTF-8 through; the decoder rejects such lines
    try:
        table = pj.read_json(pa.py_buffer(data), read_options=read_options, parse_options=parse)
    except pa.ArrowInvalid:
        return None
    if table.num_rows != lines.count - int(lines.blank.sum()):
        return None
    if any(table.column(name).null_count for name in required if name in table.column_names):
        return None
    if any(nonfinite_rows(table.column(name)).any() for name in table.column_names):
        return None  # NaN / Infinity, which JSON has not: the decoder refuses such lines
    if any(timed_date_rows(table.column(f.name)).any()
           for f in schema if pa.types.is_date(f.type) and f.name in table.column_names):
        return None  # a time of day in a date field: the decoder refuses such lines
    try:
        return [conform(b, schema, where) for b in table.to_batches() if b.num_rows]
    except FileSourceError:
        return None


def _decode_lines(lines: _Lines, decoder: JsonDecoder, first_line: int) -> Iterator[pa.RecordBatch]:
    """Decode a chunk line by line: runs of good rows and of rejected lines, in file order.

    The decoder re-parses the rest of its input after each bad value, so its cost grows with
    bad values times input length; it gets the chunk's lines in pieces of
    ``_DECODE_PIECE`` lines, which bounds what each bad line costs (1 bad line in 1,000
    measured 5.1 s per 1M lines in one piece, see ``bench.jsonl_read``)."""
    kept = np.flatnonzero(~lines.blank)
    for at in range(0, len(kept), _DECODE_PIECE):
        yield from _decode_piece(lines, kept[at : at + _DECODE_PIECE], decoder, first_line)


def _decode_piece(
    lines: _Lines, kept: npt.NDArray[np.intp], decoder: JsonDecoder, first_line: int
) -> Iterator[pa.RecordBatch]:
    values = lines.values(kept)
    result = decoder.decode(values)
    bad_index = np.asarray(result.errors.index, dtype=np.int64)
    is_bad = np.zeros(len(values), dtype=np.bool_)
    is_bad[bad_index] = True
    good_at = bad_at = 0
    for lo, hi, bad in runs(is_bad):
        n = hi - lo
        if bad:
            rows = bad_index[bad_at : bad_at + n]
            texts = result.errors.detail[bad_at : bad_at + n].to_pylist()
            details = [
                f"line {first_line + int(kept[r])}: {d}"
                for r, d in zip(rows.tolist(), texts, strict=True)
            ]
            yield rejected_records_batch(
                values.take(pa.array(rows)),
                result.errors.reason[bad_at : bad_at + n],
                pa.array(details, pa.string()),
            )
            bad_at += n
        else:
            yield from result.records.slice(good_at, n).to_batches()
            good_at += n


def _only_whitespace(f: BinaryIO, start: int, end: int) -> bool:
    """True for an empty or blank range (pyarrow refuses an empty JSON stream)."""
    f.seek(start)
    left = end - start
    while left > 0:
        chunk = f.read(min(left, 64 * 1024))
        if not chunk:
            break
        if chunk.strip():
            return False
        left -= len(chunk)
    return True


def _describe_error(
    f: BinaryIO, split: FileSourceSplit, start: int, end: int, exc: Exception
) -> str:
    """Error message naming the file and, if it can be found, the first bad line and why."""
    line_no = _first_bad_line(f, split, start, end)
    if line_no is None:
        return f"{split.describe()} cannot be parsed as JSON lines: {exc}"
    return (
        f"file '{split.path}' line {line_no} cannot be parsed as a JSON object: {exc}"
    )


def _first_bad_line(f: BinaryIO, split: FileSourceSplit, start: int, end: int) -> int | None:
    try:
        line_no = counted_lines_before(split, f, start)[0]
        f.seek(start)
        pos = start
        for raw in f:
            if pos >= end:
                break
            pos += len(raw)
            line_no += 1
            text = raw.strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                return line_no
            if not isinstance(value, dict):
                return line_no
    except OSError:
        return None
    return None
