"""Round driver reports: a :class:`RoundReport` per round, a :class:`RunSummary` per run."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["RoundReport", "RunSummary", "StopReason"]


class StopReason(StrEnum):
    """Why a run ended."""

    #: ``--once``: what the source held when the run started is committed
    DRAINED = "drained"
    #: the stop event was set (Ctrl-C)
    STOPPED = "stopped"
    #: a bounded source has no more input
    END_OF_INPUT = "end-of-input"


@dataclass(frozen=True)
class RoundReport:
    """What one round did (one report per round, also for rounds that committed nothing)."""

    #: Checkpoint round id (stored in the commit; increases by one per committed round).
    round_id: int
    #: The committed instant time, None when the round committed nothing.
    instant: str | None
    committed: bool
    records_read: int
    #: Upserted/inserted rows written to the table (after de-duplication).
    records_written: int
    records_deleted: int
    #: Bad records of this round (written to the error table with errors.tolerance = all).
    error_records: int
    files_written: int
    #: The slowest reader task's time reading and keying its plan.
    read_seconds: float
    #: The rest of the round's Spark job (shuffle by file group, writing files).
    write_seconds: float
    #: Error-table write + the commit of the instant.
    commit_seconds: float
    duration_seconds: float
    #: ``records_read / duration_seconds`` (0 for an empty round).
    records_per_second: float
    #: "topic-partition" -> records behind the end after this round (Kafka); {} for files.
    lag: dict[str, int] = field(default_factory=dict)
    #: Failed attempts (rolled back and retried) before this round succeeded.
    retries: int = 0
    #: Bytes of the records read (message values / file bytes) and of the files written.
    bytes_read: int = 0
    bytes_written: int = 0
    #: The commit of the inline compaction the round's writer ran after it (merge-on-read
    #: tables; see 'hoodie.compact.inline'), else None.
    compaction: str | None = None
    #: Time of the table's services after the commit (compaction when inline, cleaning,
    #: archival; part of ``duration_seconds``), and whether they failed (logged; retried later).
    services_seconds: float = 0.0
    services_failed: bool = False
    #: Compactions planned and not completed after the round (merge-on-read).
    pending_compactions: int = 0
    #: Files found and not yet read after this round (file source; None for Kafka).
    files_waiting: int | None = None
    #: ``error_records`` per reason code (``wrong_type``, ``unparseable``, ...).
    error_reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary:
    """What a whole ``run`` did."""

    rounds: int
    commits: int
    records_read: int
    records_written: int
    error_records: int
    last_instant: str | None
    stopped_because: StopReason
