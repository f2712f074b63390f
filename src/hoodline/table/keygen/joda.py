"""Joda-Time date patterns, as Java Hudi's ``TimestampBasedKeyGenerator`` uses them, applied to
whole Arrow columns.

Java formats partition paths with ``DateTimeFormat.forPattern(output.dateformat)`` and parses
date strings with ``forPattern(input.dateformat)``. hoodline supports the pattern letters that
make sense in a folder name and parse unambiguously, with Joda's meaning:

==========  ==========================================================================
letter      meaning (``n`` = number of repeated letters)
==========  ==========================================================================
``y``       year; ``yy`` its last two digits, other counts zero-padded to ``n`` digits
``M``       month number (``M``, ``MM``); month names (``MMM``) are refused
``d``       day of month
``D``       day of year (formatting only)
``H``       hour of day, 0-23
``m``/``s`` minute / second
``S``       fraction of second: ``n`` digits of the milliseconds (``SSS`` = millis)
``Z``       offset: ``Z`` = ``+0800``, ``ZZ`` = ``+08:00``; parsing also takes ``Z`` for UTC
``'…'``     literal text (``''`` is a quote); any non-letter character is literal
==========  ==========================================================================

Any other letter (names of months or days, 12-hour clocks, week years, zone names) is refused
with :class:`ValueError` naming it, rather than written differently from Java.

Parsing follows Joda's rules for well-formed input: the whole string must match; a numeric field
takes up to its maximum digits (exactly ``n`` when the next field is numeric too, as Joda does for
adjacent fields such as ``yyyyMMdd``); dates are checked (``2024-02-30`` does not parse); a string
without an offset is in the given time zone, the earlier instant in a DST overlap, none in a gap.
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_MS_PER_DAY = 86_400_000
#: letters with a numeric value, and the most digits Joda parses for each (when not adjacent)
_NUMERIC_MAX_DIGITS = {"y": 9, "M": 2, "d": 2, "H": 2, "m": 2, "s": 2, "S": 9}
_FORMAT_ONLY = {"D"}


@dataclass(frozen=True)
class Token:
    """A run of one pattern letter (``letter`` set) or literal text (``letter`` empty)."""

    letter: str
    count: int = 0
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC_MAX_DIGITS or self.letter in _FORMAT_ONLY


def _tokens(pattern: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            j = i + 1
            text = []
            while True:
                if j >= len(pattern):
                    raise ValueError(f"date pattern {pattern!r} has an unclosed quote")
                if pattern[j] == "'":
                    if j + 1 < len(pattern) and pattern[j + 1] == "'":
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(pattern[j])
                j += 1
            out.append(Token("", text="".join(text) if j > i + 1 else "'"))
            i = j + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            out.append(Token(ch, j - i))
            i = j
        else:
            out.append(Token("", text=ch))
            i += 1
    return out


@dataclass(frozen=True)
class JodaPattern:
    """A parsed Joda pattern; :meth:`format` and :meth:`parse` work on whole columns."""

    pattern: str
    tokens: tuple[Token, ...]

    @classmethod
    def compile(cls, pattern: str) -> JodaPattern:
        """The pattern, or :class:`ValueError` naming the first unsupported letter."""
        if not pattern:
            raise ValueError("the date pattern is empty")
        tokens = _tokens(pattern)
        for t in tokens:
            if not t.letter:
                continue
            if t.letter == "Y":  # year of era: the same digits as 'y' for years after 0
                continue
            if t.letter not in _NUMERIC_MAX_DIGITS and t.letter not in _FORMAT_ONLY | {"Z"}:
                raise ValueError(
                    f"date pattern {pattern!r}: letter {t.letter!r} is not supported by "
                    "hoodline (supported: y M d D H m s S Z and quoted text)"
                )
            if t.letter == "M" and t.count > 2:
                raise ValueError(
                    f"date pattern {pattern!r}: month names ({t.letter * t.count}) depend on "
                    "the JVM's locale and are not supported; use MM"
                )
            if t.letter == "Z" and t.count > 2:
                raise ValueError(
                    f"date pattern {pattern!r}: zone ids ({t.letter * t.count}) are not "
                    "supported; use Z (+0800) or ZZ (+08:00)"
                )
        return cls(pattern, tuple(Token("y", t.count) if t.letter == "Y" else t for t in tokens))

    # -- formatting -----------------------------------------------------------------------------
    def format(self, instants_ms: pa.Array, zone: str) -> pa.Array:
        """Each instant (epoch milliseconds, int64) written with the pattern in ``zone`` (an
        Arrow time zone: IANA name or ``+HH:MM``)."""
        instants = np.asarray(instants_ms.to_numpy(zero_copy_only=False), dtype=np.int64)
        offsets = zone_offsets_ms(instants, zone)
        local = pa.array(instants + offsets, pa.timestamp("ms"))
        parts: list[pa.Array | pa.Scalar] = []
        for t in self.tokens:
            if not t.letter:
                parts.append(pa.scalar(t.text))
            elif t.letter == "Z":
                parts.append(_offset_text(offsets, t.count == 2))
            else:
                parts.append(_field_text(local, t))
        if not parts:
            return pa.array([""] * len(instants_ms), pa.string())
        if len(parts) == 1:
            only = parts[0]
            if isinstance(only, pa.Scalar):
                return pa.array([only.as_py()] * len(instants_ms), pa.string())
            return only
        return pc.binary_join_element_wise(*parts, "")

    # -- parsing --------------------------------------------------------------------------------
    @property
    def has_offset(self) -> bool:
        return any(t.letter == "Z" for t in self.tokens)

    def _regex(self) -> tuple[str, list[Token]]:
        fields: list[Token] = []
        out = ["^"]
        tokens = self.tokens
        for i, t in enumerate(tokens):
            if not t.letter:
                out.append(re.escape(t.text))
                continue
            if t.letter in _FORMAT_ONLY or (t.letter == "y" and t.count == 2):
                raise ValueError(
                    f"date pattern {self.pattern!r}: {t.letter * t.count} cannot be used to "
                    "parse input dates in hoodline"
                )
            name = f"g{len(fields)}"
            fields.append(t)
            if t.letter == "Z":
                out.append(f"(?P<{name}>[Zz]|[+-]\\d{{2}}(?::?\\d{{2}}(?::?\\d{{2}})?)?)")
                continue
            adjacent = i + 1 < len(tokens) and tokens[i + 1].numeric
            if adjacent:
                digits = f"\\d{{{t.count}}}"
            elif t.letter == "S":  # Joda reads at most as many fraction digits as letters
                digits = f"\\d{{1,{t.count}}}"
            else:
                digits = f"\\d{{1,{_NUMERIC_MAX_DIGITS[t.letter]}}}"
            sign = "-?" if t.letter == "y" and not adjacent else ""
            out.append(f"(?P<{name}>{sign}{digits})")
        out.append("$")
        return "".join(out), fields

    def parse(self, values: pa.Array, zone: str | None) -> pa.Array:
        """Epoch milliseconds (int64) of each string; null where the string does not match the
        pattern or names no valid date. ``zone`` is the time zone of strings without an offset
        (required when the pattern has no ``Z``)."""
        regex, fields = self._regex()
        n = len(values)
        matched = pc.extract_regex(values, regex)
        valid = np.asarray(matched.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        comp = {"y": np.full(n, 1970), "M": np.ones(n, np.int64), "d": np.ones(n, np.int64)}
        for letter in "Hms":
            comp[letter] = np.zeros(n, np.int64)
        frac = np.zeros(n, np.int64)
        offset_ms: np.ndarray | None = None
        for idx, t in enumerate(fields):
            text = pc.if_else(matched.is_valid(), pc.struct_field(matched, idx), "0")
            if t.letter == "Z":
                offset_ms, offset_ok = _parse_offsets(text)
                valid &= offset_ok
            elif t.letter == "S":
                millis = pc.utf8_slice_codeunits(
                    pc.utf8_rpad(text, width=3, padding="0"), start=0, stop=3
                )
                frac = _ints(millis)
            else:
                comp[t.letter] = _ints(text)
        year, month, day = comp["y"], comp["M"], comp["d"]
        valid &= (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)
        valid &= (comp["H"] <= 23) & (comp["m"] <= 59) & (comp["s"] <= 59)
        valid &= (year > -200_000) & (year < 200_000)  # numpy datetime64 range
        safe_month = np.where(valid, month, 1)
        safe_year = np.where(valid, year, 1970)
        months = (safe_year - 1970) * 12 + (safe_month - 1)
        first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
        days = first + np.where(valid, day, 1) - 1
        # a day past the month's end lands in the next month: Joda refuses it
        valid &= days.astype("datetime64[D]").astype("datetime64[M]").astype(np.int64) == months
        local = (
            days * _MS_PER_DAY
            + ((comp["H"] * 60 + comp["m"]) * 60 + comp["s"]) * 1000
            + frac
        )
        if offset_ms is not None:
            instants = local - offset_ms
        else:
            if zone is None:
                raise ValueError(
                    f"date pattern {self.pattern!r} has no offset (Z): an input time zone is "
                    "needed to read its strings"
                )
            instants, valid = _local_to_utc(local, valid, zone)
        return pa.array(instants, pa.int64(), mask=~valid)


def _ints(text: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(text, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _parse_offsets(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``Z``, ``+01``, ``+0130``, ``-01:30``, ``+01:30:15`` -> milliseconds east of UTC."""
    digits = pc.replace_substring(pc.utf8_slice_codeunits(text, start=1), ":", "")
    digits = pc.if_else(pc.equal(pc.utf8_upper(text), "Z"), "000000", digits)
    six = _ints(pc.utf8_rpad(digits, width=6, padding="0"))
    sign = np.where(np.asarray(pc.starts_with(text, "-").to_numpy(zero_copy_only=False)), -1, 1)
    hours, minutes, seconds = six // 10_000, six // 100 % 100, six % 100
    ok = (hours <= 23) & (minutes <= 59) & (seconds <= 59)
    total = hours * 3600 + minutes * 60 + seconds
    return np.asarray(sign * total * 1000, dtype=np.int64), ok


def _pad(values: pa.Array, width: int) -> pa.Array:
    text = pc.cast(values, pa.string())
    return pc.utf8_lpad(text, width=width, padding="0") if width > 1 else text


def _field_text(local: pa.Array, t: Token) -> pa.Array:
    if t.letter == "y":
        year = np.asarray(pc.year(local).to_numpy(zero_copy_only=False), dtype=np.int64)
        if t.count == 2:  # Joda: the last two digits of the year's absolute value
            return _pad(pa.array(np.abs(year) % 100), 2)
        digits = _pad(pa.array(np.abs(year)), t.count)
        sign = pa.array(np.where(year < 0, "-", ""))
        return pc.binary_join_element_wise(sign, digits, "")
    if t.letter == "S":
        millis = _pad(pc.millisecond(local), 3)
        if t.count <= 3:
            return pc.utf8_slice_codeunits(millis, start=0, stop=t.count)
        return pc.utf8_rpad(millis, width=t.count, padding="0")
    component = {
        "M": pc.month,
        "d": pc.day,
        "D": pc.day_of_year,
        "H": pc.hour,
        "m": pc.minute,
        "s": pc.second,
    }[t.letter]
    return _pad(component(local), t.count)


def _offset_text(offsets_ms: np.ndarray, colon: bool) -> pa.Array:
    # Joda prints whole minutes of the offset, dropping seconds (LMT offsets such as -4:56:02)
    absolute = np.abs(offsets_ms) // 60_000
    sign = pa.array(np.where(offsets_ms < 0, "-", "+"))
    hours = _pad(pa.array(absolute // 60), 2)
    mins = _pad(pa.array(absolute % 60), 2)
    return pc.binary_join_element_wise(sign, hours, pa.scalar(":" if colon else ""), mins, "")


#: Arrow's time zone rules end at the last listed transition (2037 in the system zone files);
#: Joda (like Python's zoneinfo) goes on applying the zone's daylight-saving rule after it
_RULES_END_MS = 2_145_916_800_000  # 2038-01-01T00:00:00Z


def zone_offsets_ms(instants: np.ndarray, zone: str) -> np.ndarray:
    """UTC offset of ``zone`` (ms) at each instant (epoch ms)."""
    zoned = pa.array(instants, pa.timestamp("ms", tz=zone))
    local = pc.cast(pc.cast(pc.local_timestamp(zoned), pa.timestamp("ms")), pa.int64())
    offsets: np.ndarray = (
        np.array(local.to_numpy(zero_copy_only=False), dtype=np.int64) - instants
    )
    late = np.flatnonzero(instants >= _RULES_END_MS)
    if late.size and not _fixed(zone):
        rules = zoneinfo.ZoneInfo(zone)
        for i in late:
            moment = datetime.datetime.fromtimestamp(int(instants[i]) // 1000, datetime.UTC)
            delta = moment.astimezone(rules).utcoffset()
            offsets[i] = int(delta.total_seconds() * 1000) if delta is not None else 0
    return offsets


def _fixed(zone: str) -> bool:
    return zone == "UTC" or zone[:1] in "+-"


def _local_to_utc(local: np.ndarray, valid: np.ndarray, zone: str) -> tuple[np.ndarray, np.ndarray]:
    """Instants (epoch ms) of local times in ``zone``: the earlier one where the clock is set
    back (Joda's choice), none (``valid`` false) where it skips the time."""
    naive = pa.array(np.where(valid, local, 0), pa.timestamp("ms"))
    zoned = pc.assume_timezone(naive, timezone=zone, ambiguous="earliest", nonexistent="earliest")
    instants = np.array(pc.cast(zoned, pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    if not _fixed(zone):
        late = np.flatnonzero(valid & (local >= _RULES_END_MS - 86_400_000))
        if late.size:
            rules = zoneinfo.ZoneInfo(zone)
            for i in late:
                wall = datetime.datetime(1970, 1, 1) + datetime.timedelta(
                    milliseconds=int(local[i])
                )
                delta = wall.replace(tzinfo=rules, fold=0).utcoffset()
                instants[i] = int(local[i]) - int(delta.total_seconds() * 1000) if delta else 0
    # a skipped local time comes back as another wall-clock time
    valid = valid & (instants + zone_offsets_ms(instants, zone) == local)
    return instants, valid
