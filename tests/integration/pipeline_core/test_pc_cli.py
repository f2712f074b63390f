"""``hoodline run PIPELINE.toml --once`` in a subprocess on the real broker: one line per round,
a summary, the table equals the model, and a SASL password given in the config appears neither
in the output nor in the table's metadata."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pc_helpers import Stream, create_topic, table_rows, unique

from hoodline.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SECRET = "hunter2-do-not-print"


def test_cli_run_once(pc_broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = create_topic(pc_broker.bootstrap_servers, unique("pc-cli"), 2)
    stream = Stream(pc_broker.bootstrap_servers, topic, 2, seed=5)
    stream.produce(900, 200, deletes=0.1, tombstones=0.05)
    table = tmp_path / "t"
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(f"""
[source]
type = "kafka"
format = "json"
[source.options]
topic = "{topic}"
properties.bootstrap.servers = "{pc_broker.bootstrap_servers}"
properties.sasl.password = "{SECRET}"
[table]
path = "{table}"
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
    src = Path(__file__).resolve().parents[3] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.run(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg),
         "--once"],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert SECRET not in out
    assert "drained: " in proc.stdout and "900 records read" in proc.stdout
    assert proc.stdout.count("committed ") == 3  # 400 + 400 + 100: one line per round
    assert table_rows(table) == stream.model
    for meta in (table / ".hoodie").iterdir():
        if meta.is_file():
            assert SECRET.encode() not in meta.read_bytes()
