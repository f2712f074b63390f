"""Schema Registry lookups while the registry is unavailable: asked again with backoff for
``schema.registry.unavailable.timeout``, other errors at once (the real registry server's side of
this is in ``test_avro_decoder``)."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka.schema_registry.common._httpx_compat import httpx

from hoodline.errors import (
    ConfigError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    is_retryable,
)
from hoodline.formats.registry import (
    UNKNOWN,
    RegistrySettings,
    WriterSchema,
    _asking,
    fetch_subject_schema,
    latest_schema_id,
    take_unavailable_timeout,
    writer_schema,
)
from tests.helpers.schema_registry import SchemaRegistry


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


def _avro(name: str) -> dict[str, object]:
    return {"type": "record", "name": name, "fields": [{"name": "id", "type": "long"}]}


def test_an_unknown_schema_id_is_asked_again_once_registered(
    schema_registry: SchemaRegistry,
) -> None:
    """A record with an id the registry does not know yet went on being an unknown schema for
    the life of the process, after the id was registered."""
    settings = RegistrySettings((("url", schema_registry.url),), "t-value")
    next_id = schema_registry.state.next_id + 1000
    schema_registry.state.next_id = next_id
    assert writer_schema(settings, next_id) == UNKNOWN
    assert schema_registry.register(f"late-{next_id}-value", _avro("Late")) == next_id
    found = writer_schema(settings, next_id)
    assert isinstance(found, WriterSchema) and found.schema_id == next_id


def test_a_404_that_is_not_the_registrys_answer_is_a_failure_not_an_unknown_id(
    schema_registry: SchemaRegistry,
) -> None:
    """A wrong URL path (a proxy prefix left out) answers 404 to everything: every record was
    an 'unknown schema' in the error table and the run ended well."""
    sid = schema_registry.register("known-value", _avro("Known"))
    settings = RegistrySettings((("url", f"{schema_registry.url}/wrong/prefix"),), "t-value")
    with pytest.raises(SchemaRegistryError, match=rf"failed to return schema id {sid}: "):
        writer_schema(settings, sid)


def test_a_password_in_the_registry_url_is_masked_in_messages() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = RegistrySettings(((("url", f"http://alice:UrlPw0rd77@127.0.0.1:{port}"),)),
                                "t-value", unavailable_timeout_s=0)
    with pytest.raises(SchemaRegistryUnavailableError) as info:
        fetch_subject_schema(settings)
    assert "UrlPw0rd77" not in str(info.value) and "http://alice:***@127.0.0.1" in str(info.value)
    assert "UrlPw0rd77" not in repr(settings)


def test_a_registry_client_number_that_is_not_one_is_named() -> None:
    settings = RegistrySettings((("url", "http://127.0.0.1:1"), ("timeout", "abc")), "t-value")
    with pytest.raises(ConfigError, match=r"option 'schema.registry.timeout' has invalid value "
                       r"'abc': must be an integer"):
        fetch_subject_schema(settings)


def test_the_latest_schema_id_is_asked_now(schema_registry: SchemaRegistry) -> None:
    settings = RegistrySettings((("url", schema_registry.url),), "moving-value")
    first = schema_registry.register("moving-value", _avro("MovingA"))
    assert latest_schema_id(settings) == first
    second = schema_registry.register("moving-value", _avro("MovingB"))
    assert latest_schema_id(settings) == second  # not the client's cached answer


def test_a_latest_version_the_table_cannot_take_says_how_to_go_on(
    schema_registry: SchemaRegistry,
) -> None:
    """While running, records of such a version go to the error table; a start stopped at it
    with nothing to say about pinning the version before."""
    subject = "unmappable-value"
    schema_registry.register(subject, _avro("Mappable"))
    schema_registry.register(subject, {"type": "record", "name": "Unmappable", "fields": [
        {"name": "id", "type": "long"}, {"name": "next", "type": ["null", "Unmappable"]}]})
    settings = RegistrySettings((("url", schema_registry.url),), subject)
    with pytest.raises(ConfigError, match=r"cannot be the table's schema: .*; to go on, pin an "
                       r"earlier version the table can take \(source.schema-version, e.g. 1\) "
                       r"or declare the columns in \[schema\]"):
        fetch_subject_schema(settings)
    pinned = RegistrySettings((("url", schema_registry.url),), subject, version=1)
    assert fetch_subject_schema(pinned).version == 1


def test_requests_to_the_registry_time_out_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """confluent-kafka's client waits for an answer forever: a registry that accepted
    connections and never answered hung a run without a word (CDC review). (The default, 30 s,
    is made 1 s here.)"""
    import threading

    from hoodline.formats import registry

    monkeypatch.setattr(registry, "DEFAULT_REQUEST_TIMEOUT_S", 1)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        settings = RegistrySettings((("url", f"http://127.0.0.1:{port}"),), "t-value",
                                    unavailable_timeout_s=0)
        outcome: list[BaseException] = []

        def fetch() -> None:
            try:
                fetch_subject_schema(settings)
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=fetch, daemon=True)
        worker.start()
        worker.join(15)
        assert not worker.is_alive(), "the request to a silent registry never timed out"
        assert isinstance(outcome[0], SchemaRegistryUnavailableError)
        assert "Timeout" in str(outcome[0])
    assert registry.DEFAULT_REQUEST_TIMEOUT_S == 1 and registry._client(
        RegistrySettings((("url", "http://127.0.0.1:1"), ("timeout", "5")), "t-value")
    )._rest_client.session.timeout.read == 5  # a timeout set stays the user's
