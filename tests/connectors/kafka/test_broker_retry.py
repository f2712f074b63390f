"""Metadata calls while the brokers are unreachable: backoff steps, one warning each, then a
KafkaBrokerUnavailableError naming the servers once scan.broker-unavailable.timeout passed."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from hoodline.connectors.kafka.admin import BrokerRetry
from hoodline.errors import KafkaBrokerUnavailableError


class FakeTime:
    """A clock that moves only when someone sleeps or an attempt waits for its timeout."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _unreachable() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))


def test_retries_with_backoff_then_fails_naming_the_servers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = FakeTime()
    timeouts: list[float] = []

    def call(timeout: float) -> None:
        timeouts.append(timeout)
        t.now += timeout  # no broker answers: the request waits its whole timeout
        raise _unreachable()

    retry = BrokerRetry("10.0.0.7:9092", 20.0, clock=t.clock, sleep=t.sleep)
    caplog.set_level(logging.WARNING)
    with pytest.raises(KafkaBrokerUnavailableError) as info:
        retry.run("listing topics", call, lambda: "Connect to ipv4#10.0.0.7:9092 failed")
    # attempts wait 1, 2, 4, 8 s, the last one what is left of the 20 s
    assert timeouts == [1.0, 2.0, 4.0, 8.0, 5.0]
    assert t.sleeps == []  # the attempts themselves were the backoff
    message = str(info.value)
    assert "10.0.0.7:9092" in message and "'properties.bootstrap.servers'" in message
    assert "listing topics failed 5 time(s) over 20.0s" in message
    assert "'scan.broker-unavailable.timeout' = 20s" in message
    assert "Connect to ipv4#10.0.0.7:9092 failed" in message
    assert "Check that the brokers run" in message
    assert info.value.retryable is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4  # one per backoff step, none for the final failure
    assert all("Kafka brokers 10.0.0.7:9092 unreachable: listing topics" in w for w in warnings)


def test_fast_failures_sleep_out_the_backoff_step_and_success_ends_the_retry() -> None:
    t = FakeTime()
    calls: list[float] = []

    def call(timeout: float) -> str:
        calls.append(t.now)
        if len(calls) < 3:
            raise _unreachable()  # e.g. DNS failure: fails at once
        return "metadata"

    retry = BrokerRetry("b:9092", 60.0, clock=t.clock, sleep=t.sleep)
    assert retry.run("listing topics", call) == "metadata"
    assert calls == [0.0, 1.0, 3.0]
    assert t.sleeps == [1.0, 2.0]


def test_other_errors_are_not_retried() -> None:
    t = FakeTime()
    auth = KafkaException(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication failed"))

    def call(timeout: float) -> None:
        raise auth

    retry = BrokerRetry("b:9092", 60.0, clock=t.clock, sleep=t.sleep)
    with pytest.raises(KafkaException) as info:
        retry.run("listing topics", call)
    assert info.value is auth and t.sleeps == []


def test_brokers_that_refuse_the_clients_authentication_are_not_retried() -> None:
    """The metadata call fails as 'transport' while the client reports that the brokers refused
    its SASL handshake: that was retried for the whole timeout (60 s) as "unreachable" (Kafka
    review)."""
    from hoodline.errors import KafkaSourceError, is_retryable

    t = FakeTime()
    attempts: list[float] = []

    def call(timeout: float) -> None:
        attempts.append(timeout)
        raise _unreachable()

    reported = ("sasl_plaintext://b:9092/bootstrap: SASL PLAIN mechanism handshake failed: "
                "Broker: Request not valid in current SASL state (_AUTHENTICATION)")
    retry = BrokerRetry("b:9092", 60.0, clock=t.clock, sleep=t.sleep)
    with pytest.raises(KafkaSourceError, match="refused the client") as info:
        retry.run("listing topics", call, lambda: reported)
    assert len(attempts) == 1 and t.sleeps == []
    assert "properties.sasl.mechanism" in str(info.value) and "SASL PLAIN" in str(info.value)
    assert not is_retryable(info.value)
