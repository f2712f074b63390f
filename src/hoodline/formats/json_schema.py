"""JSON Schema -> Arrow types (the columns of a table following a JSON Schema subject).

Mapping of a property's ``type`` (a list with ``"null"``, or ``anyOf``/``oneOf`` of
``{"type": "null"}`` and one other schema, means nullable; every column is nullable anyway):

====================================  =================================================
JSON Schema                           Arrow
====================================  =================================================
``integer``                           int64
``number``                            float64
``boolean``                           bool
``string``                            string
``string`` + ``format: date-time``    timestamp[us, tz=UTC] (ISO-8601 text in the data)
``string`` + ``format: date``         date32 (``"2024-03-01"``)
``array`` with ``items``              list of the items' type
``object`` with ``properties``        struct of the properties (nested)
``$ref`` to ``#/definitions/..`` or ``#/$defs/..``  the referenced schema
====================================  =================================================

Anything else (a union of several non-null types, ``object`` without ``properties``,
``additionalProperties`` maps, external references) is refused naming the property.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodline.formats.codec import GroupResult
from hoodline.formats.json_decoder import JsonDecoder
from hoodline.spans import byte_spans

__all__ = ["JsonSchemaCodec", "JsonSchemaError", "json_schema_to_arrow"]


class JsonSchemaError(ValueError):
    """The JSON Schema has a construct with no column type; the message names the property."""


def _resolve(node: Any, root: Mapping[str, Any], where: str) -> Any:
    seen = 0
    while isinstance(node, Mapping) and "$ref" in node:
        ref = str(node["$ref"])
        for prefix in ("#/definitions/", "#/$defs/"):
            if ref.startswith(prefix):
                node = root.get(prefix[2:-1], {}).get(ref[len(prefix):])
                break
        else:
            raise JsonSchemaError(f"{where}: reference '{ref}' is not local (#/definitions/ or "
                                  "#/$defs/); register the schema self-contained")
        if node is None:
            raise JsonSchemaError(f"{where}: reference '{ref}' points to nothing")
        seen += 1
        if seen > 32:
            raise JsonSchemaError(f"{where}: references loop ('{ref}')")
    return node


def _type_of(
    node: Any, root: Mapping[str, Any], where: str, refs: tuple[str, ...] = ()
) -> pa.DataType:
    """``refs``: the definitions ``node`` is inside of (one inside itself, a recursive type,
    has no column type)."""
    if isinstance(node, Mapping) and "$ref" in node:
        ref = str(node["$ref"])
        if ref in refs:
            raise JsonSchemaError(
                f"{where}: '{ref}' contains itself (a recursive type has no column type: "
                "Parquet and Hudi's schemas are finite); model the recursion another way (a "
                "parent id, a JSON string) in the producer's schema")
        refs = (*refs, ref)
    node = _resolve(node, root, where)
    if not isinstance(node, Mapping):
        raise JsonSchemaError(f"{where}: schema {node!r} is not an object")
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [_resolve(o, root, where) for o in node[key]]
            real = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            if len(real) != 1:
                raise JsonSchemaError(f"{where}: {key} of several types has no column type")
            return _type_of(real[0], root, where, refs)
    kind = node.get("type")
    if isinstance(kind, list):
        real = [k for k in kind if k != "null"]
        if len(real) != 1:
            raise JsonSchemaError(f"{where}: type {kind} (several types) has no column type")
        kind = real[0]
    if kind == "integer":
        return pa.int64()
    if kind == "number":
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "string":
        fmt = node.get("format")
        if fmt == "date-time":
            return pa.timestamp("us", tz="UTC")
        if fmt == "date":
            return pa.date32()
        return pa.string()
    if kind == "array":
        if "items" not in node:
            raise JsonSchemaError(f"{where}: array without 'items' has no element type")
        return pa.list_(_type_of(node["items"], root, f"{where}[]", refs))
    if kind == "object" or (kind is None and "properties" in node):
        props = node.get("properties")
        if not props:
            raise JsonSchemaError(f"{where}: object without 'properties' (a map) is not "
                                  "supported")
        return pa.struct([pa.field(str(name), _type_of(sub, root, f"{where}.{name}", refs))
                          for name, sub in props.items()])
    raise JsonSchemaError(f"{where}: type {kind!r} has no column type")


def json_schema_to_arrow(doc: Mapping[str, Any]) -> pa.Schema:
    """The columns of an object JSON Schema: one nullable column per property, in order."""
    root = _resolve(doc, doc, "schema")
    if not isinstance(root, Mapping) or not root.get("properties"):
        raise JsonSchemaError("the JSON Schema is not an object schema with 'properties'; a "
                              "table needs named fields")
    return pa.schema([pa.field(str(name), _type_of(sub, doc, str(name)))
                      for name, sub in root["properties"].items()])


class JsonSchemaCodec:
    """JSON payloads of one JSON Schema writer schema: one bulk parse into the schema's
    columns (:class:`hoodline.formats.json_decoder.JsonDecoder`, which isolates bad ones)."""

    def __init__(self, doc: Mapping[str, Any], reader: pa.Schema) -> None:
        self.arrow = json_schema_to_arrow(doc)
        self._json = JsonDecoder(self.arrow)

    def decode(self, data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
               ends: npt.NDArray[np.int64]) -> GroupResult:
        result = self._json.decode(byte_spans(data, starts, ends - starts))
        return GroupResult(result.records, np.asarray(result.row_index, dtype=np.int64),
                           np.asarray(result.errors.index, dtype=np.int64),
                           result.errors.reason.to_pylist(), result.errors.detail.to_pylist())
