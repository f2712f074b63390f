"""Log file names (table version 6): ``.{fileId}_{baseInstant}.log.{version}_{writeToken}``.

``baseInstant`` is the instant of the file slice the log belongs to (its base file's instant, or,
for a file group that has only log files, the deltacommit that created it). Versions start at 1;
on storage without appends (local disk, object stores) every write opens the next version. The
write token is three non-negative integers joined by ``-`` (Java's ``taskPartition-stage-
attempt``); Java Hudi's parser accepts nothing else.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from hoodline.errors import TableError
from hoodline.table.instant import is_valid_timestamp

LOG_EXTENSION = "log"
FIRST_VERSION = 1
_PATTERN = re.compile(r"^\.(.+)_(\d{17})\.log\.(\d+)_(\d+-\d+-\d+)$")
_TOKEN = re.compile(r"^\d+-\d+-\d+$")


@dataclass(frozen=True, order=True)
class LogFileName:
    """A parsed log file name; orders as Java's ``LogFileComparator`` (instant, version, token)."""

    base_instant: str
    version: int
    write_token: str
    file_id: str

    def __post_init__(self) -> None:
        if not self.file_id or "_" in self.file_id or "/" in self.file_id:
            raise TableError(f"file id '{self.file_id}' is invalid for a log file name")
        if not is_valid_timestamp(self.base_instant):
            raise TableError(f"base instant '{self.base_instant}' is not a 17-digit timestamp")
        if self.version < FIRST_VERSION:
            raise TableError(f"log version {self.version} is below {FIRST_VERSION}")
        if not _TOKEN.match(self.write_token):
            raise TableError(
                f"write token '{self.write_token}' must be three integers joined by '-'"
            )

    @property
    def name(self) -> str:
        return (
            f".{self.file_id}_{self.base_instant}.{LOG_EXTENSION}.{self.version}_"
            f"{self.write_token}"
        )

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        """The parts of a log file name, or None when ``name`` is not one."""
        if cls is LogFileName:
            return _parse_cached(name)
        return cls._parse(name)

    @classmethod
    def _parse(cls, name: str) -> LogFileName | None:
        m = _PATTERN.match(name)
        if m is None:
            return None
        try:
            return cls(m.group(2), int(m.group(3)), m.group(4), m.group(1))
        except TableError:
            return None


@functools.lru_cache(maxsize=1 << 16)
def _parse_cached(name: str) -> LogFileName | None:
    # names are immutable and every write lists its partitions again: parse each name once
    return LogFileName._parse(name)


def is_log_file(name: str) -> bool:
    return LogFileName.parse(name) is not None
