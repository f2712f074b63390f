"""Custom events between the Kafka enumerator and its readers."""

from __future__ import annotations

from dataclasses import dataclass

from hoodline.connectors.kafka.split import TopicPartition
from hoodline.source.api import SourceEvent


@dataclass(frozen=True)
class PartitionsDeletedEvent(SourceEvent):
    """Reader -> enumerator: the topic of these partitions was deleted (a ``topic-pattern``
    subscription), so their splits left the reader. The enumerator forgets them; a topic
    created again under the name is discovered as a new one."""

    partitions: tuple[TopicPartition, ...]
