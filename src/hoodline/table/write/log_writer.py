"""Merge-on-read append: one new log file per file group per deltacommit (Java's append handle).

The file ``.{fileId}_{baseInstant}.log.{version}_{writeToken}`` belongs to the group's latest
file slice (``baseInstant`` = its base file's instant; for a group written only to logs so far,
the deltacommit that created it). It holds an Avro data block with the upserted records (the five
meta columns first, ``_hoodie_file_name`` = the file id, as Java writes it) and, when there are
deletes, a delete block after it; both carry the instant and the write schema in their headers.
(``hoodie.logfile.data.block.format = parquet``: the data block is a Parquet file instead.)
Every write opens the next version (local disks and object stores cannot append), created
exclusively, after its marker; nothing already on disk is changed, so a failed write is undone
by deleting the files its markers list.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa

from hoodline import faults
from hoodline.faults import FaultPoint
from hoodline.storage.paths import ObjectPath
from hoodline.table.commit_metadata import WriteStat
from hoodline.table.fs_view import FileSlice
from hoodline.table.log.blocks import LogBlock
from hoodline.table.log.content import avro_data_block, delete_block, parquet_data_block
from hoodline.table.log.names import FIRST_VERSION, LogFileName
from hoodline.table.markers import Markers
from hoodline.table.properties import IndexType
from hoodline.table.schema import META_COLUMNS, arrow_to_avro
from hoodline.table.write.context import (
    WriteContext,
    ensure_partition_metadata,
    new_rows,
    split_deletes,
    write_token,
)
from hoodline.table.write.operation import WriteOperation
from hoodline.table.write.options import Compression, LogBlockFormat, PayloadClass
from hoodline.table.write.records import (
    COMMIT_TIME,
    FILE_ID,
    FILE_NAME,
    IS_DELETE,
    PARTITION_PATH,
    RECORD_KEY,
)


def log_block_schema(data_schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """The Avro write schema of log records: Hudi's five meta fields, then the data columns."""
    schema = arrow_to_avro(data_schema, table_name)
    meta = [
        {"name": c, "type": ["null", "string"], "doc": "", "default": None} for c in META_COLUMNS
    ]
    return {**schema, "fields": meta + list(schema["fields"])}


def appends_to_log(ctx: WriteContext, base: FileSlice | None) -> bool:
    """Whether a write to a file group appends a log file (else it writes a base file).

    Merge-on-read tables append to every existing file group. A new group gets a base file with
    the BLOOM index (only base files carry the bloom filter that later finds its keys) and for
    bulk_insert; with the BUCKET index other writes start it with a log file."""
    if not ctx.config.merge_on_read:
        return False
    if base is not None:
        return True
    return ctx.config.index_type is IndexType.BUCKET and ctx.operation is not (
        WriteOperation.BULK_INSERT
    )


def _delete_orderings(ctx: WriteContext, deletes: pa.Table) -> pa.Array | None:
    """The ordering values deletes carry into the delete block (as Java writes those of
    records an upsert deletes), so that a late delete does not remove a newer log record:
    with ``DefaultHoodieRecordPayload`` only (with the default payload the last write wins
    and every delete deletes)."""
    field = ctx.config.precombine_field
    if ctx.options.payload_class is not PayloadClass.DEFAULT or not field:
        return None
    if field not in deletes.schema.names:
        return None
    return deletes.column(field).combine_chunks()


def append_log_file(
    ctx: WriteContext,
    partition: str,
    file_id: str,
    records: pa.Table,
    base: FileSlice | None,
    task_id: int = 0,
    attempt: int = 0,
) -> WriteStat | None:
    """Append ``records`` (upserts and ``_hoodline_is_delete`` rows) to one file group as a new
    log file; None when there is nothing to write."""
    upserts, deletes = split_deletes(records)
    delete_keys = deletes.column(RECORD_KEY).combine_chunks()
    drop = [c for c in (IS_DELETE, FILE_ID) if c in upserts.schema.names]
    if drop:
        upserts = upserts.drop_columns(drop)
    if upserts.num_rows == 0 and (base is None or len(delete_keys) == 0):
        return None  # nothing, or only deletes for a group that does not exist
    table = ctx.table()
    base_instant = base.base_instant if base is not None else ctx.instant_ts
    version = base.next_log_version() if base is not None else FIRST_VERSION
    log = LogFileName(base_instant, version, write_token(task_id, attempt), file_id)
    rel = f"{partition}/{log.name}" if partition else log.name
    schema = log_block_schema(ctx.data_schema, ctx.config.name)
    blocks: list[LogBlock] = []
    if upserts.num_rows:
        if ctx.options.log_block_format is LogBlockFormat.PARQUET:
            rows = new_rows(upserts, ctx, partition, file_id, task_id)
            codec = ctx.options.compression
            compression = None if codec is Compression.NONE else codec.value
            block = parquet_data_block(rows, schema, ctx.instant_ts, compression)
        else:
            # the same in every record: encoded once, no column built for them
            constants = {COMMIT_TIME: ctx.instant_ts, PARTITION_PATH: partition, FILE_NAME: file_id}
            rows = new_rows(upserts, ctx, partition, file_id, task_id, given=constants)
            block = avro_data_block(rows, schema, ctx.instant_ts, constants)
        blocks.append(block)
    if len(delete_keys):
        blocks.append(delete_block(delete_keys, partition, ctx.instant_ts, json.dumps(schema),
                                   _delete_orderings(ctx, deletes)))
    parts = [part for block in blocks for part in block.parts()]
    size = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
    ensure_partition_metadata(table.base_path, partition, ctx.instant_ts)
    Markers(table, ctx.instant_ts).create(partition, log.name, "APPEND")
    path = table.base_path / rel
    if isinstance(path, ObjectPath):
        # one conditional PUT of the whole file: never visible in part, never an existing one
        if faults.armed(FaultPoint.FILE_PARTIAL) and size > 1:
            faults.reach(FaultPoint.FILE_PARTIAL)
        if not path.create_exclusive(b"".join(bytes(p) for p in parts)):
            raise FileExistsError(str(path))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            if faults.armed(FaultPoint.FILE_PARTIAL) and size > 1:
                data = b"".join(parts)
                fh.write(data[: size // 2])
                fh.flush()
                faults.reach(FaultPoint.FILE_PARTIAL)
                fh.write(data[size // 2 :])
            else:
                for part in parts:
                    fh.write(part)
    # Java's rule (HoodieAppendHandle): a record the index located counts as an update. BLOOM
    # routes only located records to logs; BUCKET locates every record of a file group that
    # exists already -- the log writer cannot tell an old key from a new one there.
    updates = (upserts.num_rows
               if ctx.config.index_type is IndexType.BLOOM or base is not None else 0)
    existing = [os.path.basename(f) for f in base.log_files] if base is not None else []
    return WriteStat(
        file_id=file_id,
        path=rel,
        prev_commit=base_instant,
        num_writes=upserts.num_rows,
        num_deletes=len(delete_keys),
        num_update_writes=updates,
        num_inserts=upserts.num_rows - updates,
        total_write_bytes=size,
        total_write_errors=0,
        partition_path=partition,
        file_size_in_bytes=size,
        log_version=version,
        base_file=base.file_name if base is not None else "",
        log_files=[*existing, log.name],
        total_log_blocks=len(blocks),
    )
