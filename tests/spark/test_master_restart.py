"""A standalone master restarted without recovery no longer knows the application: its
executors were killed and it never gets others. A round waited forever, warning every 30 s
that the cluster may have no worker (cluster review). The master's UI is asked: an application
it does not list stops the run, naming the master and what to do."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from hoodline.errors import SparkRuntimeError, is_retryable
from hoodline.pipeline.master import master_knows_application, master_ui_url
from hoodline.spark import engine as engine_module
from hoodline.spark.engine import SparkEngine


class _MasterUi:
    """A master's web UI on 127.0.0.1 answering /json/ with ``state`` (its JSON's shape)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"url": "spark://127.0.0.1:7077", "status": "ALIVE",
                                      "aliveworkers": 1,
                                      "activeapps": [], "completedapps": []}
        ui = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(ui.state).encode()
                self.send_response(200 if self.path == "/json/" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def master_ui() -> Iterator[_MasterUi]:
    ui = _MasterUi()
    yield ui
    ui.close()


def test_the_master_ui_says_whether_it_knows_an_application(master_ui: _MasterUi) -> None:
    assert master_knows_application(master_ui.url, "app-1") is False
    master_ui.state["activeapps"] = [{"id": "app-1", "state": "WAITING"}]
    assert master_knows_application(master_ui.url, "app-1") is True
    assert master_knows_application("http://127.0.0.1:9", "app-1") is None  # no answer
    master_ui.state.update(status="STANDBY", activeapps=[])  # a standby master cannot say
    assert master_knows_application(master_ui.url, "app-1") is None
    assert master_ui_url("spark://m1:7077,m2:7077") == "http://m1:8080"
    assert master_ui_url("spark://m1:7077", "http://ui:9090/") == "http://ui:9090"
    assert master_ui_url("local[2]") is None


class _Context:
    """What the executor watcher asks of a SparkContext whose application has no executor."""

    master = "spark://127.0.0.1:7077"
    applicationId = "app-20261129-0001"

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def statusTracker(self) -> Any:
        class Tracker:
            def getExecutorInfos(self) -> list[object]:
                return [object()]  # the driver only

        return Tracker()

    def getConf(self) -> Any:
        return {}

    def cancelAllJobs(self) -> None:
        self.cancelled.set()


class _Spark:
    def __init__(self, context: _Context) -> None:
        from hoodline.pipeline.master import parse_master

        self.context = context
        self.master = parse_master(context.master)


def test_a_job_without_executors_of_an_application_the_master_forgot_stops(
    master_ui: _MasterUi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "NO_EXECUTOR_WARNING_S", 0.05)
    context = _Context()
    engine = SparkEngine(_Spark(context), master_ui=master_ui.url)  # type: ignore[arg-type]

    class Job:
        def collect(self) -> list[object]:
            assert context.cancelled.wait(10), "the waiting job was not cancelled"
            raise RuntimeError("Job 7 cancelled")

    with pytest.raises(SparkRuntimeError, match=r"the Spark master at spark://127.0.0.1:7077 "
                       r"no longer knows this application \(app-20261129-0001; its UI .* lists "
                       r"it nowhere\): it was restarted") as info:
        engine._collect(Job())  # type: ignore[arg-type]
    assert not is_retryable(info.value)


def test_a_waiting_job_of_an_application_the_master_lists_goes_on_waiting(
    master_ui: _MasterUi, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(engine_module, "NO_EXECUTOR_WARNING_S", 0.05)
    context = _Context()
    master_ui.state["activeapps"] = [{"id": context.applicationId, "state": "WAITING"}]
    engine = SparkEngine(_Spark(context), master_ui=master_ui.url)  # type: ignore[arg-type]

    class Job:
        def collect(self) -> list[object]:
            assert not context.cancelled.wait(0.5)
            return []

    with caplog.at_level("WARNING", logger="hoodline"):
        assert engine._collect(Job()) == []  # type: ignore[arg-type]
    assert "no executor has joined the application" in caplog.text
    assert "no longer knows" not in caplog.text
