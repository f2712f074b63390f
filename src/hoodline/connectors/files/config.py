"""The resolved, validated settings of one file source (built once from :class:`Options`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from hoodline.config import ErrorTolerance, Options
from hoodline.config.arrow_types import parse_schema
from hoodline.connectors.files import options as o
from hoodline.connectors.files.location import is_url
from hoodline.connectors.files.options import FileFormat, ScanMode
from hoodline.errors import ConfigError


@dataclass(frozen=True)
class FileSourceConfig:
    """Everything the enumerator and the readers need to know; see :mod:`.options` for meanings."""

    root: str
    #: a :class:`FileFormat` (a string naming one is converted)
    format: FileFormat
    continuous: bool = False
    monitor_interval: float = 10.0
    stable_scans: int = 2
    glob: str = "**/*"
    extensions: tuple[str, ...] = ()
    schema: pa.Schema | None = None
    split_target_size: int = 128 * 1024 * 1024
    jsonl_byte_ranges: bool = True
    batch_size: int = 64 * 1024
    block_size: int = 4 * 1024 * 1024
    use_threads: bool = True
    csv_delimiter: str = ","
    csv_header: bool = True
    csv_encoding: str = "utf-8"
    tolerate_errors: bool = False
    splits_per_request: int = 1
    #: JSON lines and CSV with a declared schema and ``errors.tolerance`` all: fields a line
    #: (row) must hold, not null. One without them is rejected alone (``missing_key``, its
    #: bytes or text and its line or row number kept), like other bad lines. A pipeline passes
    #: its key, partition and ordering fields (Python API only).
    required_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", o.FORMAT.convert(self.format))
        if not self.root:
            raise ConfigError("option 'path' is missing; set it to the directory to read")
        if not is_url(self.root):
            object.__setattr__(self, "root", os.path.abspath(self.root))
        if not self.extensions:
            object.__setattr__(self, "extensions", o.DEFAULT_EXTENSIONS[self.format])
        object.__setattr__(
            self, "extensions", tuple(e.lower() for e in self.extensions)
        )
        if self.format is FileFormat.CSV and not self.csv_header and self.schema is None:
            raise ConfigError(
                "option 'csv.header' is false but no 'schema' is declared; the schema gives the "
                "column names of header-less CSV files"
            )

    @classmethod
    def from_options(
        cls,
        raw: Mapping[str, object] | Options,
        schema: pa.Schema | None = None,
        required_fields: tuple[str, ...] = (),
    ) -> FileSourceConfig:
        """Read and validate all options; ``schema`` (Python API) overrides the 'schema' option;
        ``required_fields``: see the attribute."""
        opts = raw if isinstance(raw, Options) else Options(raw, known=o.ALL_OPTIONS)
        declared = schema
        text = opts.get(o.SCHEMA)
        if declared is None and text.strip():
            declared = parse_schema(text)
        return cls(
            root=opts.get(o.PATH) if opts.contains(o.PATH) else "",
            format=opts.get(o.FORMAT),
            continuous=opts.get(o.MODE) is ScanMode.CONTINUOUS,
            monitor_interval=opts.get(o.MONITOR_INTERVAL),
            stable_scans=opts.get(o.STABLE_SCANS),
            glob=opts.get(o.GLOB),
            extensions=tuple(str(e) for e in opts.get(o.EXTENSIONS)),
            schema=declared,
            split_target_size=opts.get(o.SPLIT_TARGET_SIZE),
            jsonl_byte_ranges=opts.get(o.JSONL_BYTE_RANGES),
            batch_size=opts.get(o.BATCH_SIZE),
            block_size=opts.get(o.BLOCK_SIZE),
            use_threads=opts.get(o.USE_THREADS),
            csv_delimiter=opts.get(o.CSV_DELIMITER),
            csv_header=opts.get(o.CSV_HEADER),
            csv_encoding=opts.get(o.CSV_ENCODING),
            tolerate_errors=opts.get(o.ERRORS_TOLERANCE) is ErrorTolerance.ALL,
            splits_per_request=opts.get(o.SPLITS_PER_REQUEST),
            required_fields=required_fields,
        )
