"""Object-store calls that take long are reported while they run (:mod:`hoodline.storage.slow`):
a stalled endpoint had kept a round waiting with nothing printed."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from hoodline.errors import StorageError
from hoodline.storage import slow
from hoodline.storage.paths import ObjectPath, parse_location


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_call_is_reported_once_when_late_and_again_when_it_ends() -> None:
    clock, said = _Clock(), []
    calls = slow.SlowCalls(threshold_s=15.0, clock=clock, warn=said.append)
    quick = calls.begin("read s3://b/t/a.parquet")
    late = calls.begin("list s3://b/t")
    clock.now += 5
    calls.end(quick)
    assert calls.check() == 0 and said == []
    clock.now += 11
    assert calls.check() == 1
    assert said == ["object store: list s3://b/t has taken 16 s so far; the store may be slow "
                    "or failing (its client retries failed requests, and a pipeline its "
                    "failed rounds, for up to retry_timeout, 3 minutes unless set in the storage "
                    "options)"]
    clock.now += 30
    assert calls.check() == 0  # once
    calls.end(late)
    assert said[-1] == "object store: list s3://b/t ended after 46 s"
    assert calls.check() == 0 and len(said) == 2


def test_a_stalled_endpoint_is_reported_before_the_request_times_out(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real request through obstore to a server on 127.0.0.1 that accepts and never answers."""
    monkeypatch.setattr(slow._CALLS, "threshold_s", 0.5)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # keep it open, say nothing
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        port = server.getsockname()[1]
        path = parse_location("s3://stalled/t/a.parquet", {
            "endpoint": f"http://127.0.0.1:{port}", "allow_http": "true", "region": "us-east-1",
            "access_key_id": "k", "secret_access_key": "s", "timeout": "3s",
            "max_retries": "0"})
        assert isinstance(path, ObjectPath)
        with caplog.at_level(logging.WARNING, logger="hoodline.storage.slow"), \
                pytest.raises(StorageError):
            path.read_bytes()
    finally:
        stop.set()
        acceptor.join()
        for conn in held:
            conn.close()
        server.close()
    said = [r.getMessage() for r in caplog.records if r.name == "hoodline.storage.slow"]
    assert any("read s3://stalled/t/a.parquet has taken" in m for m in said), said
    assert any("read s3://stalled/t/a.parquet ended after" in m for m in said), said
