"""CSV with pyarrow.csv; a CSV split is always a whole file (quoted values may span lines).

With a declared schema the file is streamed (``open_csv``) with the declared column types; without
one it is parsed at once (``read_csv``) so type inference sees every row. Already emitted rows
are skipped by the parser itself (``skip_rows_after_names``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pcsv

from hoodline.connectors.files.formats.conform import conform
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


def read_csv(
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    delimiter: str,
    header: bool,
) -> Iterator[pa.RecordBatch]:
    """Batches of a CSV file after skipping ``split.records_to_skip`` data rows."""
    if split.size == 0:
        return
    problem = _RowProblem()
    read_options = pcsv.ReadOptions(
        use_threads=False,
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
    where = split.describe()
    try:
        if schema is not None:
            reader = pcsv.open_csv(
                split.path,
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options,
            )
            for batch in reader:
                if batch.num_rows:
                    yield conform(batch, schema, where)
        else:
            table = pcsv.read_csv(
                split.path,
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options,
            )
            for batch in table.to_batches():
                if batch.num_rows:
                    yield batch
    except FileSourceError:
        raise
    except FileNotFoundError as exc:
        raise FileSourceError(f"{where} disappeared before it was read: {exc}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        if problem.line is not None:
            raise FileSourceError(
                f"file '{split.path}' line {problem.line} is not a valid CSV row: {exc}"
            ) from exc
        raise FileSourceError(f"{where} cannot be parsed as CSV: {exc}") from exc
