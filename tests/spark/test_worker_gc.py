"""A Python worker freezes what it loaded out of the garbage collector, once."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import gc
from hoodline.spark.worker_gc import freeze_loaded
cycle = []
cycle.append(cycle)
del cycle  # garbage: collected before the freeze, not frozen
assert gc.get_freeze_count() == 0
freeze_loaded()
first = gc.get_freeze_count()
kept = [[i] for i in range(1000)]  # loaded later: not frozen by a second call
freeze_loaded()
print(first, gc.get_freeze_count(), gc.collect())
"""


def test_the_first_call_freezes_what_the_process_tracks_and_later_calls_do_nothing() -> None:
    # a process of its own: freezing is for the rest of a process's life
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         check=True).stdout.split()
    first, second, collected = map(int, out)
    assert first > 1000  # the modules this process imported
    assert second == first
    assert collected == 0
