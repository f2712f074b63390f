"""Format readers: turn one :class:`FileSourceSplit` into Arrow record batches.

:func:`read_split` is the single entry point. It first checks that the file is still the version
the split was cut from (same size and modification time): positions in a changed file would no
longer denote the same rows, so a changed file is an error rather than silently re-interpreted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.formats.csv import CsvDialect, csv_lines, read_csv
from hoodline.connectors.files.formats.jsonl import RawLines, read_jsonl, records_before
from hoodline.connectors.files.formats.parquet import (
    plan_row_group_ranges,
    read_parquet,
    rows_before,
)
from hoodline.connectors.files.location import stat
from hoodline.connectors.files.options import FileFormat
from hoodline.connectors.files.rejections import rows_as_json
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.errors import FileSourceError

__all__ = [
    "VANISHED",
    "RawLines",
    "check_unchanged",
    "plan_row_group_ranges",
    "read_split",
    "records_before_split",
    "refused_values",
]

#: how a file that a reader does not find is described (the driver tells the two cases apart)
VANISHED = ("is not there: deleted after it was discovered and before it was read, or, on a "
            "cluster, not visible to this executor (the source path must be on storage every "
            "node sees)")


def check_unchanged(split: FileSourceSplit) -> None:
    """Raise FileSourceError if the file is gone or differs from the discovered version."""
    try:
        size, mtime_ns = stat(split.path)
    except FileNotFoundError as exc:
        raise FileSourceError(f"file '{split.path}' {VANISHED}") from exc
    except OSError as exc:
        raise FileSourceError(f"file '{split.path}' cannot be accessed: {exc}") from exc
    if size != split.size or mtime_ns != split.mtime_ns:
        raise FileSourceError(
            f"file '{split.path}' changed after it was discovered (size {split.size} -> "
            f"{size}, mtime_ns {split.mtime_ns} -> {mtime_ns}); files must not be "
            "modified once complete: write them under a hidden name and rename into place"
        )


def read_split(split: FileSourceSplit, config: FileSourceConfig) -> Iterator[pa.RecordBatch]:
    """Record batches of ``split`` (in file order), skipping ``split.records_to_skip`` records."""
    check_unchanged(split)
    if config.format is FileFormat.PARQUET:
        return read_parquet(split, config.schema, config.batch_size, config.use_threads,
                            isolate_records=config.tolerate_errors)
    if config.format is FileFormat.JSONL:
        return read_jsonl(split, config.schema, config.block_size, config.use_threads,
                          isolate_records=config.tolerate_errors,
                          required=config.required_fields)
    return read_csv(
        split,
        config.schema,
        config.block_size,
        CsvDialect(config.csv_delimiter, config.csv_header, config.csv_encoding),
        config.use_threads,
        isolate_records=config.tolerate_errors,
        required=config.required_fields,
    )


def records_before_split(split: FileSourceSplit) -> int:
    """Records of the file before ``split``: 0 for a whole file, else what its format counts
    (Parquet: rows of the earlier row groups; JSON lines: lines that are not blank)."""
    return rows_before(split) if split.kind is SplitKind.ROW_GROUPS else records_before(split)


def refused_values(
    split: FileSourceSplit, config: FileSourceConfig, rows: pa.Table, records: Sequence[int],
    first_record: int, lines: RawLines,
) -> tuple[list[bytes], list[str]]:
    """What the error table keeps of records of ``split`` refused after they were read (their
    key or partition values; ``rows`` as read, ``records`` their numbers in the split, the
    split's first being the file's record ``first_record``), and where each is: a JSON line's
    bytes as read and its line number (read again from the file by ``lines``, one reader per
    split kept over its batches); a CSV row as a CSV line of the declared columns, as read into
    their types; a Parquet row as JSON (see :func:`rows_as_json`); the others' record number."""
    where = [f"row {first_record + r} (counted from 0)" for r in records]
    if config.format is FileFormat.JSONL:
        found = lines.take(records)
        if len(found) == len(records):
            return ([found[r][0] for r in records], [f"line {found[r][1]}" for r in records])
    elif config.format is FileFormat.CSV:
        try:
            return csv_lines(rows, config.csv_delimiter), where
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a value with no text form
            pass
    return rows_as_json(rows), where
