"""A start during an object store outage waits it out for the store's retry_timeout, as a
running pipeline's rounds do (S3 review: a restart while S3 was down exited within seconds)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoodline.errors import StorageError, TableError
from hoodline.pipeline.outage import wait_out_outage
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from tests.helpers.files_pipeline import write_files_pipeline
from tests.helpers.moto_s3 import MotoS3

OUTAGE = StorageError("cannot list 's3://b/t/.hoodie': cannot reach S3 at http://127.0.0.1:9 "
                      "(connection refused, after 10 retries)", retryable=True)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def _failing(errors: list[Exception]) -> tuple[list[int], object]:
    calls: list[int] = []

    def action() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return "opened"
    return calls, action


def test_an_outage_is_waited_out_and_the_start_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    calls, action = _failing([OUTAGE, OUTAGE, OUTAGE])
    with caplog.at_level(logging.WARNING):
        assert wait_out_outage(action, what="starting", patience_s=180,  # type: ignore[arg-type]
                               backoff_s=lambda n: float(2 ** n), clock=lambda: clock.now,
                               wait=clock.wait) == "opened"
    assert len(calls) == 4 and clock.waits == [2.0, 4.0, 8.0]
    assert "starting: the object store has failed for 6 s (waited out for up to its " \
           "retry_timeout, 180 s); trying again in 8.0s: StorageError" in caplog.text


def test_an_outage_past_the_patience_and_other_errors_are_raised() -> None:
    clock = _Clock()
    calls, action = _failing([OUTAGE] * 10)
    with pytest.raises(StorageError, match=r"connection refused.* \(starting gave up: the object "
                       r"store failed for 12 s, past its retry_timeout of 10 s\)"):
        wait_out_outage(action, what="starting", patience_s=10,  # type: ignore[arg-type]
                        backoff_s=lambda n: 4.0, clock=lambda: clock.now, wait=clock.wait)
    assert len(calls) == 4 and sum(clock.waits) == 12.0  # tried at 0, 4, 8, 12 s
    other = TableError("not a table")
    calls, action = _failing([other])
    with pytest.raises(TableError):
        wait_out_outage(action, what="starting", patience_s=10,  # type: ignore[arg-type]
                        backoff_s=lambda n: 4.0, clock=lambda: clock.now, wait=clock.wait)
    assert len(calls) == 1


def test_a_stop_while_waiting_ends_the_wait() -> None:
    calls, action = _failing([OUTAGE] * 3)
    assert wait_out_outage(action, what="starting", patience_s=100,  # type: ignore[arg-type]
                           backoff_s=lambda n: 1.0, clock=lambda: 0.0,
                           wait=lambda s: True) is None
    assert len(calls) == 1


@pytest.fixture
def late_store(moto_s3: MotoS3) -> Iterator[tuple[str, threading.Event]]:
    """An endpoint that refuses connections until the event is set, then forwards to moto
    (its port is bound from the start, not listening: connections are refused, and no other
    test can take the port meanwhile)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    up = threading.Event()
    done = threading.Event()
    target = int(moto_s3.endpoint.rsplit(":", 1)[1])

    def pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass  # the other direction closed both
        finally:
            a.close()
            b.close()

    def serve() -> None:
        up.wait()
        with server:
            server.listen()
            server.settimeout(0.2)
            while not done.is_set():
                try:
                    client, _ = server.accept()
                except TimeoutError:
                    continue
                upstream = socket.create_connection(("127.0.0.1", target))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", up
    up.set()
    done.set()
    thread.join(5)


@pytest.mark.s3
@pytest.mark.spark
def test_hoodline_run_started_while_the_store_is_down_waits_for_it(
    moto_s3: MotoS3, late_store: tuple[str, threading.Event], tmp_path: Path,
) -> None:
    """`hoodline run` (its own process: a test process may run Spark already) started while
    the store refuses connections; the store comes back once the run said it waits."""
    endpoint, up = late_store
    bucket = moto_s3.new_bucket()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": "a", "ts": 1}\n{"id": "b", "ts": 2}\n')
    storage = {**moto_s3.options, "endpoint": endpoint, "max_retries": "1"}
    lines = "\n".join(f'{k} = "{v}"' for k, v in storage.items())
    cfg = write_files_pipeline(
        tmp_path / "p.toml", tmp_path / "in", f"s3://{bucket}/t", {"id": "string", "ts": "int64"},
        f'[table.storage]\n{lines}\n[runtime]\nretry-backoff = "200ms"\n'
        'retry-backoff-max = "1s"', table_lines='precombine-field = "ts"')
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    proc = subprocess.Popen([sys.executable, "-m", "hoodline", "run", str(cfg), "--once"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path)
    watchdog = threading.Timer(240, proc.kill)  # the output ends when the process does
    watchdog.start()
    try:
        assert proc.stdout is not None
        output: list[str] = []
        for line in proc.stdout:
            output.append(line)
            if "starting: the object store has failed for" in line and not up.is_set():
                up.set()  # the store comes back while the start waits
        assert proc.wait(timeout=240) == 0, "".join(output)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(output)
    assert up.is_set(), text
    assert "2 records read, 2 written" in text, text
    table = HudiTable.open(f"s3://{bucket}/t", storage_options=moto_s3.options)
    assert sorted(read_snapshot(table, columns=["id"]).column("id").to_pylist()) == ["a", "b"]
