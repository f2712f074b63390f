"""Round bounding of the Kafka plug-in with fake broker metadata: record and byte budgets, lag
per partition, continuing splits, and --once draining."""

from __future__ import annotations

from collections.abc import Collection
from types import SimpleNamespace
from typing import Any

import pytest

from hoodline.connectors.kafka import KafkaPartitionSplit, KafkaSource, TopicPartition
from hoodline.connectors.kafka.plugin import TOPIC_IDS_KEY, KafkaPlugin
from hoodline.errors import PipelineError
from hoodline.pipeline.plugin import ReadOutcome
from hoodline.runtime.source_rounds import ReaderPlan


class FakeMetadata:
    def __init__(self, ends: dict[TopicPartition, int]) -> None:
        self.ends = ends
        #: last stable offsets where a transaction is open (else the end)
        self.stable: dict[TopicPartition, int] = {}
        self.described: list[list[str]] = []
        #: topic ids the broker gives (none by default)
        self.ids: dict[str, str] = {}

    def latest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in tps}

    def stable_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.stable.get(tp, self.ends[tp]) for tp in tps}

    def topic_ids(self, topics: Collection[str]) -> dict[str, str]:
        self.described.append(sorted(topics))
        return {t: self.ids[t] for t in topics if t in self.ids}

    def earliest_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    def topic_partition_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tp in self.ends:
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
        return counts

    def close(self) -> None:
        pass


def _adapter(ends: dict[TopicPartition, int]) -> KafkaPlugin:
    fake = FakeMetadata(ends)

    def factory(_: Any) -> FakeMetadata:
        return fake

    source = KafkaSource.from_options({"properties.bootstrap.servers": "127.0.0.1:1",
                                       "topic": "t"})
    source._metadata_client_factory = factory  # type: ignore[assignment]
    return KafkaPlugin(source)


A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _plans() -> dict[int, ReaderPlan[KafkaPartitionSplit]]:
    return {0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 10),)),
            1: ReaderPlan(1, (KafkaPartitionSplit("t", 1, 0),))}


def test_budget_lag_continuation_and_drain() -> None:
    adapter = _adapter({A: 110, B: 30})
    assert adapter.identity == "topics:t"
    planned = adapter.bound(_plans(), 1, adapter.record_budget(80, 10**9))
    tasks, lag = planned.tasks, planned.lag
    ends = {i: [(s.starting_offset, s.stopping_offset) for s in t.splits]
            for i, t in tasks.items()}
    assert ends == {0: [(10, 60)], 1: [(0, 30)]}  # small backlog read fully, the rest shared
    assert lag == {"t-0": 50, "t-1": 0}
    assert not adapter.drained()

    # the reader reached the round end: the split continues from there, unbounded again
    read = ReadOutcome(0, [KafkaPartitionSplit("t", 0, 60, 60)])
    assert adapter.continuing(_plans()[0].splits, read) == [KafkaPartitionSplit("t", 0, 60)]
    with pytest.raises(PipelineError, match="no state for split"):
        adapter.continuing(_plans()[0].splits, ReadOutcome(0, []))

    # average message size 1 KB and max-bytes 20 KB: at most 20 records next round
    adapter.observe(80, 80_000)
    plans = {0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 60),)),
             1: ReaderPlan(1, (KafkaPartitionSplit("t", 1, 30),))}
    tasks = adapter.bound(plans, 2, adapter.record_budget(80, 20_000)).tasks
    assert sum(s.stopping_offset - s.starting_offset for t in tasks.values()
               for s in t.splits) == 20
    assert tasks[1].empty  # partition 1 has no new records

    # --once: drained when every partition reached the ends seen at the first round
    plans = {0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 80),)),
             1: ReaderPlan(1, (KafkaPartitionSplit("t", 1, 30),))}
    adapter.bound(plans, 3, adapter.record_budget(1000, 10**9))
    assert adapter.drained()


def test_a_round_reads_up_to_an_open_transaction_and_the_rest_after_it() -> None:
    """A read_committed consumer gets nothing past a transaction still open, and a round
    planned to the end offset waited there with every other partition's records (Kafka
    review: 75 s with nothing said). The round reads to the last stable offset; the
    transaction's records count as lag; a broker's answer below a position moves nothing."""
    adapter = _adapter({A: 110, B: 30})
    fake = adapter.source._metadata_client_factory(None)  # type: ignore[misc]
    fake.stable[A] = 40  # a transaction open from offset 40 on
    fake.stable[B] = 0  # an odd answer, below where the split stands
    planned = adapter.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 10),)),
                             1: ReaderPlan(1, (KafkaPartitionSplit("t", 1, 20),))}, 1, 1000)
    ends = {i: [(s.starting_offset, s.stopping_offset) for s in t.splits]
            for i, t in planned.tasks.items()}
    assert ends == {0: [(10, 40)], 1: [(20, 20)]}
    assert planned.lag == {"t-0": 70, "t-1": 10}
    fake.stable.clear()  # committed: the next round reads on
    planned = adapter.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 40),)),
                             1: ReaderPlan(1, (KafkaPartitionSplit("t", 1, 20),))}, 2, 1000)
    assert [(s.starting_offset, s.stopping_offset) for s in planned.tasks[0].splits] == [(40, 110)]
    # read_uncommitted consumers read records of open transactions: the end offsets
    plain = KafkaSource.from_options({"properties.bootstrap.servers": "127.0.0.1:1",
                                      "topic": "t", "properties.isolation.level":
                                      "read_uncommitted"})
    meta = FakeMetadata({A: 110, B: 30})
    meta.stable[A] = 40
    plain._metadata_client_factory = lambda _: meta  # type: ignore[assignment]
    tasks = KafkaPlugin(plain).bound(_plans(), 1, 1000).tasks
    assert [(s.starting_offset, s.stopping_offset) for s in tasks[0].splits] == [(10, 110)]


def test_topic_ids_are_asked_once_per_topic_also_when_the_broker_gives_none() -> None:
    """Every round asked DescribeTopics again for topics a broker gives no id for."""
    adapter = _adapter({A: 110, B: 30})
    for round_id in (1, 2, 3):
        adapter.bound(_plans(), round_id, 100)
    fake = adapter._client
    assert isinstance(fake, FakeMetadata) and fake.described == [["t"]]
    no_splits = SimpleNamespace(held_splits=dict)
    assert TOPIC_IDS_KEY not in adapter.commit_metadata(no_splits)  # type: ignore[arg-type]


def test_hudi_streamers_checkpoint_names_every_partition_also_one_read_to_its_bound() -> None:
    """Stored with each commit of a one-topic pipeline: Hudi Streamer takes the table over
    from there. A bounded source's partition read to its end is held by no reader, but Hudi
    Streamer would start a partition its checkpoint does not name at offset 0."""
    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY

    adapter = _adapter({A: 110, B: 30})
    bounded = KafkaPartitionSplit("t", 1, 0, 30)
    read = ReadOutcome(1, [KafkaPartitionSplit("t", 1, 30, 30)])
    assert adapter.continuing([bounded], read) == []  # finished: dropped
    held = SimpleNamespace(held_splits=lambda: {0: [KafkaPartitionSplit("t", 0, 60)], 1: []})
    stored = adapter.commit_metadata(held)  # type: ignore[arg-type]
    assert stored[STREAMER_CHECKPOINT_KEY] == "t,0:60,1:30"
    # Hudi Streamer reads one topic: a subscription of two stores no checkpoint of its
    two = KafkaPlugin(KafkaSource.from_options({"properties.bootstrap.servers": "127.0.0.1:1",
                                                "topic": "t,u"}))
    assert STREAMER_CHECKPOINT_KEY not in two.commit_metadata(held)  # type: ignore[arg-type]


def test_hudi_streamers_checkpoint_keeps_partitions_finished_in_an_earlier_run_and_its_flags() -> (
    None
):
    """A bounded run that finished partition 1 before stored 't,0:54,1:46'; the next run holds
    only partition 0, and stored 't,0:80' (Hudi Streamer would read partition 1 from offset 0
    again: code review). Hudi Streamer's --checkpoint mark is passed on, else a Streamer still
    started with the flag would go back to that checkpoint."""
    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY, STREAMER_FLAG_KEYS

    adapter = _adapter({A: 110, B: 30})
    adapter.restored({STREAMER_CHECKPOINT_KEY: "t,0:54,1:46", STREAMER_FLAG_KEYS[0]: "t,0:0"})
    held = SimpleNamespace(held_splits=lambda: {0: [KafkaPartitionSplit("t", 0, 80)]})
    stored = adapter.commit_metadata(held)  # type: ignore[arg-type]
    assert stored[STREAMER_CHECKPOINT_KEY] == "t,0:80,1:46"
    assert stored[STREAMER_FLAG_KEYS[0]] == "t,0:0"
    assert STREAMER_FLAG_KEYS[1] not in stored


def _plugin(**options: str) -> KafkaPlugin:
    return KafkaPlugin(KafkaSource.from_options(
        {"properties.bootstrap.servers": "127.0.0.1:1", **options}))


def _holding(*splits: KafkaPartitionSplit) -> Any:
    return SimpleNamespace(held_splits=lambda: {0: list(splits)})


def test_hudi_streamers_checkpoint_of_partition_and_pattern_subscriptions_of_one_topic() -> None:
    """Only option 'topic' naming one topic stored one (code review): a 'partitions' list of
    one topic, and a 'topic-pattern' that matches one topic now, store theirs too."""
    from hoodline.table.commit_metadata import CONNECT_OFFSETS_KEY, STREAMER_CHECKPOINT_KEY

    listed = _plugin(partitions="t:0,t:2")
    held = _holding(KafkaPartitionSplit("t", 0, 7), KafkaPartitionSplit("t", 2, 9))
    assert listed.commit_metadata(held) == {STREAMER_CHECKPOINT_KEY: "t,0:7,2:9",
                                            CONNECT_OFFSETS_KEY: "0=7,2=9"}
    pattern = _plugin(**{"topic-pattern": "t.*"})
    assert pattern.commit_metadata(held) == {STREAMER_CHECKPOINT_KEY: "t,0:7,2:9",
                                             CONNECT_OFFSETS_KEY: "0=7,2=9"}
    # a pattern matching two topics: Hudi Streamer reads one; there is no checkpoint of it
    two = _holding(KafkaPartitionSplit("t", 0, 7), KafkaPartitionSplit("tu", 0, 3))
    assert STREAMER_CHECKPOINT_KEY not in pattern.commit_metadata(two)
    assert STREAMER_CHECKPOINT_KEY not in _plugin(partitions="t:0,u:0").commit_metadata(two)


def test_hudi_streamers_checkpoint_stays_in_every_commit_once_stored() -> None:
    """A table whose last checkpoint of Hudi Streamer is of topic 't' (Streamer's, or a
    pipeline's reading 't' alone) and a pipeline now reading 't' and 'u': its commits stored
    none, and Hudi Streamer, which goes back to the newest commit that has one, would resume
    from that older commit and write again what the pipeline read of 't' since (code review).
    The checkpoint of 't' goes on with every commit, with the pipeline's positions in it."""
    from hoodline.table.commit_metadata import CONNECT_OFFSETS_KEY, STREAMER_CHECKPOINT_KEY

    both = _plugin(topic="t,u")
    both.restored({STREAMER_CHECKPOINT_KEY: "t,0:5,1:6"})
    held = _holding(KafkaPartitionSplit("t", 0, 50), KafkaPartitionSplit("u", 0, 3))
    stored = both.commit_metadata(held)
    assert stored[STREAMER_CHECKPOINT_KEY] == "t,0:50,1:6"
    # the Kafka Connect sink's offsets name no topic: a sink reading 'u' would take them
    assert CONNECT_OFFSETS_KEY not in stored
    # and after the commit, also in a round whose readers hold no partition of 't'
    both.after_commit(held)
    assert both.commit_metadata(_holding(KafkaPartitionSplit("u", 0, 9)))[
        STREAMER_CHECKPOINT_KEY] == "t,0:50,1:6"


def test_a_new_partition_list_pipeline_goes_on_from_hudi_streamers_checkpoint() -> None:
    """A 'partitions' subscription of one topic takes Hudi Streamer's checkpoint of it, as a
    'topic' one does (it was refused until a start was stated), and keeps the positions of
    the partitions it does not read in the checkpoint it stores (Hudi Streamer reads them)."""
    from hoodline.connectors.kafka.offsets import StartupMode
    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY

    listed = _plugin(partitions="t:1")
    commit = {STREAMER_CHECKPOINT_KEY: "t,0:40,1:30"}
    assert listed.refusal("20260101000000000", commit, None) is None
    assert listed.adopt("20260101000000000", commit, None)
    starting = listed.source.config.starting_offsets
    assert starting.mode is StartupMode.SPECIFIC and starting.specific[B] == 30
    stored = listed.commit_metadata(_holding(KafkaPartitionSplit("t", 1, 35)))
    assert stored[STREAMER_CHECKPOINT_KEY] == "t,0:40,1:35"


def test_hudi_streamers_checkpoint_drops_unheld_partitions_that_are_gone_or_new() -> None:
    """Positions no reader holds were stored again with every commit without a look at the
    brokers (code review): a partition the topic no longer has (Hudi Streamer fails on it),
    and one of a topic created again (Hudi Streamer would skip its first records)."""
    import json

    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY

    fewer = _adapter({A: 110})  # topic 't' has one partition now
    fewer.restored({STREAMER_CHECKPOINT_KEY: "t,0:5,1:7"})
    fewer.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 10),))}, 1, 100)
    assert fewer.commit_metadata(_holding(KafkaPartitionSplit("t", 0, 60)))[
        STREAMER_CHECKPOINT_KEY] == "t,0:60"
    again = _adapter({A: 110, B: 30})
    fake = again.source.metadata_client()
    assert isinstance(fake, FakeMetadata)
    fake.ids = {"t": "new"}
    again.restored({STREAMER_CHECKPOINT_KEY: "t,0:5,1:7", TOPIC_IDS_KEY: json.dumps({"t": "old"})})
    again.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 0),))}, 1, 100)
    assert again.commit_metadata(_holding(KafkaPartitionSplit("t", 0, 20)))[
        STREAMER_CHECKPOINT_KEY] == "t,0:20"
    # partitions that exist keep their positions
    kept = _adapter({A: 110, B: 30})
    kept.restored({STREAMER_CHECKPOINT_KEY: "t,0:5,1:7"})
    kept.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 10),))}, 1, 100)
    assert kept.commit_metadata(_holding(KafkaPartitionSplit("t", 0, 60)))[
        STREAMER_CHECKPOINT_KEY] == "t,0:60,1:7"


def test_a_bounded_pattern_stores_a_topics_checkpoint_only_while_it_reads_that_one() -> None:
    """A 'topic-pattern' matching 'a' and 'b' with bounded reading: once 'a' was read to its
    bound only 'b' was held, and its commits stored Hudi Streamer's checkpoint of 'b' and the
    sink's offsets, which a sink reading 'a' would take (code review)."""
    from hoodline.table.commit_metadata import CONNECT_OFFSETS_KEY, STREAMER_CHECKPOINT_KEY

    pattern = _plugin(**{"topic-pattern": "a|b"})
    ended = ReadOutcome(0, [KafkaPartitionSplit("a", 0, 10, 10)])
    assert pattern.continuing([KafkaPartitionSplit("a", 0, 0, 10)], ended) == []
    held = _holding(KafkaPartitionSplit("b", 0, 50))
    assert STREAMER_CHECKPOINT_KEY not in pattern.commit_metadata(held)
    pattern.after_commit(held)
    assert STREAMER_CHECKPOINT_KEY not in pattern.commit_metadata(held)
    # one topic matched and read to its bound: the last commit keeps the sink's offsets too
    # (it stored none, held nothing: second code review)
    one = _plugin(**{"topic-pattern": "a"})
    assert one.continuing([KafkaPartitionSplit("a", 0, 0, 10)], ended) == []
    for _ in range(2):  # also once its checkpoint was stored
        assert one.commit_metadata(_holding()) == {STREAMER_CHECKPOINT_KEY: "a,0:10",
                                                   CONNECT_OFFSETS_KEY: "0=10"}
        one.after_commit(_holding())


def test_a_topic_created_again_keeps_a_checkpoint_of_hudi_streamer_in_every_commit() -> None:
    """Every stored position of the checkpoint's topic dropped (the topic was created again):
    the commits stored no checkpoint, and Hudi Streamer, which goes back to the newest commit
    that has one, would take the old topic's positions for the new one (second code review).
    They name the new topic's partitions at offset 0, where Hudi Streamer starts partitions
    its checkpoint does not name."""
    import json

    from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY

    adapter = _adapter({A: 110, B: 30})
    fake = adapter.source.metadata_client()
    assert isinstance(fake, FakeMetadata)
    fake.ids = {"t": "new"}
    adapter.restored({STREAMER_CHECKPOINT_KEY: "t,0:5,1:7",
                      TOPIC_IDS_KEY: json.dumps({"t": "old"})})
    adapter.bound({0: ReaderPlan(0, ())}, 1, 100)  # nothing held yet
    assert adapter.commit_metadata(_holding())[STREAMER_CHECKPOINT_KEY] == "t,0:0,1:0"


def test_once_drains_a_partition_restarted_at_its_earliest_offset() -> None:
    """--once waited for the end offsets of the first round; a topic created again while it ran
    (its positions past the new ends, read again from the earliest) never reached them, and
    the run never ended (second code review)."""
    adapter = _adapter({A: 110})
    from dataclasses import replace

    from hoodline.connectors.kafka.offsets import OffsetsOutOfRange

    adapter.source.config = replace(adapter.source.config,
                                    offsets_out_of_range=OffsetsOutOfRange.EARLIEST)
    adapter.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 10),))}, 1, 50)
    assert not adapter.drained()  # read to 60 of 110
    fake = adapter.source.metadata_client()
    assert isinstance(fake, FakeMetadata)
    fake.ends[A] = 30  # created again: 30 records, below the position 60 reached
    tasks = adapter.bound({0: ReaderPlan(0, (KafkaPartitionSplit("t", 0, 60),))}, 2, 1000).tasks
    assert [(s.starting_offset, s.stopping_offset) for s in tasks[0].splits] == [(0, 30)]
    assert adapter.drained()
