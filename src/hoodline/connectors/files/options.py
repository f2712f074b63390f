"""Options of the file source (declared once; read through :class:`hoodline.config.Options`).

Example::

    FileSource.from_options({
        "path": "/data/landing",
        "format": "jsonl",
        "source.mode": "continuous",
        "source.monitor-interval": 5,
        "schema": "id int64, name string, ts timestamp[us]",
        "errors.tolerance": "all",
    })
"""

from __future__ import annotations

import codecs
from typing import Any

from hoodline.config import ConfigEnum, ConfigOption, ErrorTolerance, option
from hoodline.connectors.files.compression import with_compressed


class FileFormat(ConfigEnum):
    """How the files are encoded (``format``)."""

    PARQUET = "parquet"
    #: one JSON object per line
    JSONL = "jsonl"
    CSV = "csv"


class ScanMode(ConfigEnum):
    """Whether the source finishes after the files present at start (``source.mode``)."""

    BOUNDED = "bounded"
    CONTINUOUS = "continuous"


PATH = option(
    "path",
    str,
    "",
    "Root directory to read: a local path or an object store prefix (s3://bucket/in, gs://..., "
    "abfs://...; credentials from the provider's standard environment). Every regular file below "
    "it (recursively) that matches 'source.file.glob' and 'source.file.extensions' is read; "
    "files and directories whose name starts with '.' or '_' are ignored (in-progress uploads, "
    "_SUCCESS markers, _temporary dirs).",
    validator=lambda v: None if v else "set it to the directory to read",
)

FORMAT = option(
    "format",
    FileFormat,
    FileFormat.PARQUET,
    "File format: 'parquet', 'jsonl' (one JSON object per line) or 'csv'; JSON lines and CSV "
    "files may be compressed (gzip, bzip2, Zstandard: see 'source.file.extensions').",
)

MODE = option(
    "source.mode",
    ScanMode,
    ScanMode.BOUNDED,
    "'bounded': read the files present when the source starts (taken as they are at that "
    "listing: do not point it at files still being written), then finish; started again from "
    "its checkpoint (a pipeline run again), it lists again and reads only the files it has not "
    "read before. 'continuous': "
    "monitor the directory every 'source.monitor-interval' seconds and read new, complete "
    "files (see 'source.stable-scans') as they appear, forever.",
)

MONITOR_INTERVAL = option(
    "source.monitor-interval",
    float,
    10.0,
    "Seconds between two directory scans in continuous mode.",
    minimum=0.001,
)

STABLE_SCANS = option(
    "source.stable-scans",
    int,
    2,
    "Continuous mode: a file is picked up only after it was seen with the same size and "
    "modification time in this many consecutive scans (so a file still being written is not "
    "read half-way). Use 1 only if every file is renamed into place when complete. A writer "
    "that pauses longer than the monitor interval while writing in place defeats this rule: "
    "write to a hidden name ('.x' or '_x') and rename when done.",
    minimum=1,
)

GLOB = option(
    "source.file.glob",
    str,
    "**/*",
    "Glob (relative to 'path', '/' separated, '**' matches any number of directories) that a "
    "file's relative path must match, e.g. 'date=*/*.parquet'.",
)

EXTENSIONS = option(
    "source.file.extensions",
    tuple,
    (),
    "Comma-separated file name endings to accept (case-insensitive), e.g. '.json,.ndjson'. "
    "Empty means the format's defaults: parquet '.parquet,.parq'; jsonl '.jsonl,.json,.ndjson'; "
    "csv '.csv'; for jsonl and csv each also compressed, ending in '.gz' (gzip), '.bz2' or "
    "'.zst' (Zstandard), e.g. 'events.jsonl.gz'. A compressed file is read whole by one reader "
    "(it has no byte ranges); one of JSON lines is decompressed first, in memory up to 64 MiB, "
    "beyond that into the temporary directory. Files under 'path' with other endings are not "
    "read; the first listing says how many there are.",
)

SCHEMA = option(
    "schema",
    str,
    "",
    "Python API only (a FileSource built in code); a pipeline refuses it and reads its "
    "[schema] instead, with the same rules. Declared Arrow schema of the records, as "
    "'name type, name type not null, ...'; types are "
    "written as in a pipeline's [schema] (int64, double, bool, string, binary, date32, "
    "timestamp[us], timestamp[ms, UTC], decimal(10, 2), list<string>, struct<a: int64>, and "
    "other Arrow type names such as decimal128(10, 2) or time64[us]). Every batch is emitted "
    "with exactly this schema: a Parquet or CSV file without a declared column fails (it is "
    "rejected whole with 'errors.tolerance' all), a field missing from a JSON line is null (as "
    "in a Kafka JSON message), extra fields are dropped. "
    "Optional for Parquet (the file schema is used); recommended for JSON lines and CSV, where "
    "types are otherwise inferred per file. JSON lines take values as Kafka JSON messages do: "
    "numbers for numeric types, ISO-8601 strings for dates and timestamps ('2024-03-01', "
    "'2024-03-01T10:00:00Z'; a day number is a wrong type). CSV values convert as pyarrow's CSV "
    "reader converts them: an empty value and the markers NA, N/A, NULL, null, NaN, nan, #N/A "
    "are null in every column but a string one, where they stay text; booleans are "
    "true/false/1/0 (also True, TRUE, False, FALSE); a timestamp with a zone needs its offset "
    "('2024-03-01T10:00:00Z'); a number too big for its float column (1e309 for a double) is "
    "a wrong type, not infinity ('inf', 'Infinity' written as such are infinity).",
)

SPLIT_TARGET_SIZE = option(
    "split.target-size",
    int,
    128 * 1024 * 1024,
    "Files larger than this many bytes are cut into several splits that different readers can "
    "read in parallel: Parquet into ranges of whole row groups of about this compressed size; "
    "JSON lines into byte ranges aligned to line starts (see 'split.jsonl-byte-ranges'). CSV "
    "files are never cut (quoted values may contain line breaks).",
    minimum=1024,
)

JSONL_BYTE_RANGES = option(
    "split.jsonl-byte-ranges",
    bool,
    True,
    "Cut large JSON-lines files into byte ranges. Safe because a JSON value cannot contain a raw "
    "line break; a range owns exactly the lines that start inside it.",
)

BATCH_SIZE = option(
    "read.batch-size",
    int,
    64 * 1024,
    "Parquet: maximum rows per emitted record batch.",
    minimum=1,
)

BLOCK_SIZE = option(
    "read.block-size",
    int,
    4 * 1024 * 1024,
    "JSON lines and CSV: bytes parsed at a time (one emitted batch per block). Must exceed the "
    "longest line.",
    minimum=1024,
)

USE_THREADS = option(
    "read.use-threads",
    bool,
    True,
    "Let pyarrow parse with its thread pool (about 2-3x faster for JSON and CSV on several "
    "cores). Turn off when many readers share few cores.",
)

CSV_DELIMITER = option(
    "csv.delimiter",
    str,
    ",",
    "CSV field delimiter (one character).",
    validator=lambda v: None if len(v) == 1 else "must be exactly one character",
)

CSV_HEADER = option(
    "csv.header",
    bool,
    True,
    "CSV files start with a header line naming the columns. If false, 'schema' is required and "
    "gives the column names in file order.",
)

def _codec_problem(name: str) -> str | None:
    try:
        codecs.lookup(name)
    except LookupError:
        return "is not a character encoding Python knows (e.g. 'utf-8', 'latin-1', 'cp1252')"
    return None


CSV_ENCODING = option(
    "csv.encoding",
    str,
    "utf-8",
    "Character encoding of the CSV files, a Python codec name ('utf-8', 'latin-1', 'cp1252', "
    "'utf-16', ...). Values are read as text in that encoding and written as UTF-8; bytes the "
    "encoding cannot decode make the file unreadable.",
    validator=_codec_problem,
)

ERRORS_TOLERANCE = option(
    "errors.tolerance",
    ErrorTolerance,
    ErrorTolerance.NONE,
    "Python API (a FileSource built in code): a pipeline sets it from [errors] tolerance and "
    "refuses it here. "
    "'none': a file that cannot be read or parsed fails the source with a FileSourceError naming "
    "the file (and line / row group when known); so does a file that changed after it was read "
    "(its size or modification time; a file is read once, so the change would be lost). "
    "'all': with a declared 'schema', a JSON line "
    "that is not one object of the schema (invalid JSON, another JSON type, a value of the wrong "
    "type) is emitted in place as a rejected-records batch (the line's bytes, a reason code and "
    "the line number; see hoodline.connectors.files.rejections) and the file's other lines are "
    "read; so is a CSV row with a value that does not convert to its declared type, or no value "
    "in a not-null column (the row's declared columns as a CSV line with every value quoted, a "
    "reason code and the row number, counted from 0 after the header, empty lines not "
    "counted), and a CSV row with the wrong number of fields (its text as read, reason "
    "'unparseable'); a pipeline writes such lines and rows to its error table. A file that "
    "cannot be read at all (CSV bytes that are not text of 'csv.encoding', Parquet errors, JSON "
    "lines without a "
    "declared schema, a file deleted after discovery) is logged, recorded as rejected "
    "(kept in the checkpointed enumerator state) "
    "and skipped; rows of it emitted before the error are not taken back and the rejection says "
    "how many there were (JSON lines and CSV are parsed in blocks of 'read.block-size': of a "
    "small file, usually none). So is each new version of a file that changed after it was "
    "read, unread. A pipeline writes every rejected file to its error table, once (reason "
    "'unreadable_file', or 'file_changed'). A rejected file is not read again under its name: "
    "write the fixed file under a new name.",
)

SPLITS_PER_REQUEST = option(
    "assign.splits-per-request",
    int,
    1,
    "How many splits the enumerator hands to a reader each time it asks for work, at least: "
    "in a pipeline a reader takes more while their sizes stay below its share of "
    "runtime.round.max-bytes and of the files waiting (up to 1000 per round), so a folder of "
    "small files is not read one file per reader and round.",
    minimum=1,
)

ALL_OPTIONS: tuple[ConfigOption[Any], ...] = (
    PATH,
    FORMAT,
    MODE,
    MONITOR_INTERVAL,
    STABLE_SCANS,
    GLOB,
    EXTENSIONS,
    SCHEMA,
    SPLIT_TARGET_SIZE,
    JSONL_BYTE_RANGES,
    BATCH_SIZE,
    BLOCK_SIZE,
    USE_THREADS,
    CSV_DELIMITER,
    CSV_HEADER,
    CSV_ENCODING,
    ERRORS_TOLERANCE,
    SPLITS_PER_REQUEST,
)

DEFAULT_EXTENSIONS: dict[FileFormat, tuple[str, ...]] = {
    FileFormat.PARQUET: (".parquet", ".parq"),
    FileFormat.JSONL: with_compressed((".jsonl", ".json", ".ndjson")),
    FileFormat.CSV: with_compressed((".csv",)),
}
