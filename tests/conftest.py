"""Fixtures of the pipeline-core integration tests: one embedded broker per session, one Spark
session per module (both stopped by the fixtures)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session


@pytest.fixture(scope="session")
def pc_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(scope="module")
def pc_spark() -> Iterator[HoodlineSpark]:
    hs = start_session(SparkSettings(master="local[2]", app_name="hoodline-test-pipeline-core"))
    try:
        yield hs
    finally:
        hs.stop()
