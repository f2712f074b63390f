"""The Kafka source: FLIP-27 factory with FLIP-537 split reassignment on recovery.

Build it from options::

    source = KafkaSource.from_options({
        "properties.bootstrap.servers": "127.0.0.1:9092",
        "topic-pattern": "orders-.*",
        "scan.split-assigner": "round-robin",
    })

or with the builder::

    source = (KafkaSource.builder()
              .bootstrap_servers("127.0.0.1:9092")
              .topics("orders")
              .starting_offsets(StartingOffsets.earliest())
              .bounded(StoppingOffsets.latest())
              .build())
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hoodline.connectors.kafka.admin import ConfluentMetadataClient, KafkaMetadataClient
from hoodline.connectors.kafka.client_log import with_client_logging
from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.enumerator import KafkaSourceEnumerator
from hoodline.connectors.kafka.offsets import StartingOffsets, StoppingOffsets
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.reader import KafkaSourceReader
from hoodline.connectors.kafka.serde import (
    KafkaPartitionSplitSerializer,
    KafkaSourceEnumStateSerializer,
)
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.connectors.kafka.subscription import Subscription
from hoodline.errors import ConfigError
from hoodline.source.api import (
    Boundedness,
    Source,
    SourceReaderContext,
    SplitEnumeratorContext,
    SupportsSplitReassignmentOnRecovery,
)
from hoodline.source.serialization import VersionedSerializer

log = logging.getLogger(__name__)


class KafkaSource(
    SupportsSplitReassignmentOnRecovery, Source[KafkaPartitionSplit, KafkaSourceEnumState]
):
    """Reads Kafka partitions as :class:`KafkaPartitionSplit` s into Arrow record batches."""

    def __init__(
        self,
        config: KafkaSourceConfig,
        *,
        metadata_client_factory: Callable[[KafkaSourceConfig], KafkaMetadataClient] | None = None,
        consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
        threaded_reader: bool = True,
    ) -> None:
        self.config = config
        self._metadata_client_factory = metadata_client_factory
        self._consumer_factory = consumer_factory
        self._threaded_reader = threaded_reader

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> KafkaSource:
        return cls(KafkaSourceConfig.from_options(options))

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()

    @property
    def boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.config.bounded else Boundedness.CONTINUOUS_UNBOUNDED

    def _metadata_client(self) -> KafkaMetadataClient:
        if self._metadata_client_factory is not None:
            return self._metadata_client_factory(self.config)
        return ConfluentMetadataClient(
            self.config.client_properties,
            broker_unavailable_timeout_s=self.config.broker_unavailable_timeout_s,
        )

    def metadata_client(self) -> KafkaMetadataClient:
        """A new broker metadata client for this source's configuration (close it after use)."""
        return self._metadata_client()

    def commit_offsets(self, splits: Iterable[KafkaPartitionSplit]) -> bool:
        """Commit the splits' positions to the consumer group after a checkpoint completed.

        For round-based runtimes whose readers are gone when the commit lands (the driver calls
        this with the checkpoint's reader splits). Monitoring only: recovery never reads these
        offsets. Does nothing (returns False) without 'properties.group.id' or with
        'commit.offsets.on.checkpoint' off; a failed commit is logged, never raised.
        """
        if not self.config.group_id or not self.config.commit_offsets_on_checkpoint:
            return False
        offsets = {(s.topic, s.partition): s.starting_offset for s in splits}
        if not offsets:
            return False
        try:
            from confluent_kafka import Consumer
            from confluent_kafka import TopicPartition as CTP

            props = dict(self.config.client_properties)
            props["enable.auto.commit"] = False
            consumer = Consumer(with_client_logging(props, "offset-commit"))
            try:
                consumer.commit(
                    offsets=[CTP(t, p, o) for (t, p), o in sorted(offsets.items())],
                    asynchronous=False,
                )
            finally:
                consumer.close()
            return True
        except Exception as exc:  # monitoring only: never fail the job for it
            log.warning(
                "committing offsets of %d partitions to group %r failed: %s",
                len(offsets),
                self.config.group_id,
                exc,
            )
            return False

    def create_reader(self, context: SourceReaderContext) -> KafkaSourceReader:
        return KafkaSourceReader(
            self.config,
            context,
            consumer_factory=self._consumer_factory,
            threaded=self._threaded_reader,
        )

    def create_enumerator(
        self, context: SplitEnumeratorContext[KafkaPartitionSplit]
    ) -> KafkaSourceEnumerator:
        return KafkaSourceEnumerator(self.config, context, self._metadata_client)

    def restore_enumerator(
        self, context: SplitEnumeratorContext[KafkaPartitionSplit], checkpoint: KafkaSourceEnumState
    ) -> KafkaSourceEnumerator:
        return KafkaSourceEnumerator(self.config, context, self._metadata_client, checkpoint)

    def split_serializer(self) -> VersionedSerializer[KafkaPartitionSplit]:
        return KafkaPartitionSplitSerializer()

    def enumerator_checkpoint_serializer(self) -> VersionedSerializer[KafkaSourceEnumState]:
        return KafkaSourceEnumStateSerializer()

    def __repr__(self) -> str:
        return f"KafkaSource({self.config!r})"


class KafkaSourceBuilder:
    """Fluent construction of a :class:`KafkaSource` (validated in :meth:`build`)."""

    def __init__(self) -> None:
        self._props: dict[str, Any] = {}
        self._subscription: Subscription | None = None
        self._starting = StartingOffsets.earliest()
        self._starting_stated = False
        self._stopping = StoppingOffsets.unbounded()
        self._kwargs: dict[str, Any] = {}

    def bootstrap_servers(self, servers: str) -> KafkaSourceBuilder:
        self._props["bootstrap.servers"] = servers
        return self

    def topics(self, *topics: str) -> KafkaSourceBuilder:
        self._subscription = Subscription.of_topics(topics)
        return self

    def topic_pattern(self, pattern: str) -> KafkaSourceBuilder:
        self._subscription = Subscription.of_pattern(pattern)
        return self

    def partitions(self, partitions: Iterable[tuple[str, int]]) -> KafkaSourceBuilder:
        self._subscription = Subscription.of_partitions(TopicPartition(t, p) for t, p in partitions)
        return self

    def starting_offsets(self, offsets: StartingOffsets) -> KafkaSourceBuilder:
        self._starting = offsets
        self._starting_stated = True
        return self

    def bounded(self, offsets: StoppingOffsets) -> KafkaSourceBuilder:
        self._stopping = offsets
        return self

    def group_id(self, group_id: str) -> KafkaSourceBuilder:
        self._props["group.id"] = group_id
        return self

    def split_assigner(self, name: str) -> KafkaSourceBuilder:
        self._kwargs["split_assigner"] = name
        return self

    def discovery_interval(self, seconds: float) -> KafkaSourceBuilder:
        self._kwargs["discovery_interval_s"] = seconds
        return self

    def commit_offsets_on_checkpoint(self, enabled: bool) -> KafkaSourceBuilder:
        self._kwargs["commit_offsets_on_checkpoint"] = enabled
        return self

    def offsets_out_of_range(self, policy: str) -> KafkaSourceBuilder:
        self._kwargs["offsets_out_of_range"] = policy
        return self

    def fetch(
        self, max_records: int | None = None, timeout_s: float | None = None
    ) -> KafkaSourceBuilder:
        if max_records is not None:
            self._kwargs["fetch_max_records"] = max_records
        if timeout_s is not None:
            self._kwargs["fetch_timeout_s"] = timeout_s
        return self

    def broker_unavailable_timeout(self, seconds: float) -> KafkaSourceBuilder:
        self._kwargs["broker_unavailable_timeout_s"] = seconds
        return self

    def property(self, key: str, value: Any) -> KafkaSourceBuilder:
        """Any librdkafka client property (SASL/SSL settings included)."""
        self._props[key] = value
        return self

    def build(self, **source_kwargs: Any) -> KafkaSource:
        if self._subscription is None:
            raise ConfigError(
                "no subscription: call topics(), topic_pattern() or partitions() "
                "(options 'topic', 'topic-pattern', 'partitions')"
            )
        config = KafkaSourceConfig(
            client_properties=dict(self._props),
            subscription=self._subscription,
            starting_offsets=self._starting,
            startup_stated=self._starting_stated,
            stopping_offsets=self._stopping,
            **self._kwargs,
        )
        return KafkaSource(config, **source_kwargs)
