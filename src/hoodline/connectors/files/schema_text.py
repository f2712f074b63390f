"""Parse the textual Arrow schema of the ``schema`` option.

Example: ``"id int64 not null, ts timestamp[us, UTC], price decimal128(10, 2)"``.
"""

from __future__ import annotations

import re

import pyarrow as pa

from hoodline.errors import ConfigError

_DECIMAL = re.compile(r"^decimal(128|256)?\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_TIMESTAMP = re.compile(r"^timestamp\[\s*(s|ms|us|ns)\s*(?:,\s*([^\]]+?)\s*)?\]$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets or parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_type(text: str) -> pa.DataType:
    """One Arrow type from its name (``int64``, ``timestamp[ms, UTC]``, ``decimal128(10, 2)``)."""
    t = text.strip()
    low = t.lower()
    m = _DECIMAL.match(low)
    if m:
        precision, scale = int(m.group(2)), int(m.group(3))
        if m.group(1) == "256":
            return pa.decimal256(precision, scale)
        return pa.decimal128(precision, scale)
    m = _TIMESTAMP.match(t)
    if m:
        return pa.timestamp(m.group(1), tz=m.group(2))
    try:
        return pa.type_for_alias(low)
    except (ValueError, KeyError):
        raise ConfigError(
            f"option 'schema': unknown Arrow type '{t}'; use names like int64, double, bool, "
            "string, binary, date32, timestamp[us], timestamp[ms, UTC], decimal128(10, 2)"
        ) from None


def parse_schema(text: str) -> pa.Schema:
    """A schema from ``"name type [not null], ..."``; raises ConfigError naming the bad entry."""
    fields: list[pa.Field] = []
    seen: set[str] = set()
    for entry in _split_top_level(text):
        pieces = entry.split(None, 1)
        if len(pieces) != 2:
            raise ConfigError(
                f"option 'schema': entry '{entry}' must be 'name type' (e.g. 'id int64')"
            )
        name, type_text = pieces[0], pieces[1].strip()
        nullable = True
        if type_text.lower().endswith(" not null"):
            nullable = False
            type_text = type_text[: -len(" not null")].strip()
        if name in seen:
            raise ConfigError(f"option 'schema': column '{name}' is declared twice")
        seen.add(name)
        fields.append(pa.field(name, parse_type(type_text), nullable=nullable))
    if not fields:
        raise ConfigError("option 'schema' is empty; give at least one 'name type' entry")
    return pa.schema(fields)
