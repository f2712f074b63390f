from __future__ import annotations

import json

import pytest

from hoodline.errors import TimelineError
from hoodline.table.commit_metadata import CommitMetadata, WriteStat


def _stat(prev: str | None = None) -> WriteStat:
    return WriteStat(
        file_id="fg1-0",
        path="region=us/fg1-0_0-1-0_20240101000000000.parquet",
        prev_commit=prev,
        num_writes=3,
        num_deletes=1,
        num_update_writes=1,
        num_inserts=2,
        total_write_bytes=3160,
        total_write_errors=0,
        partition_path="region=us",
        file_size_in_bytes=3160,
    )


def test_json_shape_matches_format_doc() -> None:
    md = CommitMetadata({"region=us": [_stat()]}, "UPSERT", {"schema": "{}", "ck": "v"})
    body = json.loads(md.to_json_bytes())
    assert set(body) == {"partitionToWriteStats", "compacted", "operationType", "extraMetadata"}
    assert body["compacted"] is False
    assert body["operationType"] == "UPSERT"
    assert body["extraMetadata"] == {"schema": "{}", "ck": "v"}
    stat = body["partitionToWriteStats"]["region=us"][0]
    assert stat == {
        "fileId": "fg1-0",
        "path": "region=us/fg1-0_0-1-0_20240101000000000.parquet",
        "prevCommit": "null",
        "numWrites": 3,
        "numDeletes": 1,
        "numUpdateWrites": 1,
        "numInserts": 2,
        "totalWriteBytes": 3160,
        "totalWriteErrors": 0,
        "partitionPath": "region=us",
        "fileSizeInBytes": 3160,
    }


def test_round_trip() -> None:
    md = CommitMetadata(
        {"a": [_stat("20231231000000000")], "b": [_stat()]},
        "INSERT",
        {"schema": "s"},
        partition_to_replace_file_ids={"a": ["old-0"]},
    )
    back = CommitMetadata.from_json_bytes(md.to_json_bytes())
    assert back == md
    assert back.schema == "s"
    assert back.write_stats()[0].prev_commit == "20231231000000000"
    assert back.write_stats()[1].prev_commit is None
    assert back.total_records_written() == 6
    assert len(back.file_paths()) == 2


def test_invalid_json_names_source() -> None:
    with pytest.raises(TimelineError, match=r"x\.commit"):
        CommitMetadata.from_json_bytes(b"{not json", source="x.commit")
    with pytest.raises(TimelineError, match=r"x\.commit"):
        CommitMetadata.from_json_bytes(b"[1]", source="x.commit")
    with pytest.raises(TimelineError, match="malformed"):
        CommitMetadata.from_json_bytes(b'{"partitionToWriteStats": {"p": [{"path": "x"}]}}')


def test_an_empty_body_is_lost_metadata_not_an_empty_commit() -> None:
    # (Java reads it as a commit that wrote nothing; a pipeline's checkpoint then moved back)
    for body in (b"", b"\n "):
        with pytest.raises(TimelineError,
                           match=r"'x\.commit' is empty: its commit metadata .* is lost"):
            CommitMetadata.from_json_bytes(body, source="x.commit")


def test_reads_java_shaped_commit_with_unknown_fields() -> None:
    body = {
        "partitionToWriteStats": {
            "2024/01": [
                {
                    "fileId": "f1-0",
                    "path": "2024/01/f1-0_0-5-6_20240101000000000.parquet",
                    "cdcStats": None,
                    "prevCommit": "null",
                    "numWrites": 10,
                    "numDeletes": 0,
                    "numUpdateWrites": 0,
                    "numInserts": 10,
                    "totalWriteBytes": 100,
                    "totalWriteErrors": 0,
                    "tempPath": None,
                    "partitionPath": "2024/01",
                    "totalLogRecords": 0,
                    "fileSizeInBytes": 100,
                    "minEventTime": None,
                    "runtimeStats": {"totalScanTime": 0},
                }
            ]
        },
        "compacted": False,
        "extraMetadata": {"schema": "{}", "deltastreamer.checkpoint.key": "t,0:5"},
        "operationType": "UPSERT",
        "writePartitionPaths": ["2024/01"],
        "totalRecordsDeleted": 0,
    }
    md = CommitMetadata.from_json_bytes(json.dumps(body).encode())
    assert md.write_stats()[0].prev_commit is None
    assert md.extra_metadata["deltastreamer.checkpoint.key"] == "t,0:5"
    assert md.file_paths() == ["2024/01/f1-0_0-5-6_20240101000000000.parquet"]
