"""Where Java Hudi's Kafka writers stopped, as they keep it in the commits they make, so a table
moves between them and hoodline without reading a record twice or skipping one.

* Hudi Streamer (``HoodieStreamer`` with a Kafka source) stores in every commit's extra metadata
  (:data:`~hoodline.table.commit_metadata.STREAMER_CHECKPOINT_KEY`,
  ``deltastreamer.checkpoint.key`` for table version 6) ``topic,partition:offset,...``: each
  offset the next one to read, for every partition of its one topic. A new Streamer run resumes
  from the newest commit carrying the key.
* Hudi's Kafka Connect sink stores ``partition=offset,...`` under
  :data:`~hoodline.table.commit_metadata.CONNECT_OFFSETS_KEY` (``kafka.commit.offsets``): the
  next offset of each partition of its topic, which it does not name. It resumes from the
  newest commit's.

hoodline writes both with every commit of a pipeline reading one topic (so either takes the
table over where the pipeline stopped) and goes on from them when they are newer than its own
checkpoint (:meth:`hoodline.connectors.kafka.plugin.KafkaPlugin.adopt`): Hudi Streamer's of its
topic, the sink's when they continue the pipeline's own. Kept apart from hoodline's own
checkpoint, which holds more (the split assignment).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hoodline.connectors.kafka.split import TopicPartition

# a Kafka topic name is [a-zA-Z0-9._-]+; then one or more ",partition:offset"
_FORMAT = re.compile(r"([A-Za-z0-9._-]+)((?:,\d+:\d+)+)")
_CONNECT_FORMAT = re.compile(r"\d+=\d+(?:,\d+=\d+)*")


@dataclass(frozen=True)
class StreamerCheckpoint:
    """Where Hudi Streamer stopped in ``topic``: partition -> next offset to read."""

    topic: str
    offsets: Mapping[int, int]

    @classmethod
    def parse(cls, text: str) -> StreamerCheckpoint | None:
        """The checkpoint ``text`` states, or None when it is not the Kafka offsets form (a
        Streamer of another source, or Kafka's 'timestamp' / 'single_offset' checkpoint types,
        store other text under the same key)."""
        match = _FORMAT.fullmatch(text.strip())
        if match is None:
            return None
        offsets: dict[int, int] = {}
        for item in match.group(2)[1:].split(","):
            partition, offset = item.split(":")
            offsets[int(partition)] = int(offset)
        return cls(match.group(1), offsets)

    def positions(self) -> dict[TopicPartition, int]:
        return {TopicPartition(self.topic, p): o for p, o in sorted(self.offsets.items())}

    def format(self) -> str:
        """The text Hudi Streamer stores: partitions in ascending order."""
        items = ",".join(f"{p}:{o}" for p, o in sorted(self.offsets.items()))
        return f"{self.topic},{items}"


@dataclass(frozen=True)
class ConnectOffsets:
    """Where Hudi's Kafka Connect sink stopped: partition -> next offset (of a topic it does
    not name)."""

    offsets: Mapping[int, int]

    @classmethod
    def parse(cls, text: str) -> ConnectOffsets | None:
        """The offsets ``text`` states (``partition=offset,...``), or None for other text."""
        text = text.strip()
        if _CONNECT_FORMAT.fullmatch(text) is None:
            return None
        pairs = (item.split("=") for item in text.split(","))
        return cls({int(p): int(o) for p, o in pairs})

    def format(self) -> str:
        """The text the sink stores: partitions in ascending order."""
        return ",".join(f"{p}={o}" for p, o in sorted(self.offsets.items()))

    def option_values(self, topic: str) -> list[str]:
        """``scan.startup.specific-offsets`` items for these offsets in ``topic``."""
        return [f"{topic}:{p}:{o}" for p, o in sorted(self.offsets.items())]
