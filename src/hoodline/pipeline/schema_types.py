"""Declared Arrow types in a small string syntax, as written in the pipeline's ``[schema]`` table.

Grammar (case-insensitive names, spaces allowed)::

    type      := primitive | timestamp | decimal | list | struct
    primitive := string | large_string | binary | large_binary | bool | boolean
               | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64
               | float | float32 | double | float64 | date32 | date64
    timestamp := timestamp[s|ms|us|ns] | timestamp[UNIT, TZ]       e.g. timestamp[ms, UTC]
    decimal   := decimal(P, S) | decimal128(P, S) | decimal256(P, S)
    list      := list<type>
    struct    := struct<name: type, ...>

Example ``[schema]`` table::

    [schema]
    id = "int64"
    ts = "timestamp[ms]"
    amount = "decimal(12, 2)"
    tags = "list<string>"
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pyarrow as pa

from hoodline.errors import ConfigError

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "utf8": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float": pa.float32(),
    "float32": pa.float32(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "date32": pa.date32(),
    "date64": pa.date64(),
}

_SYNTAX_HELP = (
    "use e.g. string, int64, int32, double, bool, timestamp[ms], timestamp[us, UTC], date32, "
    "decimal(10, 2), list<string>, struct<a: int64, b: string>"
)
_TOKEN = re.compile(
    r"\s*(?:([A-Za-z_][A-Za-z0-9_/+\-]*)|([+\-]\d{2}:\d{2})|(\d+)|([\[\]<>(),:]))"
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ValueError(f"unexpected character {text[pos:].strip()[:1]!r}")
            self.tokens.append(m.group(m.lastindex or 0))
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            suffix = f", expected {expected!r}" if expected else ""
            raise ValueError(f"unexpected end of type{suffix}")
        if expected is not None and tok.lower() != expected:
            raise ValueError(f"expected {expected!r} but found {tok!r}")
        self.i += 1
        return tok

    def integer(self, what: str) -> int:
        tok = self.take()
        if not tok.isdigit():
            raise ValueError(f"{what} must be a number, found {tok!r}")
        return int(tok)

    def parse(self) -> pa.DataType:
        t = self.type_()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()!r} after the type")
        return t

    def type_(self) -> pa.DataType:
        name = self.take().lower()
        if name == "timestamp":
            self.take("[")
            unit = self.take().lower()
            if unit not in ("s", "ms", "us", "ns"):
                raise ValueError(f"timestamp unit must be s, ms, us or ns, not {unit!r}")
            tz = None
            if self.peek() == ",":
                self.take(",")
                parts = []
                while self.peek() not in ("]", None):
                    parts.append(self.take())
                tz = "".join(parts)
                if not tz:
                    raise ValueError("timestamp time zone is empty")
            self.take("]")
            return pa.timestamp(unit, tz=tz)
        if name in ("decimal", "decimal128", "decimal256"):
            self.take("(")
            precision = self.integer("decimal precision")
            self.take(",")
            scale = self.integer("decimal scale")
            self.take(")")
            limit = 76 if name == "decimal256" or precision > 38 else 38
            if not 1 <= precision <= limit:
                raise ValueError(f"decimal precision {precision} must be between 1 and {limit}")
            if scale > precision:
                raise ValueError(f"decimal scale {scale} must not exceed precision {precision}")
            if name == "decimal256" or precision > 38:
                return pa.decimal256(precision, scale)
            return pa.decimal128(precision, scale)
        if name in ("list", "large_list"):
            self.take("<")
            item = self.type_()
            self.take(">")
            return pa.list_(item) if name == "list" else pa.large_list(item)
        if name == "struct":
            self.take("<")
            fields = []
            seen = set()
            while True:
                fname = self.take()
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", fname):
                    raise ValueError(f"struct field name {fname!r} is not a name")
                if fname in seen:
                    raise ValueError(f"struct field {fname!r} is declared twice")
                seen.add(fname)
                self.take(":")
                fields.append(pa.field(fname, self.type_()))
                if self.peek() == ",":
                    self.take(",")
                    continue
                break
            self.take(">")
            return pa.struct(fields)
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        raise ValueError(f"unknown type {name!r}")


def parse_type(text: str, field: str = "?") -> pa.DataType:
    """Parse one declared type; :class:`ConfigError` names ``field`` and the bad type."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"schema field '{field}': type {text!r} is empty or not a string; "
                          f"{_SYNTAX_HELP}")
    try:
        return _Parser(text).parse()
    except ValueError as exc:
        raise ConfigError(
            f"schema field '{field}': invalid type {text!r} ({exc}); {_SYNTAX_HELP}"
        ) from None


def format_type(t: pa.DataType) -> str:
    """The string syntax for ``t`` (inverse of :func:`parse_type` for supported types)."""
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, {t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision}, {t.scale})"
    if pa.types.is_list(t):
        return f"list<{format_type(t.value_type)}>"
    if pa.types.is_large_list(t):
        return f"large_list<{format_type(t.value_type)}>"
    if pa.types.is_struct(t):
        inner = ", ".join(f"{f.name}: {format_type(f.type)}" for f in t)
        return f"struct<{inner}>"
    for name, prim in _PRIMITIVES.items():
        if prim == t and name not in ("utf8", "boolean", "float", "float64"):
            return name
    return str(t)


def parse_schema(fields: Mapping[str, object], section: str = "schema") -> pa.Schema:
    """An Arrow schema from ``{field name: type string}`` in declaration order."""
    if not fields:
        raise ConfigError(f"[{section}] declares no fields; add e.g. id = \"int64\"")
    out = []
    for name, text in fields.items():
        if not name.strip():
            raise ConfigError(f"[{section}] has an empty field name")
        if not isinstance(text, str):
            raise ConfigError(
                f"schema field '{name}': type must be a string like \"int64\", got {text!r}"
            )
        out.append(pa.field(name, parse_type(text, name)))
    return pa.schema(out)
