"""``hoodline demo`` end to end (real broker, real Spark, hudi-rs), its verification, and its
cleanup on success and on Ctrl-C: nothing it started survives."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from hoodline.demo.stream_demo import WAVES, DemoResult, demo_stream, demo_wave, verify
from tests.helpers.crash_harness import MARKER_ENV, cmdline, marked_pids
from tests.helpers.paths import SRC

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka]


def _start_demo(args: list[str], out: Path) -> tuple[subprocess.Popen[bytes], str]:
    marker = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=str(SRC), **{MARKER_ENV: marker})
    with open(out, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "hoodline.cli", "demo", *args],
                                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    return proc, marker


def _kill_leftovers(marker: str) -> list[int]:
    left = marked_pids(marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def _gone_within(marker: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return marked_pids(marker)


def test_po_demo_runs_verifies_and_stops_everything(tmp_path: Path) -> None:
    records = 2000
    target = tmp_path / "demo"
    proc, marker = _start_demo(["--path", str(target), "--records", str(records)],
                               tmp_path / "demo.out")
    try:
        code = proc.wait(600)
        text = (tmp_path / "demo.out").read_text(errors="replace")
        assert code == 0, text[-4000:]
        assert "round 1: committed" in text  # plain progress lines (not a terminal)
        assert "lag=" in text and "commit_s=" in text
        assert "matches the model" in text and "exactly the malformed ones" in text
        assert "OK" in text
        # Spark's own warnings (log4j "HH:MM:SS WARN ...") would be noise to a first-time user
        spark_warnings = [ln for ln in text.splitlines() if re.match(r"\d\d:\d\d:\d\d WARN ", ln)]
        assert spark_warnings == []
        assert _gone_within(marker, 10) == [], "the demo left processes running"
    finally:
        _kill_leftovers(marker)
    # The same deterministic stream verifies again ...
    stream = demo_stream()
    for _ in range(WAVES):
        demo_wave(stream, records)
    again = DemoResult()
    verify(stream, target / "events", target / "events_errors", again)
    assert again.table_ok and again.errors_ok, again.problems
    assert again.rows == len(stream.expected_rows()) and again.error_rows == 8
    # ... and a model with one more wave (records the table never saw) does not.
    demo_wave(stream, records)
    off = DemoResult()
    verify(stream, target / "events", target / "events_errors", off)
    assert not off.table_ok and not off.errors_ok
    assert any("differs from the model" in p for p in off.problems)


def test_po_demo_ctrl_c_stops_broker_and_spark(tmp_path: Path) -> None:
    out = tmp_path / "demo.out"
    proc, marker = _start_demo(["--path", str(tmp_path / "demo")], out)
    try:
        deadline = time.monotonic() + 400
        # interrupt while the pipeline runs (a round committed, more to come)
        while "round 1:" not in out.read_text(errors="replace"):
            assert proc.poll() is None, out.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no round within 400s"
            time.sleep(0.2)
        assert any("java" in cmdline(p) for p in marked_pids(marker)), "no Spark JVM seen"
        assert len(marked_pids(marker)) >= 3  # demo, broker, Spark JVM
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        code = proc.wait(120)
        text = out.read_text(errors="replace")
        assert code != 0, text[-3000:]
        assert "interrupted" in text
        assert _gone_within(marker, 15) == [], "Ctrl-C left processes running"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        _kill_leftovers(marker)


def test_po_demo_without_hudi_rs_refuses_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import io

    from rich.console import Console

    from hoodline.demo import stream_demo

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "hudi" else real(name, *a))
    out = io.StringIO()
    result = stream_demo.run_stream_demo(str(tmp_path / "demo"), Console(file=out, width=200))
    assert not result.ok
    assert "pip install 'hoodline[demo]'" in out.getvalue()
    assert not (tmp_path / "demo").exists()  # nothing created, no broker started


def test_po_demo_that_fails_removes_its_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A demo that failed (no Java, ...) left /tmp/hoodline-demo-*/ behind without --keep."""
    import io
    import tempfile

    from rich.console import Console

    from hoodline.demo import stream_demo

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("test: the topic cannot be created")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(stream_demo, "create_topic", broken)
    with pytest.raises(RuntimeError, match="the topic cannot be created"):
        stream_demo.run_stream_demo(None, Console(file=io.StringIO(), width=200))
    assert list(tmp_path.iterdir()) == []


class _Running:
    """A pipeline run that neither fails nor finishes (what ``_wait`` asks of it)."""

    def check(self) -> None:
        pass


def test_ctrl_c_handled_inside_a_finaliser_still_stops_the_demo() -> None:
    """The garbage collector runs finalisers (py4j's free JVM objects over a socket) on the main
    thread; a KeyboardInterrupt raised inside one is printed as "Exception ignored" and lost, and
    the demo had run on to its end after Ctrl-C."""
    import threading
    import weakref

    from hoodline.demo import stream_demo

    assert threading.current_thread() is threading.main_thread()  # where Python handles signals

    class Held:
        pass

    def finaliser() -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives while the finaliser runs
        time.sleep(0.2)  # (the handler runs here: the sleep is interrupted)

    before = signal.getsignal(signal.SIGINT)
    with stream_demo._ctrl_c_checked() as ctrl_c:
        held = Held()
        weakref.finalize(held, finaliser)
        del held  # the finaliser runs now, on this thread
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            stream_demo._wait(_Running(), ctrl_c, started + 5.0)  # type: ignore[arg-type]
        assert time.monotonic() - started < 1.0
    assert signal.getsignal(signal.SIGINT) is before  # the demo's handler is gone again
