"""Java's Avro library (the jar inside pyspark) reads hoodline's log blocks, compaction plans and
clean/rollback files with the schemas they name: everything comes back as written."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.faults import InjectedFailure
from hoodline.table.instant import State
from hoodline.table.log.content import DELETE_RECORD_LIST_SCHEMA
from hoodline.table.log.names import LogFileName
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.helpers.java_reference import pyspark_jars, run_java

FIXTURES = Path(__file__).parent / "fixtures"
JARS = ("avro-1.12", "jackson-core-", "jackson-databind-", "jackson-annotations-", "slf4j-api-")


def _java(*args: str, tmp: Path) -> list[str]:
    out = run_java(FIXTURES / "ReadHudiLog.java", *args, classpath=pyspark_jars(*JARS), cwd=tmp)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_java_avro_reads_log_blocks_and_the_compaction_plan(tmp_path: Path) -> None:
    table = HudiTable.create(
        tmp_path / "t",
        TableConfig(name="orders", record_key_fields=("id",), partition_fields=("region",),
                    precombine_field="ts", table_type="MERGE_ON_READ", bucket_count=1),
    )
    batch = pa.table({
        "id": pa.array(["a", "b"]),
        "region": pa.array(["eu", "eu"]),
        "ts": pa.array([1, 2], pa.int64()),
        "qty": pa.array([3, None], pa.int32()),
        "price": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-7.50")],
                          pa.decimal128(9, 2)),
        "day": pa.array([dt.date(2026, 1, 2), None]),
        "at": pa.array([dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)] * 2,
                       pa.timestamp("us", tz="UTC")),
        "note": pa.array(["ünïcode", None]),
        "score": pa.array([0.5, 1e-3]),
        "ok": pa.array([True, False]),
    })
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        first = client.upsert(batch)
        second = client.delete(batch.slice(1, 1))
        logs = sorted(
            n for n in (LogFileName.parse(p.name) for p in (table.base_path / "region=eu")
                        .iterdir()) if n is not None
        )
        schema_file = tmp_path / "delete_list.avsc"
        schema_file.write_text(json.dumps(DELETE_RECORD_LIST_SCHEMA))
        data_lines = _java("log", str(table.base_path / "region=eu" / logs[0].name),
                           str(schema_file), tmp=tmp_path)
        delete_lines = _java("log", str(table.base_path / "region=eu" / logs[1].name),
                             str(schema_file), tmp=tmp_path)
        done = client.compact()
    assert data_lines[0] == f"block 3 {first}"
    records = [json.loads(line) for line in data_lines[1:]]
    assert [r["_hoodie_record_key"] for r in records] == ["a", "b"]
    assert [r["_hoodie_commit_time"] for r in records] == [first, first]
    assert [r["ts"] for r in records] == [1, 2]
    assert [r["qty"] for r in records] == [3, None]
    assert [r["note"] for r in records] == ["ünïcode", None]
    assert [r["ok"] for r in records] == [True, False]
    assert records[0]["day"] == (dt.date(2026, 1, 2) - dt.date(1970, 1, 1)).days
    assert records[0]["at"] == int(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp()
                                   * 1_000_000)
    assert delete_lines[0] == f"block 1 {second}"
    (deleted,) = [json.loads(line) for line in delete_lines[1:]]
    assert deleted["recordKey"] == "b" and deleted["partitionPath"] == "region=eu"
    assert deleted["orderingVal"] == {"value": 0}  # IntWrapper(0), as Spark SQL's DELETE
    assert done is not None
    plan_lines = _java("plan", str(table.meta_path / f"{done.timestamp}.compaction.requested"),
                       tmp=tmp_path)
    assert plan_lines[0] == "schema org.apache.hudi.avro.model.HoodieCompactionPlan"
    plan = json.loads(plan_lines[1])
    (op,) = plan["operations"]
    assert op["baseInstantTime"] == first
    assert sorted(op["deltaFilePaths"]) == [logs[0].name, logs[1].name]
    assert op["partitionPath"] == "region=eu" and plan["version"] == 2


def test_java_avro_reads_clean_and_rollback_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = TableConfig(name="t", record_key_fields=("id",), partition_fields=("region",),
                         precombine_field="ts")
    table = HudiTable.create(tmp_path / "t", config)
    batch = pa.table({"id": ["a", "b"], "region": ["eu", "us"], "ts": [1, 1]})
    options = {"hoodie.clean.automatic": True, "hoodie.cleaner.commits.retained": 1}
    with WriteClient(table, options) as client:
        for _ in range(3):  # the third commit cleans the first one's files
            client.upsert(batch)
        monkeypatch.setenv("HOODLINE_FAULT_POINT", "files-written")
        monkeypatch.setenv("HOODLINE_FAULT_ACTION", "fail")
        monkeypatch.setenv("HOODLINE_FAULT_FILE", str(tmp_path / "failures"))  # counts here
        with pytest.raises(InjectedFailure):
            client.upsert(batch)  # written, then rolled back
    tl = table.timeline.reload()
    (cleaned,) = tl.completed(["clean"])
    (rolled,) = tl.completed(["rollback"])
    files = [tl.path_of(cleaned.with_state(State.REQUESTED)),
             tl.path_of(cleaned.with_state(State.INFLIGHT)), tl.path_of(cleaned),
             tl.path_of(rolled.with_state(State.REQUESTED)), tl.path_of(rolled)]
    lines = _java("plan", *map(str, files), tmp=tmp_path)
    assert lines[0::2] == [f"schema org.apache.hudi.avro.model.{n}" for n in (
        "HoodieCleanerPlan", "HoodieCleanerPlan", "HoodieCleanMetadata", "HoodieRollbackPlan",
        "HoodieRollbackMetadata")]
    plan, _inflight, clean_md, rb_plan, rb_md = (json.loads(x) for x in lines[1::2])
    assert plan["policy"] == "KEEP_LATEST_COMMITS"
    deleted = sorted(e["filePath"] for fs in plan["filePathsToBeDeletedPerPartition"].values()
                     for e in fs)
    assert len(deleted) == 2 and all(os.path.isabs(f) for f in deleted)
    assert clean_md["totalFilesDeleted"] == 2
    assert clean_md["earliestCommitToRetain"] == tl.completed_commits()[-1].timestamp
    target = rb_plan["instantToRollback"]
    assert target["action"] == "commit" and rb_md["commitsRollback"] == [target["commitTime"]]
    assert rb_md["totalFilesDeleted"] == 2


def test_java_avro_reads_the_archived_timeline(tmp_path: Path) -> None:
    config = TableConfig(name="t", record_key_fields=("id",), partition_fields=("region",),
                         precombine_field="ts")
    table = HudiTable.create(tmp_path / "t", config)
    options = {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 4,
               "hoodie.clean.automatic": True, "hoodie.cleaner.commits.retained": 2}
    written = []
    with WriteClient(table, options) as client:
        for i in range(6):
            batch = pa.table({"id": ["a", f"n{i}"], "region": ["eu", "us"], "ts": [i, i]})
            written.append(client.upsert(batch))
    (archive,) = sorted((table.meta_path / "archived").iterdir())
    schema_file = tmp_path / "delete_list.avsc"
    schema_file.write_text(json.dumps(DELETE_RECORD_LIST_SCHEMA))
    lines = _java("log", str(archive), str(schema_file), tmp=tmp_path)
    blocks = [line for line in lines if line.startswith("block ")]
    assert blocks and all(b == "block 3 null" for b in blocks)  # Avro data, no instant time
    records = [json.loads(line) for line in lines if not line.startswith("block ")]
    archived = {r["commitTime"] for r in records if r["actionType"] == "commit"}
    active = {i.timestamp for i in table.timeline.reload().completed_commits()}
    assert archived and archived == set(written) - active
    done = [r for r in records if r["actionState"] == "COMPLETED" and r["actionType"] == "commit"]
    stats = done[0]["hoodieCommitMetadata"]["partitionToWriteStats"]
    assert {s["partitionPath"] for part in stats.values() for s in part} == {"region=eu",
                                                                            "region=us"}


def test_java_avro_reads_merged_archive_files_and_the_merge_plan(tmp_path: Path) -> None:
    from hoodline.table.action_metadata import avro_container
    from hoodline.table.archive_merge import MERGE_PLAN_SCHEMA, archive_version

    config = TableConfig(name="t", record_key_fields=("id",), partition_fields=("region",),
                         precombine_field="ts")
    table = HudiTable.create(tmp_path / "t", config)
    options = {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 4,
               "hoodie.cleaner.commits.retained": 2, "hoodie.archive.merge.files.batch.size": 2}
    written = []
    with WriteClient(table, options) as client:
        for i in range(12):
            batch = pa.table({"id": ["a", f"n{i}"], "region": ["eu", "us"], "ts": [i, i]})
            written.append(client.upsert(batch))
    (archive,) = sorted((table.meta_path / "archived").iterdir())
    assert (archive_version(archive.name) or 0) > 2  # merged more than once
    schema_file = tmp_path / "delete_list.avsc"
    schema_file.write_text(json.dumps(DELETE_RECORD_LIST_SCHEMA))
    lines = _java("log", str(archive), str(schema_file), tmp=tmp_path)
    records = [json.loads(line) for line in lines if not line.startswith("block ")]
    commits = [(r["commitTime"], r["actionState"]) for r in records
               if r["actionType"] == "commit"]
    active = {i.timestamp for i in table.timeline.reload().completed_commits()}
    assert len(commits) == len(set(commits)) == 3 * len(set(written) - active)
    assert {ts for ts, _ in commits} == set(written) - active
    plan = tmp_path / "mergeArchivePlan"
    candidates = [f"file:{tmp_path}/.commits_.archive.{v}_1-0-1" for v in (1, 2)]
    plan.write_bytes(avro_container(MERGE_PLAN_SCHEMA, {
        "candidate": candidates, "mergedArchiveFileName": ".commits_.archive.3_1-0-1"}))
    lines = _java("plan", str(plan), tmp=tmp_path)
    assert lines[0] == "schema org.apache.hudi.avro.model.HoodieMergeArchiveFilePlan"
    assert json.loads(lines[1]) == {"candidate": candidates,
                                    "mergedArchiveFileName": ".commits_.archive.3_1-0-1"}


def test_java_avro_reads_the_ordering_values_of_delete_blocks(tmp_path: Path) -> None:
    """Deletes that carry their ordering value (upserts that delete, DefaultHoodieRecordPayload)
    wrap it as Java does: each wrapper a branch of ``orderingVal``, nulls as IntWrapper(0)."""
    from hoodline.table.log.content import delete_block, read_delete_block
    from hoodline.table.log.ordering import JavaClass, OrderingValue

    cases = [
        (pa.array([5, None], pa.int64()), JavaClass.LONG, 5),
        (pa.array([7, None], pa.int32()), JavaClass.INTEGER, 7),
        (pa.array([2.5, None], pa.float64()), JavaClass.DOUBLE, 2.5),
        (pa.array([True, None], pa.bool_()), JavaClass.BOOLEAN, True),
        (pa.array([1_700_000_000_123_456, None], pa.timestamp("us", tz="UTC")),
         JavaClass.LONG, 1_700_000_000_123_456),
    ]
    schema_file = tmp_path / "delete_list.avsc"
    schema_file.write_text(json.dumps(DELETE_RECORD_LIST_SCHEMA))
    parts = []
    for values, java_class, raw in cases:
        block = delete_block(pa.array(["a", "b"]), "p", "20260101000000000", "{}", values)
        deletes = read_delete_block(block)
        assert deletes.orderings == [OrderingValue(java_class, raw),
                                     OrderingValue(JavaClass.INTEGER, 0)]
        parts += [bytes(p) for p in block.parts()]
    path = tmp_path / ".f_20260101000000000.log.1_0-1-0"
    path.write_bytes(b"".join(parts))  # one file of the five blocks: one JVM
    lines = _java("log", str(path), str(schema_file), tmp=tmp_path)
    got = [json.loads(line)["orderingVal"] for line in lines if not line.startswith("block ")]
    assert got == [v for _values, _cls, raw in cases for v in ({"value": raw}, {"value": 0})]
