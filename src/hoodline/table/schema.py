"""Arrow <-> Avro schema JSON (``extraMetadata.schema``) and schema-evolution checks.

Arrow -> Avro follows what Hudi's Spark writer produces: a record ``<table>_record`` in namespace
``hoodie.<table>``; nullable columns become ``["null", T]`` unions with ``"default": null``;
timestamps ``timestamp-millis``/``timestamp-micros`` (ns as micros); dates ``date``;
decimals ``fixed`` with ``decimal`` logical type; lists ``array``; structs nested records; maps
with string keys ``map``. Types Avro cannot express (e.g. unsigned 64-bit ints, non-string map
keys) are refused with an error naming the column.

Avro -> Arrow mirrors hudi-rs so that hoodline's reads return the same types as hudi-rs reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hoodline.errors import SchemaEvolutionError, TableError

META_COLUMNS: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
META_SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS])

_NAME_RE = re.compile(r"[^A-Za-z0-9_]")


def _avro_name(text: str) -> str:
    name = _NAME_RE.sub("_", text) or "_"
    return name if not name[0].isdigit() else f"_{name}"


def data_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` without the ``_hoodie_`` meta columns."""
    return pa.schema([f for f in schema if f.name not in META_COLUMNS], metadata=None)


# -- Arrow -> Avro -------------------------------------------------------------------------------
def arrow_to_avro_schema_json(schema: pa.Schema, name: str) -> str:
    """Avro schema JSON of the data columns of ``schema`` (meta columns are left out)."""
    return json.dumps(arrow_to_avro(schema, name))


def arrow_to_avro(schema: pa.Schema, name: str) -> dict[str, Any]:
    record_name = f"{_avro_name(name)}_record"
    namespace = f"hoodie.{_avro_name(name)}"
    fields = [
        _field_to_avro(f, f"{namespace}.{record_name}")
        for f in schema
        if f.name not in META_COLUMNS
    ]
    return {"type": "record", "name": record_name, "namespace": namespace, "fields": fields}


def _field_to_avro(f: pa.Field, namespace: str) -> dict[str, Any]:
    t = _type_to_avro(f.type, f.name, namespace, f.name)
    if f.nullable:
        return {"name": f.name, "type": ["null", t], "default": None}
    return {"name": f.name, "type": t}


def _type_to_avro(t: pa.DataType, name: str, namespace: str, column: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_fixed_size_binary(t):
        return {
            "type": "fixed",
            "name": _avro_name(name),
            "namespace": namespace,
            "size": t.byte_width,
        }
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        logical = {
            "s": "timestamp-millis",
            "ms": "timestamp-millis",
            "us": "timestamp-micros",
            # Hudi's Java readers (Spark: "Illegal Parquet type: INT64 (TIMESTAMP(NANOS))")
            # and Avro before 1.12 have no nanoseconds: pandas' default datetime64[ns] is
            # stored as microseconds (values with nanoseconds are refused when cast)
            "ns": "timestamp-micros",
        }[t.unit]
        return {"type": "long", "logicalType": logical}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise TableError(
                f"column '{column}' is {t}: Hudi tables hold decimals of up to 38 digits "
                "(Spark's and Java Hudi's limit); declare decimal(38, s) or less, or a string"
            )
        size = _decimal_fixed_size(t.precision)
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{_avro_name(name)}",
            "size": size,
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field
        items = _type_to_avro(item.type, "element", f"{namespace}.{_avro_name(name)}", column)
        return {"type": "array", "items": ["null", items] if item.nullable else items}
    if pa.types.is_struct(t):
        child_ns = f"{namespace}.{_avro_name(name)}"
        return {
            "type": "record",
            "name": _avro_name(name),
            "namespace": namespace,
            "fields": [_field_to_avro(t.field(i), child_ns) for i in range(t.num_fields)],
        }
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise TableError(
                f"column '{column}' is a map with key type {t.key_type}; Avro maps need string keys"
            )
        vf = t.item_field
        values = _type_to_avro(vf.type, "value", f"{namespace}.{_avro_name(name)}", column)
        return {"type": "map", "values": ["null", values] if vf.nullable else values}
    if pa.types.is_dictionary(t):
        return _type_to_avro(t.value_type, name, namespace, column)
    raise TableError(
        f"column '{column}' has Arrow type {t}, which has no Avro (Hudi) equivalent; "
        "cast it to a supported type first"
    )


def _decimal_fixed_size(precision: int) -> int:
    """Smallest byte count holding ``precision`` decimal digits (as Spark/Hudi compute it)."""
    size = 1
    while 10**precision > 2 ** (8 * size - 1) - 1:
        size += 1
    return size


# -- Avro -> Arrow -------------------------------------------------------------------------------
def avro_schema_json_to_arrow(text: str) -> pa.Schema:
    """Arrow schema of an Avro record schema JSON, typed like hudi-rs reads it."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(f"table schema is not valid Avro JSON: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise TableError("table schema must be an Avro record schema")
    named: dict[str, Any] = {}
    return pa.schema([_avro_field_to_arrow(f, named) for f in parsed.get("fields", [])])


def _avro_field_to_arrow(
    f: dict[str, Any], named: dict[str, Any], within: tuple[str, ...] = ()
) -> pa.Field:
    t, nullable = _avro_to_type(f["type"], named, within)
    return pa.field(f["name"], t, nullable=nullable)


def _avro_to_type(
    s: Any, named: dict[str, Any], within: tuple[str, ...] = ()
) -> tuple[pa.DataType, bool]:
    """Arrow type and nullability of an Avro type; ``within``: the records it is inside of
    (a record inside itself, a recursive type, has no Arrow or table type)."""
    if isinstance(s, list):
        non_null = [v for v in s if v != "null"]
        nullable = len(non_null) < len(s)
        if len(non_null) == 1:
            t, _ = _avro_to_type(non_null[0], named, within)
            return t, nullable
        if not non_null:
            raise TableError(f"Avro union {json.dumps(s)} has no type but null")
        kinds = {avro_kind(v, named) for v in non_null}
        if len(non_null) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
            return (pa.int64() if "long" in kinds else pa.float64()), nullable
        # as Spark (and so Hudi's Spark writer) reads it: one nullable member per type
        members = [pa.field(f"member{i}", _avro_to_type(v, named, within)[0], nullable=True)
                   for i, v in enumerate(non_null)]
        return pa.struct(members), nullable
    if isinstance(s, str):
        prim = {
            "null": pa.null(),
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "bytes": pa.binary(),
            "string": pa.string(),
        }
        if s in prim:
            return prim[s], False
        short = s.rsplit(".", 1)[-1]
        if s in named or short in named:
            return _avro_to_type(named.get(s, named.get(short)), named, within)
        raise TableError(f"Avro type '{s}' is not supported")
    if not isinstance(s, dict):
        raise TableError(f"Avro type {s!r} is not supported")
    typ = s.get("type")
    logical = s.get("logicalType")
    if logical == "decimal":
        return pa.decimal128(int(s["precision"]), int(s.get("scale", 0))), False
    if logical == "date":
        return pa.date32(), False
    if logical == "timestamp-millis":
        return pa.timestamp("ms", tz="UTC"), False
    if logical == "timestamp-micros":
        return pa.timestamp("us", tz="UTC"), False
    if logical == "timestamp-nanos":
        return pa.timestamp("ns", tz="UTC"), False
    if logical == "time-millis":
        return pa.time32("ms"), False
    if logical == "time-micros":
        return pa.time64("us"), False
    if typ == "record":
        name = str(s.get("name", ""))
        if name and name in within:
            path = " -> ".join((*within[within.index(name):], name))
            raise TableError(
                f"Avro record '{name}' contains itself ({path}): a recursive type has no "
                "table column type (Parquet and Hudi's schemas are finite); model the "
                "recursion another way (a parent id, a JSON string) in the producer's schema"
            )
        if name:
            named[name] = s
        inner = (*within, name) if name else within
        return pa.struct([_avro_field_to_arrow(f, named, inner)
                          for f in s.get("fields", [])]), False
    if typ == "array":
        t, nullable = _avro_to_type(s["items"], named, within)
        return pa.list_(pa.field("element", t, nullable=nullable)), False
    if typ == "map":
        t, nullable = _avro_to_type(s["values"], named, within)
        return pa.map_(pa.string(), pa.field("value", t, nullable=nullable)), False
    if typ == "fixed":
        if "name" in s:
            named[str(s["name"])] = s
        return pa.binary(int(s["size"])), False
    if typ == "enum":
        return pa.string(), False
    if isinstance(typ, (str, list, dict)):
        return _avro_to_type(typ, named, within)
    raise TableError(f"Avro type {json.dumps(s)} is not supported")


def avro_kind(s: Any, named: Mapping[str, Any]) -> str:
    """The Avro type name of schema ``s`` (``"long"`` for a timestamp, ``"record"``, ...),
    named references resolved."""
    if isinstance(s, str):
        target = named.get(s, named.get(s.rsplit(".", 1)[-1]))
        return avro_kind(target, named) if target is not None else s
    if isinstance(s, list):
        return "union"
    typ = s.get("type") if isinstance(s, dict) else None
    if isinstance(typ, (dict, list)):
        return avro_kind(typ, named)
    return str(typ)


# -- evolution ------------------------------------------------------------------------------------
def _compatible(old: pa.DataType, new: pa.DataType) -> bool:
    """Same logical type (Arrow representations that map to the same Avro type are equal)."""
    if old == new:
        return True
    try:
        return json.dumps(_type_to_avro(old, "x", "n", "x"), sort_keys=True) == json.dumps(
            _type_to_avro(new, "x", "n", "x"), sort_keys=True
        )
    except TableError:
        return False


#: Type promotions a column may take (Avro's lossless ones): a table column of the key type
#: evolves to one of the value types; old files keep theirs and are read as the new type.
_WIDENINGS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64()),
    pa.int16(): (pa.int32(), pa.int64()),
    pa.int32(): (pa.int64(), pa.float64()),
    pa.float32(): (pa.float64(),),
}


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether a column of type ``old`` evolves to ``new`` (int -> long / double, float ->
    double, ...; see :data:`_WIDENINGS`)."""
    return new in _WIDENINGS.get(old, ())


def nested_evolution(old: pa.DataType, new: pa.DataType) -> pa.DataType | None:
    """The type a struct column (also one inside lists and maps) takes when data of type
    ``new`` holds fields its ``old`` type lacks: the old fields in their order, each evolved
    the same way, then the new ones, which must be nullable (old rows read them as null), as
    an Avro record gains optional fields. None when ``new`` is not such an evolution of
    ``old`` (fields it lacks are fine: they read as null)."""
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        fields: list[pa.Field] = []
        grew = False
        incoming = {new.field(i).name: new.field(i) for i in range(new.num_fields)}
        for i in range(old.num_fields):
            f = old.field(i)
            nf = incoming.pop(f.name, None)
            if nf is None or nf.type == f.type:
                fields.append(f)
                continue
            inner = nested_evolution(f.type, nf.type)
            if inner is None:
                return None
            fields.append(f.with_type(inner))
            grew = True
        if any(not nf.nullable for nf in incoming.values()):
            return None
        fields += [nf.with_nullable(True) for nf in incoming.values()]
        return pa.struct(fields) if grew or incoming else None
    if pa.types.is_list(old) and pa.types.is_list(new):
        inner = nested_evolution(old.value_type, new.value_type)
        return None if inner is None else pa.list_(old.value_field.with_type(inner))
    if pa.types.is_map(old) and pa.types.is_map(new) and old.key_type == new.key_type:
        inner = nested_evolution(old.item_type, new.item_type)
        return None if inner is None else pa.map_(old.key_type, old.item_field.with_type(inner))
    return None


#: An Avro name (the table's schema is stored as Avro: Java Hudi and hudi-rs parse it)
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _named_paths(
    t: pa.DataType | pa.Schema, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Paths of the named fields of a schema or type: columns and struct fields, also inside
    lists and maps (whose own item/key/value fields have no Avro name)."""
    out: list[tuple[str, ...]] = []
    fields: list[pa.Field] = []
    if isinstance(t, pa.Schema):
        fields = list(t)
    elif pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        return _named_paths(t.value_type, prefix)
    elif pa.types.is_map(t):
        return _named_paths(t.item_type, prefix)
    for f in fields:
        path = (*prefix, f.name)
        out.append(path)
        out += _named_paths(f.type, path)
    return out


def _check_names(old: pa.Schema | None, new: pa.Schema) -> None:
    """Fields new to the table must have Avro names (Java Hudi and hudi-rs cannot open a table
    whose schema has a 'first-name' column) that differ from their siblings' by more than case
    (Spark, Hive and Trino match column names without case: 'qty' and 'Qty' are one)."""
    known = set(_named_paths(old)) if old is not None else set()
    paths = _named_paths(new)
    siblings = {(p[:-1], p[-1].lower()): p for p in paths if p in known}
    for path in paths:
        if path in known:
            continue
        shown = ".".join(path)
        if not _AVRO_NAME.fullmatch(path[-1]):
            raise SchemaEvolutionError(
                f"field '{shown}' is not a valid Avro name (letters, digits and '_', not "
                "starting with a digit): the table's schema is stored as Avro, and Java Hudi "
                "and hudi-rs could not open the table. Rename it in the source (or the "
                "[schema])"
            )
        other = siblings.setdefault((path[:-1], path[-1].lower()), path)
        if other != path:
            raise SchemaEvolutionError(
                f"field '{shown}' differs from field '{'.'.join(other)}' only in case: Spark, "
                "Hive and Trino match column names without case and could not read the table. "
                "Rename one of them in the source (or the [schema])"
            )


def check_evolution(old: pa.Schema | None, new: pa.Schema, key_fields: Sequence[str]) -> pa.Schema:
    """The table schema after writing data of schema ``new`` into a table of schema ``old``.

    Allowed: same columns (any order); new *nullable* columns; a column widened (:func:`widens`;
    a key column only from integer to integer, which keeps its key text); new nullable fields
    of a struct column, also in lists and maps (:func:`nested_evolution`); a required column
    the data declares optional becomes optional. Refused with
    :class:`SchemaEvolutionError` naming the column: a changed type, a dropped column, a dropped
    key column, a new non-nullable column, a column that became non-nullable, or a new field
    whose name is not an Avro name or differs from another's only in case. The returned
    schema keeps the old column order and appends new columns (meta columns excluded).
    """
    new = data_schema(new)
    _check_names(None if old is None else data_schema(old), new)
    for key in key_fields:
        if key not in new.names:
            raise SchemaEvolutionError(
                f"record key column '{key}' is missing from the data; every write must carry it"
            )
    if old is None:
        return new
    old = data_schema(old)
    new_by_name = {f.name: f for f in new}
    result: list[pa.Field] = []
    for f in old:
        nf = new_by_name.get(f.name)
        if nf is None:
            kind = "key column" if f.name in key_fields else "column"
            raise SchemaEvolutionError(
                f"{kind} '{f.name}' ({f.type}) of the table is missing from the data; "
                "dropping columns is not supported: include it (nulls are fine if nullable)"
            )
        if widens(f.type, nf.type) and (f.name not in key_fields
                                         or pa.types.is_integer(nf.type)):
            result.append(f.with_type(nf.type))
            continue
        grown = nested_evolution(f.type, nf.type)
        if grown is not None:
            result.append(f.with_type(grown))
            continue
        if not _compatible(f.type, nf.type):
            raise SchemaEvolutionError(
                f"column '{f.name}' changes type from {f.type} to {nf.type}; "
                "type changes are not supported: cast the data to the table's type"
            )
        if not f.nullable and nf.nullable:
            # a column made optional (an Avro field gaining a null branch, as Java Hudi's
            # schema evolution allows): its older files hold no nulls, readers take them as
            # optional; it stayed required, and nulls were refused (or, written through
            # fastavro, stored as false or 0: schema-evolution review)
            result.append(f.with_nullable(True))
            continue
        # data without nulls may be declared non-nullable; the table column stays as it is
        result.append(f)
    old_names = set(old.names)
    for nf in new:
        if nf.name in old_names:
            continue
        if not nf.nullable:
            raise SchemaEvolutionError(
                f"new column '{nf.name}' is not nullable; added columns must be nullable so "
                "existing rows can read as null"
            )
        result.append(nf)
    return pa.schema(result)
