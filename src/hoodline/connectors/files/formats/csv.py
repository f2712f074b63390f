"""CSV with pyarrow.csv; a CSV split is always a whole file (quoted values may span lines).

With a declared schema the file is streamed (``open_csv``) with the declared column types; without
one it is parsed at once (``read_csv``) so type inference sees every row. Already emitted rows
are skipped by the parser itself (``skip_rows_after_names``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pcsv

from hoodline.connectors.files.formats.conform import conform
from hoodline.connectors.files.location import is_url, open_binary
from hoodline.connectors.files.split import FileSourceSplit
from hoodline.errors import FileSourceError


class _RowProblem:
    """Remembers the line number of the first malformed row (pyarrow's callback gives it)."""

    def __init__(self) -> None:
        self.line: int | None = None

    def __call__(self, row: pcsv.InvalidRow) -> str:
        if self.line is None and row.number is not None:
            self.line = int(row.number)
        return "error"


def _options(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    delimiter: str,
    header: bool,
    use_threads: bool,
    problem: _RowProblem,
) -> tuple[pcsv.ReadOptions, pcsv.ParseOptions, pcsv.ConvertOptions]:
    read_options = pcsv.ReadOptions(
        use_threads=use_threads,
        block_size=block_size,
        skip_rows_after_names=split.records_to_skip,
        column_names=None if header else (schema.names if schema is not None else None),
    )
    parse_options = pcsv.ParseOptions(delimiter=delimiter, invalid_row_handler=problem)
    convert_options = pcsv.ConvertOptions(
        column_types={f.name: f.type for f in schema} if schema is not None else None,
        include_columns=schema.names if schema is not None else None,
        include_missing_columns=False,
    )
    return read_options, parse_options, convert_options


def _source(path: str) -> str | BinaryIO:
    return open_binary(path) if is_url(path) else path


def read_csv(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    delimiter: str,
    header: bool,
    use_threads: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Batches of a CSV file after skipping ``split.records_to_skip`` data rows."""
    if split.size == 0:
        return
    problem = _RowProblem()
    options = _options(split, schema, block_size, delimiter, header, use_threads, problem)
    where = split.describe()
    try:
        if schema is not None:
            reader = pcsv.open_csv(
                _source(split.path),
                read_options=options[0],
                parse_options=options[1],
                convert_options=options[2],
            )
            for batch in reader:
                if batch.num_rows:
                    yield conform(batch, schema, where)
        else:
            table = pcsv.read_csv(
                _source(split.path),
                read_options=options[0],
                parse_options=options[1],
                convert_options=options[2],
            )
            for batch in table.to_batches():
                if batch.num_rows:
                    yield batch
    except FileSourceError:
        raise
    except FileNotFoundError as exc:
        raise FileSourceError(f"{where} disappeared before it was read: {exc}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        line = problem.line
        if line is None and use_threads:
            line = _locate_bad_row(split, schema, block_size, delimiter, header)
        if line is not None:
            raise FileSourceError(
                f"file '{split.path}' line {line} is not a valid CSV row: {exc}"
            ) from exc
        raise FileSourceError(f"{where} cannot be parsed as CSV: {exc}") from exc


def _locate_bad_row(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    delimiter: str,
    header: bool,
) -> int | None:
    """Error path only: parse again single-threaded, where pyarrow reports row numbers."""
    problem = _RowProblem()
    read_options, parse_options, convert_options = _options(
        split, schema, block_size, delimiter, header, False, problem
    )
    try:
        for _ in pcsv.open_csv(
            _source(split.path),
            read_options=read_options,
            parse_options=parse_options,
            convert_options=convert_options,
        ):
            pass
    except (pa.ArrowException, OSError, ValueError):
        pass
    return problem.line
