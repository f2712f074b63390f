"""Kafka source connector: balanced split assignment that survives recovery (FLIP-537).

Start with :class:`KafkaSource` (``KafkaSource.from_options({...})`` or ``KafkaSource.builder()``);
the options are declared in :mod:`hoodline.connectors.kafka.options`.
"""

from hoodline.connectors.kafka.assigners import AssignerKind
from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.enumerator import KafkaSourceEnumerator
from hoodline.connectors.kafka.offsets import (
    BoundedMode,
    OffsetReset,
    OffsetsOutOfRange,
    StartingOffsets,
    StartupMode,
    StoppingOffsets,
)
from hoodline.connectors.kafka.options import ALL_OPTIONS, KafkaSourceConfig
from hoodline.connectors.kafka.reader import KAFKA_RECORD_SCHEMA, KafkaSourceReader
from hoodline.connectors.kafka.rounds import after_round, plan_round
from hoodline.connectors.kafka.serde import (
    KafkaPartitionSplitSerializer,
    KafkaSourceEnumStateSerializer,
)
from hoodline.connectors.kafka.source import KafkaSource, KafkaSourceBuilder
from hoodline.connectors.kafka.split import (
    KafkaPartitionSplit,
    KafkaPartitionSplitState,
    TopicPartition,
)
from hoodline.connectors.kafka.subscription import Subscription

__all__ = [
    "ALL_OPTIONS",
    "KAFKA_RECORD_SCHEMA",
    "AssignerKind",
    "BoundedMode",
    "KafkaPartitionSplit",
    "KafkaPartitionSplitSerializer",
    "KafkaPartitionSplitState",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaSourceConfig",
    "KafkaSourceEnumState",
    "KafkaSourceEnumStateSerializer",
    "KafkaSourceEnumerator",
    "KafkaSourceReader",
    "OffsetReset",
    "OffsetsOutOfRange",
    "StartingOffsets",
    "StartupMode",
    "StoppingOffsets",
    "Subscription",
    "TopicPartition",
    "after_round",
    "plan_round",
]
