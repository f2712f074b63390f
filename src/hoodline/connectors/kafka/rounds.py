"""Bounding Kafka splits to one checkpoint round (for round-based runtimes such as Spark).

A Kafka split is unbounded (or bounded far away); a round reads a deterministic slice of it:
``[position, round_end)``. :func:`past_end` finds splits whose position lies beyond their
partition's end (the topic was deleted and re-created, or truncated, after they were read), which
the driver refuses or moves with :func:`restarted` (``offsets.out-of-range``) before
:func:`plan_round` fixes every split's round end from the partitions'
current end offsets and a record budget for the whole round, spread fairly over the splits
(water-filling: small backlogs are read fully, the rest share what is left evenly, in split order
for the remainder). The plan depends only on its inputs, so a retried Spark task reads exactly the
same records. :func:`after_round` turns a split as the reader left it (its position at the round
end) back into the continuing split (its real stopping offset restored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition


def plan_round(
    reader_splits: Mapping[int, Sequence[KafkaPartitionSplit]],
    end_offsets: Mapping[TopicPartition, int],
    max_records: int | None = None,
) -> dict[int, list[KafkaPartitionSplit]]:
    """Every reader's splits bounded to this round's end.

    ``end_offsets`` are the partitions' end offsets now (offset of the next record to be written).
    A split never gets an end beyond its own stopping offset or before its position; partitions
    missing from ``end_offsets`` get an empty slice this round.
    """
    lags: dict[TopicPartition, int] = {}
    for splits in reader_splits.values():
        for s in splits:
            end = end_offsets.get(s.topic_partition, s.starting_offset)
            if s.stopping_offset is not None:
                end = min(end, s.stopping_offset)
            lags[s.topic_partition] = max(0, end - s.starting_offset)
    budget = _share(lags, max_records)
    return {
        reader: [
            KafkaPartitionSplit(
                s.topic,
                s.partition,
                s.starting_offset,
                s.starting_offset + budget[s.topic_partition],
            )
            for s in splits
        ]
        for reader, splits in reader_splits.items()
    }


def _share(
    lags: Mapping[TopicPartition, int], max_records: int | None
) -> dict[TopicPartition, int]:
    if max_records is None or sum(lags.values()) <= max_records:
        return dict(lags)
    out = {tp: 0 for tp in lags}
    left = max_records
    open_tps = sorted(tp for tp, lag in lags.items() if lag > 0)
    while left > 0 and open_tps:
        share = left // len(open_tps)
        if share == 0:
            for tp in open_tps[:left]:
                out[tp] += 1
            break
        still_open = []
        for tp in open_tps:
            take = min(share, lags[tp] - out[tp])
            out[tp] += take
            left -= take
            if out[tp] < lags[tp]:
                still_open.append(tp)
        open_tps = still_open
    return out


def after_round(original: KafkaPartitionSplit, read: KafkaPartitionSplit) -> KafkaPartitionSplit:
    """The continuing split: the position ``read`` reached, the stop ``original`` had."""
    if original.topic_partition != read.topic_partition:
        raise ValueError(f"{read} is not a round slice of {original}")
    return KafkaPartitionSplit(
        original.topic, original.partition, read.starting_offset, original.stopping_offset
    )


def past_end(
    reader_splits: Mapping[int, Sequence[KafkaPartitionSplit]],
    end_offsets: Mapping[TopicPartition, int],
) -> list[KafkaPartitionSplit]:
    """Splits positioned beyond their partition's end offset, in partition order. A position is
    never past an end the source saw (a round reads up to one), so the partition lost records
    it had: the topic was deleted and re-created, or truncated. Unknown partitions are not."""
    out = [s for splits in reader_splits.values() for s in splits
           if s.topic_partition in end_offsets
           and end_offsets[s.topic_partition] < s.starting_offset]
    return sorted(out, key=lambda s: s.topic_partition)


def restarted(
    reader_splits: Mapping[int, Sequence[KafkaPartitionSplit]],
    starts: Mapping[TopicPartition, int],
) -> dict[int, list[KafkaPartitionSplit]]:
    """Every reader's splits, those of ``starts`` positioned there instead."""
    return {
        reader: [
            KafkaPartitionSplit(s.topic, s.partition, starts[s.topic_partition],
                                s.stopping_offset)
            if s.topic_partition in starts else s
            for s in splits
        ]
        for reader, splits in reader_splits.items()
    }
