"""Java Hudi Streamer's Kafka checkpoint, so a table moves between Hudi Streamer and hoodline
without reading a record twice or skipping one.

Hudi Streamer (``HoodieStreamer`` with a Kafka source) stores in the extra metadata of every
commit it makes (:data:`~hoodline.table.commit_metadata.STREAMER_CHECKPOINT_KEY`,
``deltastreamer.checkpoint.key`` for table version 6) where it stopped, as
``topic,partition:offset,partition:offset,...``: each offset the next one to read, for every
partition of its one topic. A new Streamer run resumes from the newest commit carrying the key.

hoodline reads that value when a table has no checkpoint of its own (a table Hudi Streamer
wrote), and writes it with every commit of a pipeline reading one topic (so Hudi Streamer can
take the table over again). Kept apart from hoodline's own checkpoint, which holds more (the
split assignment) and is what hoodline resumes from when it has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hoodline.connectors.kafka.split import TopicPartition

# a Kafka topic name is [a-zA-Z0-9._-]+; then one or more ",partition:offset"
_FORMAT = re.compile(r"([A-Za-z0-9._-]+)((?:,\d+:\d+)+)")


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
