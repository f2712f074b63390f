"""Fixtures: one embedded Tansu broker per test session (stopped by PID at the end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hoodline.broker import EmbeddedBroker
from tests.connectors.kafka.helpers import KafkaTestCluster


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def kafka(kafka_broker: EmbeddedBroker) -> Iterator[KafkaTestCluster]:
    cluster = KafkaTestCluster(kafka_broker.bootstrap_servers)
    yield cluster
    cluster.close()
