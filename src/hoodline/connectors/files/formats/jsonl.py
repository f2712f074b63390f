"""JSON lines: one JSON object per line, read with pyarrow.json.

* With a declared schema the split is *streamed* block by block (``pyarrow.json.open_json`` with
  an explicit schema; fields outside the schema are ignored).
* Without one, pyarrow infers types from the data it has seen, and a streamed reader would fail
  when a later block contradicts the first (a field first seen in block 2, a column that was all
  null). So the whole split is parsed at once (``read_json``), which infers over all of it; memory
  is then bounded by the split size (see ``split.target-size``). Declare a schema for big files.

Blank lines are ignored. On a parse error the file is scanned once more (error path only) to
name the first offending line.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.json as pj

from hoodline.connectors.files.formats.byte_range import (
    RangeReader,
    align_range,
    count_newlines_before,
)
from hoodline.connectors.files.formats.conform import conform, skip_rows
from hoodline.connectors.files.location import is_url, open_binary
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.errors import FileSourceError


def read_jsonl(
    split: FileSourceSplit, schema: pa.Schema | None, block_size: int, use_threads: bool = True
) -> Iterator[pa.RecordBatch]:
    """Batches of the lines owned by ``split``, after skipping ``split.records_to_skip`` records."""
    try:
        f = open_binary(split.path)  # closed in finally
    except OSError as exc:
        raise FileSourceError(f"{split.describe()} cannot be opened: {exc}") from exc
    try:
        if split.kind is SplitKind.BYTES:
            start, end = align_range(f, split.start, split.end, split.size)
        else:
            start, end = 0, split.size
        if end <= start:
            return
        to_skip = split.records_to_skip
        where = split.describe()
        try:
            for batch in _batches(f, start, end, split, schema, block_size, use_threads):
                rest, to_skip = skip_rows(batch, to_skip)
                if rest is not None and rest.num_rows:
                    yield conform(rest, schema, where)
        except FileSourceError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise FileSourceError(_describe_error(f, split, start, end, exc)) from exc
    finally:
        f.close()


def _batches(
    f: BinaryIO,
    start: int,
    end: int,
    split: FileSourceSplit,
    schema: pa.Schema | None,
    block_size: int,
    use_threads: bool,
) -> Iterator[pa.RecordBatch]:
    if _only_whitespace(f, start, end):
        return
    read_options = pj.ReadOptions(use_threads=use_threads, block_size=block_size)
    if schema is not None:
        parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        source: pa.NativeFile | io.BufferedReader
        if start == 0 and end == split.size and not is_url(split.path):
            source = pa.OSFile(split.path)  # whole local file: native reads, no Python loop
        else:
            source = io.BufferedReader(RangeReader(f, start, end), buffer_size=block_size)
        with source:
            yield from pj.open_json(source, read_options=read_options, parse_options=parse)
        return
    f.seek(start)
    data = f.read(end - start)
    table = pj.read_json(pa.BufferReader(data), read_options=read_options)
    yield from table.to_batches()


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
    """Error message naming the file and, if it can be found, the first unparseable line."""
    line_no = _first_bad_line(f, start, end)
    if line_no is None:
        return f"{split.describe()} cannot be parsed as JSON lines: {exc}"
    return (
        f"file '{split.path}' line {line_no} cannot be parsed as a JSON object: {exc}"
    )


def _first_bad_line(f: BinaryIO, start: int, end: int) -> int | None:
    try:
        line_no = count_newlines_before(f, start)
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
            except ValueError:
                return line_no
            if not isinstance(value, dict):
                return line_no
    except OSError:
        return None
    return None
