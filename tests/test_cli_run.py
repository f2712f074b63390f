"""``hoodline run PIPELINE.toml --once`` in a subprocess on the real broker: one line per round,
a summary, the table equals the model, a round failed once in a task is retried with one line
and no stack traces, and a SASL password given in the config appears neither in the output nor
in the table's metadata."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.faults import FaultAction, FaultPoint, fault_env
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_completed_commits
from tests.helpers.paths import SRC
from tests.helpers.pipeline_stream import Stream, create_topic, table_rows, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SECRET = "hunter2-do-not-print"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_cli_run_once(broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("pc-cli"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=5)
    stream.produce(900, 200, deletes=0.1, tombstones=0.05)
    table = tmp_path / "t"
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(f"""
[source]
type = "kafka"
format = "json"
[source.options]
topic = "{topic}"
properties.bootstrap.servers = "{broker.bootstrap_servers}"
properties.sasl.password = "{SECRET}"
[table]
path = "{table}"
name = "orders"
record-key = ["id"]
partition-fields = ["region"]
precombine-field = "ts"
delete-field = "deleted"
[schema]
id = "int64"
name = "string"
region = "string"
ts = "int64"
deleted = "bool"
[runtime]
master = "local[2]"
reader-parallelism = 2
round.max-records = 400
round.min-interval = 0
""")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    # one reader task fails once: the round is retried, and the console says so in one line,
    # without Spark's stack traces of the failed task (executor, scheduler)
    faulted = dict(env, **fault_env(FaultPoint.READ, FaultAction.FAIL, tmp_path / "fault", 1))
    proc = subprocess.run(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg),
         "--once"],
        capture_output=True, text=True, env=faulted, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "round 1 failed (1 in a row); retrying" in proc.stderr, proc.stderr[-3000:]
    assert "InjectedFailure" in proc.stderr, proc.stderr
    for spark_noise in ("Exception in task", "Lost task", "Traceback", "at org.apache"):
        assert spark_noise not in out, out[-3000:]
    assert SECRET not in out
    assert "drained: " in proc.stdout and "900 records read" in proc.stdout
    assert proc.stdout.count("committed ") == 3  # 400 + 400 + 100: one line per round
    assert table_rows(table) == stream.model
    for meta in (table / ".hoodie").iterdir():
        if meta.is_file():
            assert SECRET.encode() not in meta.read_bytes()

    # continuous run: new data is committed, then SIGTERM stops it cleanly after the round;
    # without table.name the table keeps its own, and the metrics are labelled with it
    cfg.write_text(cfg.read_text().replace('name = "orders"\n', ""))
    stream.produce(300, 200, deletes=0.1)
    before = len(hudi_completed_commits(table))
    port = _free_port()
    proc2 = subprocess.Popen(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg),
         "--metrics-port", str(port), "--metrics-host", "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while len(hudi_completed_commits(table)) == before:
            assert proc2.poll() is None, proc2.stderr.read() if proc2.stderr else ""
            assert time.monotonic() < deadline, "no commit within 120 s"
            time.sleep(0.5)
        # the metrics of the running pipeline: the 300 new records, once committed
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                scraped = r.read().decode()
            read = re.search(r'^hoodline_records_read_total\{[^}]*\} (\S+)$', scraped, re.M)
            if (read and float(read.group(1)) >= 300) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert read is not None and float(read.group(1)) == 300, scraped[-2000:]
        assert re.search(r'^hoodline_lag_records\{[^}]*partition="' + topic, scraped, re.M)
        assert 'table="orders"' in read.group(0), read.group(0)
        proc2.send_signal(signal.SIGTERM)  # as docker stop / Kubernetes / systemd stop it
        out2, err2 = proc2.communicate(timeout=60)
    finally:
        if proc2.poll() is None:
            proc2.kill()
            proc2.wait()
    assert proc2.returncode == 0, err2[-3000:]
    assert "stopping after the current round (SIGTERM; again to abort)" in err2
    assert "stopped: " in out2 and SECRET not in out2 + err2
    assert table_rows(table) == stream.model
    assert not HudiTable.open(table).timeline.pending()  # nothing left half-done
