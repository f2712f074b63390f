"""`hoodline run --once` as a new user runs it (hoodline issue 15): a wrong broker address or a
topic nobody created fails with a non-zero exit and a message naming them, never "drained: 0
records" with exit 0, and no raw librdkafka lines (``%3|...``) reach stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoodline.broker import free_port
from tests.connectors.kafka.helpers import KafkaTestCluster, unique_topic
from tests.helpers.paths import REPO

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]



def _run_once(tmp_path: Path, servers: str, topic: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "p.toml"
    config.write_text(f"""
[source]
type = "kafka"
format = "json"

[source.options]
topic = "{topic}"
properties.bootstrap.servers = "{servers}"
scan.broker-unavailable.timeout = 2

[table]
path = "{tmp_path / 'orders'}"
record-key = ["order_id"]

[schema]
order_id = "string"

[runtime]
master = "local[1]"
reader-parallelism = 1
retry-backoff = "100ms"
""")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run(
        [sys.executable, "-m", "hoodline", "run", str(config), "--once"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )


def _error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors, stderr[-3000:]
    return errors[-1]


def test_run_once_against_a_closed_port_fails_naming_the_servers(tmp_path: Path) -> None:
    servers = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = _run_once(tmp_path, servers, "orders")
    assert done.returncode != 0
    assert "drained" not in done.stdout
    error = _error_line(done.stderr)
    assert "KafkaBrokerUnavailableError" in error or error.startswith("error: Kafka brokers")
    assert f"Kafka brokers {servers} (option 'properties.bootstrap.servers') are unreachable" \
        in error
    assert "listing topics failed" in error
    assert "%3|" not in done.stderr and "%4|" not in done.stderr


def test_run_once_with_a_missing_topic_fails_naming_it(
    tmp_path: Path, kafka: KafkaTestCluster
) -> None:
    topic = unique_topic("orders")
    done = _run_once(tmp_path, kafka.bootstrap_servers, topic)
    assert done.returncode != 0
    assert "drained" not in done.stdout
    error = _error_line(done.stderr)
    assert f"topic(s) '{topic}' of option 'topic' do not exist on brokers " \
        f"{kafka.bootstrap_servers}" in error
    assert "%3|" not in done.stderr
