"""Commit metadata: the JSON body of a completed ``commit``/``replacecommit`` instant.

Shape (Hudi table version 6, as hudi-rs reads it)::

    {"partitionToWriteStats": {"<partition>": [{"fileId": ..., "path": ..., "prevCommit": ...,
        "numWrites": .., "numDeletes": .., "numUpdateWrites": .., "numInserts": ..,
        "totalWriteBytes": .., "totalWriteErrors": .., "partitionPath": ..,
        "fileSizeInBytes": ..}]},
     "compacted": false, "operationType": "UPSERT",
     "extraMetadata": {"schema": "<Avro schema JSON of the data columns>", ...writer keys...}}

A replacecommit additionally carries ``partitionToReplaceFileIds``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hoodline.errors import TimelineError

#: Key of the Avro schema (data columns, no ``_hoodie_`` columns) in ``extraMetadata``.
SCHEMA_KEY = "schema"
#: extra-metadata key of a hoodline pipeline's source checkpoint (see
#: :mod:`hoodline.pipeline.checkpoint`)
PIPELINE_CHECKPOINT_KEY = "hoodline.checkpoint"
#: extra-metadata key of Java's Hudi Streamer's checkpoint (``HoodieStreamer.CHECKPOINT_KEY`` of
#: table version 6; a Kafka source's is read and written by
#: :mod:`hoodline.connectors.kafka.java_checkpoints`)
STREAMER_CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
#: extra-metadata key of the Kafka offsets Hudi's Kafka Connect sink commits with its data (see
#: :mod:`hoodline.connectors.kafka.java_checkpoints`)
CONNECT_OFFSETS_KEY = "kafka.commit.offsets"
#: keys of the positions Java Hudi's Kafka writers keep in their commits
JAVA_POSITION_KEYS = (STREAMER_CHECKPOINT_KEY, CONNECT_OFFSETS_KEY)
#: what Hudi Streamer's ``--checkpoint`` / ``--ignore-checkpoint`` flags left in its commits: a
#: Streamer started with the flag applies it again unless the newest checkpoint carries the
#: flag's value under these keys, so a writer taking over passes them on
STREAMER_FLAG_KEYS = ("deltastreamer.checkpoint.reset_key", "deltastreamer.checkpoint.ignore_key")
#: extra-metadata keys of writers' checkpoints: hoodline's pipelines, and Hudi Streamer's (the
#: second is what table version 8 writers store). Writers look for theirs on the active
#: timeline only, so archival keeps the newest commit that carries one there
#: (:func:`~hoodline.table.archive.instants_to_archive`)
CHECKPOINT_KEYS = (PIPELINE_CHECKPOINT_KEY, STREAMER_CHECKPOINT_KEY, "streamer.checkpoint.key.v2")


@dataclass
class WriteStat:
    """What one write task did to one file group in one instant."""

    file_id: str
    path: str
    prev_commit: str | None
    num_writes: int
    num_deletes: int
    num_update_writes: int
    num_inserts: int
    total_write_bytes: int
    total_write_errors: int
    partition_path: str
    file_size_in_bytes: int
    #: merge-on-read appends (``HoodieDeltaWriteStat``): version of the log file written, the
    #: slice's base file name ("" for a log-only slice) and every log file of the slice
    log_version: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    total_log_blocks: int = 0
    #: compaction: log files and records merged
    total_log_files_compacted: int = 0
    total_log_records: int = 0

    def to_dict(self) -> dict[str, Any]:
        body = self._base_dict()
        if self.total_log_files_compacted:
            body["totalLogFilesCompacted"] = self.total_log_files_compacted
            body["totalLogRecords"] = self.total_log_records
        if self.log_version is not None:
            body["totalLogBlocks"] = self.total_log_blocks
            body["logVersion"] = self.log_version
            body["logOffset"] = 0
            body["baseFile"] = self.base_file or ""
            body["logFiles"] = list(self.log_files or [])
            body["recordsStats"] = {"val": None}
        return body

    def _base_dict(self) -> dict[str, Any]:
        return {
            "fileId": self.file_id,
            "path": self.path,
            # Java Hudi writes the string "null" for a new file group
            "prevCommit": self.prev_commit if self.prev_commit is not None else "null",
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": self.total_write_errors,
            "partitionPath": self.partition_path,
            "fileSizeInBytes": self.file_size_in_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        prev = d.get("prevCommit")
        return cls(
            file_id=str(d["fileId"]),
            path=str(d["path"]),
            prev_commit=None if prev in (None, "null") else str(prev),
            num_writes=int(d.get("numWrites", 0)),
            num_deletes=int(d.get("numDeletes", 0)),
            num_update_writes=int(d.get("numUpdateWrites", 0)),
            num_inserts=int(d.get("numInserts", 0)),
            total_write_bytes=int(d.get("totalWriteBytes", 0)),
            total_write_errors=int(d.get("totalWriteErrors", 0)),
            partition_path=str(d.get("partitionPath", "")),
            file_size_in_bytes=int(d.get("fileSizeInBytes", 0)),
            log_version=int(d["logVersion"]) if d.get("logVersion") is not None else None,
            base_file=str(d["baseFile"]) if d.get("baseFile") is not None else None,
            log_files=[str(f) for f in d["logFiles"]] if d.get("logFiles") is not None else None,
            total_log_blocks=int(d.get("totalLogBlocks") or 0),
            total_log_files_compacted=int(d.get("totalLogFilesCompacted") or 0),
            total_log_records=int(d.get("totalLogRecords") or 0),
        )


@dataclass
class CommitMetadata:
    """Everything a completed data instant records."""

    partition_to_write_stats: dict[str, list[WriteStat]]
    operation_type: str
    extra_metadata: dict[str, str]
    compacted: bool = False
    #: replacecommit only: file groups hidden by this instant, per partition.
    partition_to_replace_file_ids: dict[str, list[str]] = field(default_factory=dict)

    @property
    def schema(self) -> str | None:
        """The Avro schema JSON in ``extraMetadata.schema`` (None if absent)."""
        return self.extra_metadata.get(SCHEMA_KEY)

    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def file_paths(self) -> list[str]:
        """Relative paths of every file this instant wrote."""
        return [s.path for s in self.write_stats()]

    def total_records_written(self) -> int:
        return sum(s.num_writes for s in self.write_stats())

    def total_bytes_written(self) -> int:
        return sum(s.total_write_bytes for s in self.write_stats())

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_dict() for s in stats]
                for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids:
            body["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()
            }
        return body

    def to_json_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2).encode("utf-8")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommitMetadata:
        p2s = d.get("partitionToWriteStats") or {}
        extra = d.get("extraMetadata") or {}
        return cls(
            partition_to_write_stats={
                str(p): [WriteStat.from_dict(s) for s in (stats or [])] for p, stats in p2s.items()
            },
            operation_type=str(d.get("operationType") or "UNKNOWN"),
            extra_metadata={str(k): str(v) for k, v in extra.items() if v is not None},
            compacted=bool(d.get("compacted", False)),
            partition_to_replace_file_ids={
                str(p): [str(i) for i in ids]
                for p, ids in (d.get("partitionToReplaceFileIds") or {}).items()
            },
        )

    @classmethod
    def from_json_bytes(cls, data: bytes, source: str = "<bytes>") -> CommitMetadata:
        if not data.strip():
            # Java reads an empty body as a commit that wrote nothing (HoodieCommitMetadata's
            # fromJsonString); hudi-rs fails. Completed instants are written in one atomic step
            # (by hoodline, and by Java on its file systems): an empty one is damage from outside
            # (a crash on a file system without atomic rename, a power loss), and reading it as
            # "nothing written" moves a pipeline's checkpoint back a round and hides its files
            raise TimelineError(
                f"completed instant '{source}' is empty: its commit metadata (the files it wrote, "
                "the schema, a pipeline's checkpoint) is lost"
            )
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TimelineError(f"commit metadata in '{source}' is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise TimelineError(f"commit metadata in '{source}' is not a JSON object")
        try:
            return cls.from_dict(parsed)
        except (KeyError, TypeError, ValueError) as exc:
            raise TimelineError(
                f"commit metadata in '{source}' is malformed ({exc!r}); "
                "the file may have been written by another tool"
            ) from None
