"""The file enumerator with the harness context: discovery, bookkeeping, FLIP-537 recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hoodline.connectors.files import (
    FileEnumeratorState,
    FileEnumeratorStateSerializer,
    FileSourceConfig,
    FileSourceSplit,
    FileSplitEnumerator,
    RejectedFile,
    SplitKind,
    SplitsFinishedEvent,
)
from hoodline.connectors.files.enumerator import UNCLAIMED
from hoodline.errors import FileSourceError
from hoodline.source.serialization import read_versioned, write_versioned
from hoodline.testing.enumerator_context import MockSplitEnumeratorContext
from tests.connectors.files.data import set_mtime, write_jsonl, write_parquet

Ctx = MockSplitEnumeratorContext[FileSourceSplit]


def make(root: Path, parallelism: int = 2, state: FileEnumeratorState | None = None,
         **overrides: object) -> tuple[Ctx, FileSplitEnumerator]:
    settings: dict[str, object] = {"root": str(root), "format": "jsonl"}
    settings.update(overrides)
    config = FileSourceConfig(**settings)  # type: ignore[arg-type]
    ctx: Ctx = MockSplitEnumeratorContext(parallelism)
    enum = FileSplitEnumerator(ctx, config, state)
    enum.start()
    return ctx, enum


def register(ctx: Ctx, enum: FileSplitEnumerator, subtask: int,
             reported: list[FileSourceSplit] | None = None) -> None:
    ctx.register_reader(subtask, "host", reported or [])
    enum.add_reader(subtask)


def names(splits: list[FileSourceSplit]) -> list[str]:
    return [os.path.basename(s.path) for s in splits]


def restore(enum: FileSplitEnumerator, checkpoint_id: int) -> FileEnumeratorState:
    """Snapshot and round-trip through the versioned serializer (as a real restart would)."""
    ser = FileEnumeratorStateSerializer()
    return read_versioned(ser, write_versioned(ser, enum.snapshot_state(checkpoint_id)))


def test_bounded_lists_once_assigns_on_request_then_no_more_splits(data_dir: Path) -> None:
    for i, name in enumerate(["c.jsonl", "a.jsonl", "b.jsonl"]):
        set_mtime(write_jsonl(data_dir / name, 0, 3), 1000 + i)  # discovery order = mtime order
    ctx, enum = make(data_dir)
    assert ctx.one_shot_count == 1 and ctx.periodic_count == 0
    register(ctx, enum, 0)
    register(ctx, enum, 1)
    enum.handle_split_request(0, "host")  # before the listing: has to wait
    assert ctx.assignments == []
    ctx.run_next_one_shot()
    assert names(ctx.assigned_splits()[0]) == ["c.jsonl"]
    enum.handle_split_request(1, "host")
    enum.handle_split_request(0, "host")
    assert names(ctx.assigned_splits()[1]) == ["a.jsonl"]
    assert names(ctx.assigned_splits()[0]) == ["c.jsonl", "b.jsonl"]
    assert ctx.no_more_splits == set()
    enum.handle_split_request(1, "host")
    assert ctx.no_more_splits == {1}
    assert set(enum.processed_files) == {str(data_dir / n) for n in ["a.jsonl", "b.jsonl",
                                                                    "c.jsonl"]}


def test_continuous_needs_stable_files_and_picks_up_new_ones(data_dir: Path) -> None:
    ctx, enum = make(data_dir, **{"continuous": True, "stable_scans": 2})
    assert ctx.periodic_count == 1
    register(ctx, enum, 0)
    enum.handle_split_request(0, "host")
    write_jsonl(data_dir / "a.jsonl", 0, 3)
    write_jsonl(data_dir / ".in-progress.jsonl", 0, 3)
    ctx.run_periodic()
    assert ctx.assignments == []  # seen once only
    with open(data_dir / "a.jsonl", "a") as f:  # still being written
        f.write('{"id": 3, "name": "n3"}\n')
    ctx.run_periodic()
    assert ctx.assignments == []
    ctx.run_periodic()
    assert names(ctx.assigned_splits()[0]) == ["a.jsonl"]
    os.rename(data_dir / ".in-progress.jsonl", data_dir / "b.jsonl")
    ctx.run_periodic()
    ctx.run_periodic()
    assert enum.pending_splits and names(enum.pending_splits) == ["b.jsonl"]
    ctx.run_periodic()  # no duplicates from later scans
    assert names(enum.pending_splits) == ["b.jsonl"]
    enum.handle_split_request(0, "host")
    assert names(ctx.assigned_splits()[0]) == ["a.jsonl", "b.jsonl"]
    assert ctx.no_more_splits == set()  # continuous never ends


def test_restart_neither_skips_nor_rereads(data_dir: Path) -> None:
    write_jsonl(data_dir / "a.jsonl", 0, 3)
    write_jsonl(data_dir / "b.jsonl", 0, 3)
    ctx, enum = make(data_dir, **{"continuous": True, "stable_scans": 1})
    register(ctx, enum, 0)
    ctx.run_periodic()
    enum.handle_split_request(0, "host")  # a assigned, b pending
    state = restore(enum, 1)
    assert names(state.pending) == ["b.jsonl"] and set(state.assignment.values()) == {0}
    write_jsonl(data_dir / "c.jsonl", 0, 3)
    ctx2, enum2 = make(data_dir, state=state, **{"continuous": True, "stable_scans": 1})
    assert enum2.assignment == {str(data_dir / "a.jsonl"): UNCLAIMED}
    ctx2.run_periodic()
    assert names(enum2.pending_splits) == ["b.jsonl", "c.jsonl"]  # a not read again


def test_large_files_become_several_splits(data_dir: Path) -> None:
    p = write_parquet(data_dir / "big.parquet", 0, 2000, row_group_size=100)
    write_parquet(data_dir / "small.parquet", 0, 10)
    ctx, enum = make(data_dir, format="parquet", split_target_size=os.stat(p).st_size // 4)
    ctx.run_next_one_shot()
    splits = [s for s in enum.pending_splits if s.path == str(p)]
    assert len(splits) >= 3 and all(s.kind is SplitKind.ROW_GROUPS for s in splits)
    assert splits[0].start == 0 and splits[-1].end == 20
    j = write_jsonl(data_dir / "big.jsonl", 0, 500)
    ctx, enum = make(data_dir, format="jsonl", split_target_size=1024)
    ctx.run_next_one_shot()
    ranges = [(s.start, s.end) for s in enum.pending_splits]
    assert ranges[0][0] == 0 and ranges[-1][1] == os.stat(j).st_size
    assert all(s.kind is SplitKind.BYTES for s in enum.pending_splits)


def test_unreadable_parquet_footer_fails_or_is_recorded(data_dir: Path) -> None:
    write_parquet(data_dir / "good.parquet", 0, 10)
    bad = data_dir / "bad.parquet"
    bad.write_bytes(b"x" * 5000)
    ctx, enum = make(data_dir, format="parquet", split_target_size=1024)
    with pytest.raises(FileSourceError, match=r"bad\.parquet"):
        ctx.run_next_one_shot()
    ctx, enum = make(data_dir, format="parquet", split_target_size=1024, tolerate_errors=True)
    ctx.run_next_one_shot()
    assert names(enum.pending_splits) == ["good.parquet"]
    assert [r.path for r in enum.rejected_files] == [str(bad)]
    assert "Parquet" in enum.rejected_files[0].reason
    assert restore(enum, 1).rejected == enum.rejected_files


def _append_line(path: Path) -> None:
    with open(path, "a") as f:
        f.write('{"id": 9, "name": "x"}\n')
    set_mtime(path, 2000)


def test_a_file_changed_after_it_was_read_stops_the_source_with_tolerance_none(
    data_dir: Path,
) -> None:
    """Its new content would be lost: the strict source says so, naming the file, the sizes
    and the ways on."""
    p = write_jsonl(data_dir / "a.jsonl", 0, 3)
    set_mtime(p, 1000)
    ctx, enum = make(data_dir, **{"continuous": True, "stable_scans": 1})
    ctx.run_periodic()
    size = p.stat().st_size
    _append_line(p)
    with pytest.raises(FileSourceError) as info:
        ctx.run_periodic()
    message = str(info.value)
    assert f"'{p}': file changed after it was read (size {size} -> {p.stat().st_size} bytes, " \
        "modified 1970-01-01T00:16:40Z -> 1970-01-01T00:33:20Z)" in message
    assert f"move the file out of '{data_dir}' or set errors.tolerance = all" in message
    assert enum.rejected_files == [] and enum.unsettled_rejections() == []


def test_a_file_changed_after_it_was_read_is_rejected_once_until_a_checkpoint_holds_it(
    data_dir: Path,
) -> None:
    """tolerance all: the change is recorded (not read), listed as unsettled for the error
    table until a completed checkpoint holds it, and not reported again after a restore."""
    p = write_jsonl(data_dir / "a.jsonl", 0, 3)
    ctx, enum = make(data_dir, **{"continuous": True, "stable_scans": 1,
                                  "tolerate_errors": True})
    ctx.run_periodic()
    assert len(enum.pending_splits) == 1
    _append_line(p)
    ctx.run_periodic()
    ctx.run_periodic()
    assert len(enum.pending_splits) == 1  # not planned again
    (unsettled,) = enum.unsettled_rejections()
    assert unsettled.changed and unsettled.mtime_ns == 2000 * 10**9
    assert unsettled.rejected.split_id == f"{p}@{2000 * 10**9}"
    assert enum.rejected_files == [unsettled.rejected]
    state = restore(enum, 1)
    assert state.rejected == [unsettled.rejected]
    enum.notify_checkpoint_complete(0)  # an older checkpoint does not hold it
    assert enum.unsettled_rejections() == [unsettled]
    enum.notify_checkpoint_complete(1)
    assert enum.unsettled_rejections() == []
    # restored from that checkpoint, the strict source does not stop for what it recorded
    ctx, again = make(data_dir, state=state, **{"continuous": True, "stable_scans": 1})
    ctx.run_periodic()
    ctx.run_periodic()
    assert again.unsettled_rejections() == [] and again.rejected_files == state.rejected


def test_a_change_seen_again_before_its_checkpoint_completes_stays_one_rejection(
    data_dir: Path,
) -> None:
    """A round that failed after its snapshot held the rejection: the next snapshot holds it
    again, and it is still unsettled until that one completes."""
    p = write_jsonl(data_dir / "a.jsonl", 0, 3)
    ctx, enum = make(data_dir, **{"continuous": True, "stable_scans": 1,
                                  "tolerate_errors": True})
    ctx.run_periodic()
    _append_line(p)
    ctx.run_periodic()
    enum.snapshot_state(1)  # its round failed: checkpoint 1 never completes
    ctx.run_periodic()
    assert len(enum.unsettled_rejections()) == 1
    assert len(enum.snapshot_state(2).rejected) == 1
    enum.notify_checkpoint_complete(2)
    assert enum.unsettled_rejections() == []


def test_splits_added_back_are_assigned_again(data_dir: Path) -> None:
    write_jsonl(data_dir / "a.jsonl", 0, 3)
    ctx, enum = make(data_dir)
    register(ctx, enum, 0)
    register(ctx, enum, 1)
    ctx.run_next_one_shot()
    enum.handle_split_request(0, "host")
    (split,) = ctx.assigned_splits()[0]
    ctx.unregister_reader(0)
    enum.add_splits_back([split], 0)
    assert enum.pending_splits == [split] and enum.assignment == {}
    enum.handle_split_request(1, "host")
    assert ctx.assigned_splits()[1] == [split]
    assert enum.assignment == {split.split_id: 1}


def test_global_restart_reported_splits_are_claimed_once(data_dir: Path) -> None:
    """FLIP-537 case 3: after a restart a reader re-reports a split that moved on: ignored."""
    for n in "ab":
        write_jsonl(data_dir / f"{n}.jsonl", 0, 3)
    ctx, enum = make(data_dir)
    register(ctx, enum, 0)
    ctx.run_next_one_shot()
    enum.handle_split_request(0, "host")
    enum.handle_split_request(0, "host")
    a, b = ctx.assigned_splits()[0]
    state = restore(enum, 5)
    # restart with parallelism 2: reader 1 got reader 0's state (redistributed)
    ctx2, enum2 = make(data_dir, state=state)
    register(ctx2, enum2, 1, [a.with_progress(2), b])
    assert ctx2.assigned_splits()[1] == [a.with_progress(2), b]  # claimed, sticky
    # reader 1 gives b back (failure) and b goes to reader 0
    ctx2.unregister_reader(1)
    enum2.add_splits_back([b], 1)
    register(ctx2, enum2, 0)
    enum2.handle_split_request(0, "host")
    assert ctx2.assigned_splits()[0] == [b]
    # reader 1 comes back re-reporting both: a is its own (taken back), b moved on (ignored)
    register(ctx2, enum2, 1, [a.with_progress(2), b])
    assert ctx2.assigned_splits()[1][-1:] == [a.with_progress(2)]
    assert enum2.assignment == {a.split_id: 1, b.split_id: 0}


def test_finished_splits_leave_the_assignment_after_a_checkpoint(data_dir: Path) -> None:
    write_jsonl(data_dir / "a.jsonl", 0, 3)
    ctx, enum = make(data_dir)
    register(ctx, enum, 0)
    ctx.run_next_one_shot()
    enum.handle_split_request(0, "host")
    (a,) = ctx.assigned_splits()[0]
    enum.handle_source_event(0, SplitsFinishedEvent((a.split_id,)))
    assert enum.assignment == {}
    # before a checkpoint covers the finish, the reader may fail and re-report a from its
    # older checkpoint: it must be taken back (its rows after that checkpoint were lost)
    ctx.unregister_reader(0)
    register(ctx, enum, 0, [a.with_progress(1)])
    assert ctx.assigned_splits()[0][-1] == a.with_progress(1)
    enum.handle_source_event(0, SplitsFinishedEvent((a.split_id,)))
    assert enum.snapshot_state(7).assignment == {}
    enum.notify_checkpoint_complete(7)
    ctx.unregister_reader(0)
    register(ctx, enum, 0, [a])  # a stale report after the checkpoint: unknown split
    # (cannot happen with a correct runtime; the enumerator prefers re-reading over losing)
    assert ctx.assigned_splits()[0][-1] == a


def test_bounded_restored_lists_again_and_reads_only_new_files(data_dir: Path) -> None:
    """A bounded pipeline run again (restored from its checkpoint) picks up files that arrived
    since its last run, and none it read before."""
    write_jsonl(data_dir / "old.jsonl", 0, 3)
    ctx, enum = make(data_dir, parallelism=1)
    ctx.run_next_one_shot()
    register(ctx, enum, 0)
    enum.handle_split_request(0, "host")
    (old,) = ctx.assigned_splits()[0]
    enum.handle_source_event(0, SplitsFinishedEvent((old.split_id,), ()))
    enum.handle_split_request(0, "host")
    assert ctx.no_more_splits == {0}
    state = restore(enum, 1)
    write_jsonl(data_dir / "new.jsonl", 0, 3)
    ctx2, enum2 = make(data_dir, parallelism=1, state=state)
    assert ctx2.one_shot_count == 1  # lists again
    register(ctx2, enum2, 0)
    enum2.handle_split_request(0, "host")
    assert ctx2.assignments == []  # waits for the listing rather than finishing at once
    ctx2.run_next_one_shot()
    assert names(ctx2.assigned_splits()[0]) == ["new.jsonl"]
    enum2.handle_split_request(0, "host")
    assert ctx2.no_more_splits == {0}


def test_unclaimed_entries_are_dropped_after_first_checkpoint(data_dir: Path) -> None:
    state = FileEnumeratorState(assignment={"/x/done.jsonl": 0}, discovery_done=True)
    ctx, enum = make(data_dir, state=state)
    register(ctx, enum, 0)
    assert enum.assignment == {"/x/done.jsonl": UNCLAIMED}
    enum.snapshot_state(3)
    enum.notify_checkpoint_complete(3)
    assert enum.assignment == {}


def test_reader_rejections_are_kept_in_state(data_dir: Path) -> None:
    ctx, enum = make(data_dir)
    register(ctx, enum, 0)
    rej = RejectedFile("/d/bad.jsonl", "/d/bad.jsonl", "line 3 broken", 2)
    enum.handle_source_event(0, SplitsFinishedEvent(("/d/bad.jsonl",), (rej,)))
    enum.handle_source_event(0, SplitsFinishedEvent(("/d/bad.jsonl",), (rej,)))  # replay
    assert restore(enum, 1).rejected == [rej]


def test_missing_directory_fails_the_scan(tmp_path: Path) -> None:
    ctx, _ = make(tmp_path / "nope")
    with pytest.raises(FileSourceError, match="does not exist"):
        ctx.run_next_one_shot()


def test_request_sent_before_registration_is_served_on_registration(data_dir: Path) -> None:
    write_jsonl(data_dir / "a.jsonl", 0, 3)
    ctx, enum = make(data_dir)
    ctx.run_next_one_shot()
    enum.handle_split_request(0, "host")  # reader.start() runs before its registration lands
    assert ctx.assignments == []
    register(ctx, enum, 0)
    assert names(ctx.assigned_splits()[0]) == ["a.jsonl"]


def test_file_deleted_before_planning_is_not_taken(data_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from hoodline.connectors.files import enumerator as enumerator_module

    big = write_parquet(data_dir / "big.parquet", 0, 500, row_group_size=50)
    real_plan = enumerator_module.plan_file

    def delete_then_plan(entry, config):  # type: ignore[no-untyped-def]
        os.unlink(entry.path)
        return real_plan(entry, config)

    monkeypatch.setattr(enumerator_module, "plan_file", delete_then_plan)
    ctx, enum = make(data_dir, format="parquet", split_target_size=1024)
    ctx.run_next_one_shot()  # no error: the file was never taken
    assert enum.pending_splits == [] and enum.rejected_files == []
    assert str(big) not in enum.processed_files


def test_directory_is_scanned_every_monitor_interval(data_dir: Path) -> None:
    from hoodline.connectors.files import FileSource
    from hoodline.runtime.coordinator import SourceCoordinator
    from hoodline.runtime.reader_events import AddSplitsEvent

    now = [100.0]
    config = FileSourceConfig(root=str(data_dir), format="jsonl", continuous=True,
                              monitor_interval=10, stable_scans=1)
    coordinator: SourceCoordinator[FileSourceSplit, FileEnumeratorState] = SourceCoordinator(
        FileSource(config), 1, clock=lambda: now[0])
    coordinator.start()
    coordinator.register_reader(0)
    coordinator.handle_split_request(0)

    def assigned() -> list[str]:
        return [os.path.basename(s.path) for e in coordinator.take_reader_events(0)
                if isinstance(e, AddSplitsEvent) for s in e.splits]

    write_jsonl(data_dir / "a.jsonl", 0, 3)
    assert coordinator.run_async_calls() == 1  # first scan right away
    assert assigned() == ["a.jsonl"]
    coordinator.handle_split_request(0)
    write_jsonl(data_dir / "b.jsonl", 0, 3)
    now[0] += 9.5
    assert coordinator.run_async_calls() == 0 and assigned() == []  # not due yet
    now[0] += 0.5
    assert coordinator.run_async_calls() == 1
    assert assigned() == ["b.jsonl"]
    coordinator.close()


def test_a_request_takes_files_up_to_its_bytes(data_dir: Path) -> None:
    """One file per request (assign.splits-per-request = 1) read a folder of small files one
    round per file and reader; with ``request_bytes`` (the pipeline sets each reader's share of
    the round's bytes) a request takes files until their sizes reach it, at least one."""
    from hoodline.connectors.files.enumerator import MAX_SPLITS_PER_REQUEST

    for i in range(6):
        set_mtime(write_jsonl(data_dir / f"f{i}.jsonl", i * 10, 10), 1000 + i)
    first_two = sum((data_dir / f"f{i}.jsonl").stat().st_size for i in (0, 1))
    ctx, enum = make(data_dir)
    register(ctx, enum, 0)
    register(ctx, enum, 1)
    ctx.run_next_one_shot()
    enum.request_bytes = first_two + 1  # the third file reaches it
    enum.handle_split_request(0, "host")
    assert names(ctx.assigned_splits()[0]) == ["f0.jsonl", "f1.jsonl", "f2.jsonl"]
    enum.request_bytes = 0  # the option's count alone
    enum.handle_split_request(1, "host")
    assert names(ctx.assigned_splits()[1]) == ["f3.jsonl"]
    enum.request_bytes = 1 << 40  # everything left, within the cap
    enum.handle_split_request(1, "host")
    assert names(ctx.assigned_splits()[1]) == ["f3.jsonl", "f4.jsonl", "f5.jsonl"]
    assert MAX_SPLITS_PER_REQUEST >= 1000
