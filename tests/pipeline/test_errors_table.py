from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodline.errors import BadRecordError, WriterLockError
from hoodline.formats.json_decoder import JsonDecoder
from hoodline.pipeline.errors_table import (
    ERROR_SCHEMA,
    build_error_batch,
    drop_orphaned_errors,
    open_error_table,
    raise_for_bad_records,
    round_metadata,
)
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient

WHEN = datetime(2024, 3, 1, 12, 30, tzinfo=UTC)


KAFKA_IDS: dict[str, Any] = {"id_prefix": "kafka", "id_columns": ("topic", "partition", "offset")}
FILE_IDS: dict[str, Any] = {"id_prefix": "file", "id_columns": ("file", "row")}

def _kafka_input() -> tuple[pa.Array, pa.Table]:
    values = pa.array([b'{"id": 1}', b"oops", None, b'{"id": "x"}', b'{"id": 5}'], pa.binary())
    positions = pa.table({
        "key": pa.array([b"k1", b"k2", b"k3", None, b"k5"], pa.binary()),
        "topic": ["events"] * 5,
        "partition": pa.array([3] * 5, pa.int32()),
        "offset": pa.array([100, 101, 102, 103, 104], pa.int64()),
    })
    return values, positions


def test_kafka_error_batch_from_decoder_output() -> None:
    values, positions = _kafka_input()
    result = JsonDecoder(pa.schema([("id", pa.int64())]), ["id"]).decode(values)
    batch = build_error_batch(result.errors, values, positions, source="kafka",
                              **KAFKA_IDS, round_id=7, detected_at=WHEN)
    assert batch.schema == ERROR_SCHEMA
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [101, 102, 103]
    assert [r["error_id"] for r in rows] == [
        "kafka/events/3/101", "kafka/events/3/102", "kafka/events/3/103"
    ]
    assert [r["value"] for r in rows] == [b"oops", None, b'{"id": "x"}']
    assert [r["key"] for r in rows] == [b"k2", b"k3", None]
    assert [r["reason"] for r in rows] == ["unparseable", "null_value", "wrong_type"]
    assert all(r["round_id"] == 7 and r["day"] == "2024-03-01" for r in rows)
    assert all(r["file"] is None and r["row"] is None for r in rows)
    assert rows[0]["detected_at"] == WHEN


def test_file_error_batch_and_empty() -> None:
    values = pa.array([b"{}", b"[]"], pa.binary())
    positions = pa.table({"file": ["/in/a.jsonl", "/in/a.jsonl"], "row": [0, 1]})
    result = JsonDecoder(pa.schema([("id", pa.int64())])).decode(values)
    batch = build_error_batch(result.errors, values, positions, source="files",
                              **FILE_IDS, round_id=1, detected_at=WHEN)
    assert batch.to_pylist()[0]["error_id"] == "file//in/a.jsonl/1"
    assert batch.column("topic").null_count == 1
    ok = JsonDecoder(pa.schema([("id", pa.int64())])).decode(pa.array([b"{}"], pa.binary()))
    empty = build_error_batch(ok.errors, pa.array([b"{}"], pa.binary()),
                              positions.slice(0, 1), source="files", **FILE_IDS, round_id=1)
    assert empty.num_rows == 0 and empty.schema == ERROR_SCHEMA
    raise_for_bad_records(pa.Table.from_batches([empty]), "/t_errors")  # nothing to raise


def test_inputs_are_checked() -> None:
    values, positions = _kafka_input()
    errors = JsonDecoder(pa.schema([("id", pa.int64())])).decode(values).errors
    with pytest.raises(ValueError, match="lack id column"):
        build_error_batch(errors, values, positions.drop_columns(["offset"]), source="kafka",
                          **KAFKA_IDS, round_id=1)
    with pytest.raises(ValueError, match="rows"):
        build_error_batch(errors, values, positions.slice(0, 2), source="kafka", **KAFKA_IDS,
                          round_id=1)


def test_tolerance_none_names_the_first_bad_record() -> None:
    values, positions = _kafka_input()
    errors = JsonDecoder(pa.schema([("id", pa.int64())]), ["id"]).decode(values).errors
    batch = build_error_batch(errors, values, positions, source="kafka", **KAFKA_IDS, round_id=2)
    with pytest.raises(BadRecordError) as err:
        raise_for_bad_records(pa.Table.from_batches([batch]), "/data/t_errors")
    msg = str(err.value)
    assert "topic 'events' partition 3 offset 101" in msg
    assert "unparseable" in msg and "2 more" in msg and "errors.tolerance = 'all'" in msg


def test_a_writer_that_lost_the_error_tables_lock_rolls_nothing_back(tmp_path: Path) -> None:
    """Code review: a pipeline paused past its lock's expiry finished rollbacks on the error
    table (and rolled back its newest commit) while the new holder wrote it; the repairs and
    the rollback of a commit now check the lock first."""
    errors_path, target_path = tmp_path / "t_errors", tmp_path / "t"
    target = HudiTable.create(target_path, TableConfig(name="t", record_key_fields=("id",)))
    open_error_table(str(errors_path), "t_errors")
    stalled = WriteClient(HudiTable.open(errors_path), {
        "hoodline.writer.lock.heartbeat.seconds": 30, "hoodline.writer.lock.expiry.seconds": 60,
        "hoodline.write.lock.owner": "stalled"}).open()
    lock = errors_path / ".hoodie" / ".hoodline" / "writer.lock"
    old = time.time() - 120
    os.utime(lock, (old, old))
    failed = target.new_instant_time()
    target.timeline.create_requested(target.write_action, failed)
    with WriteClient(HudiTable.open(errors_path), {"hoodline.write.lock.owner": "fresh"}) as new:
        values, positions = _kafka_input()
        bad = JsonDecoder(pa.schema([("id", pa.int64())]), ["id"]).decode(values).errors
        rows = build_error_batch(bad, values, positions, source="kafka", **KAFKA_IDS, round_id=1,
                                 detected_at=WHEN)
        done = new.upsert(rows, round_metadata(target, failed))
        pending = new.table.new_instant_time()
        new.table.timeline.create_requested(new.table.write_action, pending)  # its next write
        for attempt in (lambda: drop_orphaned_errors(stalled, target, failed),
                        lambda: stalled.rollback(done, completed_because="test")):
            with pytest.raises(WriterLockError, match="lost the lock"):
                attempt()
        tl = new.table.timeline.reload()
        assert tl.is_completed_commit(done) and [i.timestamp for i in tl.pending()] == [pending]
