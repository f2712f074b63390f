"""What an engine hands the driver: every reader and every writer must have reported, a task's
non-retryable error comes back as the typed error, bad records come back in source order."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pytest

from hoodline.errors import EngineJobError, FileSourceError, PipelineError
from hoodline.pipeline.engine import RoundOutputBuilder
from hoodline.pipeline.errors_table import ERROR_SCHEMA
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.pipeline.tasks import TaskFailure

STAT = json.dumps({"fileId": "f1", "path": "p/f1_0-1-0_1.parquet", "partitionPath": "p",
                   "numWrites": 3}).encode()


def _complete(readers: int = 2, writers: int = 3) -> RoundOutputBuilder:
    b = RoundOutputBuilder(readers, writers)
    for i in range(readers):
        b.reader_outcome(i, ReadOutcome(i, [], records=i))
    b.write_status(1, STAT)
    for t in range(writers):
        b.writer_done(t)
    return b


def test_a_complete_round_gives_outcomes_in_subtask_order_and_the_write_stats() -> None:
    out = _complete().build()
    assert list(out.outcomes) == [0, 1]
    assert [s.file_id for s in out.write_stats] == ["f1"]
    assert out.bad_records.num_rows == 0 and out.bad_records.schema == ERROR_SCHEMA


def test_a_missing_reader_or_writer_report_refuses_the_round() -> None:
    b = RoundOutputBuilder(2, 3)
    b.reader_outcome(0, ReadOutcome(0, []))
    for t in range(3):
        b.writer_done(t)
    with pytest.raises(EngineJobError, match=r"reader subtasks \[0\], expected 0\.\.1"):
        b.build()
    b = RoundOutputBuilder(1, 3)
    b.reader_outcome(0, ReadOutcome(0, []))
    b.writer_done(0)
    b.write_status(2, STAT)  # a writer that wrote counts as reported
    with pytest.raises(EngineJobError, match=r"tasks \[0, 2\], expected 0\.\.2"):
        b.build()
    assert EngineJobError("x").retryable


def test_a_reader_reporting_twice_or_for_another_subtask_is_refused() -> None:
    b = RoundOutputBuilder(2, 1)
    b.reader_outcome(0, ReadOutcome(0, []))
    with pytest.raises(EngineJobError, match="twice"):
        b.reader_outcome(0, ReadOutcome(0, []))
    with pytest.raises(EngineJobError, match="state of subtask 0"):
        b.reader_outcome(1, ReadOutcome(0, []))


def test_a_task_failure_is_raised_as_its_own_type_before_completeness() -> None:
    b = _complete()
    b.failure(TaskFailure.of(FileSourceError("cannot parse '/in/x.jsonl' line 3")))
    with pytest.raises(FileSourceError, match=r"x\.jsonl' line 3"):
        b.build()


def test_a_failure_that_cannot_be_rebuilt_still_stops_with_its_text() -> None:
    class Local(PipelineError):
        def __init__(self, a: str, b: str) -> None:  # a local class: pickle cannot carry it
            super().__init__(f"{a} {b}")

    failure = TaskFailure.of(Local("first", "second"))
    err = TaskFailure.from_bytes(failure.to_bytes()).error()
    assert isinstance(err, PipelineError) and "first second" in str(err)


def test_a_storage_error_of_a_task_says_executors_need_the_storage_settings_too() -> None:
    """S3 credentials in the driver's environment only: the executors' error told the user to
    set them in the environment, which they were."""
    from hoodline.errors import StorageError
    from hoodline.pipeline.tasks import _guarded

    def failing() -> Iterator[int]:
        raise StorageError("cannot list 's3://lake/t/.hoodie': no S3 credentials are set; set "
                           "AWS_ACCESS_KEY_ID ... in the environment")
        yield 0  # a generator, as a task's records are

    (failure,) = list(_guarded(failing()))  # what the task sends back
    assert isinstance(failure, TaskFailure)
    err = TaskFailure.from_bytes(failure.to_bytes()).error()
    assert isinstance(err, StorageError) and not err.retryable
    assert str(err).endswith("[in a task: on a cluster the executors need the storage settings "
                             "too: the table's [table.storage], or the environment variables "
                             "(the only settings the file source reads) passed on with "
                             "spark.executorEnv.*]")


def test_a_retryable_storage_error_of_a_task_carries_the_executors_hint_too() -> None:
    """An endpoint the executors could not reach (AWS_ENDPOINT_URL in the driver's shell only)
    failed the task as a retryable error, which Spark retried and reported without the hint:
    after 3.5 minutes the run stopped telling the user to set what the driver had (cluster
    review)."""
    from hoodline.errors import StorageError
    from hoodline.pipeline.tasks import EXECUTOR_STORAGE_HINT, _guarded

    def failing() -> Iterator[int]:
        yield 1
        raise StorageError("cannot reach S3 at https://s3.us-east-1.amazonaws.com",
                           retryable=True)

    out = _guarded(failing())
    assert next(out) == 1
    with pytest.raises(StorageError) as info:
        next(out)
    assert info.value.retryable and str(info.value).endswith(EXECUTOR_STORAGE_HINT)


def test_a_store_failing_on_its_side_in_a_task_gets_no_settings_hint() -> None:
    """A throttled store (503 SlowDown) was answered with the hint to pass the storage
    settings to the executors, which had reached the store (S3 review)."""
    from hoodline.errors import StorageError
    from hoodline.pipeline.tasks import EXECUTOR_STORAGE_HINT, _guarded
    from hoodline.storage.paths import ObjectPath, parse_location, storage_error

    path = parse_location("s3://b/t/.hoodie", {"region": "us-east-1"})
    assert isinstance(path, ObjectPath)
    throttled = storage_error(RuntimeError(
            "Generic S3 error: Error performing GET http://127.0.0.1:1/b?list-type=2 in 1s - "
            "Server returned non-2xx status code: 503 Service Unavailable: <?xml version=\"1.0\""
            "?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
            "</Error>"), path, "list")

    def failing() -> Iterator[int]:
        raise throttled
        yield 1

    with pytest.raises(StorageError) as info:
        next(_guarded(failing()))
    assert info.value.retryable and "503 Service Unavailable, SlowDown" in str(info.value)
    assert EXECUTOR_STORAGE_HINT not in str(info.value)
    assert "a failure on the store's side, which may pass" in str(info.value)


def test_bad_records_come_back_sorted_by_position() -> None:
    b = _complete()
    rows = [{"error_id": f"kafka/t/{p}/{o}", "day": "2024-01-01", "source": "kafka",
             "topic": "t", "partition": p, "offset": o, "reason": "r", "detail": "d",
             "round_id": 1, "detected_at": 0} for p, o in [(1, 5), (0, 9), (0, 2)]]
    b.bad_records(pa.RecordBatch.from_pylist(rows[:1], schema=ERROR_SCHEMA))
    b.bad_records(pa.RecordBatch.from_pylist(rows[1:], schema=ERROR_SCHEMA))
    bad = b.build().bad_records
    assert list(zip(bad.column("partition").to_pylist(), bad.column("offset").to_pylist(),
                    strict=True)) == [(0, 2), (0, 9), (1, 5)]
