"""bench.common's peak-RSS sampler: it sees descendants' memory without scanning /proc at every
sample (the scans cost the measured process CPU and GIL time)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from bench import common

_HOLD_MIB = 200
_CHILD = (
    "import sys, time\n"
    f"block = bytearray({_HOLD_MIB} * 2**20)\n"
    "for i in range(0, len(block), 4096):\n"
    "    block[i] = 1\n"  # touch every page: resident
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


def test_peak_rss_counts_a_descendant_started_after_sampling_began() -> None:
    with common.PeakRss(children=True, rescan=0.1) as mem:
        child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
            time.sleep(0.5)  # several rescans and samples
        finally:
            child.kill()
            child.wait()
    assert mem.peak - mem.start_rss >= (_HOLD_MIB - 20) * 2**20


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
