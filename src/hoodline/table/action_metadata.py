"""Avro bodies of the table-service instants, as Java Hudi writes them for table version 6.

``.clean.requested`` / ``.clean.inflight`` hold a ``HoodieCleanerPlan``, ``.clean`` a
``HoodieCleanMetadata``, ``.rollback.requested`` a ``HoodieRollbackPlan`` and ``.rollback`` a
``HoodieRollbackMetadata`` (``.rollback.inflight`` is empty), each an Avro object container file
with one record and the writer schema embedded, uncompressed (``TimelineMetadataUtils
.serializeAvroMetadata``). The schemas below are those of hudi-common 0.14 (``src/main/avro``);
Java reads them with its own, newer reader schemas by Avro's schema resolution.

Readers also accept the JSON bodies hoodline 0.1 wrote for these instants, so tables it wrote
stay readable.
"""

from __future__ import annotations

import io
import json
from enum import Enum
from typing import Any

import fastavro

from hoodline.errors import TimelineError

NAMESPACE = "org.apache.hudi.avro.model"
_OPT_STR: list[Any] = ["null", "string"]
_STR_ARRAY = {"type": "array", "items": "string"}
_VERSION = {"name": "version", "type": ["int", "null"], "default": 1}

INSTANT_INFO: dict[str, Any] = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "commitTime", "type": "string"},
        {"name": "action", "type": "string"},
    ],
}

CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": NAMESPACE,
    "fields": [
        {
            "name": "earliestInstantToRetain",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieActionInstant",
                    "fields": [
                        {"name": "timestamp", "type": "string"},
                        {"name": "action", "type": "string"},
                        {"name": "state", "type": "string"},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "policy", "type": "string"},
        {
            "name": "filesToBeDeletedPerPartition",
            "type": ["null", {"type": "map", "values": _STR_ARRAY}],
            "default": None,
        },
        _VERSION,
        {
            "name": "filePathsToBeDeletedPerPartition",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieCleanFileInfo",
                            "fields": [
                                {"name": "filePath", "type": _OPT_STR, "default": None},
                                {
                                    "name": "isBootstrapBaseFile",
                                    "type": ["null", "boolean"],
                                    "default": None,
                                },
                            ],
                        },
                    },
                },
            ],
            "default": None,
        },
        {"name": "partitionsToBeDeleted", "type": ["null", _STR_ARRAY], "default": None},
    ],
}

_CLEAN_PARTITION: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": _STR_ARRAY},
        {"name": "successDeleteFiles", "type": _STR_ARRAY},
        {"name": "failedDeleteFiles", "type": _STR_ARRAY},
        {"name": "isPartitionDeleted", "type": ["null", "boolean"], "default": None},
    ],
}

CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        _VERSION,
        {
            "name": "bootstrapPartitionMetadata",
            "type": ["null", {"type": "map", "values": "HoodieCleanPartitionMetadata"}],
            "default": None,
        },
    ],
}

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "instantToRollback", "type": ["null", INSTANT_INFO], "default": None},
        {
            "name": "RollbackRequests",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            {"name": "partitionPath", "type": "string"},
                            {"name": "fileId", "type": _OPT_STR, "default": None},
                            {"name": "latestBaseInstant", "type": _OPT_STR, "default": None},
                            {"name": "filesToBeDeleted", "type": _STR_ARRAY, "default": []},
                            {
                                "name": "logBlocksToBeDeleted",
                                "type": ["null", {"type": "map", "values": "long"}],
                                "default": None,
                            },
                        ],
                    },
                },
            ],
            "default": None,
        },
        _VERSION,
    ],
}

_SIZE_MAP: list[Any] = ["null", {"type": "map", "values": "long"}]
ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "startRollbackTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": _STR_ARRAY},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": "string"},
                        {"name": "successDeleteFiles", "type": _STR_ARRAY},
                        {"name": "failedDeleteFiles", "type": _STR_ARRAY},
                        {"name": "rollbackLogFiles", "type": _SIZE_MAP, "default": None},
                        {"name": "logFilesFromFailedCommit", "type": _SIZE_MAP, "default": None},
                    ],
                },
            },
        },
        _VERSION,
        {
            "name": "instantsRollback",
            "type": {"type": "array", "items": INSTANT_INFO},
            "default": [],
        },
    ],
}


SAVEPOINT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSavepointMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "savepointedBy", "type": "string"},
        {"name": "savepointedAt", "type": "long"},
        {"name": "comments", "type": "string"},
        {
            "name": "partitionMetadata",
            "type": {"type": "map", "values": {
                "type": "record",
                "name": "HoodieSavepointPartitionMetadata",
                "fields": [
                    {"name": "partitionPath", "type": "string"},
                    {"name": "savepointDataFile", "type": _STR_ARRAY},
                ],
            }},
        },
        _VERSION,
    ],
}


class ActionBody(Enum):
    """The Avro record an instant file holds (the value: its schema)."""

    CLEANER_PLAN = "HoodieCleanerPlan"
    CLEAN_METADATA = "HoodieCleanMetadata"
    ROLLBACK_PLAN = "HoodieRollbackPlan"
    ROLLBACK_METADATA = "HoodieRollbackMetadata"
    #: ``.savepoint`` (written by Java's savepoint command; hoodline only reads it)
    SAVEPOINT_METADATA = "HoodieSavepointMetadata"

    @property
    def schema(self) -> dict[str, Any]:
        return _SCHEMAS[self]

    @property
    def full_name(self) -> str:
        return f"{NAMESPACE}.{self.value}"


_SCHEMAS = {
    ActionBody.CLEANER_PLAN: CLEANER_PLAN_SCHEMA,
    ActionBody.CLEAN_METADATA: CLEAN_METADATA_SCHEMA,
    ActionBody.ROLLBACK_PLAN: ROLLBACK_PLAN_SCHEMA,
    ActionBody.ROLLBACK_METADATA: ROLLBACK_METADATA_SCHEMA,
    ActionBody.SAVEPOINT_METADATA: SAVEPOINT_METADATA_SCHEMA,
}
_PARSED: dict[str, Any] = {}
AVRO_MAGIC = b"Obj\x01"


def avro_container(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """One record in an uncompressed Avro object container file (how Java Hudi serializes
    plans and metadata of the timeline)."""
    name = str(schema["name"])
    parsed = _PARSED.get(name)
    if parsed is None:
        parsed = _PARSED[name] = fastavro.parse_schema(schema)
    buf = io.BytesIO()
    fastavro.writer(buf, parsed, [record], codec="null")
    return buf.getvalue()


def serialize(kind: ActionBody, record: dict[str, Any]) -> bytes:
    """``record`` (missing optional fields take their defaults) as the body Java writes."""
    return avro_container(kind.schema, record)


def avro_record(data: bytes, source: str, record: str) -> dict[str, Any]:
    """The one record of an Avro container file whose schema is Hudi's ``record``
    (:class:`TimelineError` naming ``source`` otherwise)."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        schema = reader.writer_schema
        name = schema.get("name") if isinstance(schema, dict) else None
        records = list(reader)
    except (ValueError, EOFError, StopIteration, TypeError, KeyError) as exc:
        raise TimelineError(f"'{source}' is not a readable Avro file: {exc}") from None
    if name not in (record, f"{NAMESPACE}.{record}"):
        raise TimelineError(f"'{source}' holds a {name} record, expected {NAMESPACE}.{record}")
    if len(records) != 1 or not isinstance(records[0], dict):
        raise TimelineError(f"'{source}' does not hold exactly one {record} record")
    return records[0]


def deserialize(kind: ActionBody, data: bytes, source: str) -> dict[str, Any]:
    """The record of an instant body written by Java Hudi or hoodline (Avro), or by hoodline
    0.1 (JSON). :class:`TimelineError` naming ``source`` if it is neither."""
    if data.startswith(AVRO_MAGIC):
        return avro_record(data, source, kind.value)
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise TimelineError(
            f"'{source}' is neither an Avro {kind.value} nor hoodline 0.1's JSON: {exc}"
        ) from None
    if not isinstance(value, dict):
        raise TimelineError(f"'{source}' holds JSON that is not an object")
    return value
