"""Crash-test harness: pipeline subprocesses (started, paused, killed with SIGKILL, restarted),
their process trees, and hudi-rs checks of the table against the event model.

Every process a :class:`PipelineProcess` starts carries a unique marker in its environment
(inherited by the Spark JVM, executors and Python workers), so cleanup kills exactly the
processes this test started -- also those re-parented after their parent was killed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from hoodline import faults
from hoodline.broker import EmbeddedBroker
from hoodline.demo.events import (
    MODEL_COLUMNS,
    EventStream,
    Row,
    StreamKind,
    describe_mismatch,
    find_committed_prefixes,
)
from hoodline.demo.feed import create_topic
from hoodline.demo.pipeline_config import event_pipeline_toml
from hoodline.faults import FaultPoint
from hoodline.storage.ops import walk_files
from hoodline.storage.paths import TablePath, parse_location
from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.paths import SRC
from tests.helpers.wave_feeder import WaveFeeder

RUNNER = Path(__file__).resolve().parent / "pipeline_runner.py"
MARKER_ENV = "HOODLINE_PO_TEST_RUN"


# -- processes ----------------------------------------------------------------------------------
def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of ``pid`` or None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
        return int(rest[1]), rest[0]
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[1] != "Z"


def marked_pids(marker: str, env_name: str = MARKER_ENV) -> list[int]:
    """PIDs of live processes whose environment carries ``env_name=marker``."""
    needle = f"{env_name}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0") and _alive(int(entry)):
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class PipelineProcess:
    """One pipeline process (``pipeline_runner.py``) and everything it starts."""

    config_path: Path
    log_dir: Path
    once: bool = False
    pause_at: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: replaces ``python pipeline_runner.py CONFIG`` (harness self-tests)
    command: Sequence[str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pause_file(self) -> Path:
        return self.log_dir / f"pause-{self.marker}"

    @property
    def out_path(self) -> Path:
        return self.log_dir / f"run-{self.marker}.out"

    @property
    def err_path(self) -> Path:
        return self.log_dir / f"run-{self.marker}.err"

    def start(self) -> PipelineProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        env[MARKER_ENV] = self.marker
        for key in (faults.POINT_ENV, faults.ACTION_ENV, faults.FILE_ENV, faults.TIMES_ENV):
            env.pop(key, None)
        if self.pause_at:
            env.update(faults.fault_env(FaultPoint(self.pause_at), file=self.pause_file))
        env.update(self.extra_env)
        args = [sys.executable, str(RUNNER), str(self.config_path)]
        if self.once:
            args.append("--once")
        if self.command is not None:
            args = list(self.command)
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def tail(self, chars: int = 3000) -> str:
        text = ""
        for p in (self.out_path, self.err_path):
            if p.exists():
                text += f"--- {p.name}\n" + p.read_text(errors="replace")[-chars:]
        return text

    def reports(self) -> list[dict[str, Any]]:
        """Round reports printed so far."""
        if not self.out_path.exists():
            return []
        out = []
        for line in self.out_path.read_text(errors="replace").splitlines():
            if line.startswith('{"round"'):
                out.append(json.loads(line)["round"])
        return out

    def summary(self) -> dict[str, Any] | None:
        if not self.out_path.exists():
            return None
        for line in self.out_path.read_text(errors="replace").splitlines():
            if line.startswith('{"summary"'):
                return dict(json.loads(line)["summary"])
        return None

    def wait_paused(self, timeout_s: float) -> str:
        """Wait until the process reached its pause point; returns the pause file's text."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.pause_file.exists():
                return self.pause_file.read_text()
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"pipeline exited with {self.proc.returncode} before pausing at "
                    f"{self.pause_at!r}:\n{self.tail()}")
            time.sleep(0.1)
        raise AssertionError(f"pipeline did not reach {self.pause_at!r} in {timeout_s}s:\n"
                             f"{self.tail()}")

    def wait_for_rounds(self, count: int, timeout_s: float, committed: bool = True) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = [r for r in self.reports() if r["committed"] or not committed]
            if len(done) >= count:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"pipeline exited with {self.proc.returncode}:\n"
                                     f"{self.tail()}")
            time.sleep(0.1)
        raise AssertionError(f"fewer than {count} rounds in {timeout_s}s:\n{self.tail()}")

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"pipeline still running after {timeout_s}s:\n"
                                 f"{self.tail()}") from None

    def executor_pids(self) -> list[int]:
        """Executor JVMs of this process's Spark (local-cluster)."""
        return [p for p in marked_pids(self.marker)
                if "CoarseGrainedExecutorBackend" in cmdline(p)]

    def kill9(self) -> None:
        """The crash: SIGKILL the pipeline process, then every process it started."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.cleanup()

    def terminate(self, timeout_s: float = 60.0) -> int:
        """Graceful stop (SIGTERM: the runner stops after the current round)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        code = self.wait(timeout_s)
        self.cleanup()
        return code

    def cleanup(self, timeout_s: float = 30.0) -> None:
        """SIGKILL every remaining process carrying this run's marker; wait until all are gone."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        deadline = time.monotonic() + timeout_s
        while True:
            left = marked_pids(self.marker)
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"processes of run {self.marker} survive SIGKILL: {left}")
            time.sleep(0.1)


def spark_executors(ui_port: int) -> list[dict[str, object]]:
    """Every executor (live or removed, not the driver) of the Spark application whose UI
    listens on ``ui_port``, as its REST API describes them (``id``, ``isActive``,
    ``activeTasks``, ``removeReason``...); [] when the UI is not up yet."""
    import urllib.request

    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=2) as resp:
            apps = json.loads(resp.read())
        if not apps:
            return []
        with urllib.request.urlopen(f"{base}/{apps[0]['id']}/allexecutors", timeout=2) as resp:
            executors = json.loads(resp.read())
    except (OSError, ValueError):
        return []
    return [e for e in executors if e.get("id") != "driver"]


# -- table checks -------------------------------------------------------------------------------
def read_rows(table_path: TablePath) -> tuple[dict[int, Row], int]:
    """(id -> row, number of rows) of the table as hudi-rs reads it; {} before the first commit.

    Raises when two live rows share an id (a duplicate)."""
    if not (table_path / ".hoodie" / "hoodie.properties").exists():
        return {}, 0
    tbl = hudi_snapshot(table_path)
    if tbl.num_rows == 0:
        return {}, 0
    tbl = tbl.select(list(MODEL_COLUMNS))
    counts = pc.value_counts(tbl.column("id"))
    dup = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    if dup:
        raise AssertionError(f"{len(dup)} id(s) have more than one row (duplicates), e.g. "
                             f"{sorted(dup)[:10]}")
    rows = {int(r["id"]): r for r in tbl.to_pylist()}
    return rows, tbl.num_rows


def assert_consistent_prefix(stream: EventStream, table_path: TablePath,
                             previous: dict[int, int] | None = None) -> dict[int, int]:
    """The table equals the model at some per-partition prefix (no loss, no duplicate, no
    wrong version); with ``previous`` that prefix does not go back. Returns the newest
    consistent prefix count per partition."""
    rows, _ = read_rows(table_path)
    found = find_committed_prefixes(stream, rows)
    if found is None:
        raise AssertionError(
            "the table is not the model of any committed prefix: "
            + describe_mismatch(stream.expected_rows(), rows))
    newest = {p: ks[-1] for p, ks in found.items()}
    if previous is not None:
        for p, k in previous.items():
            if max(found[p]) < k:
                raise AssertionError(f"partition {p} went back from {k} to {found[p]} messages")
    return newest


def assert_table_equals_model(stream: EventStream, table_path: TablePath) -> int:
    rows, n = read_rows(table_path)
    expected = stream.expected_rows()
    problem = describe_mismatch(expected, rows)
    if problem or n != len(expected):
        raise AssertionError(f"table differs from the model ({n} rows, expected "
                             f"{len(expected)}): {problem}")
    return n


def assert_no_leftovers(table_path: TablePath) -> None:
    """No pending instant and no data file of an uncommitted (rolled back) instant remains."""
    from hoodline.table.archive import has_archived_instants
    from hoodline.table.fs_view import CommittedInstants, parse_base_file_name
    from hoodline.table.log.blocks import HeaderKey, read_blocks
    from hoodline.table.log.names import LogFileName
    from hoodline.table.table import HudiTable

    table = HudiTable.open(table_path)
    pending = table.timeline.pending()
    if pending:
        raise AssertionError(f"pending instants left on the timeline: {pending}")
    completed = {i.timestamp for i in table.timeline.completed_commits()}
    # archived instants count as committed; without archival only the completed ones do
    committed: Callable[[str], bool] = (
        CommittedInstants.of(table.timeline) if has_archived_instants(table)
        else completed.__contains__
    )
    stray = []
    for rel in walk_files(table.base_path):
        name = rel.rpartition("/")[2]
        if rel.startswith(".hoodie/"):
            continue
        if name.endswith(".parquet") and not committed(parse_base_file_name(name)[2]):
            stray.append(rel)
        elif LogFileName.parse(name) is not None:  # merge-on-read: every block committed
            data = (table.base_path / rel).read_bytes()
            instants = {b.header.get(HeaderKey.INSTANT_TIME) for b in read_blocks(data)}
            if not instants or not all(committed(str(i)) for i in instants):
                stray.append(rel)
    if stray:
        raise AssertionError(f"{len(stray)} data file(s) of uncommitted instants left: "
                             f"{sorted(stray)[:5]}")


def error_values(errors_path: TablePath) -> list[tuple[int, bytes]]:
    """(partition, raw value) of every error-table row, sorted."""
    if not (errors_path / ".hoodie" / "hoodie.properties").exists():
        return []
    tbl = hudi_snapshot(errors_path)
    if tbl.num_rows == 0:
        return []
    return sorted(zip(tbl.column("partition").to_pylist(), tbl.column("value").to_pylist(),
                      strict=True))


def assert_errors_subset(stream: EventStream, errors_path: TablePath,
                         exact: bool = False) -> int:
    got = error_values(errors_path)
    want = sorted(stream.malformed_values())
    if len(set(got)) != len(got):
        raise AssertionError("the error table holds a malformed record twice")
    if exact and got != want:
        raise AssertionError(f"error table holds {len(got)} records, expected the {len(want)} "
                             f"malformed ones; missing {sorted(set(want) - set(got))[:3]}, "
                             f"unexpected {sorted(set(got) - set(want))[:3]}")
    if not set(got) <= set(want):
        raise AssertionError(f"error table holds records that were not malformed: "
                             f"{sorted(set(got) - set(want))[:3]}")
    return len(got)


__all__: Sequence[str] = (
    "PipelineProcess",
    "assert_consistent_prefix",
    "assert_errors_subset",
    "assert_no_leftovers",
    "assert_table_equals_model",
    "error_values",
    "marked_pids",
    "read_rows",
)


PARTITIONS = 2
START_TIMEOUT_S = 240.0  # Spark start + first round on 2 shared cores
DRAIN_TIMEOUT_S = 300.0


class Scenario:
    """A topic, a table, a stream feeding the topic and pipeline runs against them."""

    def __init__(self, broker: EmbeddedBroker, tmp: Path, *, kind: StreamKind,
                 operation: WriteOperation, index: IndexType = IndexType.BUCKET,
                 master: str = "local[2]", wave: int = 20,
                 malformed: int = 1, tombstones: bool = False,
                 spark_conf: dict[str, str] | None = None,
                 table_type: TableType = TableType.COPY_ON_WRITE,
                 table_options: dict[str, str] | None = None,
                 table_location: str | None = None,
                 table_storage: dict[str, str] | None = None) -> None:
        self.topic = f"po-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap_servers, self.topic, PARTITIONS)
        self.tmp = tmp
        location = table_location or str(tmp / "table")
        self.table: TablePath = parse_location(location, table_storage)
        self.errors: TablePath = parse_location(location + "_errors", table_storage)
        # short, not under tmp: the pipeline's Spark session puts its worker daemon's socket
        # in here, and a Unix socket's path has at most 107 bytes (under pytest's tmp_path it
        # had ~116: the crash runs started cold Python workers, unlike a user's local master)
        scratch = self.scratch = Path(tempfile.mkdtemp(prefix="hl-"))
        self.config = tmp / "pipeline.toml"
        self.config.write_text(event_pipeline_toml(
            bootstrap=broker.bootstrap_servers, topic=self.topic, table_path=location,
            operation=operation, index=index, master=master, readers=2, bucket_count=2,
            max_records=1000,
            min_interval="100ms", max_interval="1s",
            spark_conf={"spark.local.dir": str(scratch), **(spark_conf or {})},
            table_type=table_type, table_options=table_options, table_storage=table_storage,
        ))
        self.env = {"TMPDIR": str(scratch)}
        self.stream = EventStream(partitions=PARTITIONS, kind=kind,
                                  seed=random.randrange(1 << 30), tombstones=tombstones)
        self.feeder = WaveFeeder(broker.bootstrap_servers, self.topic, self.stream,
                                 lambda s: s.wave(wave, malformed=malformed), interval_s=0.5)
        self.runs: list[PipelineProcess] = []
        self.prefix: dict[int, int] | None = None

    def run(self, *, once: bool = False, pause_at: str | None = None) -> PipelineProcess:
        run = PipelineProcess(self.config, self.tmp, once=once, pause_at=pause_at,
                              extra_env=self.env)
        self.runs.append(run)
        return run.start()

    def check_after_crash(self, label: str) -> None:
        """With the producer paused: the table is a committed prefix, not behind the last one."""
        self.feeder.pause()
        try:
            self.prefix = assert_consistent_prefix(self.stream, self.table, self.prefix)
        except AssertionError as exc:
            raise AssertionError(f"after the kill {label}: {exc}") from None
        assert_errors_subset(self.stream, self.errors)
        self.feeder.start()

    def drain_and_check(self) -> None:
        """Stop producing, restart once more and drain: the table equals the whole model."""
        self.feeder.pause()
        run = self.run(once=True)
        code = run.wait(DRAIN_TIMEOUT_S)
        assert code == 0, f"draining run failed ({code}):\n{run.tail()}"
        run.cleanup()
        assert_table_equals_model(self.stream, self.table)
        assert_errors_subset(self.stream, self.errors, exact=True)
        assert_no_leftovers(self.table)
        assert_no_leftovers(self.errors)
        assert self.stream.totals.messages > 0

    def close(self) -> None:
        try:
            self.feeder.pause()
        finally:
            for run in self.runs:
                run.cleanup()
            shutil.rmtree(self.scratch, ignore_errors=True)
