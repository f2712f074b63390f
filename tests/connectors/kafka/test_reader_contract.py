"""The framework's source-reader contract, run against the Kafka reader on the real broker."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from hoodline.connectors.kafka.serde import KafkaPartitionSplitSerializer
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.source.api import SourceReader, SourceReaderContext
from hoodline.source.serialization import VersionedSerializer
from hoodline.testing.reader_contract import SourceReaderContract
from tests.connectors.kafka.helpers import KafkaTestCluster, unique_topic

pytestmark = pytest.mark.kafka


class TestKafkaReaderContract(SourceReaderContract[KafkaPartitionSplit]):
    kafka: KafkaTestCluster

    @pytest.fixture(autouse=True)
    def _kafka(self, kafka: KafkaTestCluster) -> None:
        self.kafka = kafka

    def create_reader(self, context: SourceReaderContext) -> SourceReader[KafkaPartitionSplit]:
        source = (
            KafkaSource.builder()
            .bootstrap_servers(self.kafka.bootstrap_servers)
            .topic_pattern("contract-.*")
            .fetch(max_records=7, timeout_s=0.05)
            .build()
        )
        return source.create_reader(context)

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[KafkaPartitionSplit]:
        topic = self.kafka.create_topic(unique_topic("contract"), num_splits)
        self.kafka.produce(topic, {p: rows_per_split for p in range(num_splits)})
        return [KafkaPartitionSplit(topic, p, 0, rows_per_split) for p in range(num_splits)]

    def split_serializer(self) -> VersionedSerializer[KafkaPartitionSplit]:
        return KafkaPartitionSplitSerializer()

    def row_ids(self, table: pa.Table) -> Sequence[object]:
        return table["value"].to_pylist()
