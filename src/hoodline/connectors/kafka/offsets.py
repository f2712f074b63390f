"""Starting and stopping offsets: turned into concrete offsets once, when a split is created.

The enumerator resolves them for newly discovered partitions only; a split that exists (restored,
reported by a reader, added back) keeps its own offset and is never re-initialized.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from hoodline.config import ConfigEnum
from hoodline.connectors.kafka.admin import KafkaMetadataClient
from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import KafkaSourceError

log = logging.getLogger(__name__)


class StartupMode(ConfigEnum):
    """Where partitions found by the first discovery start (``scan.startup.mode``)."""

    EARLIEST = "earliest-offset"
    LATEST = "latest-offset"
    COMMITTED = "group-offsets"
    SPECIFIC = "specific-offsets"
    TIMESTAMP = "timestamp"


class OffsetReset(ConfigEnum):
    """What to start from when a committed / specific offset is missing for a partition."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"  # fail naming the partition


class OffsetsOutOfRange(ConfigEnum):
    """What a reader does when a split's next offset no longer exists (``offsets.out-of-range``)."""

    #: fail naming topic, partition and offset
    FAIL = "fail"
    #: skip to the earliest available offset (the skipped records are lost)
    EARLIEST = "earliest"


@dataclass(frozen=True)
class StartingOffsets:
    """Where newly discovered partitions of the initial discovery start."""

    mode: StartupMode = StartupMode.EARLIEST
    specific: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    reset: OffsetReset = OffsetReset.EARLIEST

    @classmethod
    def earliest(cls) -> StartingOffsets:
        return cls(StartupMode.EARLIEST)

    @classmethod
    def latest(cls) -> StartingOffsets:
        return cls(StartupMode.LATEST)

    @classmethod
    def committed(cls, reset: OffsetReset = OffsetReset.EARLIEST) -> StartingOffsets:
        return cls(StartupMode.COMMITTED, reset=reset)

    @classmethod
    def offsets(
        cls, offsets: Mapping[TopicPartition, int], reset: OffsetReset = OffsetReset.EARLIEST
    ) -> StartingOffsets:
        for tp, off in offsets.items():
            if off < 0:
                raise KafkaSourceError(f"specific starting offset of {tp} must be >= 0, got {off}")
        return cls(StartupMode.SPECIFIC, specific=dict(offsets), reset=reset)

    @classmethod
    def timestamp(cls, timestamp_ms: int) -> StartingOffsets:
        if timestamp_ms < 0:
            raise KafkaSourceError(f"starting timestamp must be >= 0 ms, got {timestamp_ms}")
        return cls(StartupMode.TIMESTAMP, timestamp_ms=timestamp_ms)

    def resolve(
        self,
        tps: Collection[TopicPartition],
        client: KafkaMetadataClient,
        group_id: str | None,
    ) -> dict[TopicPartition, int]:
        """Concrete starting offsets for ``tps`` (clamped into [earliest, latest])."""
        if not tps:
            return {}
        earliest = client.earliest_offsets(tps)
        latest = client.latest_offsets(tps)
        if self.mode is StartupMode.EARLIEST:
            return {tp: earliest[tp] for tp in tps}
        if self.mode is StartupMode.LATEST:
            return {tp: latest[tp] for tp in tps}
        if self.mode is StartupMode.TIMESTAMP:
            assert self.timestamp_ms is not None
            found = client.offsets_for_timestamp(tps, self.timestamp_ms)
            return {tp: (latest[tp] if found.get(tp) is None else _req(found[tp])) for tp in tps}
        wanted: Mapping[TopicPartition, int | None]
        if self.mode is StartupMode.COMMITTED:
            if not group_id:
                raise KafkaSourceError(
                    "starting from committed offsets needs a consumer group: set option "
                    "'properties.group.id'"
                )
            wanted = client.committed_offsets(group_id, tps)
            source = f"committed offset of group {group_id!r}"
        else:
            wanted = self.specific
            source = "specific starting offset"
        out: dict[TopicPartition, int] = {}
        for tp in tps:
            off = wanted.get(tp)
            if off is None:
                out[tp] = self._reset(tp, earliest, latest, f"no {source}")
            elif off < earliest[tp] or off > latest[tp]:
                why = (f"{source} {off} is outside the available range "
                       f"[{earliest[tp]}, {latest[tp]}]")
                out[tp] = self._reset(tp, earliest, latest, why)
                # below the start: the records in between are gone (retention); above the
                # end: the topic holds fewer records than the offset says (created again)
                log.warning("partition %s-%s: %s; starting at offset %d ('scan.startup."
                            "offset-reset' = '%s')", tp.topic, tp.partition, why, out[tp],
                            self.reset.config_text)
            else:
                out[tp] = off
        return out

    def _reset(
        self,
        tp: TopicPartition,
        earliest: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
        why: str,
    ) -> int:
        if self.reset is OffsetReset.EARLIEST:
            return earliest[tp]
        if self.reset is OffsetReset.LATEST:
            return latest[tp]
        raise KafkaSourceError(
            f"cannot start partition {tp}: {why} and 'scan.startup.offset-reset' is 'none'; "
            f"set it to 'earliest' or 'latest', or give an offset for this partition"
        )


def _req(v: int | None) -> int:
    assert v is not None
    return v


class BoundedMode(ConfigEnum):
    """Where reading stops (``scan.bounded.mode``)."""

    UNBOUNDED = "unbounded"
    LATEST = "latest-offset"
    SPECIFIC = "specific-offsets"


@dataclass(frozen=True)
class StoppingOffsets:
    """Where bounded reading stops (exclusive); ``UNBOUNDED`` never stops."""

    mode: BoundedMode = BoundedMode.UNBOUNDED
    specific: Mapping[TopicPartition, int] = field(default_factory=dict)

    @classmethod
    def unbounded(cls) -> StoppingOffsets:
        return cls(BoundedMode.UNBOUNDED)

    @classmethod
    def latest(cls) -> StoppingOffsets:
        """Stop at the end offsets seen when the partition is first discovered."""
        return cls(BoundedMode.LATEST)

    @classmethod
    def offsets(cls, offsets: Mapping[TopicPartition, int]) -> StoppingOffsets:
        for tp, off in offsets.items():
            if off < 0:
                raise KafkaSourceError(f"specific stopping offset of {tp} must be >= 0, got {off}")
        return cls(BoundedMode.SPECIFIC, specific=dict(offsets))

    @property
    def is_bounded(self) -> bool:
        return self.mode is not BoundedMode.UNBOUNDED

    def resolve(
        self, tps: Collection[TopicPartition], client: KafkaMetadataClient
    ) -> dict[TopicPartition, int | None]:
        if self.mode is BoundedMode.UNBOUNDED:
            return {tp: None for tp in tps}
        if self.mode is BoundedMode.LATEST:
            return dict(client.latest_offsets(tps)) if tps else {}
        missing = sorted(tp for tp in tps if tp not in self.specific)
        if missing:
            raise KafkaSourceError(
                f"no stopping offset for partition(s) {', '.join(map(str, missing))} in option "
                f"'scan.bounded.specific-offsets'; give one for every subscribed partition"
            )
        return {tp: self.specific[tp] for tp in tps}
