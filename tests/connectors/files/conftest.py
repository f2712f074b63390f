"""Fixtures for the file-source tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "landing"
    d.mkdir()
    return d
