"""Partition paths of Java Hudi's ``TimestampBasedKeyGenerator`` (and the ``timestamp`` fields of
its ``CustomKeyGenerator``), computed on whole columns.

Java reads the partition field's value as a time and writes it with a Joda date pattern
(``TimestampBasedAvroKeyGenerator.getPartitionPath`` in Hudi 0.14/0.15, table version 6):

* ``UNIX_TIMESTAMP`` / ``EPOCHMILLISECONDS`` / ``SCALAR``: the value is a number of seconds,
  milliseconds or ``scalar.time.unit`` units since the epoch (fractions dropped toward zero, as
  Java's ``longValue`` and ``TimeUnit.convert`` do). A date column counts its days since the
  epoch in that unit, as Java reads Avro dates.
* ``DATE_STRING`` / ``MIXED``: the value is a string parsed with the first matching
  ``input.dateformat`` (several separated by ``input.dateformat.list.delimiter.regex``).
* A timestamp column is read as the instant it holds only with
  ``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled=true``; without it
  Java reads the raw number Avro stores (micro- or milliseconds, depending on the writing
  engine), which hoodline refuses rather than guess.

The time is written with ``output.dateformat`` in ``output.timezone``. Java falls back to its
JVM's default zone when no zone is configured; hoodline does not guess it: tables it creates record
UTC for both zones (``hoodie.keygen.timebased.*`` are kept in ``hoodie.properties``, where Java
writers read them too), and a Java table without them must name its zones in ``[table.options]``.
Unlike Java (which substitutes the epoch for a null), a null partition value is refused.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.config import options as cfg
from hoodline.config.enums import ConfigEnum
from hoodline.errors import ConfigError, InvalidRecordsError
from hoodline.table.keygen.joda import JodaPattern


class TimestampType(ConfigEnum):
    """How the partition value is read (``hoodie.keygen.timebased.timestamp.type``)."""

    #: seconds since the epoch
    UNIX_TIMESTAMP = "UNIX_TIMESTAMP"
    #: a string in one of the input date formats
    DATE_STRING = "DATE_STRING"
    #: as DATE_STRING (Java parses strings the same way; numbers fail there)
    MIXED = "MIXED"
    #: milliseconds since the epoch
    EPOCHMILLISECONDS = "EPOCHMILLISECONDS"
    #: units of `scalar.time.unit` since the epoch
    SCALAR = "SCALAR"


class TimeUnit(ConfigEnum):
    """Java's ``TimeUnit`` names, for ``hoodie.keygen.timebased.timestamp.scalar.time.unit``."""

    NANOSECONDS = "NANOSECONDS"
    MICROSECONDS = "MICROSECONDS"
    MILLISECONDS = "MILLISECONDS"
    SECONDS = "SECONDS"
    MINUTES = "MINUTES"
    HOURS = "HOURS"
    DAYS = "DAYS"

    @property
    def nanos(self) -> int:
        return {
            "NANOSECONDS": 1, "MICROSECONDS": 1_000, "MILLISECONDS": 1_000_000,
            "SECONDS": 10**9, "MINUTES": 60 * 10**9, "HOURS": 3600 * 10**9,
            "DAYS": 86_400 * 10**9,
        }[self.value]


PREFIX = "hoodie.keygen.timebased."

TIMESTAMP_TYPE = cfg.option(
    PREFIX + "timestamp.type",
    str,
    "",
    "Timestamp-based key generators: how the partition value is read: UNIX_TIMESTAMP (seconds), "
    "EPOCHMILLISECONDS, SCALAR (units of timestamp.scalar.time.unit), DATE_STRING or MIXED (a "
    "string in input.dateformat). Required with table.key-generator = timestamp or a "
    "`:timestamp` partition field.",
    validator=lambda v: _enum_problem(TimestampType, v),
)
SCALAR_TIME_UNIT = cfg.option(
    PREFIX + "timestamp.scalar.time.unit",
    TimeUnit,
    TimeUnit.SECONDS,
    "Timestamp-based key generators: unit of a SCALAR partition value.",
)
INPUT_DATE_FORMAT = cfg.option(
    PREFIX + "input.dateformat",
    str,
    "",
    "Timestamp-based key generators: Joda pattern(s) of DATE_STRING values, e.g. "
    "`yyyy-MM-dd'T'HH:mm:ssZ`; several separated by the list delimiter, the first that matches "
    "wins. Letters: y M d H m s S Z and quoted text.",
)
INPUT_DATE_FORMAT_DELIMITER = cfg.option(
    PREFIX + "input.dateformat.list.delimiter.regex",
    str,
    ",",
    "Timestamp-based key generators: regular expression separating several input date formats.",
)
OUTPUT_DATE_FORMAT = cfg.option(
    PREFIX + "output.dateformat",
    str,
    "",
    "Timestamp-based key generators: Joda pattern the partition path is written with, e.g. "
    "`yyyy/MM/dd` (one folder level per `/`, unless partition paths are URL-encoded) or "
    "`yyyyMMddHH`. Letters: y M d D H m s S Z and quoted text.",
)
INPUT_TIMEZONE = cfg.option(
    PREFIX + "input.timezone",
    str,
    "",
    "Timestamp-based key generators: time zone of DATE_STRING values without an offset (IANA "
    "name such as `Europe/Paris`, `UTC`, or `GMT+08:00`). New tables record UTC when unset.",
)
OUTPUT_TIMEZONE = cfg.option(
    PREFIX + "output.timezone",
    str,
    "",
    "Timestamp-based key generators: time zone the partition path is written in. New tables "
    "record UTC when unset; Java uses its JVM's zone when a table does not say.",
)
TIMEZONE = cfg.option(
    PREFIX + "timezone",
    str,
    "",
    "Timestamp-based key generators: input and output time zone at once (Java's older key); "
    "overrides the two above when set.",
)
DATE_TIME_PARSER = cfg.option(
    "hoodie.keygen.datetime.parser.class",
    str,
    "org.apache.hudi.keygen.parser.HoodieDateTimeParser",
    "Timestamp-based key generators: Java's date parser class; hoodline implements Hudi's own "
    "and refuses others.",
)
CONSISTENT_LOGICAL_TIMESTAMP = cfg.option(
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled",
    bool,
    False,
    "Key generators read timestamp columns as the instant they hold (Java's consistent logical "
    "timestamps). Required for a timestamp column as a timestamp-based partition field.",
)

TIMESTAMP_OPTIONS: tuple[cfg.ConfigOption[Any], ...] = (
    TIMESTAMP_TYPE, SCALAR_TIME_UNIT, INPUT_DATE_FORMAT, INPUT_DATE_FORMAT_DELIMITER,
    OUTPUT_DATE_FORMAT, INPUT_TIMEZONE, OUTPUT_TIMEZONE, TIMEZONE, DATE_TIME_PARSER,
    CONSISTENT_LOGICAL_TIMESTAMP,
)
#: the keys a table keeps in ``hoodie.properties`` (Java's persisted ones, and the type)
TIMESTAMP_KEYS = frozenset(o.key for o in TIMESTAMP_OPTIONS)
_HUDI_PARSER = DATE_TIME_PARSER.default

_GMT_OFFSET = re.compile(r"^(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?$")


def _enum_problem(kind: type[ConfigEnum], value: str) -> str | None:
    if not value:
        return None
    try:
        kind.parse(value)
    except ValueError as exc:
        return str(exc)
    return None


def arrow_zone(java_zone: str) -> str | None:
    """The Arrow time zone for a Java ``TimeZone`` id (None when empty); ValueError when hoodline
    cannot be sure Java reads it the same (Java silently takes GMT for ids it does not know)."""
    text = java_zone.strip()
    if not text:
        return None
    if text in ("UTC", "GMT", "Z", "UCT", "Etc/UTC", "Etc/GMT"):
        return "UTC"
    m = _GMT_OFFSET.match(text)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 23 or minutes > 59:
            raise ValueError(f"time zone {java_zone!r} is not a valid offset")
        return f"{m.group(1)}{hours:02d}:{minutes:02d}"
    if "/" in text:
        try:
            zoneinfo.ZoneInfo(text)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"time zone {java_zone!r} is not a known IANA zone") from None
        return text
    raise ValueError(
        f"time zone {java_zone!r} is ambiguous (Java maps short ids such as PST itself and "
        "takes GMT for unknown ones); use an IANA name such as 'America/Los_Angeles', 'UTC' "
        "or 'GMT+08:00'"
    )


def timestamp_settings(raw: Mapping[str, object]) -> dict[str, str]:
    """The timestamp key generator's settings among ``raw`` (``hoodie.*`` options or a table's
    properties), as strings."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in raw.items() if k in TIMESTAMP_KEYS}


def creation_defaults(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` with the zones a new table records when none is set (UTC): Java would use
    its JVM's default zone, which differs from machine to machine."""
    out = dict(settings)
    if not out.get(TIMEZONE.key):
        out.setdefault(OUTPUT_TIMEZONE.key, "UTC")
        if TimestampType.parse(out.get(TIMESTAMP_TYPE.key) or "SCALAR") in _STRING_TYPES:
            out.setdefault(INPUT_TIMEZONE.key, "UTC")
    return out


_STRING_TYPES = (TimestampType.DATE_STRING, TimestampType.MIXED)


@dataclass(frozen=True)
class TimestampKeyOptions:
    """The timestamp key generator's settings, checked (see :meth:`from_settings`)."""

    timestamp_type: TimestampType
    scalar_unit: TimeUnit
    input_formats: tuple[JodaPattern, ...]
    output_format: JodaPattern
    input_zone: str | None
    output_zone: str
    consistent_logical_timestamps: bool

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], table: str) -> TimestampKeyOptions:
        """Parse ``settings`` (``hoodie.keygen.timebased.*``); :class:`ConfigError` naming the key
        and what to do when one is missing, invalid or would make other paths than Java's."""
        o = cfg.Options(timestamp_settings(settings), known=TIMESTAMP_OPTIONS)

        def need(opt: cfg.ConfigOption[str], why: str) -> str:
            value = o.get(opt).strip()
            if not value:
                raise ConfigError(
                    f"table '{table}' uses a timestamp-based key generator but '{opt.key}' is not "
                    f"set; {why}. Set it in [table.options]"
                )
            return value

        ttype = TimestampType.parse(need(TIMESTAMP_TYPE, "it says how partition values are read"))
        parser = o.get(DATE_TIME_PARSER).strip()
        if parser and parser != _HUDI_PARSER:
            raise ConfigError(
                f"table '{table}': '{DATE_TIME_PARSER.key}' = {parser!r}: hoodline implements "
                f"Hudi's own parser ({_HUDI_PARSER}) only"
            )
        try:
            output = JodaPattern.compile(
                need(OUTPUT_DATE_FORMAT, "it is the partition path's pattern")
            )
            inputs: tuple[JodaPattern, ...] = ()
            if ttype in _STRING_TYPES:
                delimiter = o.get(INPUT_DATE_FORMAT_DELIMITER).strip() or ","
                raw_inputs = need(INPUT_DATE_FORMAT, f"{ttype} values are parsed with it")
                inputs = tuple(
                    JodaPattern.compile(p.strip()) for p in re.split(delimiter, raw_inputs)
                    if p.strip()
                )
                for p in inputs:
                    p.parse(pa.array([], pa.string()), "UTC")  # refuses format-only letters
            zone_key = TIMEZONE if o.get(TIMEZONE).strip() else None
            out_raw = o.get(zone_key or OUTPUT_TIMEZONE)
            in_raw = o.get(zone_key or INPUT_TIMEZONE)
            output_zone = arrow_zone(out_raw)
            input_zone = arrow_zone(in_raw)
        except ValueError as exc:
            raise ConfigError(f"table '{table}': {exc}") from None
        if output_zone is None:
            raise ConfigError(
                f"table '{table}' uses a timestamp-based key generator without "
                f"'{OUTPUT_TIMEZONE.key}': Java writes such paths in its JVM's default time zone, "
                "which hoodline cannot know. Set it in [table.options] to the zone the table's "
                "Java writers run in (often UTC)"
            )
        if input_zone is None and any(not p.has_offset for p in inputs):
            raise ConfigError(
                f"table '{table}': the input date format {raw_inputs!r} has no offset (Z) and "
                f"'{INPUT_TIMEZONE.key}' is not set: Java reads such strings in its JVM's default "
                "time zone, which hoodline cannot know. Set it in [table.options]"
            )
        return cls(
            timestamp_type=ttype,
            scalar_unit=o.get(SCALAR_TIME_UNIT),
            input_formats=inputs,
            output_format=output,
            input_zone=input_zone,
            output_zone=output_zone,
            consistent_logical_timestamps=o.get(CONSISTENT_LOGICAL_TIMESTAMP),
        )

    @property
    def unit(self) -> TimeUnit:
        """The unit numbers are read in (per the timestamp type)."""
        if self.timestamp_type is TimestampType.UNIX_TIMESTAMP:
            return TimeUnit.SECONDS
        if self.timestamp_type is TimestampType.EPOCHMILLISECONDS:
            return TimeUnit.MILLISECONDS
        return self.scalar_unit

    # -- values ---------------------------------------------------------------------------------
    def instants_ms(self, values: pa.Array, name: str) -> pa.Array:
        """Epoch milliseconds of each (non-null) value of partition column ``name``, as Java
        computes them; :class:`InvalidRecordsError` naming the first value Java cannot read."""
        t = values.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return self._parse_strings(pc.cast(values, pa.string()), name)
        if self.timestamp_type in _STRING_TYPES:
            raise InvalidRecordsError(
                f"partition column '{name}' has type {t}, but timestamp type "
                f"{self.timestamp_type} reads strings; Java cannot read its numbers either. "
                f"Use a numeric timestamp type in '{TIMESTAMP_TYPE.key}'"
            )
        if pa.types.is_timestamp(t):
            if not self.consistent_logical_timestamps:
                raise InvalidRecordsError(
                    f"partition column '{name}' has type {t}: Java reads it as the raw number "
                    "Avro stores (micro- or milliseconds, depending on the writing engine) "
                    f"unless '{CONSISTENT_LOGICAL_TIMESTAMP.key}' is true; set that option "
                    "(in hoodline and in the table's Java writers)"
                )
            raw = pc.cast(values, pa.int64())
            return _convert(raw, _UNIT_NANOS[t.unit], TimeUnit.MILLISECONDS.nanos)
        if pa.types.is_date32(t):
            days = pc.cast(values, pa.int32()).cast(pa.int64())
            return _convert(days, self.unit.nanos, TimeUnit.MILLISECONDS.nanos)
        if pa.types.is_floating(t):
            whole = pc.cast(pc.trunc(values), pa.int64(), safe=False)
            return _convert(whole, self.unit.nanos, TimeUnit.MILLISECONDS.nanos)
        if pa.types.is_integer(t):
            return _convert(pc.cast(values, pa.int64()), self.unit.nanos,
                            TimeUnit.MILLISECONDS.nanos)
        raise InvalidRecordsError(
            f"partition column '{name}' has type {t}, which a timestamp-based key generator "
            "cannot read; use an integer, floating-point, date, timestamp or string column"
        )

    def _parse_strings(self, values: pa.Array, name: str) -> pa.Array:
        if self.timestamp_type not in _STRING_TYPES:
            raise InvalidRecordsError(
                f"partition column '{name}' holds strings, but timestamp type "
                f"{self.timestamp_type} reads numbers (Java fails on strings without an input "
                f"date format); use DATE_STRING in '{TIMESTAMP_TYPE.key}' with "
                f"'{INPUT_DATE_FORMAT.key}'"
            )
        result = self._parse_all(values)
        if result.null_count:
            row = int(pc.index(pc.is_null(result), True).as_py())
            formats = ", ".join(repr(p.pattern) for p in self.input_formats)
            raise InvalidRecordsError(
                f"partition column '{name}' value {values[row].as_py()!r} matches none of the "
                f"input date formats ({formats}), or names no valid time; Java fails on it too"
            )
        return result

    def _parse_all(self, values: pa.Array) -> pa.Array:
        result: pa.Array | None = None
        for pattern in self.input_formats:
            parsed = pattern.parse(values, self.input_zone)
            result = parsed if result is None else pc.coalesce(result, parsed)
        assert result is not None
        return result

    def unreadable(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Per value: a non-null string no input date format reads, or a time outside the
        years -9999 to 9999 (a bad record, not a bad setting: :meth:`instants_ms` refuses
        columns of the wrong type as a whole)."""
        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        if pa.types.is_dictionary(arr.type):
            arr = pc.cast(arr, arr.type.value_type)
        t = arr.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if self.timestamp_type not in _STRING_TYPES:
                return pa.array(np.zeros(len(arr), dtype=bool))
            parsed = self._parse_all(pc.cast(arr, pa.string()))
            ms: pa.Array = parsed
            bad = parsed.is_null()
        elif self.timestamp_type in _STRING_TYPES or not _is_numeric_time(t):
            return pa.array(np.zeros(len(arr), dtype=bool))
        else:
            ms = pc.multiply(pc.cast(_whole(arr), pa.float64(), safe=False), self._ms_per_unit(t))
            bad = pa.array(np.zeros(len(arr), dtype=bool))
        outside = pc.invert(pc.and_(pc.greater_equal(ms, MIN_INSTANT_MS),
                                    pc.less(ms, END_INSTANT_MS)))
        return pc.and_(arr.is_valid(), pc.or_(bad, pc.fill_null(outside, False)))

    def _ms_per_unit(self, t: pa.DataType) -> float:
        nanos = _UNIT_NANOS[t.unit] if pa.types.is_timestamp(t) else self.unit.nanos
        return nanos / TimeUnit.MILLISECONDS.nanos

    def partition_values(self, values: pa.Array, name: str) -> pa.Array:
        """The partition path text of each value (before hive-style naming and URL encoding);
        :class:`InvalidRecordsError` for a time outside the years -9999 to 9999."""
        instants = self.instants_ms(values, name)
        outside = self.unreadable(values)
        if pc.any(outside).as_py():
            row = int(pc.index(outside, True).as_py())
            raise InvalidRecordsError(
                f"partition column '{name}' value {values[row].as_py()!r} is a time outside "
                f"the years -9999 to 9999 hoodline writes partition paths for (read as "
                f"{self.unit.name.lower()}: a number in the wrong unit?)"
            )
        return self.output_format.format(instants, self.output_zone)


#: The instants whose partition path hoodline writes: -9999-01-01T00:00:00Z up to
#: 10000-01-01T00:00:00Z (excluded). Java's Joda writes years far beyond, but a time there is
#: nearly always a number in the wrong unit (microseconds read as milliseconds).
MIN_INSTANT_MS = -377_705_116_800_000
END_INSTANT_MS = 253_402_300_800_000


def _is_numeric_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)
            or pa.types.is_date32(t))


def _whole(arr: pa.Array) -> pa.Array:
    """The values as whole numbers of their unit (floats truncated, as Java reads them)."""
    if pa.types.is_floating(arr.type):
        return pc.trunc(arr)
    if pa.types.is_timestamp(arr.type):
        return pc.cast(arr, pa.int64())
    if pa.types.is_date32(arr.type):
        return pc.cast(arr, pa.int32())
    return arr


_UNIT_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _convert(values: pa.Array, from_nanos: int, to_nanos: int) -> pa.Array:
    """Java's ``TimeUnit.convert``: toward zero when going to a coarser unit."""
    arr = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    if from_nanos >= to_nanos:
        out = arr * (from_nanos // to_nanos)
    else:
        step = to_nanos // from_nanos
        out = np.sign(arr) * (np.abs(arr) // step)
    return pa.array(out, pa.int64())
