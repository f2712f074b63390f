"""The compaction plan: ``<C>.compaction.requested`` holds an Avro ``HoodieCompactionPlan``
(one operation per file group: its base file, log files and base instant), as Java Hudi writes
it for table version 6. Plans never change once written, so a process parses each one once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from hoodline.errors import TimelineError
from hoodline.storage.paths import TablePath
from hoodline.table.action_metadata import avro_container, avro_record
from hoodline.table.instant import Instant, State
from hoodline.table.timeline import Timeline

_NS = "org.apache.hudi.avro.model"
_OPT_STR: list[Any] = ["null", "string"]

#: ``HoodieCompactionPlan`` (hudi-common ``HoodieCompactionOperation.avsc``, table version 6)
COMPACTION_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": _NS,
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieCompactionOperation",
                        "namespace": _NS,
                        "fields": [
                            {"name": "baseInstantTime", "type": _OPT_STR},
                            {
                                "name": "deltaFilePaths",
                                "type": ["null", {"type": "array", "items": "string"}],
                                "default": None,
                            },
                            {"name": "dataFilePath", "type": _OPT_STR, "default": None},
                            {"name": "fileId", "type": _OPT_STR},
                            {"name": "partitionPath", "type": _OPT_STR, "default": None},
                            {
                                "name": "metrics",
                                "type": ["null", {"type": "map", "values": "double"}],
                                "default": None,
                            },
                            {"name": "bootstrapFilePath", "type": _OPT_STR, "default": None},
                        ],
                    },
                },
            ],
            "default": None,
        },
        {
            "name": "extraMetadata",
            "type": ["null", {"type": "map", "values": "string"}],
            "default": None,
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "strategy",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieCompactionStrategy",
                    "namespace": _NS,
                    "fields": [
                        {"name": "compactorClassName", "type": _OPT_STR, "default": None},
                        {
                            "name": "strategyParams",
                            "type": ["null", {"type": "map", "values": "string"}],
                            "default": None,
                        },
                        {"name": "version", "type": ["int", "null"], "default": 1},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
    ],
}
PLAN_VERSION = 2


@dataclass(frozen=True)
class CompactionOperation:
    """One file group to compact: its slice as the plan names it."""

    partition_path: str
    file_id: str
    base_instant: str
    #: base file name ("" for a slice with only log files)
    base_file: str
    log_files: tuple[str, ...]

    def to_avro(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.base_file or None,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": {"TOTAL_LOG_FILES": float(len(self.log_files))},
            "bootstrapFilePath": None,
        }

    @classmethod
    def from_avro(cls, op: dict[str, Any]) -> CompactionOperation:
        return cls(
            partition_path=str(op.get("partitionPath") or ""),
            file_id=str(op["fileId"]),
            base_instant=str(op["baseInstantTime"]),
            base_file=str(op.get("dataFilePath") or ""),
            log_files=tuple(str(f) for f in (op.get("deltaFilePaths") or ())),
        )


def serialize_plan(operations: list[CompactionOperation]) -> bytes:
    """The ``.compaction.requested`` bytes: an Avro container file with one plan record."""
    plan = {
        "operations": [op.to_avro() for op in operations],
        "extraMetadata": None,
        "version": PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": True,
    }
    return avro_container(COMPACTION_PLAN_SCHEMA, plan)


def read_plan_record(data: bytes, source: str) -> dict[str, Any]:
    """The ``HoodieCompactionPlan`` record of a ``.compaction.requested`` file."""
    return avro_record(data, source, "HoodieCompactionPlan")


def parse_plan(data: bytes, source: str) -> list[CompactionOperation]:
    ops = read_plan_record(data, source).get("operations") or []
    return [CompactionOperation.from_avro(op) for op in ops]


def read_plan(timeline: Timeline, instant: Instant) -> tuple[CompactionOperation, ...]:
    """The operations of a pending or completed compaction's plan; :class:`TimelineError`
    naming the file and, for a pending compaction, the way out (rolling it back) otherwise."""
    plan = _load_plan(timeline, instant)
    if not isinstance(plan, str):
        return plan
    if timeline.exists(instant.with_state(State.COMPLETED)):
        raise TimelineError(plan)
    raise TimelineError(
        f"{plan}; compaction {instant.timestamp} is pending and cannot run without its plan: "
        f"`hoodline table rollback {timeline.meta_path.parent} --instant {instant.timestamp}` "
        "removes it and what it wrote (the file slices it planned stay as they are, for a "
        "later compaction)"
    )


def plan_problem(timeline: Timeline, instant: Instant) -> str | None:
    """Why a compaction's plan cannot be read (missing, not an Avro plan); None if it can."""
    plan = _load_plan(timeline, instant)
    return plan if isinstance(plan, str) else None


def _load_plan(timeline: Timeline, instant: Instant) -> tuple[CompactionOperation, ...] | str:
    path = timeline.path_of(instant.with_state(State.REQUESTED))
    try:
        return _read_plan_file(path, path.stat().st_size)
    except FileNotFoundError:
        return f"compaction plan '{path}' does not exist"
    except TimelineError as exc:
        return str(exc)


@functools.lru_cache(maxsize=256)
def _read_plan_file(path: TablePath, size: int) -> tuple[CompactionOperation, ...]:
    data = path.read_bytes()
    if len(data) != size:
        raise TimelineError(f"compaction plan '{path}' changed while it was read")
    return tuple(parse_plan(data, str(path)))
