"""What log blocks carry: Avro/Parquet data blocks, delete blocks, rollback command blocks.

* Avro data block (content version 3): ``int32 3``, ``int32 record count``, then per record
  ``int32 length`` + the Avro binary datum under the block's SCHEMA header (meta fields first).
* Parquet data block: the content is a whole Parquet file (hoodline writes Avro blocks unless
  ``hoodie.logfile.data.block.format = parquet``).
* Delete block (content version 3): ``int32 3``, ``int32 length``, then one Avro datum of
  ``HoodieDeleteRecordList`` (record key, partition path, ordering value). With
  ``DefaultHoodieRecordPayload`` hoodline writes each delete's own ordering value, as Java
  does for records an upsert deletes (a late delete then does not remove a newer log record);
  otherwise, and for deletes without one (tombstones), ``IntWrapper(0)``, as Spark SQL's
  DELETE does: natural order, the delete wins over every earlier version of the key.
* Command block: no content; ROLLBACK removes the blocks of TARGET_INSTANT_TIME.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodline.errors import TableError
from hoodline.table.log.avro_codec import (
    concatenated,
    decode_datum,
    decode_records,
    encode_records,
    record_list,
    record_offsets,
    zigzag,
)
from hoodline.table.log.blocks import (
    ROLLBACK_COMMAND,
    HeaderKey,
    LogBlock,
    LogBlockType,
)
from hoodline.table.log.ordering import OrderingValue, unwrapped

CONTENT_VERSION = 3
_I32 = struct.Struct(">i")

_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value: Any) -> dict[str, Any]:
    fields = [{"name": "value", "type": value}]
    return {"type": "record", "name": name, "namespace": _NS, "fields": fields}


#: ``HoodieDeleteRecordList`` of table version 6 (the wrappers inline, in Java's union order)
DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "namespace": _NS,
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "HoodieDeleteRecord",
                    "namespace": _NS,
                    "fields": [
                        {"name": "recordKey", "type": ["null", "string"], "default": None},
                        {"name": "partitionPath", "type": ["null", "string"], "default": None},
                        {
                            "name": "orderingVal",
                            "type": [
                                "null",
                                _wrapper("BooleanWrapper", "boolean"),
                                _wrapper("IntWrapper", "int"),
                                _wrapper("LongWrapper", "long"),
                                _wrapper("FloatWrapper", "float"),
                                _wrapper("DoubleWrapper", "double"),
                                _wrapper("BytesWrapper", "bytes"),
                                _wrapper("StringWrapper", "string"),
                                _wrapper("DateWrapper", "int"),
                                _wrapper(
                                    "DecimalWrapper",
                                    {
                                        "type": "bytes",
                                        "logicalType": "decimal",
                                        "precision": 30,
                                        "scale": 15,
                                    },
                                ),
                                _wrapper(
                                    "TimeMicrosWrapper",
                                    {"type": "long", "logicalType": "time-micros"},
                                ),
                                _wrapper("TimestampMicrosWrapper", "long"),
                            ],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}

#: the per-record fields hoodline writes column at a time, then ``IntWrapper(0)`` (branch 2)
_DELETE_KEY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "k",
    "fields": [
        {"name": "recordKey", "type": ["null", "string"]},
        {"name": "partitionPath", "type": ["null", "string"]},
    ],
}
_INT_WRAPPER_ZERO = b"\x04\x00"


def _header(instant: str, schema_json: str | None) -> dict[HeaderKey, str]:
    header = {HeaderKey.INSTANT_TIME: instant}
    if schema_json is not None:
        header[HeaderKey.SCHEMA] = schema_json
    return header


# -- writing ---------------------------------------------------------------------------------------
def avro_data_block(
    records: pa.Table,
    schema: dict[str, Any],
    instant: str,
    constants: Mapping[str, str] | None = None,
) -> LogBlock:
    """An Avro data block of ``records`` (columns named as ``schema``'s fields; ``constants``:
    string fields with one value in every record, given instead of a column)."""
    lead = _I32.pack(CONTENT_VERSION) + _I32.pack(records.num_rows)
    content = record_list(records, schema, constants, lead)
    return LogBlock(LogBlockType.AVRO_DATA, _header(instant, json.dumps(schema)), content)


def parquet_data_block(
    records: pa.Table, schema: dict[str, Any], instant: str, compression: str | None
) -> LogBlock:
    """A Parquet data block: ``records`` as one whole Parquet file (schema in the header)."""
    sink = pa.BufferOutputStream()
    pq.write_table(records, sink, compression=compression)
    content = sink.getvalue().to_pybytes()
    return LogBlock(LogBlockType.PARQUET_DATA, _header(instant, json.dumps(schema)), content)


def delete_block(
    keys: pa.Array | pa.ChunkedArray, partition_path: str, instant: str, schema_json: str,
    orderings: pa.Array | None = None,
) -> LogBlock:
    """A delete block removing ``keys`` of one partition. ``orderings``: each delete's
    ordering value (see :func:`_ordering_wrappers`); None: ``IntWrapper(0)``, natural order."""
    n = len(keys)
    keyed = encode_records(
        pa.table({"recordKey": keys}), _DELETE_KEY_SCHEMA, {"partitionPath": partition_path}
    )
    wrapped = _ordering_wrappers(orderings) if orderings is not None else None
    datums = pc.binary_join_element_wise(
        keyed, pa.scalar(_INT_WRAPPER_ZERO, pa.large_binary()) if wrapped is None else wrapped,
        pa.scalar(b"", pa.large_binary())
    )
    # an Avro array: one block of n items, then the empty block
    body = (zigzag(n) if n else b"") + bytes(concatenated(datums)) + b"\x00"
    content = _I32.pack(CONTENT_VERSION) + _I32.pack(len(body)) + body
    return LogBlock(LogBlockType.DELETE, _header(instant, schema_json), content)


#: Arrow type test -> (the Avro type of the wrapper's value, its branch in the orderingVal union)
_WRAPPED: tuple[tuple[Callable[[pa.DataType], bool], str, int], ...] = (
    (pa.types.is_boolean, "boolean", 1),
    (lambda t: pa.types.is_integer(t) and t.bit_width <= 32 and pa.types.is_signed_integer(t),
     "int", 2),
    (lambda t: t == pa.int64() or (pa.types.is_timestamp(t) and t.unit in ("ms", "us")),
     "long", 3),
    (lambda t: t == pa.float32(), "float", 4),
    (lambda t: t == pa.float64(), "double", 5),
)


def _ordering_wrappers(values: pa.Array) -> pa.Array | None:
    """Each value as the ``orderingVal`` union branch Java writes for a delete's ordering
    value (its raw Avro value wrapped: ``IntWrapper``, ``LongWrapper`` (also for timestamps,
    whose raw value is a long), ``FloatWrapper``, ``DoubleWrapper``, ``BooleanWrapper``), nulls
    as ``IntWrapper(0)``. None for other types: their wrappers (strings, dates, decimals) are
    of another Java class than a log record's ordering value, so such deletes always delete,
    as ``IntWrapper(0)`` does."""
    found = next(((avro, branch) for test, avro, branch in _WRAPPED if test(values.type)), None)
    if found is None:
        return None
    avro, branch = found
    raw = values.cast(pa.int64()) if pa.types.is_timestamp(values.type) else values
    if avro == "int":
        raw = raw.cast(pa.int32())
    filled = pc.fill_null(raw, pa.scalar(False if avro == "boolean" else 0, raw.type))
    encoded = encode_records(pa.table({"value": filled}), {
        "type": "record", "name": "w", "fields": [{"name": "value", "type": avro}]})
    wrapped = pc.binary_join_element_wise(
        pa.scalar(zigzag(branch), pa.large_binary()), encoded, pa.scalar(b"", pa.large_binary()))
    zero = pa.scalar(_INT_WRAPPER_ZERO, pa.large_binary())
    return pc.if_else(pc.is_valid(values), wrapped, zero)


def rollback_block(instant: str, target_instant: str) -> LogBlock:
    """A command block rolling back the blocks of ``target_instant``."""
    header = {
        HeaderKey.INSTANT_TIME: instant,
        HeaderKey.TARGET_INSTANT_TIME: target_instant,
        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
    }
    return LogBlock(LogBlockType.COMMAND, header)


# -- reading ---------------------------------------------------------------------------------------
def block_schema(block: LogBlock) -> dict[str, Any]:
    raw = block.header.get(HeaderKey.SCHEMA)
    if raw is None:
        raise TableError(f"data block at offset {block.offset} has no SCHEMA header")
    try:
        schema = json.loads(raw)
    except ValueError as exc:
        raise TableError(
            f"data block at offset {block.offset}: SCHEMA is not JSON ({exc})"
        ) from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise TableError(f"data block at offset {block.offset}: SCHEMA is not an Avro record")
    return schema


def read_data_blocks(blocks: Sequence[LogBlock], wanted: pa.Schema | None = None) -> pa.Table:
    """The records of consecutive data blocks of one type and one SCHEMA header (see
    :func:`same_records_schema`), in block order, typed as that schema says (``wanted``: the
    reader's columns, see :func:`~hoodline.table.log.avro_codec.decode_records`; Parquet
    blocks give every column).

    Avro blocks are decoded in one pass over their joined contents: the decoder's cost per
    call is ~1.5 ms whatever the record count, so decoding a slice's ~1,000-record blocks one by
    one took twice as long per record (BENCHMARKS.md)."""
    if not blocks:
        raise TableError("no log blocks to read records from")
    kind = blocks[0].type
    if any(b.type is not kind for b in blocks):
        raise TableError("data blocks read together must be of one type")
    if kind is LogBlockType.PARQUET_DATA:
        tables = [pq.read_table(pa.BufferReader(bytes(b.content))) for b in blocks]
        return tables[0] if len(tables) == 1 else pa.concat_tables(
            tables, promote_options="permissive")
    if kind is not LogBlockType.AVRO_DATA:
        raise TableError(f"log block type {kind.name} holds no records hoodline reads")
    schema = block_schema(blocks[0])
    if len(blocks) == 1:
        content = blocks[0].content
        starts, ends = _avro_records(blocks[0])
        return decode_records(content, starts, ends, schema, wanted)
    firsts: list[npt.NDArray[np.int64]] = []
    lasts: list[npt.NDArray[np.int64]] = []
    at = 0
    for block in blocks:
        if block.header.get(HeaderKey.SCHEMA) != blocks[0].header.get(HeaderKey.SCHEMA):
            raise TableError("data blocks read together must have one SCHEMA header")
        starts, ends = _avro_records(block)
        firsts.append(starts + at)
        lasts.append(ends + at)
        at += len(block.content)
    joined = b"".join(b.content for b in blocks)
    return decode_records(joined, np.concatenate(firsts), np.concatenate(lasts), schema, wanted)


def same_records_schema(a: LogBlock, b: LogBlock) -> bool:
    """Whether :func:`read_data_blocks` reads ``a`` and ``b`` together: data blocks of one type
    whose records have one schema."""
    return (
        a.type is b.type
        and a.type in _DATA_BLOCKS
        and a.header.get(HeaderKey.SCHEMA) == b.header.get(HeaderKey.SCHEMA)
    )


_DATA_BLOCKS = (LogBlockType.AVRO_DATA, LogBlockType.PARQUET_DATA)


def _avro_records(block: LogBlock) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(start, end) of each record of an Avro data block in its content."""
    content = block.content
    if len(content) < 8:
        raise TableError(f"Avro data block at offset {block.offset} is too short")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise TableError(
            f"Avro data block at offset {block.offset} has content version {version}; "
            f"only {CONTENT_VERSION} (Hudi 0.7 and later) is supported"
        )
    return record_offsets(content, 8, count)


@dataclass(frozen=True)
class DeleteList:
    """What one delete block removes: per deleted key, its partition path and the ordering
    value the delete carries (None: null; ``IntWrapper(0)``, hoodline's, is natural order)."""

    keys: list[str]
    partition_paths: list[str]
    orderings: list[OrderingValue | None]


def read_delete_block(block: LogBlock) -> DeleteList:
    """The keys a delete block removes, with their partition paths and ordering values."""
    content = block.content
    if len(content) < 8:
        raise TableError(f"delete block at offset {block.offset} is too short")
    version, length = struct.unpack_from(">ii", content, 0)
    if version < CONTENT_VERSION:
        raise TableError(
            f"delete block at offset {block.offset} has content version {version} (Kryo, "
            "written by Hudi before 0.12); compact the table with Hudi first"
        )
    datum = decode_datum(content[8 : 8 + length], DELETE_RECORD_LIST_SCHEMA, record_names=True)
    records = datum["deleteRecordList"]
    return DeleteList(
        [str(r["recordKey"]) for r in records],
        [str(r["partitionPath"] or "") for r in records],
        [unwrapped(r["orderingVal"]) for r in records],
    )
