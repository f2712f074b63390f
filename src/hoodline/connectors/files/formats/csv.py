"""CSV with pyarrow.csv; a CSV split is always a whole file (quoted values may span lines), a
compressed one (``.gz``, ``.bz2``, ``.zst``) read as a decompressing stream.

With a declared schema the file is streamed (``open_csv``) with the declared column types; without
one it is parsed at once (``read_csv``) so type inference sees every row. Already emitted rows
are dropped from the start of the read: pyarrow's own ``skip_rows_after_names`` counts empty
lines, which are not rows, so a file with empty lines, resumed in its middle, was read again
from a few rows too early (measured on 2M rows of 4 columns: resuming after 1.5M takes
0.15-0.16 s by dropping them against 0.09-0.10 s by skipping them, the whole file 0.15 s).

With ``errors.tolerance = all`` a value that does not convert to its declared type (or a null in
a not-null column) costs only its row: the rest of the file, from the first row not yet
emitted, is parsed again single-threaded with every column as text, and each column is
converted by pyarrow's CSV reader itself (the values written back as a one-column CSV), so rows
convert exactly as in the streamed read. A column that does not convert is bisected to its bad
rows, which come as rejected-records batches in place (the row's declared columns as a CSV
line, a reason code and the row number, counted from 0 as the error table's ``row``), so every
row keeps its position; so do rows whose key, partition or ordering field is empty
(``missing_key``, as JSON lines), and rows with the wrong number of fields (``unparseable``,
their text as pyarrow read it: pyarrow numbers every row it parses, empty lines not counted, so
the single-threaded pass puts each in its place). Without ``errors.tolerance = all`` the same
pass names the first such row in the error. That path reads the rest of the file about 5x
slower (1M rows of 4 columns, one bad value: 0.97 s against 0.21 s). A file whose bytes do not
parse at all (e.g. text that is not of its ``csv.encoding``, UTF-8 by default) is still
rejected whole, with a hint to set the encoding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from hoodline.config.arrow_types import format_type
from hoodline.connectors.files.compression import codec_of, open_stream
from hoodline.connectors.files.formats.conform import conform, skip_rows
from hoodline.connectors.files.location import is_url, open_binary
from hoodline.connectors.files.rejections import (
    STRICT_HINT,
    is_rejected_records,
    rejected_records_batch,
)
from hoodline.connectors.files.split import FileSourceSplit
from hoodline.errors import FileSourceError
from hoodline.formats.json_decoder import (
    MISSING_KEY,
    NULL_VALUE,
    REQUIRED_MISSING,
    UNPARSEABLE,
    WRONG_TYPE,
    missing_fields_text,
)


class _RowProblem:
    """Remembers the position of the first malformed row (from pyarrow's number: rows parsed
    before it, the header included, empty lines not) and stops the read there."""

    def __init__(self, header: bool) -> None:
        self.first = 2 if header else 1  # pyarrow's number of the first data row
        self.seen = False
        self.row: int | None = None  # None when multi-threaded: pyarrow does not number rows

    def __call__(self, row: pcsv.InvalidRow) -> str:
        if not self.seen and row.number is not None:
            self.row = int(row.number) - self.first
        self.seen = True
        return "error"


class _Malformed:
    """The isolating pass's rows with the wrong number of fields: pyarrow leaves each out and
    reports it with its number (rows parsed before it, the header included, empty lines not),
    which makes its position among the file's records."""

    def __init__(self, header: bool) -> None:
        self.first = 2 if header else 1  # pyarrow's number of the first data row
        self.rows: deque[tuple[int, str, int, int]] = deque()  # (row, text, fields, expected)

    def __call__(self, row: pcsv.InvalidRow) -> str:
        if row.number is None:  # never single-threaded; without a position, stop the file
            return "error"
        self.rows.append((int(row.number) - self.first, row.text, row.actual_columns,
                          row.expected_columns))
        return "skip"

    def run_at(self, row: int) -> list[tuple[int, str, int, int]]:
        """The malformed rows that come next when ``row`` records were emitted."""
        run: list[tuple[int, str, int, int]] = []
        while self.rows and self.rows[0][0] <= row + len(run):
            run.append(self.rows.popleft())
        return run


@dataclass(frozen=True)
class _Read:
    """The options of one read of a CSV file."""

    read: pcsv.ReadOptions
    parse: pcsv.ParseOptions
    convert: pcsv.ConvertOptions

    def stream(self, path: str) -> pcsv.CSVStreamingReader:
        return pcsv.open_csv(_source(path), read_options=self.read, parse_options=self.parse,
                             convert_options=self.convert)

    def whole(self, path: str) -> pa.Table:
        return pcsv.read_csv(_source(path), read_options=self.read, parse_options=self.parse,
                             convert_options=self.convert)


@dataclass(frozen=True)
class CsvDialect:
    """How the source's CSV files are written (``csv.*`` options)."""

    delimiter: str = ","
    header: bool = True
    #: a Python codec name; files in another encoding than UTF-8 are decoded while read
    encoding: str = "utf-8"


def _options(
    schema: pa.Schema | None,
    block_size: int,
    dialect: CsvDialect,
    use_threads: bool,
    problem: Callable[[pcsv.InvalidRow], str],
) -> _Read:
    """Options of a read of the file's data rows."""
    read_options = pcsv.ReadOptions(
        use_threads=use_threads,
        block_size=block_size,
        column_names=None if dialect.header else (schema.names if schema is not None else None),
        encoding=dialect.encoding,
    )
    parse_options = pcsv.ParseOptions(delimiter=dialect.delimiter, invalid_row_handler=problem)
    convert_options = pcsv.ConvertOptions(
        column_types={f.name: f.type for f in schema} if schema is not None else None,
        include_columns=schema.names if schema is not None else None,
        include_missing_columns=False,
    )
    return _Read(read_options, parse_options, convert_options)


def _source(path: str) -> str | BinaryIO:
    codec = codec_of(path)
    if codec is not None:
        return open_stream(path, codec)
    return open_binary(path) if is_url(path) else path


def read_csv(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    dialect: CsvDialect,
    use_threads: bool = True,
    isolate_records: bool = False,
    required: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Batches of a CSV file after skipping ``split.records_to_skip`` data rows; with
    ``isolate_records`` and a ``schema``, rows whose values do not convert, and rows where a
    field of ``required`` is null, come as rejected-records batches (see the module docs)."""
    if split.size == 0:
        return
    problem = _RowProblem(dialect.header)
    options = _options(schema, block_size, dialect, use_threads, problem)
    where = split.describe()
    to_skip = split.records_to_skip
    try:
        if schema is not None:
            read = 0  # rows of this read emitted so far
            try:
                for batch in options.stream(split.path):
                    fresh, to_skip = skip_rows(batch, to_skip)
                    if fresh is not None and fresh.num_rows:
                        rows = conform(fresh, schema, where)
                        if ((isolate_records and _lacks_required(rows, required))
                                or _has_infinity(rows)):
                            raise _Isolate
                        read += fresh.num_rows
                        yield rows
            except pa.ArrowKeyError as exc:  # a declared column the header lacks
                raise FileSourceError(_missing_column(split, schema, dialect)) from exc
            except (pa.ArrowInvalid, FileSourceError, _Isolate) as exc:
                if problem.seen and not isolate_records:
                    raise  # a row that is not CSV: named below
                rest = _isolated_rows(split, schema, block_size, dialect,
                                      split.records_to_skip + read,
                                      required if isolate_records else ())
                if isolate_records:
                    yield from rest
                    return
                # the first row that does not convert, named as a rejected one would be
                for batch in rest:
                    if is_rejected_records(batch):
                        reason, detail = batch.column("reason")[0], batch.column("detail")[0]
                        raise FileSourceError(
                            f"file '{split.path}' {detail} ({reason}){STRICT_HINT}") from exc
                    if isinstance(exc, _Isolate):
                        yield batch  # an infinity written as one: the rows stand
                if not isinstance(exc, _Isolate):
                    raise
        else:
            for batch in options.whole(split.path).to_batches():
                fresh, to_skip = skip_rows(batch, to_skip)
                if fresh is not None and fresh.num_rows:
                    yield fresh
    except FileSourceError:
        raise
    except FileNotFoundError as exc:
        raise FileSourceError(f"{where} disappeared before it was read: {exc}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        row = problem.row
        if row is None and use_threads:
            row = _locate_bad_row(split, schema, block_size, dialect)
        if row is not None:
            raise FileSourceError(
                f"file '{split.path}' row {row} (counted from 0) is not a valid CSV row: {exc}"
                f"{_encoding_hint(exc, dialect)}"
            ) from exc
        raise FileSourceError(
            f"{where} cannot be parsed as CSV: {exc}{_encoding_hint(exc, dialect)}"
        ) from exc


def _encoding_hint(exc: BaseException, dialect: CsvDialect) -> str:
    """What to do when the bytes are not text of the configured encoding."""
    if "invalid UTF8" in str(exc) or isinstance(exc, UnicodeError):
        return (f" (the file is not {dialect.encoding} text: set csv.encoding to the encoding "
                "it was written in, e.g. 'latin-1' or 'cp1252')")
    return ""


def _locate_bad_row(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    dialect: CsvDialect,
) -> int | None:
    """Error path only: parse again single-threaded, where pyarrow reports row numbers."""
    problem = _RowProblem(dialect.header)
    options = _options(schema, block_size, dialect, False, problem)
    try:
        for _ in options.stream(split.path):
            pass
    except (pa.ArrowException, OSError, ValueError):
        pass
    return problem.row


class _Isolate(Exception):
    """A batch holds a row with a null required field, or an infinite float (a number too big
    for its column reads as infinity): the rest of the file goes through the isolating pass,
    which rejects such rows one by one with their text."""


def _lacks_required(rows: pa.RecordBatch, required: Sequence[str]) -> bool:
    return any(rows.column(name).null_count for name in required
               if name in rows.schema.names)


def _has_infinity(rows: pa.RecordBatch) -> bool:
    return any(pc.any(pc.is_inf(rows.column(i))).as_py() for i, f in enumerate(rows.schema)
               if pa.types.is_floating(f.type))


#: how pyarrow's CSV reader accepts an infinity written as one
_SPELLED_INFINITY = r"^[+-]?inf(inity)?$"


def _overflowed(text: pa.Array, values: pa.Array) -> list[int]:
    """Rows whose number was too big for the float column: infinity, not written as one (an
    overflow that would be stored as infinity without a word)."""
    inf = pc.is_inf(values).fill_null(False)
    if not pc.any(inf).as_py():
        return []
    spelled = pc.match_substring_regex(text, _SPELLED_INFINITY, ignore_case=True)
    return np.flatnonzero(np.asarray(pc.and_not(inf, spelled.fill_null(False)))).tolist()


def _missing_column(
    split: FileSourceSplit, schema: pa.Schema, dialect: CsvDialect
) -> str:
    """The message for a declared column the file's header does not name."""
    try:
        names = pcsv.open_csv(
            _source(split.path),
            read_options=pcsv.ReadOptions(
                column_names=None if dialect.header else schema.names, use_threads=False,
                encoding=dialect.encoding),
            parse_options=pcsv.ParseOptions(delimiter=dialect.delimiter),
        ).schema.names
    except (pa.ArrowException, OSError, ValueError) as exc:
        return f"{split.describe()} cannot be parsed as CSV: {exc}"
    missing = [n for n in schema.names if n not in names]
    return (f"{split.describe()} has no column '{missing[0] if missing else '?'}' of the "
            f"declared schema (its header names {names}); fix the file or the schema")


def _isolated_rows(
    split: FileSourceSplit,
    schema: pa.Schema,
    block_size: int,
    dialect: CsvDialect,
    skip: int,
    required: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """The file's records after the first ``skip``, parsed single-threaded as text, then
    converted column by column; rows that do not convert, lack a ``required`` field or have the
    wrong number of fields come as rejected-records batches, in place."""
    text = pa.schema([pa.field(f.name, pa.string()) for f in schema])
    malformed = _Malformed(dialect.header)
    options = _options(text, block_size, dialect, False, malformed)
    row = 0  # records of the file before the next one

    def fresh(rows: pa.RecordBatch) -> pa.RecordBatch | None:
        nonlocal skip
        rest, skip = skip_rows(rows, skip)
        return rest if rest is not None and rest.num_rows else None

    def unparseable(run: list[tuple[int, str, int, int]]) -> Iterator[pa.RecordBatch]:
        nonlocal row
        batch = fresh(_malformed_batch(run, row))
        row += len(run)
        if batch is not None:
            yield batch

    for batch in options.stream(split.path):
        taken = 0
        while taken < batch.num_rows:
            run = malformed.run_at(row)
            if run:
                yield from unparseable(run)
                continue
            upto = batch.num_rows - taken
            if malformed.rows:
                upto = min(upto, malformed.rows[0][0] - row)
            rows = fresh(batch.slice(taken, upto))  # one record per row: drop before converting
            if rows is not None:
                yield from _converted(rows, schema, row + upto - rows.num_rows,
                                      dialect.delimiter,
                                      required)
            taken += upto
            row += upto
    while malformed.rows:  # after the last row that parsed
        yield from unparseable(malformed.run_at(row))


def _malformed_batch(run: list[tuple[int, str, int, int]], first_row: int) -> pa.RecordBatch:
    """A rejected-records batch of consecutive rows with the wrong number of fields."""
    values, details = [], []
    for i, (_, text, fields, expected) in enumerate(run):
        values.append(text.encode())
        details.append(f"row {first_row + i} (counted from 0): {fields} field(s) where the "
                       f"file's rows have {expected}")
    return rejected_records_batch(pa.array(values, pa.binary()),
                                  pa.array([UNPARSEABLE] * len(run), pa.string()),
                                  pa.array(details, pa.string()))


def _converted(
    batch: pa.RecordBatch, schema: pa.Schema, first_row: int, delimiter: str,
    required: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Rows of ``batch`` (every column text) in ``schema``, and rejected-records batches of
    the rows that do not convert, in row order (``first_row``: the file's data rows before)."""
    n = batch.num_rows
    problems: list[tuple[str, str] | None] = [None] * n
    columns: list[pa.Array] = []
    for field in schema:
        values = batch.column(field.name)
        if field.type != pa.string():
            try:
                values = _csv_convert(values, field.type)
            except pa.ArrowInvalid:
                bad = _bad_rows(values, field.type)
                hint = _hint(field.type)
                for i in bad:
                    if problems[i] is None:
                        problems[i] = (WRONG_TYPE, f"column '{field.name}' holds "
                                       f"{_shown(values[i].as_py())}, which does not convert "
                                       f"to {format_type(field.type)}{hint}")
                # those values as nulls (an empty quoted value reads as null)
                cleared = np.zeros(n, dtype=bool)
                cleared[bad] = True
                values = _csv_convert(pc.if_else(pa.array(cleared), "", values), field.type)
        if pa.types.is_floating(field.type):
            text = batch.column(field.name)
            limit = float(np.finfo(field.type.to_pandas_dtype()).max)
            for i in _overflowed(text, values):
                if problems[i] is None:
                    problems[i] = (WRONG_TYPE, f"column '{field.name}' holds "
                                   f"{_shown(text[i].as_py())}, which is too big for "
                                   f"{format_type(field.type)} (up to about {limit:.1e})")
        if not field.nullable and values.null_count:
            for row in np.flatnonzero(np.asarray(values.is_null())).tolist():
                if problems[row] is None:
                    problems[row] = (NULL_VALUE, f"column '{field.name}' is declared not null "
                                   "but holds no value")
        columns.append(values)
    rows = pa.RecordBatch.from_arrays(
        columns, schema=pa.schema([f.with_nullable(True) for f in schema]))
    keyless = [n for n in required if n in schema.names]
    if keyless:  # as a JSON line without them: the key, partition or ordering fields
        missing = np.zeros(n, dtype=bool)
        for name in keyless:
            missing |= np.asarray(rows.column(name).is_null(), dtype=bool)
        at = np.flatnonzero(missing)
        if len(at):
            texts = missing_fields_text(pa.Table.from_batches([rows]).take(pa.array(at)),
                                        keyless, REQUIRED_MISSING)
            for i, text in zip(at.tolist(), texts.to_pylist(), strict=True):
                if problems[i] is None:
                    problems[i] = (MISSING_KEY, str(text))
    rejected = np.array([p is not None for p in problems], dtype=bool)
    start = 0
    while start < n:  # runs of good rows and of rejected rows, in order
        stop = start + 1
        while stop < n and rejected[stop] == rejected[start]:
            stop += 1
        if rejected[start]:
            yield _rejections(batch.slice(start, stop - start), problems[start:stop],
                              first_row + start, delimiter)
        else:
            yield pa.RecordBatch.from_arrays(
                [c.slice(start, stop - start) for c in rows.columns], schema=schema)
        start = stop


def _csv_convert(values: pa.Array, to: pa.DataType) -> pa.Array:
    """Text values converted to ``to`` as pyarrow's CSV reader converts a column (null values,
    booleans, timestamps alike): written as a one-column CSV and read back with that type."""
    sink = pa.BufferOutputStream()
    pcsv.write_csv(pa.table({"v": values}), sink,
                   write_options=pcsv.WriteOptions(include_header=False))
    back = pcsv.read_csv(
        pa.BufferReader(sink.getvalue()),
        read_options=pcsv.ReadOptions(column_names=["v"], use_threads=False),
        convert_options=pcsv.ConvertOptions(column_types={"v": to}),
    ).column(0).combine_chunks()
    if len(back) != len(values):  # every value is written quoted: no line is empty
        raise FileSourceError(f"CSV values read back as {len(back)} rows, not {len(values)}")
    return back


def _bad_rows(values: pa.Array, to: pa.DataType) -> list[int]:
    """Rows of ``values`` that do not convert to ``to``: halves are converted until each bad
    value is alone (a few conversions per bad value, each in C++)."""
    bad: list[int] = []
    pending = [(0, len(values))]
    while pending:
        lo, hi = pending.pop()
        try:
            _csv_convert(values.slice(lo, hi - lo), to)
        except pa.ArrowInvalid:
            if hi - lo == 1:
                bad.append(lo)
            else:
                mid = (lo + hi) // 2
                pending += [(mid, hi), (lo, mid)]
    return sorted(bad)


def _hint(to: pa.DataType) -> str:
    """What a value of ``to`` looks like, where CSV is strict about it."""
    if pa.types.is_timestamp(to) and to.tz is not None:
        return " (a timestamp with a zone needs its offset: 2024-03-01T10:00:00Z)"
    return ""


def _shown(value: str | None, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def csv_lines(rows: pa.Table, delimiter: str) -> list[bytes]:
    """Each row as a CSV line of its columns (as text), every value quoted, fields separated by
    the file's delimiter: what the error table keeps of a CSV row."""
    texts = pa.table({n: pc.cast(rows.column(n), pa.string()) for n in rows.column_names})
    lines = []
    for i in range(texts.num_rows):
        sink = pa.BufferOutputStream()
        pcsv.write_csv(texts.slice(i, 1), sink,
                       write_options=pcsv.WriteOptions(include_header=False, delimiter=delimiter))
        lines.append(sink.getvalue().to_pybytes().rstrip(b"\r\n"))
    return lines


def _rejections(
    rows: pa.RecordBatch, problems: list[tuple[str, str] | None], first_row: int, delimiter: str
) -> pa.RecordBatch:
    """A rejected-records batch of ``rows`` (text columns): each row as a CSV line of the
    declared columns (:func:`csv_lines`)."""
    lines = csv_lines(pa.Table.from_batches([rows]), delimiter)
    reasons, details = [], []
    for i, p in enumerate(problems):
        assert p is not None
        reasons.append(p[0])
        details.append(f"row {first_row + i} (counted from 0): {p[1]}")
    return rejected_records_batch(
        pa.array(lines, pa.binary()), pa.array(reasons, pa.string()),
        pa.array(details, pa.string()))
