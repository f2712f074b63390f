"""Fixtures of the Kafka connector tests: a client helper on the session's broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hoodline.broker import EmbeddedBroker
from tests.connectors.kafka.helpers import KafkaTestCluster


@pytest.fixture
def kafka(broker: EmbeddedBroker) -> Iterator[KafkaTestCluster]:
    cluster = KafkaTestCluster(broker.bootstrap_servers)
    yield cluster
    cluster.close()
