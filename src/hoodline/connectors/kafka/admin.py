"""The few broker metadata calls the enumerator needs, behind a small interface.

:class:`KafkaMetadataClient` is what the enumerator and the offsets initializers use, so their
logic runs against an in-memory fake in unit tests and against :class:`ConfluentMetadataClient`
(confluent-kafka ``AdminClient`` + a group consumer for committed offsets) for real.

While the brokers are unreachable, every call of :class:`ConfluentMetadataClient` is retried with
backoff (:class:`BrokerRetry`: one warning per backoff step naming ``bootstrap.servers``) and fails
with :class:`~hoodline.errors.KafkaBrokerUnavailableError` once ``scan.broker-unavailable.timeout``
has passed: a first discovery against a wrong address fails, it never looks like an empty topic.
The metadata requests never create topics (admin ``list_topics`` asks for all topics; only a
producer's metadata request may auto-create one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from hoodline.connectors.kafka.client_log import with_client_logging
from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import KafkaBrokerUnavailableError, KafkaSourceError

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: librdkafka error codes that mean "no broker answered" (retried until the timeout).
UNREACHABLE_CODES = frozenset(
    {"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE", "_MSG_TIMED_OUT"}
)


#: librdkafka error codes (as :func:`describe_kafka_error` shows them) that mean the brokers
#: answered and refused this client's authentication or TLS handshake
REFUSED_CODES = ("(_AUTHENTICATION)", "(SASL_AUTHENTICATION_FAILED)", "(_SSL)")


def is_unreachable(exc: BaseException) -> bool:
    """True if ``exc`` is a confluent-kafka error saying that no broker answered."""
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    return callable(name) and name() in UNREACHABLE_CODES


def describe_kafka_error(err: object) -> str:
    """``Connection refused ... (_TRANSPORT)`` for a confluent-kafka ``KafkaError`` (or the
    ``KafkaException`` holding one); ``str(err)`` for anything else."""
    inner = err.args[0] if isinstance(err, Exception) and err.args else err
    text, name = getattr(inner, "str", None), getattr(inner, "name", None)
    if callable(text) and callable(name):
        return f"{text()} ({name()})"
    return str(err)


@dataclass
class BrokerRetry:
    """Retries a broker call while the brokers are unreachable, then gives up (see module).

    Attempt *n* waits at most ``first_backoff_s * 2**(n-1)`` seconds (up to ``max_backoff_s``,
    at least one second, never beyond ``request_timeout_s``) for an answer, and the next attempt
    starts one backoff step after the previous one started. After ``budget_s`` seconds
    (``scan.broker-unavailable.timeout``) of failed attempts the call fails with
    :class:`KafkaBrokerUnavailableError`. Errors other than "unreachable" are not retried.
    """

    servers: str
    budget_s: float
    request_timeout_s: float = 30.0
    first_backoff_s: float = 1.0
    max_backoff_s: float = 16.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def run(
        self,
        what: str,
        call: Callable[[float], _T],
        after_failure: Callable[[], str] = lambda: "",
    ) -> _T:
        """``call(request_timeout_s)`` until it succeeds; ``after_failure()`` returns what the
        client reported meanwhile (e.g. its last ``error_cb`` text), shown in messages."""
        started = self.clock()
        backoff = self.first_backoff_s
        attempts = 0
        while True:
            attempts += 1
            attempt_start = self.clock()
            remaining = self.budget_s - (attempt_start - started)
            timeout = min(self.request_timeout_s, max(1.0, min(backoff, remaining)))
            try:
                return call(timeout)
            except Exception as exc:
                if not is_unreachable(exc):
                    raise
                reported = after_failure()
                if any(code in reported for code in REFUSED_CODES):
                    # the brokers answer but refuse this client: retrying cannot help (a SASL
                    # mechanism they do not take was retried for the whole timeout, 60 s,
                    # labelled "unreachable": Kafka review)
                    raise KafkaSourceError(
                        f"Kafka brokers {self.servers} refused the client: {what} failed: "
                        f"{reported}. Check that the security settings match the brokers' "
                        "listener: properties.security.protocol, properties.sasl.mechanism, "
                        "properties.sasl.username / sasl.password, properties.ssl.*"
                    ) from exc
                now = self.clock()
                elapsed = now - started
                detail = describe_kafka_error(exc) + (
                    f"; the client reported: {reported}" if reported else ""
                )
                if elapsed >= self.budget_s:
                    raise KafkaBrokerUnavailableError(
                        f"Kafka brokers {self.servers} (option 'properties.bootstrap.servers') "
                        f"are unreachable: {what} failed {attempts} time(s) over {elapsed:.1f}s, "
                        f"giving up after 'scan.broker-unavailable.timeout' = "
                        f"{self.budget_s:g}s. Last error: {detail}. Check that the brokers run and "
                        f"are reachable from this machine at exactly these host:port addresses "
                        f"(firewall, DNS, the brokers' advertised listeners) and that the "
                        f"security settings (properties.security.protocol, SASL/SSL) match them."
                    ) from exc
                wait = min(max(0.0, attempt_start + backoff - now), self.budget_s - elapsed)
                log.warning(
                    "Kafka brokers %s unreachable: %s failed (attempt %d, %.1fs so far): %s; "
                    "retrying %s, giving up after 'scan.broker-unavailable.timeout' = %gs",
                    self.servers,
                    what,
                    attempts,
                    elapsed,
                    detail,
                    f"in {wait:.1f}s" if wait >= 0.05 else "now",
                    self.budget_s,
                )
                if wait > 0:
                    self.sleep(wait)
                backoff = min(backoff * 2, self.max_backoff_s)


class KafkaMetadataClient(Protocol):
    """Broker metadata the enumerator needs (all calls may raise :class:`KafkaSourceError`)."""

    def topic_partition_counts(self) -> dict[str, int]:
        """Every non-internal topic and its number of partitions."""
        ...

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each partition."""
        ...

    def topic_ids(self, topics: Collection[str]) -> dict[str, str]:
        """Each topic's id (a topic deleted and created again has another one), for the topics
        the brokers know and give an id (best effort: {} where they do not)."""
        ...

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """End offset (offset of the next record to be written) of each partition."""
        ...

    def stable_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Last stable offset of each partition: where a ``read_committed`` consumer stops
        (the first offset of a transaction still open; the end offset without one)."""
        ...

    def offsets_for_timestamp(
        self, tps: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """First offset with a timestamp >= ``timestamp_ms`` (``None``: no such record yet)."""
        ...

    def committed_offsets(
        self, group_id: str, tps: Collection[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """Offsets committed by consumer group ``group_id`` (``None``: nothing committed)."""
        ...

    def close(self) -> None: ...


class ConfluentMetadataClient:
    """:class:`KafkaMetadataClient` on confluent-kafka (librdkafka).

    ``timeout_s`` bounds one request; ``broker_unavailable_timeout_s`` is how long calls keep
    retrying while the brokers are unreachable (see :class:`BrokerRetry`).
    """

    def __init__(
        self,
        client_properties: Mapping[str, Any],
        timeout_s: float = 30.0,
        broker_unavailable_timeout_s: float = 60.0,
    ) -> None:
        from confluent_kafka.admin import AdminClient

        self._props = dict(client_properties)
        self._timeout = timeout_s
        self._errors: list[str] = []
        admin_props = {k: v for k, v in self._props.items() if not _consumer_only(k)}
        admin_props["error_cb"] = self._on_error
        self._admin_props = with_client_logging(admin_props, "metadata")
        self._admin_client: Any = AdminClient(self._admin_props)
        self._consumers: dict[str, Any] = {}
        self._retry = BrokerRetry(
            str(self._props.get("bootstrap.servers", "?")),
            broker_unavailable_timeout_s,
            request_timeout_s=timeout_s,
        )

    @property
    def _admin(self) -> Any:
        """The admin client, created again if :meth:`close` released it."""
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient(self._admin_props)
        return self._admin_client

    def _on_error(self, err: Any) -> None:
        self._errors.append(describe_kafka_error(err))
        del self._errors[:-3]
        log.debug("Kafka admin client error: %s", err)

    def _admin_reported(self) -> str:
        """Serve the admin client's queued error_cb calls and log lines; its last error."""
        if self._admin_client is not None:
            self._admin_client.poll(0)
        return self._errors[-1] if self._errors else ""

    def _fail(self, what: str, exc: BaseException) -> KafkaSourceError:
        servers = self._props.get("bootstrap.servers", "?")
        reported = self._admin_reported()
        recent = f"; the client reported: {reported}" if reported else ""
        return KafkaSourceError(
            f"{what} failed against bootstrap.servers={servers}: "
            f"{describe_kafka_error(exc)}{recent}. "
            f"Check that the brokers are reachable and the client properties are right."
        )

    def topic_partition_counts(self) -> dict[str, int]:
        try:
            md = self._retry.run(
                "listing topics",
                lambda timeout: self._admin.list_topics(timeout=timeout),
                self._admin_reported,
            )
        except KafkaBrokerUnavailableError:
            raise
        except Exception as exc:
            raise self._fail("listing topics", exc) from exc
        self._admin_reported()
        out: dict[str, int] = {}
        for name, topic in md.topics.items():
            if name.startswith("__") or topic.error is not None:
                continue
            out[name] = len(topic.partitions)
        return out

    def _list_offsets(
        self, tps: Iterable[TopicPartition], spec: Any, what: str, committed: bool = False
    ) -> dict[TopicPartition, int]:
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as CTP

        request = {CTP(tp.topic, tp.partition): spec for tp in tps}
        if not request:
            return {}
        isolation = (IsolationLevel.READ_COMMITTED if committed
                     else IsolationLevel.READ_UNCOMMITTED)

        def call(timeout: float) -> dict[TopicPartition, int]:
            from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException

            futures = self._admin.list_offsets(request, isolation_level=isolation,
                                               request_timeout=timeout)
            found = {
                TopicPartition(k.topic, k.partition): int(f.result().offset)
                for k, f in futures.items()
            }
            unanswered = sorted(str(tp) for tp, off in found.items() if off == OFFSET_INVALID)
            if unanswered:
                # librdkafka's answer to a request that timed out: no offset, not an error (a
                # broker that stalled for a moment gave "end offsets" of -1001, read as the
                # topic deleted and re-created)
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT,
                    f"no {what} offset within {timeout:g}s for {', '.join(unanswered)}"))
            return found

        try:
            return self._retry.run(f"listing {what} offsets", call, self._admin_reported)
        except KafkaBrokerUnavailableError:
            raise
        except Exception as exc:
            raise self._fail(f"listing {what} offsets", exc) from exc

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, _offset_spec().earliest(), "earliest")

    def topic_ids(self, topics: Collection[str]) -> dict[str, str]:
        from confluent_kafka import TopicCollection

        if not topics:
            return {}
        try:
            futures = self._admin.describe_topics(TopicCollection(sorted(topics)),
                                                  request_timeout=self._timeout)
        except Exception as exc:  # an older broker: no ids to compare
            log.debug("describing topics %s failed: %s", sorted(topics), exc)
            return {}
        out: dict[str, str] = {}
        for name, future in futures.items():
            try:
                topic_id = str(future.result().topic_id)
            except Exception as exc:
                log.debug("describing topic %r failed: %s", name, exc)
                continue
            if topic_id.strip("A=") and topic_id != "None":  # not the all-zero id
                out[name] = topic_id
        return out

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, _offset_spec().latest(), "latest")

    def stable_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, _offset_spec().latest(), "last stable", committed=True)

    def offsets_for_timestamp(
        self, tps: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        spec = _offset_spec().for_timestamp(timestamp_ms)
        found = self._list_offsets(tps, spec, "timestamp")
        return {tp: (off if off >= 0 else None) for tp, off in found.items()}

    def committed_offsets(
        self, group_id: str, tps: Collection[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CTP

        if not tps:
            return {}
        consumer = self._consumers.get(group_id)
        if consumer is None:
            props = dict(self._props)
            props.update({"group.id": group_id, "enable.auto.commit": False})
            consumer = Consumer(with_client_logging(props, "group-offsets"))
            self._consumers[group_id] = consumer
        what = f"reading committed offsets of group {group_id!r}"
        request = [CTP(tp.topic, tp.partition) for tp in tps]
        try:
            result = self._retry.run(
                what, lambda timeout: consumer.committed(request, timeout=timeout)
            )
        except KafkaBrokerUnavailableError:
            raise
        except Exception as exc:
            raise self._fail(what, exc) from exc
        return {
            TopicPartition(r.topic, r.partition): (int(r.offset) if r.offset >= 0 else None)
            for r in result
        }

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
        # AdminClient has no close(): dropping the last reference destroys the librdkafka handle,
        # so no connection outlives the source (and no reconnect noise after a broker stops)
        self._admin_client = None


def _offset_spec() -> Any:
    import confluent_kafka.admin as ck_admin

    return getattr(ck_admin, "OffsetSpec")  # noqa: B009 - the stubs do not export it


_CONSUMER_ONLY_PREFIXES = (
    "group.",
    "enable.auto",
    "auto.",
    "session.timeout",
    "fetch.",
    "max.partition.fetch",  # librdkafka's alias of fetch.message.max.bytes (wide-topics review)
    "max.poll",
    "isolation.level",
    "queued.",
    "heartbeat.",
    "partition.assignment",
    "enable.partition.eof",
    "check.crcs",
)


def _consumer_only(key: str) -> bool:
    return key.startswith(_CONSUMER_ONLY_PREFIXES)
