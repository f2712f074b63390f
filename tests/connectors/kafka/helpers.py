"""Test-side Kafka helpers: explicit topic creation and the "hold-back" producer.

Tansu reports the end offset (high watermark) of a partition as the base offset of its last stored
record batch + 1. Producing all but the last record of each partition, flushing, then producing
each last record alone makes that batch a single record, so end offsets are exact. (Real Kafka
needs none of this; it is a test-harness workaround, not product logic.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from confluent_kafka.admin import AdminClient, NewTopic

from hoodline.broker import ExactEndProducer

#: librdkafka logs of test clients (e.g. reconnect attempts after the broker stopped) go here
_CLIENT_LOG = logging.getLogger("tests.kafka.client")


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class KafkaTestCluster:
    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": _CLIENT_LOG})

    def create_topic(self, name: str, partitions: int) -> str:
        futures = self.admin.create_topics([NewTopic(name, partitions, 1)])
        for f in futures.values():
            f.result(timeout=10)
        return name

    def produce(
        self,
        topic: str,
        records_per_partition: Mapping[int, int],
        start: Mapping[int, int] | None = None,
        headers: bool = False,
    ) -> None:
        """Produce values ``b"<topic>/<partition>/<i>"`` with exact end offsets (hold-back)."""
        start = start or {}
        hdrs = [("src", b"test")] if headers else None
        with ExactEndProducer(self.bootstrap_servers, logger=_CLIENT_LOG) as producer:
            for partition, n in records_per_partition.items():
                s = start.get(partition, 0)
                for i in range(s, s + n):
                    producer.produce(
                        topic, partition, record_value(topic, partition, i), str(i).encode(), hdrs
                    )

    def close(self) -> None:
        pass


def record_value(topic: str, partition: int, i: int) -> bytes:
    return f"{topic}/{partition}/{i}".encode()
