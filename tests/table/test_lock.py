from __future__ import annotations

import json
import os
import socket
import time

import pytest

from hoodline.errors import StorageError, WriterLockError
from hoodline.table.lock import WriterLock
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from tests.helpers.moto_s3 import MotoS3


def test_second_live_writer_refused_naming_holder(table: HudiTable) -> None:
    with WriterLock(table, owner="job-a", heartbeat_interval=0.05, expiry=5):
        with pytest.raises(WriterLockError) as err:
            WriterLock(table, owner="job-b", heartbeat_interval=0.05, expiry=5).acquire()
        msg = str(err.value)
        assert "'job-a'" in msg and f"pid {os.getpid()}" in msg
        assert socket.gethostname() in msg and "since" in msg
    # released: the next writer gets it
    with WriterLock(table, owner="job-b", heartbeat_interval=0.05, expiry=5) as lock:
        assert lock.held
        lock.ensure_held()
    assert not (table.meta_path / ".hoodline" / "writer.lock").exists()


def test_heartbeat_keeps_lock_alive_beyond_expiry(table: HudiTable) -> None:
    with WriterLock(table, owner="a", heartbeat_interval=0.05, expiry=0.4):
        time.sleep(1.0)
        with pytest.raises(WriterLockError, match="'a'"):
            WriterLock(table, owner="b", heartbeat_interval=0.05, expiry=0.4).acquire()


def test_heartbeat_outlives_a_storage_outage(
    table: HudiTable, caplog: pytest.LogCaptureFixture
) -> None:
    """An object store that fails for a moment (StorageError) ended the heartbeat thread for
    good: once the heartbeat had expired, a second writer got in while this one still wrote."""
    lock = WriterLock(table, owner="a", heartbeat_interval=0.05, expiry=0.5)
    real = lock.heartbeat
    failures = [StorageError("s3://lake/t: connection refused")] * 4

    def flaky() -> None:
        if failures:
            raise failures.pop()
        real()

    lock.heartbeat = flaky  # type: ignore[method-assign]
    with lock:
        time.sleep(1.2)  # the outage (~0.2 s), then beyond the expiry
        assert not failures
        with pytest.raises(WriterLockError, match="'a'"):
            WriterLock(table, owner="b", heartbeat_interval=0.05, expiry=0.5).acquire()
        lock.ensure_held()
    warnings = [r.getMessage() for r in caplog.records if r.name == "hoodline.table.lock"]
    assert len(warnings) == 2, warnings  # once when it fails, once when it works again
    assert "cannot refresh the writer lock's heartbeat" in warnings[0]
    assert "connection refused" in warnings[0] and "refreshed again" in warnings[1]


def test_expired_lock_is_taken_over_and_old_holder_notices(table: HudiTable) -> None:
    # the first holder's heartbeat thread is effectively stalled (interval >> expiry wait)
    first = WriterLock(table, owner="stalled", heartbeat_interval=30, expiry=60).acquire()
    path = table.meta_path / ".hoodline" / "writer.lock"
    old = time.time() - 120
    os.utime(path, (old, old))  # heartbeat 2 minutes old
    second = WriterLock(table, owner="fresh", heartbeat_interval=0.05, expiry=60).acquire()
    try:
        assert json.loads(path.read_text())["owner"] == "fresh"
        with pytest.raises(WriterLockError, match="lost the lock"):
            first.ensure_held()
        second.ensure_held()
        first.release()  # must not remove the new holder's lock
        assert json.loads(path.read_text())["owner"] == "fresh"
        second.ensure_held()
    finally:
        second.release()
    assert not path.exists()


def test_lock_of_dead_local_process_taken_at_once(table: HudiTable) -> None:
    lock_dir = table.meta_path / ".hoodline"
    lock_dir.mkdir()
    pid = os.fork()
    if pid == 0:  # child exits immediately: its pid is then certainly dead
        os._exit(0)
    os.waitpid(pid, 0)
    body = {"owner": "dead", "pid": pid, "host": socket.gethostname(), "since": "x", "token": "t"}
    (lock_dir / "writer.lock").write_text(json.dumps(body))
    with WriterLock(table, owner="new", heartbeat_interval=0.05, expiry=3600) as lock:
        assert lock.held


def test_invalid_intervals(table: HudiTable) -> None:
    with pytest.raises(WriterLockError, match="below"):
        WriterLock(table, heartbeat_interval=5, expiry=1)


def test_concurrent_contenders_exactly_one_wins(table: HudiTable) -> None:
    import threading

    n = 8
    barrier = threading.Barrier(n)
    won: list[WriterLock] = []
    refused: list[str] = []

    def contend(i: int) -> None:
        lock = WriterLock(table, owner=f"c{i}", heartbeat_interval=0.05, expiry=30)
        barrier.wait()
        try:
            won.append(lock.acquire())
        except WriterLockError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(won) == 1 and len(refused) == n - 1
        assert all(f"'{won[0].owner}'" in msg for msg in refused)
    finally:
        for lock in won:
            lock.release()


def test_a_writer_dropped_without_closing_gives_its_lock_up(
    table: HudiTable, caplog: pytest.LogCaptureFixture
) -> None:
    """A WriteClient opened in a notebook cell that was run again (the old one never closed)
    kept its heartbeat thread, which held it alive: the table stayed locked against every
    writer, the colleagues' pipeline too, until the kernel restarted (Python API review)."""
    import gc

    from hoodline.table.write.client import WriteClient

    client = WriteClient(table).open()
    heartbeat = client._lock._thread
    assert heartbeat is not None and heartbeat.is_alive()
    with pytest.raises(WriterLockError, match="only one writer may write at a time"):
        WriteClient(table).open()
    with caplog.at_level("WARNING", logger="hoodline"):
        del client
        gc.collect()
    assert "was dropped without closing it: its lock on" in caplog.text
    heartbeat.join(timeout=5)
    assert not heartbeat.is_alive()
    with WriteClient(table) as again:  # at once, not after the lock's expiry
        assert again.table.base_path == table.base_path


def test_a_contender_goes_by_the_holders_expiry_not_its_own(
    table: HudiTable, caplog: pytest.LogCaptureFixture
) -> None:
    """A WriteClient with a 5-s expiry took the lock of a healthy pipeline (a heartbeat every
    10 s, expiry 60 s) between two of its heartbeats, and the pipeline died: whether a lock is
    stale is the holder's expiry to say, which the lock records."""
    path = table.meta_path / ".hoodline" / "writer.lock"
    # the holder's heartbeat thread does not beat within the test (interval 30 s)
    holder = WriterLock(table, owner="pipeline", heartbeat_interval=30, expiry=60).acquire()
    try:
        body = json.loads(path.read_text())
        assert (body["expiry"], body["heartbeat"]) == (60, 30)
        old = time.time() - 10
        os.utime(path, (old, old))  # 10 s since the last heartbeat: live by the holder's 60 s
        with pytest.raises(WriterLockError, match=r"'pipeline'.*wait 60s \(the holder's expiry"):
            WriterLock(table, owner="notebook", heartbeat_interval=1, expiry=5).acquire()
        holder.ensure_held()
        # a holder with a longer expiry than the contender's is live beyond the contender's
        old = time.time() - 61
        os.utime(path, (old, old))
        with caplog.at_level("WARNING", logger="hoodline.table.lock"):
            taker = WriterLock(table, owner="notebook", heartbeat_interval=1, expiry=120)
            taker.acquire()
        assert "takes over the lock" in caplog.text
        assert "older than the holder's expiry of 60s" in caplog.text
        _assert_taken_over(holder, taker)
    finally:
        holder.release()


def _assert_taken_over(holder: WriterLock, taker: WriterLock) -> None:
    """``taker`` took the lock over: ``holder`` finds it lost (``taker`` released after)."""
    try:
        with pytest.raises(WriterLockError, match="lost the lock"):
            holder.ensure_held()
    finally:
        taker.release()


def test_a_lock_that_records_no_expiry_goes_by_the_contenders(
    table: HudiTable, caplog: pytest.LogCaptureFixture
) -> None:
    """A lock written by an older hoodline records no expiry: the contender's own decides, but
    not below the default 60 s an older hoodline paced its heartbeat for (a contender with a
    5-s expiry took the lock of a live older pipeline: upgrade review)."""
    lock_dir = table.meta_path / ".hoodline"
    lock_dir.mkdir()
    body = {"owner": "old", "pid": 1, "host": "elsewhere", "since": "x", "token": "t"}
    path = lock_dir / "writer.lock"
    path.write_text(json.dumps(body))
    old = time.time() - 10
    os.utime(path, (old, old))
    for expiry in (60, 5):
        with pytest.raises(WriterLockError, match=r"wait 60s \(this writer's expiry"):
            WriterLock(table, owner="new", heartbeat_interval=1, expiry=expiry).acquire()
    old = time.time() - 61
    os.utime(path, (old, old))
    with caplog.at_level("WARNING", logger="hoodline.table.lock"):
        with WriterLock(table, owner="new", heartbeat_interval=1, expiry=5) as lock:
            assert lock.held
    assert ("older than this writer's expiry, at least the default (the lock records none) "
            "of 60s") in caplog.text


@pytest.mark.s3
def test_an_object_store_lock_goes_by_the_holders_expiry(moto_s3: MotoS3) -> None:
    """The same on an object store, where each generation of the lock records its holder's
    expiry (the contenders' clocks run ahead instead of the heartbeat being made old)."""
    url = f"s3://{moto_s3.new_bucket()}/t"
    table = HudiTable.create(url, TableConfig("t", ("id",)), storage_options=moto_s3.options)
    holder = WriterLock(table, owner="pipeline", heartbeat_interval=30, expiry=60).acquire()
    try:
        def contender(ahead: float) -> WriterLock:
            return WriterLock(HudiTable.open(url, storage_options=moto_s3.options),
                              owner="notebook", heartbeat_interval=1, expiry=5,
                              clock=lambda: time.time() + ahead)

        with pytest.raises(WriterLockError, match=r"'pipeline'.*wait 60s \(the holder's expiry"):
            contender(10).acquire()
        holder.ensure_held()
        _assert_taken_over(holder, contender(120).acquire())
    finally:
        holder.release()


def test_a_lock_this_process_failed_to_remove_is_taken_over_at_once(
    table: HudiTable, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer whose release failed (the store did not answer) left its lock with this
    process's pid: the next writer of the process, a start tried again after the outage,
    waited for its expiry (S3 review). A lock a live writer of the process holds still stops
    a second one."""
    first = WriterLock(table, owner="a", expiry=60).acquire()
    with pytest.raises(WriterLockError, match="'a'"):
        WriterLock(table, owner="b", expiry=60).acquire()

    def failing(path: object, *args: object, **kwargs: object) -> None:
        raise OSError("the store did not answer")

    with monkeypatch.context() as m:
        m.setattr(os, "unlink", failing)
        with pytest.raises(OSError):
            first.release()
    assert first.path.exists() and not first.held  # left behind
    second = WriterLock(table, owner="b", expiry=60).acquire()
    assert second.held
    assert "an earlier writer of this process released it" in caplog.text
    second.release()
