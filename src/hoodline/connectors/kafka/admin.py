"""The few broker metadata calls the enumerator needs, behind a small interface.

:class:`KafkaMetadataClient` is what the enumerator and the offsets initializers use, so their
logic runs against an in-memory fake in unit tests and against :class:`ConfluentMetadataClient`
(confluent-kafka ``AdminClient`` + a group consumer for committed offsets) for real.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import KafkaSourceError

log = logging.getLogger(__name__)


class KafkaMetadataClient(Protocol):
    """Broker metadata the enumerator needs (all calls may raise :class:`KafkaSourceError`)."""

    def topic_partition_counts(self) -> dict[str, int]:
        """Every non-internal topic and its number of partitions."""
        ...

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each partition."""
        ...

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """End offset (offset of the next record to be written) of each partition."""
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
    """:class:`KafkaMetadataClient` on confluent-kafka (librdkafka)."""

    def __init__(self, client_properties: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        from confluent_kafka.admin import AdminClient

        self._props = dict(client_properties)
        self._timeout = timeout_s
        self._errors: list[str] = []
        admin_props = {k: v for k, v in self._props.items() if not _consumer_only(k)}
        admin_props["error_cb"] = self._on_error
        self._admin_props = admin_props
        self._admin_client: Any = AdminClient(admin_props)
        self._consumers: dict[str, Any] = {}

    @property
    def _admin(self) -> Any:
        """The admin client, created again if :meth:`close` released it."""
        if self._admin_client is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient(self._admin_props)
        return self._admin_client

    def _on_error(self, err: Any) -> None:
        self._errors.append(str(err))
        log.warning("Kafka admin client error: %s", err)

    def _fail(self, what: str, exc: BaseException) -> KafkaSourceError:
        servers = self._props.get("bootstrap.servers", "?")
        recent = f"; recent client errors: {self._errors[-3:]}" if self._errors else ""
        return KafkaSourceError(
            f"{what} failed against bootstrap.servers={servers}: {exc}{recent}. "
            f"Check that the brokers are reachable and the client properties are right."
        )

    def topic_partition_counts(self) -> dict[str, int]:
        try:
            md = self._admin.list_topics(timeout=self._timeout)
        except Exception as exc:
            raise self._fail("listing topics", exc) from exc
        out: dict[str, int] = {}
        for name, topic in md.topics.items():
            if name.startswith("__") or topic.error is not None:
                continue
            out[name] = len(topic.partitions)
        return out

    def _list_offsets(
        self, tps: Iterable[TopicPartition], spec: Any, what: str
    ) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as CTP

        request = {CTP(tp.topic, tp.partition): spec for tp in tps}
        if not request:
            return {}
        try:
            futures = self._admin.list_offsets(request, request_timeout=self._timeout)
            return {
                TopicPartition(k.topic, k.partition): int(f.result().offset)
                for k, f in futures.items()
            }
        except Exception as exc:
            raise self._fail(f"listing {what} offsets", exc) from exc

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, _offset_spec().earliest(), "earliest")

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, _offset_spec().latest(), "latest")

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
            consumer = Consumer(props)
            self._consumers[group_id] = consumer
        try:
            result = consumer.committed(
                [CTP(tp.topic, tp.partition) for tp in tps], timeout=self._timeout
            )
        except Exception as exc:
            raise self._fail(f"reading committed offsets of group {group_id!r}", exc) from exc
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
