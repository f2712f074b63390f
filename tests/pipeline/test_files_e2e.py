"""File source -> table end to end: JSON-lines files keep arriving (renamed into place) while a
continuous pipeline runs; updates and delete-flagged rows across files; a row without a key and
a line that is no JSON go to the error table with their file and row, the file's other lines to
the table. hudi-rs reads exactly the model; a restart with other
reader parallelism reads nothing twice."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.errors import BadRecordError, FileSourceError
from hoodline.pipeline.api import Pipeline, RoundReport
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_completed_commits, hudi_snapshot
from tests.helpers.pipeline_stream import SCHEMA, region, table_rows

pytestmark = pytest.mark.spark


def _config(root: Path, table: Path, readers: int) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl",
                               "source.mode": "continuous", "source.monitor-interval": 0.1,
                               "source.stable-scans": 1}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "delete-field": "deleted"},
        "schema": SCHEMA,
        "runtime": {"reader-parallelism": readers,
                    "round": {"min-interval": 0.2, "max-records": 400}},
        "errors": {"tolerance": "all"},
    })


class Dropper(threading.Thread):
    def __init__(self, root: Path, files: int, first_ts: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.root, self.files, self.ts, self.rng = root, files, first_ts, random.Random(seed)
        self.model: dict[int, dict[str, object]] = {}
        self.rows = 0
        self.bad: list[tuple[str, int, str, bytes | None]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for f in range(self.files):
                lines = []
                for _ in range(self.rng.choice([5, 40, 150])):
                    self.ts += 1
                    i = self.rng.randrange(120)
                    deleted = self.rng.random() < 0.1
                    rec = {"id": i, "name": f"n{i}-{self.ts}", "region": region(i),
                           "ts": self.ts, "deleted": deleted}
                    lines.append(json.dumps(rec))
                    if deleted:
                        self.model.pop(i, None)
                    else:
                        self.model[i] = rec
                final = self.root / f"batch-{self.ts:06d}.jsonl"
                if f == 2:  # a record without key, and a line that is no JSON, mid-file
                    at = len(lines) // 2
                    self.bad += [(str(final), at, "missing_key", None),
                                 (str(final), at + 1, "unparseable", b"{not json")]
                    lines[at:at] = [json.dumps({"name": "no id", "region": "r0", "ts": 0}),
                                    "{not json"]
                tmp = self.root / f".{final.name}.tmp"
                tmp.write_text("\n".join(lines) + "\n")
                os.rename(tmp, final)
                self.rows += len(lines)
                time.sleep(self.rng.uniform(0.05, 0.3))
        except BaseException as exc:
            self.error = exc


def _run_until(hs: HoodlineSpark, cfg: PipelineConfig, dropper: Dropper) -> list[RoundReport]:
    """Run continuously until the dropper is done and every row it dropped was read."""
    stop = threading.Event()
    reports: list[RoundReport] = []
    deadline = time.monotonic() + 90

    def on_round(r: RoundReport) -> None:
        reports.append(r)
        if dropper.ident is None:
            dropper.start()  # files start arriving once the pipeline runs
        done = sum(x.records_read for x in reports)
        if (not dropper.is_alive() and done >= dropper.rows) or time.monotonic() > deadline:
            stop.set()

    with Pipeline(cfg, SparkEngine(hs)) as p:
        summary = p.run(on_round=on_round, stop=stop)
    assert summary.stopped_because == "stopped"
    return reports


def test_files_arriving_while_running(spark: HoodlineSpark, tmp_path: Path) -> None:
    root = tmp_path / "landing"
    root.mkdir()
    table = tmp_path / "t"
    first = Dropper(root, 8, 0, seed=1)
    reports = _run_until(spark, _config(root, table, 2), first)
    first.join()
    assert first.error is None
    assert sum(r.records_read for r in reports) == first.rows
    assert sum(r.committed for r in reports) >= 3  # files were picked up over several rounds
    assert not reports[0].committed  # the first round saw an empty directory
    assert table_rows(table) == first.model

    errors = hudi_snapshot(tmp_path / "t_errors").sort_by("row").to_pylist()
    assert [(e["file"], e["row"], e["reason"]) for e in errors] == [
        (path, row, reason) for path, row, reason, _ in first.bad
    ]
    assert errors[1]["value"] == first.bad[1][3]  # the line's bytes, as read
    assert errors[1]["detail"].startswith(f"line {first.bad[1][1] + 1}: invalid JSON")

    # more files, restart with 3 readers: only the new files are read
    second = Dropper(root, 5, first.ts, seed=2)
    second.model = dict(first.model)
    commits = len(hudi_completed_commits(table))
    reports = _run_until(spark, _config(root, table, 3), second)
    second.join()
    assert second.error is None
    assert sum(r.records_read for r in reports) == second.rows
    assert len(hudi_completed_commits(table)) > commits
    assert table_rows(table) == second.model

    # --once picks up a file that arrived while the pipeline was down, then stops
    third = Dropper(root, 1, second.ts, seed=3)
    third.model = dict(second.model)
    third.run()
    with Pipeline(_config(root, table, 2), SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.stopped_because == "drained"
    assert summary.records_read == third.rows
    assert table_rows(table) == third.model


def test_unreadable_file_with_tolerance_none_stops_at_once(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    root = tmp_path / "landing"
    root.mkdir()
    (root / "bad.jsonl").write_text('{"id": 1, "region": "r1", "ts": 1}\n{not json\n')
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": SCHEMA,
        "runtime": {"retry-backoff": 0.01},
    })
    with Pipeline(cfg, SparkEngine(spark)) as p:
        with pytest.raises(FileSourceError, match=r"bad\.jsonl"):
            p.run(once=True)
    assert hudi_completed_commits(tmp_path / "t") == []
    timeline = HudiTable.open(tmp_path / "t").timeline.instants()
    # one attempt, rolled back; a deterministic error is not retried
    assert [(i.action, i.state.name) for i in timeline] == [("rollback", "COMPLETED")]


def test_declared_types_survive_the_spark_exchange(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    """timestamp[ms] (Spark exchanges microseconds only), decimal, list and struct columns
    arrive in the table with exactly the declared types and values."""
    root = tmp_path / "in"
    root.mkdir()
    rows = [{"id": i, "at": f"2024-03-0{1 + i % 3}T10:00:00.123Z", "amount": f"{i}.25",
             "tags": ["a", str(i)], "nested": {"x": i}} for i in range(30)]
    (root / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"], "index": "BLOOM"},
        "schema": {"id": "int64", "at": "timestamp[ms, UTC]", "amount": "decimal(10, 2)",
                   "tags": "list<string>", "nested": "struct<x: int64>"},
    })
    with Pipeline(cfg, SparkEngine(spark)) as p:
        assert p.run(once=True).records_read == 30
    table = hudi_snapshot(tmp_path / "t").sort_by("id")
    assert table.schema.field("at").type == pa.timestamp("ms", tz="UTC")
    assert table.schema.field("amount").type == pa.decimal128(10, 2)
    got = table.select(["id", "amount", "tags", "nested"]).to_pylist()
    assert [(r["id"], str(r["amount"]), r["tags"], r["nested"]) for r in got] == [
        (i, f"{i}.25", ["a", str(i)], {"x": i}) for i in range(30)]
    assert table.column("at")[1].as_py().isoformat() == "2024-03-02T10:00:00.123000+00:00"


def test_custom_key_generator_writes_dated_folders_through_spark(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    """The custom generator runs in the Spark tasks: one simple and one timestamp partition
    field (date strings, several input formats, written as yyyy/MM in Tokyo time); a date no
    format reads goes to the error table; hudi-rs reads the model."""
    root = tmp_path / "in"
    root.mkdir()
    days = ["2024-01-31T20:00:00Z", "2024-02-01 09:30", "not a date", "2024-02-29T23:59:59+09:00"]
    rows = [{"id": i, "kind": f"k{i % 2}", "day": days[i % 4], "v": i} for i in range(20)]
    (root / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    p = "hoodie.keygen.timebased."
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"], "key-generator": "custom",
                  "partition-fields": ["kind:simple", "day:timestamp"],
                  "options": {p + "timestamp.type": "DATE_STRING",
                              p + "input.dateformat": "yyyy-MM-dd'T'HH:mm:ssZ,yyyy-MM-dd HH:mm",
                              p + "input.timezone": "UTC", p + "output.timezone": "Asia/Tokyo",
                              p + "output.dateformat": "yyyy/MM"}},
        "schema": {"id": "int64", "kind": "string", "day": "string", "v": "int64"},
        "errors": {"tolerance": "all"},
    })
    with Pipeline(cfg, SparkEngine(spark)) as pipe:
        assert pipe.run(once=True).records_read == 20
    table = HudiTable.open(tmp_path / "t")
    got = hudi_snapshot(tmp_path / "t").select(["id", "_hoodie_partition_path"]).to_pylist()
    want_month = {0: "2024/02", 1: "2024/02", 3: "2024/02"}  # Tokyo is UTC+9
    assert sorted((r["id"], r["_hoodie_partition_path"]) for r in got) == sorted(
        (i, f"kind=k{i % 2}/day={want_month[i % 4]}") for i in range(20) if i % 4 != 2
    )
    assert table.config.custom_partition_spec == "kind:simple,day:timestamp"
    errors = hudi_snapshot(tmp_path / "t_errors").to_pylist()
    assert sorted(e["row"] for e in errors) == [i for i in range(20) if i % 4 == 2]
    assert {e["reason"] for e in errors} == {"unreadable_partition"}


def test_a_bounded_pipeline_run_again_reads_the_files_that_arrived_since(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    root = tmp_path / "in"
    root.mkdir()

    def drop(name: str, ids: range) -> None:
        rows = [{"id": i, "name": f"n{i}", "region": region(i), "ts": i, "deleted": False}
                for i in ids]
        (root / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"], "precombine-field": "ts"},
        "schema": SCHEMA,
        "runtime": {"reader-parallelism": 1, "round": {"max-records": 4, "min-interval": 0}},
    })

    def rounds() -> list[int]:
        """Records read per round of one `--once` run (rounds with nothing to read commit
        nothing)."""
        reports: list[RoundReport] = []
        with Pipeline(cfg, SparkEngine(spark)) as p:
            p.run(once=True, on_round=reports.append)
        assert all(r.committed == (r.records_read > 0) for r in reports)
        return [r.records_read for r in reports if r.committed]

    drop("a.jsonl", range(0, 10))
    assert rounds() == [4, 4, 2]  # the budget exactly, and a file's end ends its split
    drop("b.jsonl", range(10, 25))
    assert rounds() == [4, 4, 4, 3]  # b only: a is not read again
    assert sorted(table_rows(tmp_path / "t")) == list(range(25))
    assert rounds() == []


def test_a_first_run_that_failed_leaves_no_setting_the_next_run_must_keep(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    """A wrong record key makes every record bad and the first run fails before its first
    commit; the run with the key fixed writes the table instead of being refused."""
    root = tmp_path / "in"
    root.mkdir()
    rows = [{"id": i, "region": region(i), "ts": i} for i in range(6)]
    (root / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def cfg(key: str) -> PipelineConfig:
        return config_from_dict({
            "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
            "table": {"path": str(tmp_path / "t"), "record-key": [key]},
            "schema": SCHEMA,
            "runtime": {"retry-backoff": 0.01},
        })

    with Pipeline(cfg("name"), SparkEngine(spark)) as p:
        with pytest.raises(BadRecordError, match="missing_key"):
            p.run(once=True)
    with Pipeline(cfg("id"), SparkEngine(spark)) as p:
        assert p.run(once=True).records_read == 6
    assert HudiTable.open(tmp_path / "t").config.record_key_fields == ("id",)
    assert sorted(table_rows(tmp_path / "t")) == list(range(6))
