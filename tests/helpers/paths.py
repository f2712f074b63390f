"""Where the checkout is: subprocesses the tests start import hoodline from ``SRC``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
