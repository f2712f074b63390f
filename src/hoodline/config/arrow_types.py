"""The one type syntax of every schema option: Arrow types as text, parsed and formatted.

Used by the pipeline's ``[schema]`` table (``id = "int64"``) and by the file source's ``schema``
option (``"id int64 not null, ts timestamp[ms, UTC]"``). Grammar (names case-insensitive,
spaces allowed)::

    type      := primitive | timestamp | decimal | list | struct | map | fixed | arrow
    primitive := string | utf8 | large_string | binary | large_binary | bool | boolean
               | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64
               | float | float32 | double | float64 | date32 | date64
    timestamp := timestamp[s|ms|us|ns] | timestamp[UNIT, TZ]      e.g. timestamp[ms, UTC]
    decimal   := decimal(P, S) | decimal128(P, S) | decimal256(P, S)
                 (decimal: decimal128 up to precision 38, decimal256 above)
    list      := list<type> | large_list<type>
    struct    := struct<name: type, ...>
    map       := map<type, type>                 (keys, values; JSON sources cannot read it)
    fixed     := fixed_size_binary[N]            (N bytes; Avro ``fixed``)
    arrow     := any other Arrow type alias: halffloat, time32[ms], time64[us], duration[s], ...

    schema    := field, field, ...        (the file source's ``schema`` option)
    field     := NAME type [not null]

:func:`format_type` writes what :func:`parse_type` reads back to the same type.
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
#: Aliases in :data:`_PRIMITIVES` that :func:`format_type` does not write (it writes the first).
_NOT_WRITTEN = ("utf8", "boolean", "float", "float64")

SYNTAX_HELP = (
    "use e.g. string, int64, int32, double, bool, timestamp[ms], timestamp[us, UTC], date32, "
    "decimal(10, 2), list<string>, struct<a: int64, b: string>, map<string, int64>, "
    "fixed_size_binary[16]"
)
_TOKEN = re.compile(
    r"\s*(?:([A-Za-z_][A-Za-z0-9_/+\-]*)|([+\-]\d{2}:\d{2})|(-?\d+)|([\[\]<>(),:]))"
)
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_NULL = re.compile(r"\s+not\s+null\s*$", re.IGNORECASE)


class _Parser:
    def __init__(self, text: str) -> None:
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
        if not tok.lstrip("-").isdigit():
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
            return self.timestamp()
        if name in ("decimal", "decimal128", "decimal256"):
            return self.decimal(name)
        if name in ("list", "large_list"):
            self.take("<")
            item = self.type_()
            self.take(">")
            return pa.list_(item) if name == "list" else pa.large_list(item)
        if name == "struct":
            return self.struct()
        if name == "map":
            self.take("<")
            key = self.type_()
            self.take(",")
            item = self.type_()
            self.take(">")
            return pa.map_(key, item)
        if name == "fixed_size_binary":
            self.take("[")
            width = self.integer("fixed_size_binary width")
            self.take("]")
            if width < 1:
                raise ValueError(f"fixed_size_binary width {width} must be at least 1")
            return pa.binary(width)
        alias = name
        if self.peek() == "[":  # time32[ms], duration[s], date32[day]
            self.take("[")
            alias += f"[{self.take()}]"
            self.take("]")
        elif name in _PRIMITIVES:
            return _PRIMITIVES[name]
        try:
            return pa.type_for_alias(alias)
        except (ValueError, KeyError):
            raise ValueError(f"unknown type {alias!r}") from None

    def timestamp(self) -> pa.DataType:
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

    def decimal(self, name: str) -> pa.DataType:
        self.take("(")
        precision = self.integer("decimal precision")
        self.take(",")
        scale = self.integer("decimal scale")
        self.take(")")
        wide = name == "decimal256" or (name == "decimal" and precision > 38)
        limit = 76 if wide else 38
        if not 1 <= precision <= limit:
            raise ValueError(f"{name} precision {precision} must be between 1 and {limit}")
        if scale > precision:
            raise ValueError(f"decimal scale {scale} must not exceed precision {precision}")
        return pa.decimal256(precision, scale) if wide else pa.decimal128(precision, scale)

    def struct(self) -> pa.DataType:
        self.take("<")
        fields = []
        seen = set()
        while True:
            fname = self.take()
            if not _FIELD_NAME.fullmatch(fname):
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


def parse_type(text: str, where: str = "type") -> pa.DataType:
    """Parse one type; :class:`ConfigError` starts with ``where`` (e.g. ``schema field 'ts'``)
    and names the bad type."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: type {text!r} is empty or not a string; {SYNTAX_HELP}")
    try:
        return _Parser(text).parse()
    except ValueError as exc:
        raise ConfigError(f"{where}: invalid type {text!r} ({exc}); {SYNTAX_HELP}") from None


def format_type(t: pa.DataType) -> str:
    """The text of ``t`` (inverse of :func:`parse_type` for the types of the grammar)."""
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, {t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    if pa.types.is_decimal(t):
        narrow = pa.types.is_decimal128(t)
        name = "decimal" if narrow or t.precision > 38 else "decimal256"
        return f"{name}({t.precision}, {t.scale})"
    if pa.types.is_list(t):
        return f"list<{format_type(t.value_type)}>"
    if pa.types.is_large_list(t):
        return f"large_list<{format_type(t.value_type)}>"
    if pa.types.is_struct(t):
        inner = ", ".join(f"{f.name}: {format_type(f.type)}" for f in t)
        return f"struct<{inner}>"
    if pa.types.is_map(t):
        return f"map<{format_type(t.key_type)}, {format_type(t.item_type)}>"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary[{t.byte_width}]"
    for name, prim in _PRIMITIVES.items():
        if prim == t and name not in _NOT_WRITTEN:
            return name
    return str(t)


def schema_from_mapping(fields: Mapping[str, object], section: str = "schema") -> pa.Schema:
    """An Arrow schema from ``{field name: type text}`` in declaration order (the pipeline's
    ``[schema]`` table)."""
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
        out.append(pa.field(name, parse_type(text, f"schema field '{name}'")))
    return pa.schema(out)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets (``[]``, ``()``, ``<>``)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_schema(text: str, key: str = "schema") -> pa.Schema:
    """A schema from ``"name type [not null], ..."`` (the file source's option ``key``);
    :class:`ConfigError` names the option and the bad entry."""
    fields: list[pa.Field] = []
    seen: set[str] = set()
    for entry in _split_top_level(text):
        pieces = entry.split(None, 1)
        if len(pieces) != 2:
            raise ConfigError(
                f"option '{key}': entry '{entry}' must be 'name type' (e.g. 'id int64')"
            )
        name, type_text = pieces
        not_null = _NOT_NULL.search(type_text)
        if not_null:
            type_text = type_text[: not_null.start()]
        if name in seen:
            raise ConfigError(f"option '{key}': column '{name}' is declared twice")
        seen.add(name)
        t = parse_type(type_text, f"option '{key}', column '{name}'")
        fields.append(pa.field(name, t, nullable=not not_null))
    if not fields:
        raise ConfigError(f"option '{key}' is empty; give at least one 'name type' entry")
    return pa.schema(fields)

