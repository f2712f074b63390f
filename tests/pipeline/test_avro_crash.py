"""An Avro topic whose schema evolves mid-stream, read by ``hoodline run`` processes on Spark
(the Python workers fetch writer schemas from the test registry themselves): the first process
is killed with SIGKILL right after its first commit, a second drains the rest. Every message
is committed exactly once and the table read by hudi-rs equals the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.faults import FaultPoint
from hoodline.pipeline.driver import read_checkpoint
from hoodline.table.table import HudiTable
from tests.helpers.crash_harness import PipelineProcess, assert_no_leftovers
from tests.helpers.schema_registry import SchemaRegistry
from tests.pipeline.test_avro_e2e import V1, V2, _expected, _rows, _stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]


def test_avro_pipeline_killed_after_a_commit_resumes_exactly_once(
    schema_registry: SchemaRegistry, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    stream = _stream(schema_registry, broker)
    stream.produce(V1, 700, 150)
    stream.produce(V2, 500, 200, tombstones=30)  # a new version mid-stream
    total = 700 + 500 + 30
    table = tmp_path / "orders"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = tmp_path / "pipeline.toml"
    config.write_text(f"""
[source]
type = "kafka"
format = "avro"
[source.options]
topic = "{stream.topic}"
scan.fetch.timeout = 0.05
properties.bootstrap.servers = "{stream.bootstrap}"
schema.registry.url = "{schema_registry.url}"
[table]
path = "{table}"
record-key = ["id"]
partition-fields = ["region"]
precombine-field = "ts"
[runtime]
master = "local[2]"
round.max-records = 500
round.min-interval = 0
spark-conf."spark.local.dir" = "{scratch}"
[errors]
tolerance = "all"
""")
    env = {"TMPDIR": str(scratch)}
    first = PipelineProcess(config, tmp_path, pause_at=FaultPoint.AFTER_COMMIT.value,
                            extra_env=env).start()
    try:
        first.wait_paused(180)
        first.kill9()
        checkpoint = read_checkpoint(HudiTable.open(table))
        assert checkpoint is not None and checkpoint.round_id == 1
        committed_first = _rows(table)
        assert 0 < len(committed_first)

        drain = PipelineProcess(config, tmp_path, once=True, extra_env=env).start()
        try:
            assert drain.wait(240) == 0, drain.tail()
            reports = drain.reports()
        finally:
            drain.cleanup()
    finally:
        first.cleanup()
    # the first process committed round 1 (500 messages); the drain read exactly the rest
    assert sum(r["records_read"] for r in reports if r["committed"]) == total - 500
    assert _rows(table) == _expected(stream.model, ["id", "name", "region", "ts", "qty",
                                                    "score"])
    assert_no_leftovers(table)
