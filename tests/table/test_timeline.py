from __future__ import annotations

import os
import threading

import pytest

from hoodline.errors import TimelineError
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.instant import Instant, State
from hoodline.table.table import HudiTable

T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"


def _md(**extra: str) -> CommitMetadata:
    return CommitMetadata({}, "UPSERT", {"schema": "s", **extra})


def _commit(table: HudiTable, ts: str, **extra: str) -> Instant:
    tl = table.timeline
    inst = tl.transition_to_inflight(tl.create_requested("commit", ts))
    return tl.complete(inst, _md(**extra))


def test_lifecycle_writes_java_layout_files(table: HudiTable) -> None:
    tl = table.timeline
    req = tl.create_requested("commit", T1)
    assert req == Instant(T1, "commit", State.REQUESTED)
    assert tl.pending() == [req]
    infl = tl.transition_to_inflight(req)
    assert tl.pending() == [infl]
    done = tl.complete(infl, _md(ck="7"))
    assert tl.pending() == [] and tl.completed_commits() == [done]
    assert tl.last_completed_commit() == done
    names = sorted(n for n in os.listdir(table.meta_path) if n[0].isdigit())
    assert names == [f"{T1}.commit", f"{T1}.commit.requested", f"{T1}.inflight"]
    assert tl.read_commit_metadata(done).extra_metadata == {"schema": "s", "ck": "7"}
    # nothing left in staging
    assert os.listdir(table.meta_path / ".temp" / ".hoodline-staging") == []


def test_completed_instant_never_overwritten(table: HudiTable) -> None:
    done = _commit(table, T1, ck="1")
    before = table.timeline.read_instant_bytes(done)
    with pytest.raises(TimelineError, match="already completed"):
        table.timeline.complete(done.with_state(State.INFLIGHT), _md(ck="2"))
    assert table.timeline.read_instant_bytes(done) == before


def test_racing_completions_only_one_wins(table: HudiTable) -> None:
    tl = table.timeline
    infl = tl.transition_to_inflight(tl.create_requested("commit", T1))
    results: list[str] = []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        from hoodline.table.timeline import Timeline

        own = Timeline(table.meta_path)
        barrier.wait()
        try:
            own.complete(infl, _md(ck=str(i)))
            results.append(f"ok{i}")
        except TimelineError:
            results.append("refused")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.startswith("ok")]
    assert len(winners) == 1 and results.count("refused") == 7
    tl.reload()
    assert tl.read_commit_metadata(tl.completed_commits()[0]).extra_metadata["ck"] == winners[0][2:]


def test_transitions_require_previous_state(table: HudiTable) -> None:
    tl = table.timeline
    with pytest.raises(TimelineError, match="does not exist"):
        tl.transition_to_inflight(Instant(T1, "commit", State.REQUESTED))
    req = tl.create_requested("commit", T1)
    with pytest.raises(TimelineError, match="inflight"):
        tl.complete(req, _md())
    with pytest.raises(TimelineError, match="already exists"):
        tl.transition_to_inflight(tl.transition_to_inflight(req))


def test_create_requested_must_be_newest(table: HudiTable) -> None:
    _commit(table, T2)
    with pytest.raises(TimelineError, match=f"'{T1}' is not newer"):
        table.timeline.create_requested("commit", T1)
    with pytest.raises(TimelineError, match="17-digit"):
        table.timeline.create_requested("commit", "2024")


def test_extra_metadata_api(table: HudiTable) -> None:
    tl = table.timeline
    assert tl.latest_extra_metadata("ck") is None
    _commit(table, T1, ck="a")
    inst = tl.transition_to_inflight(tl.create_requested("commit", T2))
    tl.complete(inst, _md(), extra_metadata={"ck": "b"})
    _commit(table, T3)  # another writer's commit without the key
    found = tl.latest_extra_metadata("ck")
    assert found is not None and found[0].timestamp == T2 and found[1] == "b"
    with pytest.raises(TimelineError, match="reserved"):
        tl.complete(
            tl.transition_to_inflight(tl.create_requested("commit", "20240101000000004")),
            _md(),
            extra_metadata={"schema": "x"},
        )


def test_latest_instant_state_and_unknown_files(table: HudiTable) -> None:
    _commit(table, T1)
    tl = table.timeline
    tl.create_requested("clean", T2)
    (table.meta_path / "random.txt").write_text("x")
    (table.meta_path / f"{T3}.commit.requested.crc").write_text("x")
    tl.reload()
    assert [str(i) for i in tl.instants()] == [
        f"[{T1}__commit__COMPLETED]",
        f"[{T2}__clean__REQUESTED]",
    ]
    assert len(tl.instant_files()) == 4
    assert tl.last_timestamp() == T2
    assert tl.find(T2) == Instant(T2, "clean", State.REQUESTED)


def test_delete_pending_files(table: HudiTable) -> None:
    tl = table.timeline
    infl = tl.transition_to_inflight(tl.create_requested("commit", T1))
    tl.delete_pending_files(infl)
    assert tl.instants() == []
    done = _commit(table, T2)
    with pytest.raises(TimelineError, match="completed"):
        tl.delete_pending_files(done)


def test_new_instant_time_is_after_timeline(table: HudiTable) -> None:
    future = "29990101000000000"
    _commit(table, future)
    assert table.new_instant_time() == "29990101000000001"
