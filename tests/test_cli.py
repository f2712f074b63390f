"""The `hoodline table ...` commands against real tables written by the write client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from hoodline import __version__
from hoodline.cli import _human_bytes, app, global_options_first
from hoodline.table.fs_view import base_file_name
from hoodline.table.markers import Markers
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_rows_equal, hudi_snapshot
from tests.helpers.files_pipeline import write_files_pipeline

runner = CliRunner()


@pytest.fixture()
def table(tmp_path: Path) -> HudiTable:
    t = HudiTable.create(
        tmp_path / "t",
        TableConfig(
            name="orders", record_key_fields=("id",), partition_fields=("region",),
            precombine_field="ts",
        ),
    )
    with WriteClient(t) as client:
        client.upsert(pa.table({"id": ["a", "b", "c"], "region": ["us", "eu", "us"],
                                "ts": [1, 2, 3], "v": [1.0, 2.0, 3.0]}))
        client.upsert(pa.table({"id": ["a"], "region": ["us"], "ts": [5], "v": [9.0]}))
        client.delete(pa.table({"id": ["b"], "region": ["eu"], "ts": [6], "v": [0.0]}))
    return t


def test_show_summarises_table(table: HudiTable) -> None:
    result = runner.invoke(app, ["table", "show", str(table.base_path)])
    assert result.exit_code == 0, result.output
    assert "orders" in result.output
    assert "region" in result.output
    assert "completed commits  3" in result.output
    assert "archived" in result.output and "metadata table     none" in result.output
    assert "key generator      SimpleKeyGenerator" in result.output
    # the table's columns and types (schema review: only hand-parsing a commit showed them)
    assert "columns            id string, region string, ts int64, v double" in result.output


def test_show_names_a_timestamp_key_generator_and_its_settings(tmp_path: Path) -> None:
    from hoodline.table.properties import TableConfig

    settings = {"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
                "hoodie.keygen.timebased.output.timezone": "UTC"}
    t = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("ts",),
                                                     key_generator="timestamp", extra=settings))
    result = runner.invoke(app, ["table", "show", str(t.base_path)])
    assert result.exit_code == 0, result.output
    assert ("TimestampBasedKeyGenerator (output.dateformat=yyyy/MM/dd, output.timezone=UTC, "
            "timestamp.type=EPOCHMILLISECONDS)") in result.output


def test_show_reports_archival_and_a_metadata_table(tmp_path: Path) -> None:
    from hoodline.table.properties import TableConfig
    from hoodline.table.write.client import WriteClient

    t = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",)))
    options = {"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
               "hoodie.cleaner.commits.retained": 1}
    with WriteClient(t, options) as client:
        for i in range(5):
            client.upsert(pa.table({"id": [i]}))
    (t.meta_path / "metadata").mkdir()
    result = runner.invoke(app, ["table", "show", str(t.base_path)])
    assert result.exit_code == 0, result.output
    assert "1 archive file(s); the active timeline starts at" in result.output
    assert "present (hoodline writers remove it" in result.output
    assert "timeline timezone  UTC" in result.output


def test_commits_json_lists_operations_and_counts(table: HudiTable) -> None:
    result = runner.invoke(app, ["table", "commits", str(table.base_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["operation"] for r in rows] == ["UPSERT", "UPSERT", "DELETE"]
    assert rows[0]["inserts"] == 3
    assert rows[1]["updates"] == 1
    assert rows[2]["deletes"] == 1


def test_files_json_matches_file_system_view(table: HudiTable) -> None:
    result = runner.invoke(app, ["table", "files", str(table.base_path), "--json"])
    assert result.exit_code == 0, result.output
    listed = sorted(json.loads(line)["file"] for line in result.output.splitlines())
    assert listed == sorted(s.base_file for s in table.fs_view().latest_file_slices())


def test_files_of_some_partitions_only(table: HudiTable) -> None:
    """A table of thousands of partitions listed every slice, 40,000 lines, with no way to look
    at one partition (large-table review)."""
    result = runner.invoke(app, ["table", "files", str(table.base_path), "--json",
                                 "--partition", "region=e*"])
    assert result.exit_code == 0, result.output
    parts = {json.loads(line)["partition"] for line in result.output.splitlines()}
    assert parts == {"region=eu"}
    result = runner.invoke(app, ["table", "files", str(table.base_path), "--partition", "x=*"])
    assert result.exit_code == 0 and "no partition of the table's" in result.output


def test_rollback_removes_pending_instant_and_its_files(table: HudiTable) -> None:
    before = hudi_snapshot(table.base_path)
    # a writer that died mid-instant: inflight instant + a marked, half-written data file
    ts = table.new_instant_time()
    inflight = table.timeline.transition_to_inflight(table.timeline.create_requested("commit", ts))
    name = base_file_name("deadbeef-0000", "0-0-0", ts)
    Markers(table, ts).create("region=us", name, "CREATE")
    stray = table.base_path / "region=us" / name
    pq.write_table(pa.table({"x": [1]}), stray)

    result = runner.invoke(app, ["table", "rollback", str(table.base_path)])
    assert result.exit_code == 0, result.output
    assert f"rolled back commit {ts} (rollback " in result.output  # names what it undid
    assert not stray.exists()
    table.timeline.reload()
    assert table.timeline.find(inflight.timestamp) is None
    assert_rows_equal(before, hudi_snapshot(table.base_path), label="after CLI rollback")

    again = runner.invoke(app, ["table", "rollback", str(table.base_path)])
    assert again.exit_code == 0
    assert "nothing to roll back" in again.output


def test_a_pending_compaction_is_finished_not_rolled_back(tmp_path: Path) -> None:
    """A write after the plan logs against it: rolling the plan back lost that committed
    write (its logs no longer belong to any slice). The CLI refuses and says what finishes it."""
    from hoodline.table.compaction import schedule_compaction
    from hoodline.table.read import read_snapshot
    from tests.table.write.helpers import mor_table, rows

    table = mor_table(tmp_path, "BUCKET")
    with WriteClient(table, {"hoodline.compaction.async": True,
                             "hoodie.compact.inline": False}) as client:
        client.upsert(rows([1, 2], region="eu", ts=1))
        client.upsert(rows([1], region="eu", ts=2, v="second"))
        planned = schedule_compaction(table)
        assert planned is not None
        client.upsert(rows([1], region="eu", ts=3, v="after the plan"))
    path = str(table.base_path)
    show = runner.invoke(app, ["table", "show", path])
    assert f"compaction {planned.timestamp} (requested)" in show.output, show.output
    plain = runner.invoke(app, ["table", "rollback", path])
    assert plain.exit_code == 0
    assert (f"nothing to roll back; compaction {planned.timestamp} (requested) is a pending "
            f"compaction: `hoodline table compact {path}` finishes it") in " ".join(
        plain.output.split())
    refused = runner.invoke(app, ["table", "rollback", path, "--instant", planned.timestamp])
    assert refused.exit_code == 1
    assert "is a pending compaction, which is finished, not rolled back" in " ".join(
        refused.output.split())
    table.timeline.reload()
    assert table.timeline.find(planned.timestamp) is not None
    compacted = runner.invoke(app, ["table", "compact", path])
    assert compacted.exit_code == 0, compacted.output
    values = {r["id"]: r["v"] for r in read_snapshot(HudiTable.open(path)).to_pylist()}
    assert values[1] == "after the plan1"  # rows() suffixes each value with its id


def test_not_a_table_gives_one_clear_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["table", "show", str(tmp_path)])
    assert result.exit_code == 1
    assert "no Hudi table" in result.output
    assert "Traceback" not in result.output


def test_merge_on_read_show_files_and_compact(tmp_path: Path) -> None:
    t = HudiTable.create(
        tmp_path / "mor",
        TableConfig(name="orders", record_key_fields=("id",), partition_fields=("region",),
                    precombine_field="ts", table_type="MERGE_ON_READ", bucket_count=2),
    )
    with WriteClient(t, {"hoodie.compact.inline": False}) as client:
        client.upsert(pa.table({"id": ["a", "b", "c"], "region": ["us", "eu", "us"],
                                "ts": [1, 2, 3], "v": [1.0, 2.0, 3.0]}))
        client.upsert(pa.table({"id": ["a"], "region": ["us"], "ts": [5], "v": [9.0]}))
    path = str(t.base_path)
    shown = runner.invoke(app, ["table", "show", path])
    assert shown.exit_code == 0, shown.output
    assert "MERGE_ON_READ" in shown.output
    assert "log files           3 in 2 slices" in shown.output
    assert "in 1 slices" not in shown.output and "1 log files" not in shown.output
    assert "uncompacted writes  up to 2 log files per slice" in shown.output
    commits = [json.loads(line) for line in
               runner.invoke(app, ["table", "commits", path, "--json"]).output.splitlines()]
    # write statistics of deltacommits, not empty rows
    assert [(c["action"], c["records"], c["deletes"]) for c in commits] == [
        ("deltacommit", 3, 0), ("deltacommit", 1, 0)]
    assert all(c["inserts"] + c["updates"] == c["records"] and c["bytes"] > 0 for c in commits)
    files = runner.invoke(app, ["table", "files", path, "--json"])
    rows = [json.loads(line) for line in files.output.splitlines()]
    assert all(r["file"] is None and r["log_files"] for r in rows)  # log-only slices
    on_disk = sum((t.base_path / f).stat().st_size for r in rows for f in r["log_files"])
    assert sum(r["log_bytes"] for r in rows) == on_disk > 0
    # a table of log files alone is not empty: its size is its log files'
    assert f"log files {_human_bytes(on_disk)}" in shown.output
    listed = runner.invoke(app, ["table", "files", path], terminal_width=200)
    assert f"{_human_bytes(on_disk)} in log files" in listed.output
    # each log file shown by what tells it apart from its row's file id and base instant
    for r in rows:
        for name in r["log_files"]:
            short = Path(name).name.removeprefix(f".{r['file_id']}_{r['base_instant']}")
            assert short.startswith(".log.") and short in listed.output, listed.output
    written = sum(len(t.timeline.read_commit_metadata(i).write_stats())
                  for i in t.timeline.completed_commits())
    assert sum(len(r["log_files"]) for r in rows) == written  # one log file per group and write
    before = hudi_snapshot(t.base_path).drop_columns(["_hoodie_file_name"])
    done = runner.invoke(app, ["table", "compact", path])
    assert done.exit_code == 0, done.output
    assert "log file" in done.output and "merged" in done.output
    rows = [json.loads(line) for line in
            runner.invoke(app, ["table", "files", path, "--json"]).output.splitlines()]
    assert all(r["file"] and not r["log_files"] for r in rows)
    # piped (160 columns): base file names wrap, none is cut short
    listed = runner.invoke(app, ["table", "files", path]).output
    assert "\u2026" not in listed and listed.count(".parquet") == len(rows)
    after = hudi_snapshot(t.base_path).drop_columns(["_hoodie_file_name"])
    assert_rows_equal(before, after, label="after compaction")
    again = runner.invoke(app, ["table", "compact", path])
    assert again.exit_code == 0 and "nothing to compact" in again.output


def test_compact_refuses_copy_on_write_tables(table: HudiTable) -> None:
    result = runner.invoke(app, ["table", "compact", str(table.base_path)])
    assert result.exit_code != 0
    assert "COPY_ON_WRITE" in result.output and "MERGE_ON_READ" in result.output


def test_clean_deletes_versions_older_than_the_retained_commits(tmp_path: Path) -> None:
    t = HudiTable.create(
        tmp_path / "cow",
        TableConfig(name="orders", record_key_fields=("id",), partition_fields=(),
                    precombine_field="ts", bucket_count=1),
    )
    with WriteClient(t, {"hoodie.clean.automatic": False}) as client:
        for ts in range(1, 6):  # each upsert rewrites the one base file: five versions
            client.upsert(pa.table({"id": ["a", "b"], "ts": [ts, ts], "v": [ts, ts]}))
    path = str(t.base_path)
    before = hudi_snapshot(t.base_path).drop_columns(["_hoodie_file_name"])
    assert len(list(t.base_path.glob("*.parquet"))) == 5
    done = runner.invoke(app, ["table", "clean", path, "--retain", "2"])
    assert done.exit_code == 0, done.output
    assert "2 files deleted" in done.output
    # the versions the last two commits read stay, and the newest one before them (Java's
    # KEEP_LATEST_COMMITS), nothing else
    assert len(list(t.base_path.glob("*.parquet"))) == 3
    after = hudi_snapshot(t.base_path).drop_columns(["_hoodie_file_name"])
    assert_rows_equal(before, after, label="after clean")
    again = runner.invoke(app, ["table", "clean", path, "--retain", "2"])
    assert again.exit_code == 0 and "nothing to clean" in again.output
    refused = runner.invoke(app, ["table", "clean", path, "--retain", "0"])
    assert refused.exit_code != 0 and "'--retain'" in refused.output


def test_clean_without_retain_keeps_at_least_what_the_writers_kept(tmp_path: Path) -> None:
    """Writers retaining 12 commits had cleaned; `table clean` without --retain used 10 and
    deleted history the pipeline promised (the writers' setting lives in the pipeline file)."""
    t = HudiTable.create(
        tmp_path / "cow",
        TableConfig(name="orders", record_key_fields=("id",), partition_fields=(),
                    precombine_field="ts", bucket_count=1),
    )
    with WriteClient(t, {"hoodie.cleaner.commits.retained": 12,
                         "hoodie.keep.min.commits": 20, "hoodie.keep.max.commits": 30}) as client:
        for ts in range(1, 16):
            client.upsert(pa.table({"id": ["a"], "ts": [ts], "v": [ts]}))
    files = len(list(t.base_path.glob("*.parquet")))
    assert files == 13  # 12 retained commits' versions and the newest before them
    done = runner.invoke(app, ["table", "clean", str(t.base_path)])
    assert done.exit_code == 0, done.output
    assert "keeping the file versions the last 12 commits need" in " ".join(done.output.split())
    assert len(list(t.base_path.glob("*.parquet"))) == files
    fresh = HudiTable.create(
        tmp_path / "never", TableConfig(name="o", record_key_fields=("id",),
                                        partition_fields=(), bucket_count=1))
    out = runner.invoke(app, ["table", "clean", str(fresh.base_path)])
    assert out.exit_code == 0 and "the last 10 commits" in out.output, out.output
    # refused while a live writer holds the lock: no "keeping ..." line before the refusal
    # (walkthrough review)
    with WriteClient(fresh):
        refused = runner.invoke(app, ["table", "clean", str(fresh.base_path)])
    assert refused.exit_code == 1 and "writer" in refused.output, refused.output
    assert "keeping" not in refused.output


def test_help_reads_as_plain_text_and_the_version_has_a_flag() -> None:
    """Flags show no value placeholder, paragraphs are rewrapped (not broken where the source
    line ended), the log level's default is written as the choices are; --version works."""
    done = runner.invoke(app, ["run", "--help"], terminal_width=100)
    assert done.exit_code == 0
    assert "<bool>" not in done.output
    assert "stops cleanly after the current round (a second one aborts; the next start" in " ".join(
        done.output.split())
    top = runner.invoke(app, ["--help"], terminal_width=100)
    assert "[default: warning]" in top.output and "<debug|info|warning|error>" in top.output
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == __version__
    assert runner.invoke(app, ["--log-level", "INFO", "version"]).exit_code == 0


def test_the_run_summary_says_when_nothing_was_committed() -> None:
    from hoodline.cli import summary_line
    from hoodline.pipeline.report import RunSummary, StopReason

    idle = RunSummary(rounds=1, commits=0, records_read=0, records_written=0, error_records=0,
                      last_instant=None, stopped_because=StopReason.DRAINED)
    assert summary_line(idle, "/t_errors") == (
        "drained: 1 round (0 committed, 1 with nothing new), 0 records read, 0 written, 0 error "
        "records, nothing new to commit")
    done = RunSummary(rounds=2, commits=2, records_read=5, records_written=5, error_records=1,
                      last_instant="20261128120000000", stopped_because=StopReason.DRAINED)
    assert summary_line(done, "/t_errors") == (
        "drained: 2 rounds (2 committed), 5 records read, 5 written, 1 error record (in the "
        "error table /t_errors), last instant 20261128120000000")


def test_show_and_files_warn_about_a_lost_committed_file_and_accept_loss_goes_on(
        table: HudiTable) -> None:
    last = table.timeline.completed_commits()[-2].timestamp  # the upsert of "a" (region us)
    (newest,) = Path(str(table.base_path)).glob(f"region=us/*_{last}.parquet")
    newest.unlink()
    rel = f"region=us/{newest.name}"
    for command in ("show", "files"):
        result = runner.invoke(app, ["table", command, str(table.base_path)])
        assert result.exit_code == 0, result.output  # a damaged table stays inspectable
        assert f"'{rel}' is missing; commit {last}" in result.output, command
        assert "accept-loss" in result.output, command
    wrong = runner.invoke(app, ["table", "accept-loss", str(table.base_path), "region=us/x"])
    assert wrong.exit_code == 1 and rel in wrong.output  # names what is damaged
    result = runner.invoke(app, ["table", "accept-loss", str(table.base_path), rel])
    assert result.exit_code == 0 and f"accepted the loss: '{rel}'" in result.output
    assert "do not restore these files once a write went on" in result.output
    # naming it again is no error (it said the file was not missing or shortened)
    again = runner.invoke(app, ["table", "accept-loss", str(table.base_path), rel])
    assert again.exit_code == 0 and "every file named was accepted before" in again.output
    shown = runner.invoke(app, ["table", "show", str(table.base_path)])
    assert "accept-loss" not in shown.output


def test_show_looks_again_before_it_warns_of_a_missing_file(
        table: HudiTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside a fast writer, a commit and its clean between `show` reading the timeline and
    listing the folders made an older version look missing (1 run in 69; damaged-table
    re-review): the view is made again before a warning."""
    from hoodline.table import integrity
    from hoodline.table.integrity import Damage, RecordedFile

    calls: list[int] = []
    real = integrity.find_damage

    def first_time_stale(view: object, accepted: frozenset[tuple[str, str]]) -> list[Damage]:
        calls.append(1)
        if len(calls) == 1:
            return [Damage(RecordedFile("region=us/gone.parquet", "1", "commit", 10), None)]
        return real(view, accepted)  # type: ignore[arg-type]

    monkeypatch.setattr(integrity, "find_damage", first_time_stale)
    result = runner.invoke(app, ["table", "show", str(table.base_path)])
    assert result.exit_code == 0 and "warning" not in result.output and len(calls) == 2


def test_a_commit_archived_while_read_is_not_called_damaged(table: HudiTable) -> None:
    """It was read as gone and wrapped in the damaged-commit advice (`rollback --instant`)."""
    from hoodline.errors import TimelineError

    done = table.timeline.completed_commits()[-1]
    fresh = HudiTable.open(table.base_path)
    fresh.timeline.path_of(done).unlink()  # archived by a writer meanwhile
    with pytest.raises(TimelineError, match="does not exist") as err:
        fresh.timeline.read_commit_metadata(done)
    assert "rollback" not in str(err.value)


def test_a_pending_compaction_with_an_unreadable_plan_is_rolled_back_by_name(
    tmp_path: Path,
) -> None:
    """Every command stopped on the truncated plan and `rollback` sent the engineer to
    `compact`, which stopped on it too. The error names the way out, which works: a requested
    compaction has written nothing, so removing it loses nothing."""
    from hoodline.table.compaction import schedule_compaction
    from hoodline.table.read import read_snapshot
    from tests.table.write.helpers import mor_table, rows

    table = mor_table(tmp_path, "BUCKET")
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(rows([1, 2], region="eu", ts=1))
        client.upsert(rows([1], region="eu", ts=2, v="second"))
    planned = schedule_compaction(table)
    assert planned is not None
    plan = table.timeline.path_of(planned)
    plan.write_bytes(plan.read_bytes()[:100])
    path = str(table.base_path)
    way_out = f"`hoodline table rollback {path} --instant {planned.timestamp}`"
    for command in ("show", "compact"):
        stopped = runner.invoke(app, ["table", command, path])
        assert stopped.exit_code == 1
        assert str(plan) in stopped.output and way_out in " ".join(stopped.output.split())
    plain = runner.invoke(app, ["table", "rollback", path])
    assert plain.exit_code == 0
    assert way_out in " ".join(plain.output.split()), plain.output
    done = runner.invoke(app, ["table", "rollback", path, "--instant", planned.timestamp])
    assert done.exit_code == 0, done.output
    assert f"rolled back compaction {planned.timestamp}" in done.output
    table.timeline.reload()
    assert table.timeline.find(planned.timestamp) is None
    assert runner.invoke(app, ["table", "show", path]).exit_code == 0
    values = {r["id"]: r["v"] for r in read_snapshot(HudiTable.open(path)).to_pylist()}
    assert values == {1: "second1", 2: "v2"}


def test_a_truncated_newest_commit_names_the_way_out_which_works(tmp_path: Path) -> None:
    """`show` stopped on the truncated commit file and `rollback --instant` refused completed
    instants: the engineer had to know to delete the file by hand."""
    from hoodline.table.read import read_snapshot
    from tests.table.write.helpers import mor_table, rows

    table = mor_table(tmp_path, "BUCKET")
    with WriteClient(table) as client:
        client.upsert(rows([1, 2], region="eu", ts=1))
        ts = client.upsert(rows([1], region="eu", ts=2, v="second"))
    commit = table.timeline.path_of(table.timeline.completed_commits()[-1])
    commit.write_bytes(commit.read_bytes()[:300])
    path = str(table.base_path)
    stopped = runner.invoke(app, ["table", "show", path])
    assert stopped.exit_code == 1
    way_out = f"`hoodline table rollback {path} --instant {ts}`"
    assert str(commit) in stopped.output and way_out in " ".join(stopped.output.split())
    done = runner.invoke(app, ["table", "rollback", path, "--instant", ts])
    assert done.exit_code == 0, done.output
    assert f"rolled back deltacommit {ts}" in done.output
    assert runner.invoke(app, ["table", "show", path]).exit_code == 0
    values = {r["id"]: r["v"] for r in read_snapshot(HudiTable.open(path)).to_pylist()}
    assert values == {1: "v1", 2: "v2"}


@pytest.mark.parametrize(("args", "expected"), [
    (["run", "p.toml", "--log-level", "debug"], ["--log-level", "debug", "run", "p.toml"]),
    (["run", "--once", "--log-level=info", "p.toml", "--debug"],
     ["--log-level=info", "--debug", "run", "--once", "p.toml"]),
    (["--debug", "table", "show", "t"], ["--debug", "table", "show", "t"]),
    (["run", "p.toml", "--", "--debug"], ["run", "p.toml", "--", "--debug"]),
])
def test_global_options_after_the_command_are_taken_as_given_before_it(
    args: list[str], expected: list[str]
) -> None:
    """Walkthrough review: `hoodline run P.toml --log-level debug` said "No such option:
    --log-level" (an option of hoodline itself, taken only before the command)."""
    assert global_options_first(args) == expected


def test_the_command_takes_a_global_option_after_the_subcommand() -> None:
    done = subprocess.run([sys.executable, "-c", "from hoodline.cli import main; main()",
                           "version", "--log-level", "debug"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert __version__ in done.stdout


def test_a_busy_metrics_port_is_refused_before_the_table_is_made(tmp_path: Path) -> None:
    """Metrics review: a run refused for its --metrics-port had created the table's
    hoodie.properties first (and preflight, Spark's start check) before the refusal."""
    import socket

    table = tmp_path / "t"
    cfg = write_files_pipeline(tmp_path / "p.toml", tmp_path / "in", table, {"id": "int64"})
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = runner.invoke(app, ["run", str(cfg), "--once", "--metrics-port", str(port),
                                   "--metrics-host", "127.0.0.1"])
    assert done.exit_code == 2, done.output
    assert f"cannot serve metrics on 127.0.0.1:{port}" in " ".join(done.output.split())
    assert not table.exists()
