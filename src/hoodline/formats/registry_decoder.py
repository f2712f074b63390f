"""Bulk decoding of Confluent-framed values (Avro, JSON Schema, Protobuf) into the table's
Arrow schema.

The Confluent wire format (:mod:`hoodline.formats.confluent`): the magic byte ``0``, the writer
schema's id in the Schema Registry, the payload. The frames are checked and the ids read for all
values at once, then the values of each writer schema are decoded together by that schema's
kind's payload codec -- Avro: :class:`AvroCodec`, column by column with
:func:`hoodline.table.log.avro_codec.decode_records` (flat records vectorised; nested ones
through fastavro); JSON Schema: :class:`hoodline.formats.json_schema.JsonSchemaCodec` (one bulk
JSON parse); Protobuf: :class:`hoodline.formats.protobuf.ProtobufCodec` (message by message) --
and resolved to the *reader* schema (the table's record schema) by Avro's resolution rules
(which JSON and Protobuf readers follow in effect): fields matched by name, writer fields the
reader lacks skipped, reader fields the writer lacks filled with the reader's default (else
null), promotions int -> long -> float -> double and string <-> bytes.

Nothing is dropped silently; every value is a decoded record or a bad record with a reason:

* ``not_wire_format``: no value, shorter than 5 bytes, or a magic byte other than 0;
* ``unknown_schema``: the registry has no schema with the value's id (the detail names it);
* ``incompatible_schema``: the writer schema cannot be read into the table's schema (a field's
  type changed beyond Avro's promotions, a non-Avro or referencing schema), or an integer
  outside the range of the table's narrower column (a field widened after the table got it:
  the table's column type is kept, values that fit are read);
* ``unparseable`` (and the JSON decoder's reasons): the payload does not match its writer schema
  (truncated, corrupt);
* ``missing_key``: a key, partition or ordering field is null or absent.

A value written with a schema that carries fields the reader lacks (or holds a field as another
type) raises :class:`~hoodline.errors.SchemaChangedError` when the reader follows the subject's
latest version and that version is no longer the reader: the round is retried after the
pipeline fetched it, so new fields reach the table instead of being skipped. The ids' order
says nothing here (a registry gives a schema text it already knew under another subject its
old, lower id). When the reader still is the latest version (the schema is registered under
another subject only), a retry could not help: the value is read into the reader by Avro's
rules, without the fields the subject does not have.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodline.errors import SchemaChangedError, TableError
from hoodline.formats.codec import GroupResult, PayloadCodec
from hoodline.formats.confluent import NOT_WIRE_FORMAT, NOT_WIRE_FORMAT_DETAIL, read_frames
from hoodline.formats.json_decoder import (
    MISSING_KEY,
    UNPARSEABLE,
    BadRecords,
    DecodeResult,
)
from hoodline.formats.json_schema import JsonSchemaCodec
from hoodline.formats.narrowing import Problem, cast_fitting, problem_text
from hoodline.formats.protobuf import ProtobufCodec, table_type
from hoodline.formats.registry import (
    UNKNOWN,
    RegistrySettings,
    SchemaKind,
    WriterSchema,
    latest_schema_id,
    writer_schema,
)
from hoodline.table.log.avro_codec import decode_records
from hoodline.table.schema import avro_schema_json_to_arrow

__all__ = [
    "INCOMPATIBLE_SCHEMA",
    "NOT_WIRE_FORMAT",
    "UNKNOWN_SCHEMA",
    "AvroCodec",
    "RegistryDecoder",
    "RegistryFormat",
    "resolve_columns",
]

UNKNOWN_SCHEMA = "unknown_schema"
INCOMPATIBLE_SCHEMA = "incompatible_schema"

#: Looks up a writer schema by id (the registry, cached per process; a dict in unit tests).
SchemaLookup = Callable[[int], WriterSchema | str]

_INTS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def _promotable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Avro's promotions (and the Arrow representations of one Avro type) from ``src``."""
    if src == dst:
        return True
    if pa.types.is_integer(src):
        if pa.types.is_integer(dst):
            return _INTS.index(dst) >= _INTS.index(src) if src in _INTS and dst in _INTS else False
        return bool(pa.types.is_floating(dst))
    if pa.types.is_float32(src):
        return bool(pa.types.is_float64(dst))
    if pa.types.is_string(src) or pa.types.is_large_string(src):
        return dst in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
    if pa.types.is_binary(src) or pa.types.is_large_binary(src):
        return dst in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        return True  # units and zones are representations of Avro's timestamp types
    return False


def _narrowing(src: pa.DataType, dst: pa.DataType) -> bool:
    """A value read into a narrower column: an integer or floating-point value into an
    integer column (a field widened after the table got its column, a JSON Schema integer
    become number), a decimal into a decimal of other precision or scale, a double into a
    float. Values that fit -- whole numbers in the column's range, decimals without lost
    digits, doubles in a float's range (rounded, as JSON's are) -- are read, others are bad
    records (a declared narrower decimal or float refused every record: data-types review)."""
    return bool(((pa.types.is_integer(src) or pa.types.is_floating(src))
                 and pa.types.is_integer(dst))
                or (pa.types.is_decimal(src) and pa.types.is_decimal(dst))
                or (pa.types.is_float64(src) and pa.types.is_float32(dst)))


def _represented(src: pa.DataType, dst: pa.DataType) -> bool:
    """A decoded type the table stores as another (Protobuf's, see
    :func:`hoodline.formats.protobuf.table_columns`): an integer (a ``uint64``, or a field
    of an older version before it became one) as a decimal that holds every value of its
    type, a duration as its int64 ticks."""
    if pa.types.is_integer(src) and pa.types.is_decimal(dst):
        info = np.iinfo(src.to_pandas_dtype())
        digits = len(str(max(-int(info.min), int(info.max))))
        return bool(dst.precision - dst.scale >= digits)
    return bool(pa.types.is_duration(src) and pa.types.is_int64(dst))


def _readable(src: pa.DataType, dst: pa.DataType) -> bool:
    return (_promotable(src, dst) or _narrowing(src, dst) or _represented(src, dst)
            or (pa.types.is_nested(src) and pa.types.is_nested(dst)))


def _nested_mismatch(src: pa.DataType, dst: pa.DataType, path: str) -> str | None:
    """Where a value of nested type ``src`` cannot be read into ``dst`` by Avro's rules (a
    field inside whose type changed beyond the promotions: Arrow's cast would turn an int
    into the text '7', as in a Debezium change event's before/after images: CDC review):
    'path.field is X in the writer schema, the table has Y'; None when readable."""
    if src == dst:
        return None
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        have = {src.field(i).name: src.field(i).type for i in range(src.num_fields)}
        for i in range(dst.num_fields):
            f = dst.field(i)
            if f.name in have:
                found = _nested_mismatch(have[f.name], f.type, f"{path}.{f.name}")
                if found is not None:
                    return found
        return None
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(t(src) for t in lists) and any(t(dst) for t in lists):
        return _nested_mismatch(src.value_type, dst.value_type, f"{path}[]")
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return (_nested_mismatch(src.key_type, dst.key_type, f"{path}{{key}}")
                or _nested_mismatch(src.item_type, dst.item_type, f"{path}{{value}}"))
    if pa.types.is_map(src) and any(t(dst) for t in lists):  # entries as key/value records
        entries = pa.struct([("key", src.key_type), ("value", src.item_type)])
        return _nested_mismatch(entries, dst.value_type, f"{path}[]")
    if pa.types.is_nested(src) or pa.types.is_nested(dst) or not (
            _promotable(src, dst) or _narrowing(src, dst) or _represented(src, dst)):
        # a narrower integer inside a record is read as Arrow casts it: values that fit, or
        # the whole version refused, as before this check (review: not refused outright)
        return f"'{path}' is {src} in the writer schema, the table has {dst}"
    return None


def resolve_columns(
    decoded: pa.Table,
    writer_names: Sequence[str],
    reader: pa.Schema,
    defaults: Mapping[str, Any],
) -> tuple[pa.Table, npt.NDArray[np.bool_], list[Problem]]:
    """``decoded`` (columns of the writer schema) read into ``reader``: the table, the rows
    whose value does not fit the reader's type (an integer out of a narrower column's range)
    and, per field with such values, its rows and why. Raises :class:`ValueError` naming the
    fields when a type cannot be read at all."""
    n = decoded.num_rows
    cols: list[pa.Array | pa.ChunkedArray] = []
    present = set(writer_names)
    unfit = np.zeros(n, dtype=bool)
    why: list[Problem] = []
    refused: list[str] = []  # every field that cannot be read, named in one message
    for f in reader:
        if f.name in present:
            col = decoded.column(f.name)
            if col.type != f.type:
                if not _readable(col.type, f.type):
                    refused.append(f"field '{f.name}' is {col.type} in the writer schema, the "
                                   f"table has {f.type}")
                    continue
                if pa.types.is_nested(col.type):
                    inside = _nested_mismatch(col.type, f.type, f.name)
                    if inside is not None:
                        refused.append(f"field {inside}")
                        continue
                try:
                    col, problems = cast_fitting(col, f.type, f.name, target="the table's",
                                                 source="the writer schema")
                    for rows, _ in problems:
                        unfit |= rows
                    why += problems
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    refused.append(f"field '{f.name}' ({col.type}) does not convert to the "
                                   f"table's {f.type}: {exc}")
                    continue
            cols.append(col)
        elif f.name in defaults:
            try:
                cols.append(pa.array([defaults[f.name]] * n, f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                cols.append(pa.nulls(n, f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    if refused:
        raise ValueError("; ".join(refused))
    table = pa.Table.from_arrays(cols, schema=pa.schema([f.with_nullable(True) for f in reader]))
    return table, unfit, why


class AvroCodec:
    """Avro payloads of one writer schema, column by column (see module docs). ``reader``: the
    table's columns; writer fields it lacks are stepped over, not copied out (every field is
    decoded without it)."""

    def __init__(self, avro: Any, reader: pa.Schema | None = None) -> None:
        self.avro = avro
        self.arrow = avro_schema_json_to_arrow(json.dumps(avro))
        self._parsed = fastavro.parse_schema(avro)
        self._reader = reader

    def decode(self, data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
               ends: npt.NDArray[np.int64]) -> GroupResult:
        everything = np.arange(len(starts), dtype=np.int64)
        try:
            return GroupResult(
                decode_records(data.data, starts, ends, self.avro, self._reader), everything)
        except (TableError, EOFError, ValueError, IndexError, UnicodeDecodeError,
                pa.ArrowInvalid):
            pass
        # some datum is corrupt: find which, one at a time (rare path), then decode the rest
        view = data.data
        good: list[int] = []
        broken: list[int] = []
        details: list[str] = []
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            buf = io.BytesIO(view[s:e])
            try:
                fastavro.schemaless_reader(buf, self._parsed, None)
                if buf.tell() != e - s:
                    raise ValueError(f"{e - s - buf.tell()} byte(s) left after the datum")
                good.append(i)
            except Exception as exc:  # fastavro raises many types on corrupt input
                broken.append(i)
                details.append(f"Avro datum does not match its writer schema: "
                               f"{_failure(exc)}"[:300])
        good_rows = np.asarray(good, dtype=np.int64)
        table = (decode_records(data.data, starts[good_rows], ends[good_rows], self.avro,
                                self._reader) if good else None)
        return GroupResult(table, good_rows, np.asarray(broken, dtype=np.int64),
                           [UNPARSEABLE] * len(broken), details)


def _failure(exc: BaseException) -> str:
    """What a decoder's exception says about a corrupt datum (some carry no message; reading
    past the end shows as EOFError, or as an IndexError of the bytes)."""
    if isinstance(exc, EOFError | IndexError):
        said = f": {type(exc).__name__}: {exc}" if str(exc) else ""
        return f"it ends before its schema's fields do (truncated{said})"
    if str(exc):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__


@dataclass
class _Plan:
    """How values of one writer schema are read (or why they cannot be)."""

    codec: PayloadCodec | None
    problem: str | None = None


class RegistryDecoder:
    """Decode Confluent-framed values into ``reader`` (see module docs).

    ``lookup`` returns the writer schema of an id; ``defaults`` are the reader's Avro defaults;
    ``reader_id`` is the id of the reader schema when it follows the subject's latest version
    (None: pinned or declared, never retried). ``primitive_field`` names the one reader field a
    non-record writer schema (a primitive message key) is read into. ``nested`` names record
    fields whose own new fields also count as a newer schema (Debezium's row images).
    ``kind`` is the schema type the source reads (others are incompatible); ``message_path``
    the Protobuf message the table follows; ``latest_id`` asks the registry for the id of the
    subject's latest version (a newer writer's fields retry the round only if that is not the
    reader).
    """

    def __init__(
        self,
        reader: pa.Schema,
        lookup: SchemaLookup,
        *,
        required: Sequence[str] = (),
        defaults: Mapping[str, Any] | None = None,
        reader_id: int | None = None,
        primitive_field: str | None = None,
        nested: Sequence[str] = (),
        kind: SchemaKind = SchemaKind.AVRO,
        message_path: str = "",
        latest_id: Callable[[], int] | None = None,
    ) -> None:
        self.reader = reader
        self._latest_id = latest_id
        self.kind = kind
        self.message_path = message_path
        self._nested = tuple(nested)
        self.required = tuple(required)
        self._lookup = lookup
        self._defaults = dict(defaults or {})
        self._reader_id = reader_id
        self._primitive_field = primitive_field
        self._plans: dict[int, _Plan] = {}

    # -- writer schemas --------------------------------------------------------------------------
    def _plan(self, schema_id: int) -> _Plan | str:
        found = self._plans.get(schema_id)
        if found is not None:
            return found
        writer = self._lookup(schema_id)
        if writer == UNKNOWN or isinstance(writer, str):
            return UNKNOWN
        plan = self._make_plan(writer)
        self._plans[schema_id] = plan
        return plan

    def _codec(self, writer: WriterSchema) -> PayloadCodec | str:
        """The writer schema's payload codec, or why it cannot be read."""
        sid = writer.schema_id
        if writer.kind is not self.kind:
            return f"schema id {sid} is a {writer.kind} schema, the source reads {self.kind}"
        try:
            if writer.kind is SchemaKind.JSON:
                return JsonSchemaCodec(writer.parsed, self.reader)
            if writer.kind is SchemaKind.PROTOBUF:
                return ProtobufCodec(writer.parsed, self.message_path)
            avro = writer.parsed
            if not (isinstance(avro, dict) and avro.get("type") == "record"):
                if self._primitive_field is None:
                    return f"schema id {sid} is not an Avro record"
                avro = {"type": "record", "name": "hoodline_value",
                        "fields": [{"name": self._primitive_field, "type": avro}]}
            return AvroCodec(avro, self.reader)
        except (TableError, fastavro.schema.SchemaParseException, ValueError, KeyError,
                TypeError) as exc:
            return f"schema id {sid} cannot be read: {exc}"

    def _make_plan(self, writer: WriterSchema) -> _Plan:
        if writer.problem is not None:
            return _Plan(None, writer.problem)
        codec = self._codec(writer)
        if isinstance(codec, str):
            return _Plan(None, codec)
        arrow = codec.arrow
        by_name = {f.name: f for f in arrow}
        extra = self._new_fields(arrow)
        # compared as the table stores them (a Protobuf uint64 is a decimal column: no
        # change, though the decoded types differ)
        changed = [f for f in self.reader
                   if f.name in by_name and table_type(by_name[f.name].type) != f.type]
        if (extra or changed) and self._behind(writer.schema_id):
            what = (f"carry field(s) {', '.join(extra)} that the round's schema (id "
                    f"{self._reader_id}) lacks" if extra else
                    f"hold field '{changed[0].name}' as {by_name[changed[0].name].type}, which "
                    f"the round's schema (id {self._reader_id}) reads as {changed[0].type}")
            raise SchemaChangedError(
                f"records written with schema id {writer.schema_id} {what}; the round is "
                "planned again with the subject's latest version"
            )
        unreadable = [  # nested types are checked when cast
            f"field '{f.name}' is {by_name[f.name].type} in the writer schema, the table has "
            f"{f.type}" for f in changed if not _readable(by_name[f.name].type, f.type)]
        if unreadable:  # every one named: fixing them one run at a time is slow
            return _Plan(None, f"schema id {writer.schema_id}: {'; '.join(unreadable)}")
        return _Plan(codec)

    def _behind(self, writer_id: int) -> bool:
        """Whether a writer with ``writer_id`` may be of a subject version newer than the
        reader: the reader follows the latest version, and the subject's latest version is not
        the reader any more (asked once per writer schema). Not the ids' order: a registry
        gives a schema text it knew (under another subject) its old, lower id, so a newer
        version can have a lower id than the reader -- its new fields were skipped."""
        return (self._reader_id is not None and writer_id != self._reader_id
                and (self._latest_id is None or self._latest_id() != self._reader_id))

    def _new_fields(self, writer: pa.Schema) -> list[str]:
        """Writer fields the reader lacks: top-level ones, and inside the record fields named
        by ``nested`` (``after.discount``)."""
        extra = [n for n in writer.names if n not in self.reader.names]
        for name in self._nested:
            if name not in writer.names or name not in self.reader.names:
                continue
            w, r = writer.field(name).type, self.reader.field(name).type
            if pa.types.is_struct(w) and pa.types.is_struct(r):
                known = {r.field(i).name for i in range(r.num_fields)}
                extra += [f"{name}.{w.field(i).name}" for i in range(w.num_fields)
                          if w.field(i).name not in known]
        return sorted(extra)

    # -- decoding --------------------------------------------------------------------------------
    def decode(self, values: pa.Array | pa.ChunkedArray) -> DecodeResult:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        n = len(values)
        frames = read_frames(values)
        framed, ids, starts, ends, data = (frames.framed, frames.ids, frames.starts, frames.ends,
                                           frames.data)

        bad: list[tuple[npt.NDArray[np.int64], str, list[str] | str]] = []
        unframed = np.flatnonzero(~framed)
        if len(unframed):
            bad.append((unframed, NOT_WIRE_FORMAT, NOT_WIRE_FORMAT_DETAIL))
        tables: list[pa.Table] = []
        rows_of: list[npt.NDArray[np.int64]] = []
        for schema_id in np.unique(ids[framed]).tolist():
            rows = np.flatnonzero(ids == schema_id)
            plan = self._plan(int(schema_id))
            if isinstance(plan, str):
                bad.append((rows, UNKNOWN_SCHEMA,
                            f"schema id {schema_id} is not in the Schema Registry"))
                continue
            if plan.codec is None:
                bad.append((rows, INCOMPATIBLE_SCHEMA, plan.problem or "unreadable schema"))
                continue
            group = plan.codec.decode(data, starts[rows] + 5, ends[rows])
            for reason in dict.fromkeys(group.reasons):
                pick = np.asarray([r == reason for r in group.reasons])
                bad.append((rows[group.bad[pick]], reason,
                            [f"schema id {schema_id}: {d}"
                             for d, p in zip(group.details, pick, strict=True) if p]))
            table, good = group.table, group.good
            if table is None:
                continue
            try:
                resolved, unfit, why = resolve_columns(table, plan.codec.arrow.names,
                                                       self.reader, self._defaults)
            except ValueError as exc:
                bad.append((rows[good], INCOMPATIBLE_SCHEMA, f"schema id {schema_id}: {exc}"))
                continue
            if unfit.any():  # each record's detail names its own fields' problems
                bad.append((rows[good][unfit], INCOMPATIBLE_SCHEMA,
                            [f"schema id {schema_id}: {problem_text(why, i)}"
                             for i in np.flatnonzero(unfit).tolist()]))
                resolved = resolved.filter(pa.array(~unfit))
                good = good[~unfit]
            tables.append(resolved)
            rows_of.append(rows[good])
        return self._assemble(n, tables, rows_of, bad)

    def _assemble(
        self, n: int, tables: list[pa.Table], rows_of: list[npt.NDArray[np.int64]],
        bad: list[tuple[npt.NDArray[np.int64], str, list[str] | str]],
    ) -> DecodeResult:
        schema = pa.schema([f.with_nullable(True) for f in self.reader])
        if tables:
            records = pa.concat_tables(tables).combine_chunks()
            row_index = np.concatenate(rows_of)
            order = np.argsort(row_index, kind="stable")
            if not (order == np.arange(len(order))).all():
                records = records.take(pa.array(order))
                row_index = row_index[order]
        else:
            records = schema.empty_table()
            row_index = np.zeros(0, dtype=np.int64)
        if self.required and records.num_rows:
            missing = np.zeros(records.num_rows, dtype=bool)
            for name in self.required:
                missing |= np.asarray(records.column(name).is_null())
            if missing.any():
                details = [
                    "null or missing field(s) " + ", ".join(
                        repr(name) for name in self.required
                        if not records.column(name)[int(i)].is_valid
                    )
                    for i in np.flatnonzero(missing)
                ]
                bad.append((row_index[missing], MISSING_KEY, details))
                keep = pa.array(~missing)
                records = records.filter(keep)
                row_index = row_index[~missing]
        errors = _bad_records(bad)
        assert records.num_rows + len(errors) == n, "decoder lost or duplicated records"
        return DecodeResult(records, pa.array(row_index, pa.int64()), errors)


def _bad_records(parts: list[tuple[npt.NDArray[np.int64], str, list[str] | str]]) -> BadRecords:
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return BadRecords(pa.array([], pa.int64()), pa.array([], pa.string()),
                          pa.array([], pa.string()))
    idx = np.concatenate([p[0] for p in parts])
    reasons = np.concatenate([np.full(len(p[0]), p[1], dtype=object) for p in parts])
    details: list[str] = []
    for rows, _, d in parts:
        details.extend([d] * len(rows) if isinstance(d, str) else d)
    order = np.argsort(idx, kind="stable")
    return BadRecords(
        pa.array(idx[order], pa.int64()),
        pa.array(reasons[order].tolist(), pa.string()),
        pa.array(np.asarray(details, dtype=object)[order].tolist(), pa.string()),
    )


@dataclass(frozen=True)
class RegistryFormat:
    """What a task needs to decode Confluent-framed values (picklable; sent with every
    round)."""

    settings: RegistrySettings
    #: id of the reader schema when it follows the subject's latest version, else None
    reader_id: int | None = None
    #: the reader's Avro default values by field, as JSON text
    defaults: str = "{}"
    kind: SchemaKind = SchemaKind.AVRO

    def decoder(self, reader: pa.Schema, required: Sequence[str] = (), *,
                primitive_field: str | None = None,
                nested: Sequence[str] = ()) -> RegistryDecoder:
        """The process's decoder for this reader schema (it keeps resolved writer schemas)."""
        key = (self, reader.serialize().to_pybytes(), tuple(required), primitive_field,
               tuple(nested))
        found = _decoders.get(key)
        if found is None:
            settings = self.settings
            # message keys (primitive_field) are Avro whatever the values' format
            found = RegistryDecoder(
                reader, lambda schema_id: writer_schema(settings, schema_id),
                required=required, defaults=json.loads(self.defaults),
                reader_id=None if primitive_field else self.reader_id,
                primitive_field=primitive_field, nested=nested,
                kind=SchemaKind.AVRO if primitive_field else self.kind,
                message_path=settings.message_path,
                latest_id=lambda: latest_schema_id(settings),
            )
            if len(_decoders) > 64:
                _decoders.clear()
            _decoders[key] = found
        return found


_decoders: dict[tuple[Any, ...], RegistryDecoder] = {}
