"""Feed an :class:`~hoodline.demo.events.EventStream` into a Kafka topic (the demo; the crash
tests' background feeder, ``tests/helpers/wave_feeder.py``, uses :func:`produce`).

Waves are produced with :class:`~hoodline.broker.ExactEndProducer`, so the bundled broker's end
offsets are exact after every wave (a Tansu quirk, see ``hoodline.broker``) and a pipeline that
drains "what is there" sees every record of the waves produced so far.
"""

from __future__ import annotations

from collections.abc import Sequence

from hoodline.broker import ExactEndProducer
from hoodline.connectors.kafka.client_log import with_client_logging
from hoodline.demo.events import Message
from hoodline.errors import EmbeddedBrokerError


def create_topic(bootstrap_servers: str, topic: str, partitions: int,
                 timeout_s: float = 15.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(
        with_client_logging({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    )
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    try:
        for future in futures.values():
            try:
                future.result(timeout=timeout_s)
            except Exception as exc:
                raise EmbeddedBrokerError(
                    f"could not create topic {topic!r} on {bootstrap_servers}: {exc}"
                ) from exc
    finally:
        admin.poll(0)  # hand its queued log lines to Python logging


def produce(producer: ExactEndProducer, topic: str, messages: Sequence[Message]) -> None:
    """Send ``messages`` and flush (end offsets exact afterwards)."""
    for m in messages:
        producer.produce(topic, m.partition, m.value, m.key)
    producer.flush()
