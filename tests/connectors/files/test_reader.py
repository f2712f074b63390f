"""The file source reader: batches, checkpointed progress, requests, error tolerance."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.connectors.files import (
    FileSource,
    FileSourceConfig,
    FileSourceReader,
    FileSourceSplit,
    SplitsFinishedEvent,
)
from hoodline.errors import FileSourceError
from hoodline.source.api import InputStatus
from hoodline.source.drive import BoundedRead, poll_until_end
from hoodline.source.output import CollectingOutput
from hoodline.testing.reader_context import RecordingReaderContext
from tests.connectors.files.data import write_csv, write_jsonl, write_parquet


def split_of(path: Path) -> FileSourceSplit:
    st = os.stat(path)
    return FileSourceSplit(str(path), st.st_size, st.st_mtime_ns)


def reader_for(root: Path, fmt: str, threaded: bool, **kw: object
               ) -> tuple[FileSourceReader, RecordingReaderContext]:
    config = FileSourceConfig(root=str(root), format=fmt, **kw)  # type: ignore[arg-type]
    ctx = RecordingReaderContext(0, 1)
    return FileSource(config, threaded_reader=threaded).create_reader(ctx), ctx


def ids_of(out: CollectingOutput) -> list[int]:
    return out.to_table().column("id").to_pylist() if out.batches else []


@pytest.mark.parametrize("threaded", [False, True])
def test_reads_splits_reports_finish_and_asks_for_more(data_dir: Path, threaded: bool) -> None:
    a = write_parquet(data_dir / "a.parquet", 0, 300, row_group_size=50)
    b = write_parquet(data_dir / "b.parquet", 300, 10)
    reader, ctx = reader_for(data_dir, "parquet", threaded, batch_size=40)
    reader.start()
    assert ctx.split_requests == 1  # no splits yet: asks for work
    reader.add_splits([split_of(a), split_of(b)])
    reader.notify_no_more_splits()
    out = CollectingOutput()
    poll_until_end(reader, out, timeout=20)
    assert ids_of(out) == list(range(310))
    assert all(isinstance(x, pa.RecordBatch) for x in out.batches)
    assert set(out.split_ids) == {str(a), str(b)}
    finished = [s for e in ctx.sent_events if isinstance(e, SplitsFinishedEvent)
                for s in e.split_ids]
    assert finished == [str(a), str(b)]
    assert ctx.split_requests == 2  # once more after both finished
    assert reader.snapshot_state(1) == []
    reader.close()


@pytest.mark.parametrize("fmt,writer", [("parquet", write_parquet), ("jsonl", write_jsonl),
                                        ("csv", write_csv)])
@pytest.mark.parametrize("threaded", [False, True])
def test_snapshot_and_restore_continue_without_loss_or_duplicates(
        data_dir: Path, fmt: str, writer: object, threaded: bool) -> None:
    path = writer(data_dir / f"a.{fmt}", 0, 1000)  # type: ignore[operator]
    kw = {"batch_size": 64, "block_size": 1024}
    reader, _ = reader_for(data_dir, fmt, threaded, **kw)
    reader.add_splits([split_of(path)])
    out = CollectingOutput()
    while out.num_rows < 300:
        if reader.poll_next(out) is InputStatus.NOTHING_AVAILABLE:
            reader.wait_available(1.0)
    (state,) = reader.snapshot_state(1)
    assert state.records_to_skip == out.num_rows  # exactly what was emitted
    reader.close()
    restored, _ = reader_for(data_dir, fmt, threaded, **kw)
    restored.add_splits([state])
    restored.notify_no_more_splits()
    poll_until_end(restored, out, timeout=20)
    restored.close()
    assert ids_of(out) == list(range(1000))


@pytest.mark.parametrize("fmt,writer", [("parquet", write_parquet), ("jsonl", write_jsonl),
                                        ("csv", write_csv)])
@pytest.mark.parametrize("threaded", [False, True])
def test_a_record_budget_is_read_exactly_and_a_split_read_to_its_end_is_finished(
        data_dir: Path, fmt: str, writer: object, threaded: bool) -> None:
    """Rounds with a budget of 70 records over files of 100 and 40 rows (batches of 64 for
    Parquet, whole small files for JSON lines and CSV): every round reads exactly its budget
    (the batch reaching it is cut) and reports a split finished in the round that read its last
    row, so no round reads nothing and no row is read twice or lost."""
    a = writer(data_dir / f"a.{fmt}", 0, 100)  # type: ignore[operator]
    b = writer(data_dir / f"b.{fmt}", 100, 40)  # type: ignore[operator]
    held = [split_of(a), split_of(b)]
    seen: list[int] = []
    per_round: list[tuple[int, list[str]]] = []
    for round_id in range(1, 10):
        if not held:
            break
        reader, ctx = reader_for(data_dir, fmt, threaded, batch_size=64, block_size=1 << 16)
        run = BoundedRead(reader, held, checkpoint_id=round_id, timeout=20, max_records=70)
        rows = [i for batch, _ in run for i in batch.column("id").to_pylist()]
        finished = [os.path.basename(s) for e in ctx.sent_events
                    if isinstance(e, SplitsFinishedEvent) for s in e.split_ids]
        per_round.append((len(rows), finished))
        seen += rows
        held = list(run.split_states)
    assert seen == list(range(140))
    assert per_round == [(70, []), (70, [f"a.{fmt}", f"b.{fmt}"])]


@pytest.mark.parametrize("threaded", [False, True])
def test_unparseable_file_fails_with_its_name(data_dir: Path, threaded: bool) -> None:
    bad = data_dir / "bad.jsonl"
    bad.write_text('{"id": 1, "name": "a"}\nnot json\n')
    reader, _ = reader_for(data_dir, "jsonl", threaded)
    reader.add_splits([split_of(bad)])
    reader.notify_no_more_splits()
    with pytest.raises(FileSourceError, match=r"bad\.jsonl' line 2"):
        poll_until_end(reader, CollectingOutput(), timeout=20)
    reader.close()


@pytest.mark.parametrize("threaded", [False, True])
def test_tolerated_bad_file_is_recorded_and_skipped(data_dir: Path, threaded: bool) -> None:
    good = write_csv(data_dir / "good.csv", 0, 5)
    bad = data_dir / "bad.csv"  # bytes that are not UTF-8: no row of it can be isolated
    lines = ["id,name"] + [f"{i},x" for i in range(100, 400)]
    bad.write_bytes(("\n".join(lines) + "\n").encode() + b"401,\xff\n")
    gone = write_csv(data_dir / "gone.csv", 0, 5)
    gone_split = split_of(gone)
    gone.unlink()
    reader, ctx = reader_for(data_dir, "csv", threaded, tolerate_errors=True,
                             schema=pa.schema([("id", pa.int64()), ("name", pa.string())]),
                             block_size=1024)
    reader.add_splits([split_of(bad), gone_split, split_of(good)])
    reader.notify_no_more_splits()
    out = CollectingOutput()
    poll_until_end(reader, out, timeout=20)
    reader.close()
    emitted_from_bad = [i for i in ids_of(out) if i >= 100]
    # the rows of the blocks before the bad one are emitted (and counted), in order
    assert emitted_from_bad and emitted_from_bad == list(range(100, 100 + len(emitted_from_bad)))
    assert ids_of(out)[-5:] == list(range(5))
    rejected = {r.path: r for r in reader.rejected_files}
    assert set(rejected) == {str(bad), str(gone)}
    assert "invalid UTF8" in rejected[str(bad)].reason, rejected[str(bad)].reason
    assert rejected[str(bad)].rows_emitted == len(emitted_from_bad)  # honest partial count
    assert "deleted" in rejected[str(gone)].reason
    sent = [r for e in ctx.sent_events if isinstance(e, SplitsFinishedEvent) for r in e.rejected]
    assert {r.path for r in sent} == {str(bad), str(gone)}


def test_source_is_picklable_for_shipping_to_tasks(data_dir: Path) -> None:
    import pickle

    source = FileSource.from_options({"path": str(data_dir), "format": "jsonl",
                                      "schema": "id int64, name string"})
    copy = pickle.loads(pickle.dumps(source))
    assert copy.config == source.config and copy.config.schema is not None
