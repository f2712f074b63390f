"""Stopping hoodline's Spark session: nothing waits for PySpark's accumulator server (its
handler polls with a 1 s timeout), and the server is still shut down."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hoodline.spark.session import HoodlineSpark

pytestmark = pytest.mark.spark


def test_stop_does_not_wait_for_the_accumulator_server(
    spark: HoodlineSpark, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = spark.context.accumulator(0)
    spark.context.range(0, 10, numSlices=2).foreach(lambda x: acc.add(x))
    assert acc.value == 45  # updates still arrive while the session runs
    server: Any = spark.context._accumulatorServer
    stop_returned = threading.Event()
    shut_after_stop: list[bool] = []
    real_shutdown = server.shutdown

    def shutdown() -> None:
        # a stop() that waited for this call would only get here after 10 s, with the flag unset
        shut_after_stop.append(stop_returned.wait(10))
        real_shutdown()

    monkeypatch.setattr(server, "shutdown", shutdown)
    spark.stop()
    stop_returned.set()
    deadline = time.monotonic() + 15
    while server.socket.fileno() != -1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shut_after_stop == [True]
    assert server.socket.fileno() == -1 and server.server_shutdown  # shut down, not leaked
