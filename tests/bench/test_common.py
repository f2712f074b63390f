"""bench.common's peak-RSS sampler: it sees descendants' memory without scanning /proc at every
sample (the scans cost the measured process CPU and GIL time)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench import common
from tests.helpers.paths import REPO

_HOLD_MIB = 200
_CHILD = (
    "import sys, time\n"
    f"block = bytearray({_HOLD_MIB} * 2**20)\n"
    "for i in range(0, len(block), 4096):\n"
    "    block[i] = 1\n"  # touch every page: resident
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


#: run in a process of its own: the test process's other descendants (a shared Spark session's
#: JVM and workers, a broker) change their RSS meanwhile and would blur the child's share
_MEASURE = (
    "import subprocess, sys, time\n"
    "from bench import common\n"
    "with common.PeakRss(children=True, rescan=0.1) as mem:\n"
    "    child = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE)\n"
    "    try:\n"
    "        assert child.stdout.readline().strip() == b'ready'\n"
    "        time.sleep(0.5)  # several rescans and samples\n"
    "    finally:\n"
    "        child.kill()\n"
    "        child.wait()\n"
    "print(mem.start_rss, mem.peak)\n"
)


def test_peak_rss_counts_a_descendant_started_after_sampling_began() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, _CHILD], capture_output=True, text=True, check=True,
        cwd=str(REPO), timeout=120,
    ).stdout.split()
    start_rss, peak = int(out[0]), int(out[1])
    assert peak - start_rss >= (_HOLD_MIB - 20) * 2**20


def test_peak_rss_scans_the_process_tree_only_every_rescan_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans = 0
    real_children = psutil.Process.children

    def counting(self: psutil.Process, recursive: bool = False) -> list[psutil.Process]:
        nonlocal scans
        scans += 1
        return real_children(self, recursive=recursive)

    monkeypatch.setattr(psutil.Process, "children", counting)
    with common.PeakRss(interval=0.01, children=True, rescan=0.5) as mem:
        time.sleep(0.6)
    # ~60 samples; the tree was scanned at the start, once after 0.5 s and at the end
    assert mem.peak > 0
    assert scans <= 4


@pytest.mark.parametrize(("system", "teardown"), [("delta", False), ("hoodline-bucket", True)])
def test_a_child_of_an_abrupt_exit_peer_skips_the_interpreters_teardown(
    system: str, teardown: bool
) -> None:
    code = (
        "import atexit, sys\n"
        "from bench import common\n"
        "atexit.register(lambda: print('teardown', flush=True))\n"
        "common.emit_result({'s': 1.0})\n"
        f"sys.exit(common.end_child({system!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=common.child_env(),
                          cwd=common.REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(common.RESULT_PREFIX)  # the result is out before the exit
    assert ("teardown" in proc.stdout) is teardown


def test_publish_prints_the_report_and_writes_the_raw_one(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rep.json"
    common.publish("Title", "the report", {"n": 3, "path": tmp_path}, out, record=False)
    assert capsys.readouterr().out == "the report\n"
    assert json.loads(out.read_text()) == {"n": 3, "path": str(tmp_path)}


def test_child_env_byte_compiles_the_package_first(tmp_path, monkeypatch: pytest.MonkeyPatch
                                                   ) -> None:
    """The measured children import hoodline from bytecode, as from an installed package, also
    where PYTHONDONTWRITEBYTECODE keeps Python from writing it."""
    module = tmp_path / "src" / "hoodline" / "table" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text("X = 1\n")
    monkeypatch.setattr(common, "REPO", tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    common.child_env()
    assert Path(importlib.util.cache_from_source(str(module))).is_file()


def test_steal_text_shows_every_run_or_nothing_when_one_is_unknown() -> None:
    assert common.steal_text([0.04, 1.26]) == "0.0 / 1.3"
    assert common.steal_text([0.5, None]) == "-"
    assert common.steal_text([]) == "-"


def test_steal_seconds_reads_the_hypervisors_share_from_proc_stat() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    stat = (
        "cpu  3790508 0 683295 2822315 26333 0 19236 69394 0 0\n"
        "cpu0 1733596 0 321456 1600153 6759 0 7611 34751 0 0\n"
    )
    assert common.steal_seconds(stat) == pytest.approx(69394 / ticks)
    # kernels older than 2.6.11 have no steal field; no cpu line at all: unknown, not zero
    assert common.steal_seconds("cpu  1 2 3 4 5 6 7\n") is None
    assert common.steal_seconds("intr 1 2 3\n") is None
    # this machine's own counter: a number that never goes down
    first = common.steal_seconds()
    assert first is not None and first >= 0
    second = common.steal_seconds()
    assert second is not None and second >= first


def test_run_child_reports_the_steal_during_the_child(tmp_path, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    readings = iter([10.0, 12.5])
    monkeypatch.setattr(common, "steal_seconds", lambda: next(readings))
    child = tmp_path / "steal_child.py"
    child.write_text(f"print({common.RESULT_PREFIX!r} + '{{\"ok\": 1}}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    res = common.run_child("steal_child", [])
    assert res["ok"] == 1 and res["steal_s"] == pytest.approx(2.5)
