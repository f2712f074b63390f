"""Smoke versions of the benchmarks in ``bench/`` (tiny scale; consistency, never timings)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
