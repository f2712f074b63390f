"""Every confluent-kafka client hoodline creates logs through Python logging, not raw librdkafka
lines on stderr (hoodline issue 15): the source's consumer and the embedded broker's producer,
each against a closed port (connection refused, logged at ERROR). The metadata client is checked
in test_kafka_metadata_broker.py, the offset-commit consumer's configuration in the unit tests (a
synchronous commit against a closed port blocks for 45 s)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hoodline.broker import ExactEndProducer, free_port
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.reader import KafkaPartitionSplitReader, check_consumer_properties
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.source.base import SplitsAddition

pytestmark = pytest.mark.kafka


def _options(servers: str) -> dict[str, object]:
    return {
        "properties.bootstrap.servers": servers,
        "topic": "orders",
        "properties.group.id": "g",
        "scan.fetch.timeout": 0.2,
        "properties.reconnect.backoff.ms": 10,
    }


def _read(servers: str) -> None:
    reader = KafkaPartitionSplitReader(KafkaSourceConfig.from_options(_options(servers)))
    try:
        reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("orders", 0, 0)]))
        for _ in range(5):
            reader.fetch()  # consume() hands the queued log lines over
    finally:
        reader.close()


def _produce(servers: str) -> None:
    producer = ExactEndProducer(servers, **{"message.timeout.ms": 1500})
    producer.produce("orders", 0, b"v")
    producer.produce("orders", 0, b"w")
    producer.flush(timeout_s=3.0)  # the records expire undelivered after message.timeout.ms


@pytest.mark.parametrize("client", [_read, _produce], ids=["reader", "producer"])
def test_client_logs_go_to_python_logging(
    client: Callable[[str], None],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    servers = f"127.0.0.1:{free_port()}"
    client(servers)
    err = capfd.readouterr().err
    assert "%3|" not in err and "%4|" not in err and "%6|" not in err
    routed = [r.getMessage() for r in caplog.records if r.name == "hoodline.kafka.client"]
    assert any(f"Connect to ipv4#{servers} failed: Connection refused" in m for m in routed), routed


def test_the_start_check_of_consumer_properties_writes_nothing_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The check made at start (a consumer created and closed at once) connects to the brokers
    like any consumer; its refused connection was a raw librdkafka line on stderr, before the
    pipeline's own message about unreachable brokers."""
    options = _options(f"127.0.0.1:{free_port()}")
    for _ in range(20):
        check_consumer_properties(KafkaSourceConfig.from_options(options))
    err = capfd.readouterr().err
    assert "%3|" not in err and "%4|" not in err and "%6|" not in err, err
