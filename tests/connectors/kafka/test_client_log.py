"""librdkafka log lines through Python logging: level kept, thread prefix dropped, rate-limited."""

from __future__ import annotations

import logging

import pytest

from hoodline.connectors.kafka.client_log import ClientLog, client_log, with_client_logging

FAIL = (
    "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
    "Connection refused (after {ms}ms in state CONNECT)"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "test.kafka.client"]


def test_repeats_within_the_window_are_counted_not_shown(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = ClientLog(logging.getLogger("test.kafka.client"), window_s=10.0, clock=clock)
    caplog.set_level(logging.DEBUG, logger="test.kafka.client")
    # confluent-kafka's call shape: log(level, "%s [%s] %s", facility, client name, message)
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", FAIL.format(ms=0))
    for i in range(5):
        clock.now += 1.0
        log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", FAIL.format(ms=i))
    assert len(_records(caplog)) == 1
    first = _records(caplog)[0]
    # librdkafka's level 3 for a failed connection, which it retries by itself: a warning
    # (metrics review: alerts on errors fired on an outage the pipeline survived)
    assert first.levelno == logging.WARNING
    assert first.getMessage() == (
        "Kafka client rdkafka#producer-1 FAIL: 127.0.0.1:1/bootstrap: Connect to "
        "ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
    )
    clock.now += 10.0
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", FAIL.format(ms=1))
    assert len(_records(caplog)) == 2
    assert "(5 repeat(s) in the last 10s not shown)" in _records(caplog)[1].getMessage()


def test_levels_are_kept_and_different_messages_are_not_merged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ClientLog(logging.getLogger("test.kafka.client"), window_s=10.0, clock=Clock())
    caplog.set_level(logging.DEBUG, logger="test.kafka.client")
    log.log(logging.INFO, "%s [%s] %s", "FAIL", "rdkafka#consumer-2", "Disconnected")
    log.log(logging.WARNING, "%s [%s] %s", "FAIL", "rdkafka#consumer-2", "Disconnected")
    log.log(logging.WARNING, "%s [%s] %s", "REQTMOUT", "rdkafka#consumer-2", "Timed out")
    log.log(logging.ERROR, "%s [%s] %s", "SSL", "rdkafka#consumer-2", "Bad certificate")
    assert [(r.levelno, r.getMessage().split(": ", 1)[1]) for r in _records(caplog)] == [
        (logging.INFO, "Disconnected"),
        (logging.WARNING, "Disconnected"),
        (logging.WARNING, "Timed out"),
        (logging.ERROR, "Bad certificate"),
    ]


def test_every_hoodline_client_configuration_gets_the_shared_logger() -> None:
    props = with_client_logging({"bootstrap.servers": "127.0.0.1:1"})
    assert props["logger"] is client_log()
    assert props["bootstrap.servers"] == "127.0.0.1:1"


def test_a_client_is_named_by_its_role_unless_the_user_names_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The metadata client is an admin client, which librdkafka names "<client.id>#producer-N":
    hoodline's clients get a client.id of their role, and log lines name them by it."""
    assert with_client_logging({}, "metadata")["client.id"] == "hoodline-metadata"
    assert with_client_logging({"client.id": "mine"}, "metadata")["client.id"] == "mine"
    log = ClientLog(logging.getLogger("test.kafka.client"), clock=Clock())
    caplog.set_level(logging.DEBUG, logger="test.kafka.client")
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "hoodline-metadata#producer-1", "refused")
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "mine#consumer-3", "refused again")
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-2", "as librdkafka says")
    assert [r.getMessage() for r in _records(caplog)] == [
        "Kafka client hoodline-metadata-1 FAIL: refused",
        "Kafka client mine-3 FAIL: refused again",
        "Kafka client rdkafka#producer-2 FAIL: as librdkafka says",
    ]


def test_the_offset_commit_consumer_logs_through_python_logging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import confluent_kafka

    from hoodline.connectors.kafka.source import KafkaSource
    from hoodline.connectors.kafka.split import KafkaPartitionSplit

    created: list[dict[str, object]] = []

    class RecordingConsumer:
        def __init__(self, props: dict[str, object]) -> None:
            created.append(props)

        def commit(self, offsets: object, asynchronous: bool) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(confluent_kafka, "Consumer", RecordingConsumer)
    source = KafkaSource.from_options({
        "properties.bootstrap.servers": "127.0.0.1:1", "topic": "t", "properties.group.id": "g",
    })
    assert source.commit_offsets([KafkaPartitionSplit("t", 0, 5)]) is True
    assert [props["logger"] for props in created] == [client_log()]


def test_librdkafka_suppression_counts_do_not_make_a_new_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ClientLog(logging.getLogger("test.kafka.client"), window_s=10.0, clock=Clock())
    caplog.set_level(logging.DEBUG, logger="test.kafka.client")
    base = "127.0.0.1:1/bootstrap: Connect failed: Connection refused (after 0ms in state CONNECT"
    for suffix in (")", ", 1 identical error(s) suppressed)", ", 7 identical error(s) suppressed)"):
        log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", base + suffix)
    assert len(_records(caplog)) == 1
