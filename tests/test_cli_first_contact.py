"""What a new user meets first (hoodline issue 15): messages printed literally (not as rich
markup), `python -m hoodline`, the run banner, and wrong input that says what to do."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner, Result

from hoodline.cli import _friendly_errors, app, run_banner
from hoodline.demo.stream_demo import DemoResult, _print_summary, demo_stream
from hoodline.errors import BadRecordError
from hoodline.pipeline.config import parse_config
from hoodline.pipeline.progress import RoundProgress
from hoodline.table.instant import parse_timestamp
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from tests.helpers.files_pipeline import write_files_pipeline
from tests.helpers.paths import REPO

runner = CliRunner()
EXAMPLE = (REPO / "examples" / "kafka-orders.toml").read_text()


def _pipeline(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    text = EXAMPLE.replace('path = "/tmp/hoodline/orders"', f'path = "{tmp_path / "t"}"')
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def _run_without_spark(path: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    """``hoodline run PATH --once`` where starting Spark fails the test."""

    def no_spark(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"Spark started for '{path}', which should fail before it")

    monkeypatch.setattr("hoodline.spark.session.start_session", no_spark)
    return runner.invoke(app, ["run", str(path), "--once"])


@pytest.fixture()
def bracket_table(tmp_path: Path) -> HudiTable:
    t = HudiTable.create(
        tmp_path / "t",
        TableConfig(name="orders[eu]", record_key_fields=("id",), partition_fields=("region",),
                    precombine_field="ts"),
    )
    with WriteClient(t) as client:
        client.upsert(pa.table({"id": ["a", "b"], "region": ["[eu]", "us"], "ts": [1, 2]}))
    return t


# --- B3: text the CLI did not write is printed literally ----------------------------------------
def test_error_messages_keep_bracketed_words() -> None:
    cmd = typer.Typer()

    @cmd.command()
    @_friendly_errors
    def fail() -> None:
        raise BadRecordError(
            "record at orders-0@5 cannot be parsed: [1, 2] is not an object. Fix the producer or "
            "the [schema], or set errors.tolerance = 'all'"
        )

    result = runner.invoke(cmd, [])
    assert result.exit_code == 1
    assert "Fix the producer or the [schema], or set" in result.output
    assert "[1, 2] is not an object" in result.output


def test_config_error_keeps_bracketed_type_names(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, ('amount = "decimal(12, 2)"', 'amount = "money"'))
    result = runner.invoke(app, ["run", str(path), "--once"])
    assert result.exit_code == 1
    assert "timestamp[ms], timestamp[us, UTC]" in result.output


def test_table_commands_show_names_and_partitions_literally(bracket_table: HudiTable) -> None:
    shown = runner.invoke(app, ["table", "show", str(bracket_table.base_path)])
    assert shown.exit_code == 0, shown.output
    assert "orders[eu]" in shown.output
    files = runner.invoke(app, ["table", "files", str(bracket_table.base_path)])
    assert files.exit_code == 0, files.output
    assert "region=[eu]" in files.output
    assert "file slices of orders[eu]" in files.output
    commits = runner.invoke(app, ["table", "commits", str(bracket_table.base_path)])
    assert "timeline of orders[eu]" in commits.output


def test_progress_lines_and_status_are_literal() -> None:
    out = io.StringIO()
    progress = RoundProgress(Console(file=out, width=200), live=False)
    progress.set_status("wave 1 of [orders] produced")
    assert "wave 1 of [orders] produced" in out.getvalue()


def test_demo_summary_prints_problems_literally() -> None:
    out = io.StringIO()
    result = DemoResult(problems=["hudi-rs could not read the table: KeyError('[region]')"])
    _print_summary(Console(file=out, width=200), demo_stream(), result)
    assert "KeyError('[region]')" in out.getvalue()


def test_demo_counts_read_in_the_singular_for_one() -> None:
    from hoodline.demo.stream_demo import _n

    assert [_n(1, "delete"), _n(0, "delete"), _n(2_000, "insert")] == [
        "1 delete", "0 deletes", "2,000 inserts"]


# --- B6: python -m hoodline, the run banner -----------------------------------------------------
def test_python_dash_m_hoodline_runs_the_cli() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "hoodline", "version"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0.1.0"


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    bracket_table: HudiTable,
) -> None:
    """`hoodline table files T --json | head -1`: no error line, no traceback at exit, the
    exit status of a tool SIGPIPE ended."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hoodline", "table", "files", str(bracket_table.base_path),
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command writes anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


@pytest.mark.parametrize(("readers", "shown"), [(1, "1 reader,"), (3, "3 readers,")])
def test_run_banner_counts_readers_in_words(tmp_path: Path, readers: int, shown: str) -> None:
    text = _pipeline(tmp_path, ("reader-parallelism = 2", f"reader-parallelism = {readers}"))
    banner = run_banner(parse_config(text.read_text()), once=True)
    assert shown in banner and banner.endswith("--once")


def test_license_is_an_spdx_expression_for_a_backend_that_reads_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    # PEP 639 license expressions need setuptools >= 77 (older ones warn or fail)
    assert "setuptools>=77" in project["build-system"]["requires"]


# --- B7: wrong input says what is wrong and what to do -----------------------------------------
def test_missing_pipeline_file_says_what_to_give(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "nope.toml")])
    assert result.exit_code == 1
    assert "No such file or directory" in result.output
    assert "give the path of a pipeline TOML file" in result.output


def test_a_table_path_that_cannot_be_created_fails_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = _pipeline(tmp_path)
    path.write_text(path.read_text().replace(f'path = "{tmp_path / "t"}"',
                                             f'path = "{blocker / "t"}"'))

    result = _run_without_spark(path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert f"cannot create a Hudi table at '{blocker / 't'}'" in result.output
    assert "choose a path where this user can create directories" in result.output
    assert "Traceback" not in result.output


def test_no_usable_java_is_one_line_before_the_table_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was ~80 lines of Py4J traceback (JAVA_GATEWAY_EXITED) after the table was created."""
    path = write_files_pipeline(tmp_path / "p.toml", tmp_path / "in", tmp_path / "t",
                                {"id": "int64"})
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    result = _run_without_spark(path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert (f"error: JAVA_HOME is '{tmp_path / 'no-jdk'}', which holds no bin/java: set "
            "JAVA_HOME to a Java 17") in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(("line", "said"), [
    ('properties.fetch.max.bytez = "100"', 'No such configuration property: "fetch.max.bytez"'),
    ('properties.fetch.max.bytes = "lots"',
     'Invalid value for configuration property "fetch.max.bytes"'),
])
def test_a_librdkafka_property_it_refuses_fails_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, said: str
) -> None:
    """Every reader task failed on it, round after round with backoff, and the message never
    named the option."""
    anchor = 'properties.bootstrap.servers = "127.0.0.1:9092"'
    path = _pipeline(tmp_path, (anchor, f"{anchor}\n{line}"))
    result = _run_without_spark(path, monkeypatch)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert ("error: [source.options] properties: librdkafka refuses the consumer configuration: "
            f"{said}") in text
    assert "Traceback" not in result.output and not (tmp_path / "t").exists()


def test_piped_output_and_log_lines_are_never_wrapped(capsys: pytest.CaptureFixture[str]) -> None:
    """Output to a file or pipe was wrapped at 160 columns: a summary line's last instant, or
    a warning's end, went to a line of its own and broke whoever parsed the log."""
    import logging

    from hoodline.cli import LogLevel, configure_logging, console

    long = "last instant " + "9" * 200
    with console.capture() as captured:
        console.print(long, markup=False, highlight=False)
    assert captured.get() == long + "\n"
    configure_logging(LogLevel.WARNING)
    try:
        logging.getLogger("hoodline.test").warning("w %s end", "x" * 300)
        err = capsys.readouterr().err
    finally:
        logging.getLogger("hoodline").handlers[:] = []
    (line,) = err.splitlines()
    assert line.endswith(" WARNING hoodline.test: w " + "x" * 300 + " end")


def test_a_standalone_master_that_does_not_answer_is_one_line_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark retried registering for about a minute, with ~100 lines of Java stack traces."""
    from hoodline.broker import free_port

    url = f"spark://127.0.0.1:{free_port()}"
    path = _pipeline(tmp_path, ('master = "local[2]"', f'master = "{url}"'))
    result = _run_without_spark(path, monkeypatch)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"error: the Spark master '{url}' (runtime.master) does not answer (127.0.0.1:" in text
    assert "start it, or fix runtime.master" in text and "Traceback" not in result.output
    assert not (tmp_path / "t").exists()


def test_errors_of_the_operating_system_print_as_one_line() -> None:
    cmd = typer.Typer()

    @cmd.command()
    @_friendly_errors
    def fail() -> None:
        raise PermissionError(13, "Permission denied", "/data/[x]")

    result = runner.invoke(cmd, [])
    assert result.exit_code == 1
    assert "error: [Errno 13] Permission denied: '/data/[x]'" in result.output
    assert "run with --debug for the traceback" in result.output
    assert "Traceback" not in result.output


def test_misspelt_spark_master_fails_before_spark_starts(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, ('master = "local[2]"', 'master = "lokal[2]"'))
    result = runner.invoke(app, ["run", str(path), "--once"])
    assert result.exit_code == 1
    assert "'lokal[2]' is not a Spark master URL" in result.output
    assert "spark://HOST:PORT" in result.output


@pytest.mark.parametrize("as_of", ["abc", "2026", "2026-11-22T10"])
def test_bad_as_of_names_the_format_and_an_example(bracket_table: HudiTable, as_of: str) -> None:
    result = runner.invoke(app, ["table", "files", str(bracket_table.base_path), "--as-of", as_of])
    assert result.exit_code == 1
    last = bracket_table.timeline.completed_commits()[-1].timestamp
    assert f"--as-of {as_of!r} is not a time hoodline reads: give one of " \
        "yyyyMMddHHmmssSSS (an instant), yyyyMMddHHmmss, yyyy-MM-dd" in result.output
    assert f"e.g. {last}" in result.output
    assert "hoodline table commits" in result.output


def test_as_of_takes_a_date_as_java_hudi_does(bracket_table: HudiTable) -> None:
    """``yyyy-MM-dd`` is that day's first moment in the timeline's timezone: a day after the
    last commit lists what the latest state lists; the day of the first commit, nothing yet."""
    path = str(bracket_table.base_path)
    commits = bracket_table.timeline.completed_commits()
    latest = runner.invoke(app, ["table", "files", path, "--json"])
    last = commits[-1].timestamp
    after = (parse_timestamp(last) + timedelta(days=1)).strftime("%Y-%m-%d")
    result = runner.invoke(app, ["table", "files", path, "--json", "--as-of", after])
    assert result.exit_code == 0 and result.output == latest.output
    first = commits[0].timestamp
    day = f"{first[:4]}-{first[4:6]}-{first[6:8]}"
    result = runner.invoke(app, ["table", "files", path, "--as-of", day])
    assert result.exit_code == 0
    assert f"nothing was committed at or before {first[:8]}000000000" in result.output


def test_as_of_before_the_first_commit_says_so(bracket_table: HudiTable) -> None:
    result = runner.invoke(
        app, ["table", "files", str(bracket_table.base_path), "--as-of", "20000101000000000"]
    )
    assert result.exit_code == 0
    first = bracket_table.timeline.completed_commits()[0].timestamp
    assert f"nothing was committed at or before 20000101000000000 (its first commit is {first})" \
        in result.output


def test_negative_limit_is_refused(bracket_table: HudiTable) -> None:
    result = runner.invoke(app, ["table", "commits", str(bracket_table.base_path), "--limit", "-2"])
    assert result.exit_code == 2
    assert "--limit" in result.output


def test_a_missing_source_directory_fails_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (REPO / "examples" / "files-events.toml").read_text()
    missing = tmp_path / "no-such-dir"
    text = text.replace('path = "/tmp/hoodline/incoming"', f'path = "{missing}"')
    text = text.replace('path = "/tmp/hoodline/events"', f'path = "{tmp_path / "t"}"')
    path = tmp_path / "files.toml"
    path.write_text(text)

    result = _run_without_spark(path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert f"source directory '{missing}' does not exist" in result.output
    assert "check option 'path'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "t").exists()  # a run that cannot read creates no table


def test_info_logging_shows_the_whole_configuration_without_secrets(tmp_path: Path) -> None:
    """The README said the run banner shows the non-secret [table.storage] values; nothing
    showed them (cluster review). `--log-level info` logs every setting, secrets masked."""
    from tests.helpers.files_pipeline import write_files_pipeline

    config = write_files_pipeline(
        tmp_path / "p.toml", str(tmp_path / "missing"), "s3://lake/t", {"id": "string"},
        extra='[table.storage]\nendpoint = "http://127.0.0.1:9"\n'
              'secret_access_key = "hush-hush-1234"\n')
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "hoodline", "--log-level", "info", "run",
                           str(config), "--once"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0  # the source folder does not exist
    assert "configuration: source.type = 'files'" in done.stderr, done.stderr
    assert "table.storage.endpoint = 'http://127.0.0.1:9'" in done.stderr
    assert "hush-hush" not in done.stderr + done.stdout
