"""Spark's JVM must open its gateway within a bound: one that never did (its main thread died
writing to a full temporary folder) left `hoodline run` waiting forever."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hoodline.errors import SparkRuntimeError
from hoodline.spark import gateway_watchdog
from hoodline.spark.session import SparkSettings, start_session


def _stuck_java(root: Path) -> Path:
    """A "Java 17" whose every start hangs (as the JVM that never wrote its connection file)."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text("#!/bin/sh\nexec sleep 600\n")
    java.chmod(0o755)
    (root / "release").write_text('JAVA_VERSION="17.0.15"\n')
    return root


def test_a_jvm_that_never_opens_its_gateway_is_ended_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_stuck_java(tmp_path / "jdk")))
    monkeypatch.setattr(gateway_watchdog, "GATEWAY_START_TIMEOUT_S", 3.0)
    before = gateway_watchdog.descendants(os.getpid())
    started = time.monotonic()
    with pytest.raises(SparkRuntimeError, match=r"Spark's JVM did not start within 3 s and was "
                       r"ended: see the JVM's lines above"):
        start_session(SparkSettings(master="local[1]", class_cache=False,
                                    preload_workers=False))
    assert time.monotonic() - started < 60
    time.sleep(0.5)
    assert gateway_watchdog.descendants(os.getpid()) - before == set()  # nothing left running


def test_a_gateway_that_opens_in_time_is_left_alone() -> None:
    """The watchdog kills nothing once the gateway is up, nor without processes to end."""
    with gateway_watchdog.watch_gateway(lambda: True, timeout_s=0.05) as fired:
        time.sleep(0.2)
    assert not fired()
    with gateway_watchdog.watch_gateway(lambda: False, timeout_s=0.05) as fired:
        time.sleep(0.2)
    assert not fired()  # this process started nothing to end
