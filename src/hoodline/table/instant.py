"""Timeline instants: the one parser/formatter of instant file names; the only place ordering them.

Hudi table version 6 / timeline layout 1 names an instant file ``<timestamp>.<action>[.<state>]``:

* ``commit``: ``<ts>.commit.requested`` -> ``<ts>.inflight`` -> ``<ts>.commit``
* every other action ``A`` (``deltacommit``, ``replacecommit``, ``rollback``, ``clean``):
  ``<ts>.A.requested`` -> ``<ts>.A.inflight`` -> ``<ts>.A``
* ``compaction`` (merge-on-read): ``<ts>.compaction.requested`` -> ``<ts>.compaction.inflight``
  -> ``<ts>.commit``: a completed compaction is a commit

Timestamps are 17 digits ``yyyyMMddHHmmssSSS`` (UTC in hoodline tables), always the same length so
string order is time order. :class:`InstantTimeGenerator` issues strictly increasing timestamps even
when the clock stands still or steps back.
"""

from __future__ import annotations

import enum
import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hoodline.errors import TableError, TimelineError

log = logging.getLogger(__name__)

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
ROLLBACK = "rollback"
CLEAN = "clean"
COMPACTION = "compaction"
SAVEPOINT = "savepoint"

#: Actions hoodline knows how to name. Others found on disk are ignored by the parser.
ACTIONS: tuple[str, ...] = (
    COMMIT, DELTA_COMMIT, REPLACE_COMMIT, ROLLBACK, CLEAN, COMPACTION, SAVEPOINT
)
#: Actions whose completed instant makes data visible to readers.
DATA_ACTIONS: tuple[str, ...] = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)

TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"
TIMESTAMP_LENGTH = 17
_TS_RE = re.compile(r"^\d{17}$")


class State(enum.Enum):
    """Lifecycle of an instant; declared in transition order."""

    REQUESTED = 1
    INFLIGHT = 2
    COMPLETED = 3


def _ordinal(state: State) -> int:
    return state.value


@dataclass(frozen=True)
class Instant:
    """One instant of the timeline, ordered by ``(timestamp, action, state)`` (:meth:`sort_key`)."""

    timestamp: str
    action: str
    state: State

    def __post_init__(self) -> None:
        if not is_valid_timestamp(self.timestamp):
            raise TimelineError(
                f"instant time '{self.timestamp}' is not a 17-digit yyyyMMddHHmmssSSS timestamp"
            )
        if self.action not in ACTIONS:
            raise TimelineError(
                f"unknown instant action '{self.action}'; known: {', '.join(ACTIONS)}"
            )
        if self.action == COMPACTION and self.state is State.COMPLETED:
            object.__setattr__(self, "action", COMMIT)  # a completed compaction is a commit

    # -- ordering: the only place instants are compared -----------------------------------------
    def sort_key(self) -> tuple[str, str, int]:
        return (self.timestamp, self.action, _ordinal(self.state))

    def __lt__(self, other: Instant) -> bool:
        return self.sort_key() < other.sort_key()

    def __le__(self, other: Instant) -> bool:
        return self.sort_key() <= other.sort_key()

    def __gt__(self, other: Instant) -> bool:
        return self.sort_key() > other.sort_key()

    def __ge__(self, other: Instant) -> bool:
        return self.sort_key() >= other.sort_key()

    # -- names ----------------------------------------------------------------------------------
    @property
    def comparable_action(self) -> str:
        """The action this instant completes as (a compaction completes as a commit)."""
        return COMMIT if self.action == COMPACTION else self.action

    @property
    def file_name(self) -> str:
        """The file name of this instant in ``.hoodie/`` (timeline layout 1)."""
        if self.state is State.COMPLETED:
            return f"{self.timestamp}.{self.comparable_action}"
        if self.state is State.REQUESTED:
            return f"{self.timestamp}.{self.action}.requested"
        if self.action == COMMIT:
            return f"{self.timestamp}.inflight"
        return f"{self.timestamp}.{self.action}.inflight"

    @classmethod
    def parse(cls, file_name: str) -> Instant | None:
        """Parse a ``.hoodie/`` file name; ``None`` if it is not an instant file hoodline knows."""
        if cls is Instant:
            return _parse_cached(file_name)
        return cls._parse(file_name)

    @classmethod
    def _parse(cls, file_name: str) -> Instant | None:
        parts = file_name.split(".")
        if len(parts) < 2 or len(parts) > 3 or not _TS_RE.match(parts[0]):
            return None
        ts = parts[0]
        if len(parts) == 2:
            if parts[1] == "inflight":
                return cls(ts, COMMIT, State.INFLIGHT)
            if parts[1] in ACTIONS:
                return cls(ts, parts[1], State.COMPLETED)
            return None
        action, suffix = parts[1], parts[2]
        if action not in ACTIONS:
            return None
        if suffix == "requested":
            return cls(ts, action, State.REQUESTED)
        if suffix == "inflight" and action != COMMIT:
            return cls(ts, action, State.INFLIGHT)
        return None

    def with_state(self, state: State) -> Instant:
        return Instant(self.timestamp, self.action, state)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    def __str__(self) -> str:
        return f"[{self.timestamp}__{self.action}__{self.state.name}]"

    def describe(self) -> str:
        """For people: ``commit 20261128120000000 (inflight)``."""
        return f"{self.action} {self.timestamp} ({self.state.name.lower()})"


@functools.lru_cache(maxsize=1 << 16)
def _parse_cached(file_name: str) -> Instant | None:
    # instants are immutable and timelines are re-listed often: parse each name once
    return Instant._parse(file_name)


def is_valid_timestamp(ts: str) -> bool:
    """True for a 17-digit timestamp that names a real calendar time."""
    if not isinstance(ts, str) or not _TS_RE.match(ts):
        return False
    try:
        parse_timestamp(ts)
    except ValueError:
        return False
    return True


def is_timestamp_string(ts: str) -> bool:
    """True for any 17-digit string (bounds of queries, e.g. ``00000000000000000``)."""
    return isinstance(ts, str) and bool(_TS_RE.match(ts))


_QUERY_TIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?)?$")

#: The forms :func:`query_instant` reads, for messages.
QUERY_TIME_FORMS = ("yyyyMMddHHmmssSSS (an instant), yyyyMMddHHmmss, yyyy-MM-dd, "
                    "yyyy-MM-dd HH:mm:ss[.SSS] (also with 'T')")


def query_instant(text: str | int, what: str) -> str:
    """The 17-digit bound of a query given as Java Hudi's ``as.of.instant`` takes it: an
    instant time, ``yyyyMMddHHmmss``, ``yyyy-MM-dd`` (its first moment) or ``yyyy-MM-dd
    HH:mm:ss[.SSS]``, all read in the table's timeline timezone as its instant times are (so
    only the digits are rearranged); zeros alone (``000``, Java's usual incremental start) are
    the time before every instant. ``what`` names the argument in the error. An integer is
    read as its digits (instant times look like numbers: ``20261129155538673``)."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise TableError(f"{what} {text!r} is a {type(text).__name__}, not a time: give one of "
                         f"{QUERY_TIME_FORMS}, as text")
    if _TS_RE.match(text):
        return text  # any 17 digits (also bounds such as 00000000000000000)
    if text and set(text) == {"0"}:
        return "0" * 17
    if len(text) == 14 and text.isdigit():
        digits = text + "000"
    else:
        m = _QUERY_TIME_RE.match(text.strip())
        if m is None:
            raise TableError(
                f"{what} {text!r} is not a time hoodline reads: give one of "
                f"{QUERY_TIME_FORMS}, in the table's timeline timezone"
            )
        y, mo, d, h, mi, sec, frac = m.groups()
        digits = f"{y}{mo}{d}{h or '00'}{mi or '00'}{sec or '00'}{(frac or '').ljust(3, '0')[:3]}"
    try:
        parse_timestamp(digits)
    except ValueError:
        raise TableError(f"{what} {text!r} is not a calendar time") from None
    return digits


def format_timestamp(moment: datetime) -> str:
    """Format ``moment`` (naive = UTC) as a 17-digit instant time."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime(TIMESTAMP_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_timestamp(ts: str) -> datetime:
    """Parse a 17-digit instant time into an aware UTC datetime (millisecond precision)."""
    if not _TS_RE.match(ts):
        raise ValueError(f"instant time '{ts}' is not 17 digits")
    # the fields by position (what strptime with TIMESTAMP_FORMAT reads from 14 digits, and it
    # refuses the same impossible times), ~10x faster: table listings parse every file name
    base = datetime(int(ts[0:4]), int(ts[4:6]), int(ts[6:8]), int(ts[8:10]), int(ts[10:12]),
                    int(ts[12:14]), tzinfo=UTC)
    return base + timedelta(milliseconds=int(ts[14:]))


#: how far the timeline may be ahead of the clock before a writer says so (clock skew between
#: writers is normal; a day ahead is a wrong clock, and every later instant follows it)
AHEAD_OF_CLOCK = timedelta(hours=1)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class InstantTimeGenerator:
    """Issues strictly increasing 17-digit instant times from an injectable clock.

    ``next()`` returns the clock's time, unless that is not later than the last time it issued
    (or than ``after``, e.g. the newest instant already on the timeline, which other processes may
    have written): then it returns one millisecond later than the larger of the two. Thread safe.
    """

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or _utc_now
        self._last: str | None = None
        self._mutex = threading.Lock()
        self._said_ahead = False

    def next(self, after: str | None = None) -> str:
        if after is not None and not is_valid_timestamp(after):
            raise TimelineError(
                f"cannot issue an instant time after '{after}': not a 17-digit timestamp"
            )
        with self._mutex:
            candidate = format_timestamp(self._clock())
            floor = max((t for t in (self._last, after) if t is not None), default=None)
            if floor is not None and candidate <= floor:
                ahead = parse_timestamp(floor) - parse_timestamp(candidate)
                if ahead > AHEAD_OF_CLOCK and not self._said_ahead:
                    self._said_ahead = True  # once: every later instant follows it
                    log.warning(
                        "the timeline's newest instant '%s' is %s ahead of this machine's clock "
                        "('%s'), so new instants follow it: written by a machine whose clock "
                        "was wrong? Check the clocks of every writer; time travel and incremental "
                        "reads by time see these instants at the wrong time", floor,
                        str(ahead).split(".")[0], candidate)
                candidate = format_timestamp(parse_timestamp(floor) + timedelta(milliseconds=1))
            if len(candidate) != TIMESTAMP_LENGTH:
                raise TimelineError(f"instant time '{candidate}' does not have 17 digits")
            self._last = candidate
            return candidate
