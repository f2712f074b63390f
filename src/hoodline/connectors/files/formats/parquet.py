"""Parquet: read a whole file or a range of row groups as record batches; plan row-group ranges."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from hoodline.connectors.files.formats.conform import conform, conform_rows, skip_rows
from hoodline.connectors.files.location import is_url, open_binary
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.errors import FileSourceError


def _open(path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(open_binary(path) if is_url(path) else path)
    except FileNotFoundError as exc:
        raise FileSourceError(f"file '{path}' disappeared before it was read: {exc}") from exc
    except (pa.ArrowException, OSError) as exc:
        raise FileSourceError(
            f"file '{path}' is not a readable Parquet file (footer unreadable): {exc}"
        ) from exc


def rows_before(split: FileSourceSplit) -> int:
    """Rows of the file before ``split`` (of its row groups before the split's first): its row
    numbers within the file start there (one footer read)."""
    if split.kind is not SplitKind.ROW_GROUPS or split.start <= 0:
        return 0
    meta = _open(split.path).metadata
    return sum(meta.row_group(g).num_rows for g in range(split.start))


def plan_row_group_ranges(path: str, target_size: int) -> list[tuple[int, int]]:
    """Cut a Parquet file into ``[first, end)`` row-group ranges of about ``target_size`` bytes.

    Consecutive row groups are grouped until their compressed size reaches the target; every row
    group belongs to exactly one range. A file with no row groups gives no ranges.
    """
    meta = _open(path).metadata
    ranges: list[tuple[int, int]] = []
    first, acc = 0, 0
    for g in range(meta.num_row_groups):
        acc += _compressed_size(meta, g) or meta.row_group(g).total_byte_size
        if acc >= target_size:
            ranges.append((first, g + 1))
            first, acc = g + 1, 0
    if first < meta.num_row_groups:
        ranges.append((first, meta.num_row_groups))
    return ranges


def _compressed_size(meta: pq.FileMetaData, g: int) -> int:
    rg = meta.row_group(g)
    return sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))


def read_parquet(
    split: FileSourceSplit, schema: pa.Schema | None, batch_size: int, use_threads: bool = True,
    isolate_records: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Batches of ``split`` minus ``split.records_to_skip`` leading rows, row group by row
    group. With ``isolate_records`` (``errors.tolerance = "all"``) a value that does not fit
    its narrower declared type makes its row a rejected record (:func:`conform_rows`);
    without, it fails the file."""
    pf = _open(split.path)
    n_groups = pf.metadata.num_row_groups
    if split.kind is SplitKind.ROW_GROUPS:
        if split.end > n_groups:
            raise FileSourceError(
                f"{split.describe()}: the file has only {n_groups} row groups; it was replaced "
                "after it was discovered"
            )
        groups = range(split.start, split.end)
    else:
        groups = range(n_groups)
    columns = schema.names if schema is not None else None
    to_skip = split.records_to_skip
    for g in groups:
        rows = pf.metadata.row_group(g).num_rows
        if to_skip >= rows:
            to_skip -= rows  # whole row group already emitted before the checkpoint
            continue
        where = f"file '{split.path}' row group {g}"
        row = 0  # of the row group
        try:
            for batch in pf.iter_batches(
                batch_size=batch_size, row_groups=[g], columns=columns, use_threads=use_threads
            ):
                rest, to_skip = skip_rows(batch, to_skip)
                if rest is not None and rest.num_rows and isolate_records:
                    yield from conform_rows(rest, schema, where,
                                            row + batch.num_rows - rest.num_rows)
                elif rest is not None and rest.num_rows:
                    yield conform(rest, schema, where)
                row += batch.num_rows
        except FileSourceError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise FileSourceError(f"{where} cannot be read: {exc}") from exc
