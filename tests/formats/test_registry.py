"""Schema Registry lookups while the registry is unavailable: asked again with backoff for
``schema.registry.unavailable.timeout``, other errors at once (the real registry server's side of
this is in ``test_avro_decoder``)."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka.schema_registry.common._httpx_compat import httpx

from hoodline.errors import ConfigError, SchemaRegistryUnavailableError, is_retryable
from hoodline.formats.registry import (
    RegistrySettings,
    _asking,
    fetch_subject_schema,
    take_unavailable_timeout,
)


class _Answer(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.http_status_code = status


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _settings(timeout_s: float) -> RegistrySettings:
    return RegistrySettings((("url", "http://registry:8081"),), "t-value",
                            unavailable_timeout_s=timeout_s)


def _failing(*errors: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "schema"

    return calls, call


def test_an_unavailable_registry_is_asked_again_with_backoff() -> None:
    clock = _Clock()
    errors = (httpx.ConnectError("refused"), _Answer(503), _Answer(502), _Answer(429))
    calls, call = _failing(*errors)
    assert _asking(_settings(60), "schema id 7", call, clock, clock.sleep) == "schema"
    assert len(calls) == 5 and clock.slept == [1.0, 2.0, 4.0, 8.0]


def test_the_lookup_gives_up_after_the_timeout_naming_the_registry_and_the_option() -> None:
    clock = _Clock()
    calls, call = _failing(*[httpx.ReadTimeout("slow")] * 10)
    with pytest.raises(SchemaRegistryUnavailableError) as info:
        _asking(_settings(10), "schema id 7", call, clock, clock.sleep)
    assert clock.slept == [1.0, 2.0, 4.0, 3.0]  # the last wait ends at the timeout
    assert len(calls) == 5
    text = str(info.value)
    assert "http://registry:8081" in text and "schema id 7" in text
    assert "'schema.registry.unavailable.timeout' = 10s" in text and "ReadTimeout" in text
    assert not is_retryable(info.value)  # it was retried for the whole timeout already


def test_other_errors_are_not_asked_again() -> None:
    clock = _Clock()
    for error in (_Answer(401), _Answer(404), ValueError("bad schema")):
        calls, call = _failing(error)
        with pytest.raises(type(error)):
            _asking(_settings(60), "schema id 7", call, clock, clock.sleep)
        assert len(calls) == 1
    assert clock.slept == []


def test_the_timeout_option_is_taken_out_of_the_client_settings() -> None:
    client = {"url": "http://r:8081", "unavailable.timeout": "5.5", "timeout": "10"}
    assert take_unavailable_timeout(client) == 5.5
    assert client == {"url": "http://r:8081", "timeout": "10"}  # what the client is given
    assert take_unavailable_timeout({"url": "http://r:8081"}) == 60.0
    for bad in ("-1", "soon", "inf", "nan"):
        with pytest.raises(ConfigError, match=f"'schema.registry.unavailable.timeout' = '{bad}'"):
            take_unavailable_timeout({"unavailable.timeout": bad})


def test_a_registry_nobody_listens_on_is_unavailable() -> None:
    with socket.socket() as s:  # a port of 127.0.0.1 that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = RegistrySettings(((("url", f"http://127.0.0.1:{port}"),)), "t-value",
                                unavailable_timeout_s=0)
    with pytest.raises(SchemaRegistryUnavailableError, match="ConnectError"):
        fetch_subject_schema(settings)
