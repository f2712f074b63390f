"""A Hudi table (copy-on-write or merge-on-read) on a local file system or an object store."""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping

import pyarrow as pa

from hoodline.errors import TableError
from hoodline.storage.paths import ObjectPath, TablePath, parse_location
from hoodline.table.fs_view import FileSystemView
from hoodline.table.instant import COMMIT, DELTA_COMMIT, InstantTimeGenerator
from hoodline.table.integrity import check_writable
from hoodline.table.properties import (
    META_FOLDER,
    TableConfig,
    TimelineTimezone,
    properties_path,
    read_table_config,
    write_table_config,
)
from hoodline.table.schema import arrow_to_avro_schema_json
from hoodline.table.timeline import Timeline


def _local_now() -> datetime.datetime:
    return datetime.datetime.now()


#: hoodie.properties key holding the Avro schema given at creation (used until the first commit).
CREATE_SCHEMA_KEY = "hoodie.table.create.schema"


class HudiTable:
    """Entry point of the table layer: configuration, timeline and file-system views."""

    def __init__(self, base_path: str | os.PathLike[str] | TablePath, config: TableConfig) -> None:
        self.base_path: TablePath = parse_location(base_path)
        self.config = config
        self.meta_path = self.base_path / META_FOLDER
        self.timeline = Timeline(self.meta_path)
        # instant times on the clock the table's timeline uses (Java's default: local time)
        local = config.timeline_timezone is TimelineTimezone.LOCAL
        self.instant_time_generator = InstantTimeGenerator(_local_now if local else None)
        #: what this process's last clean planned through (see :mod:`hoodline.table.clean`):
        #: later cleans of this object look only at the partitions written since
        self.clean_progress: object | None = None

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str] | TablePath,
        config: TableConfig,
        exist_ok: bool = False,
        schema: pa.Schema | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> HudiTable:
        """Create a new table at ``path`` (folder may exist but must not hold a table).

        ``schema`` (data columns) is recorded as ``hoodie.table.create.schema`` so readers know
        the columns before the first commit. With ``exist_ok`` an existing table with the same
        name, keys and partitioning is opened; a different layout is refused."""
        base = parse_location(path, storage_options)
        if properties_path(base).exists():
            if not exist_ok:
                raise TableError(
                    f"a Hudi table already exists at '{base}'; open it instead, "
                    "or choose another path"
                )
            table = cls.open(base)
            existing = table.config
            for attr in ("name", "record_key_fields", "partition_fields", "table_type"):
                if getattr(existing, attr) != getattr(config, attr):
                    raise TableError(
                        f"table at '{base}' has {attr}={getattr(existing, attr)!r}, "
                        f"but {getattr(config, attr)!r} was requested"
                    )
            return table
        if schema is not None:
            extra = dict(config.extra)
            extra[CREATE_SCHEMA_KEY] = arrow_to_avro_schema_json(schema, config.name)
            config = dataclasses.replace(config, extra=extra)
        try:
            (base / META_FOLDER).mkdir(parents=True, exist_ok=True)
            write_table_config(base, config)
        except OSError as exc:
            where = f" ('{exc.filename}')" if exc.filename else ""
            raise TableError(
                f"cannot create a Hudi table at '{base}': {exc.strerror or exc}{where}; "
                "choose a path where this user can create directories"
            ) from exc
        return cls(base, config)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | TablePath,
        storage_options: Mapping[str, str] | None = None,
    ) -> HudiTable:
        """Open an existing table (``TableNotFoundError`` / ``UnsupportedTableError`` otherwise);
        ``storage_options`` open an object store location (``s3://…``)."""
        base = parse_location(path, storage_options)
        return cls(base, read_table_config(base))

    @property
    def write_action(self) -> str:
        """The action of a write instant: ``deltacommit`` on merge-on-read, else ``commit``."""
        return DELTA_COMMIT if self.config.merge_on_read else COMMIT

    def new_instant_time(self) -> str:
        """A fresh instant time newer than anything on the timeline."""
        self.timeline.reload()
        return self.instant_time_generator.next(after=self.timeline.last_timestamp())

    def fs_view(self, as_of: str | None = None) -> FileSystemView:
        """Committed file slices at ``as_of`` (None = latest completed commit)."""
        self.timeline.reload()
        return FileSystemView(
            self.base_path, self.timeline, self.config.is_partitioned, as_of=as_of
        )

    def write_view(self) -> FileSystemView:
        """The latest committed file slices for a writer to merge into or append to; a
        :class:`TableError` when one lacks a file its commit recorded
        (:func:`~hoodline.table.integrity.check_writable`)."""
        view = self.fs_view()
        check_writable(view, self.meta_path)
        return view

    def absolute(self, relative_path: str) -> TablePath:
        return self.base_path / relative_path

    def file_at(self, stored: str) -> TablePath:
        """A file named in a timeline body (clean, rollback): a full path as Java writes it
        (``/data/t/p/f``, ``file:/data/t/p/f``, ``s3a://bucket/t/p/f``) or one relative to the
        table (hoodline 0.1)."""
        base = self.base_path
        if isinstance(base, ObjectPath):
            _scheme, sep, rest = stored.partition("://")
            if not sep:
                return base / stored
            bucket, _, key = rest.partition("/")
            if bucket != base.root.bucket:
                raise TableError(f"file '{stored}' is not in the table's bucket '{base.root.url}'")
            return ObjectPath(base.root, key)
        if stored.startswith("file://"):
            stored = stored[len("file://"):]
        elif stored.startswith("file:"):
            stored = stored[len("file:"):]
        return base / stored

    def __repr__(self) -> str:
        return f"HudiTable({str(self.base_path)!r}, name={self.config.name!r})"
