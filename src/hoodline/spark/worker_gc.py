"""Python workers keep what they loaded out of the garbage collector's full collections.

Fact (pyspark 4.3.0, ``pyspark/daemon.py``): a reused Python worker calls ``gc.collect()`` after
every task -- a full collection over every object the process tracks. With pyarrow, numpy,
pandas, pyspark and hoodline's task code loaded that was ~90k objects (~60k now that the workers
load no pandas), 41 ms per task on the 2-core machine of BENCHMARKS.md: in a trivial two-stage
round job (two reader and two writer tasks) each worker spent ~110 ms CPU, and every next task of
a worker waited for it.

``gc.freeze()`` moves every object tracked so far into a permanent generation that collections
skip (with it, ~5 ms per worker and job). Frozen objects are still freed when their reference
count drops to zero; only cycles among them are never collected, which is why a process freezes
once, when it has loaded its code, and never again. hoodline's worker daemon (``local[N]``)
freezes after its preloads, before forking, as the ``gc`` module's documentation advises for
pre-forking servers (child collections then also leave the parent's memory pages unwritten);
on other masters a worker freezes at the start of its first hoodline task.
"""

from __future__ import annotations

import gc

#: whether this process froze (inherited by forked workers; ``gc.get_freeze_count()`` would
#: walk every frozen object, ~10 ms per task)
_frozen = False


def freeze_loaded() -> None:
    """Freeze the objects this process tracks (after collecting its garbage): the first call
    of a process does, later calls (and calls in workers forked from a frozen parent) do
    nothing."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
