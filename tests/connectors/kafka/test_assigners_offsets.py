"""Assigners (pure), offsets initializers and subscriptions against the metadata fake."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.connectors.kafka.assigners import (
    HashSplitAssigner,
    RoundRobinSplitAssigner,
    create_assigner,
    java_string_hash,
    topic_start_index,
)
from hoodline.connectors.kafka.offsets import OffsetReset, StartingOffsets, StoppingOffsets
from hoodline.connectors.kafka.split import KafkaPartitionSplit, KafkaPartitionSplitState
from hoodline.connectors.kafka.split import TopicPartition as TP
from hoodline.connectors.kafka.subscription import Subscription
from hoodline.errors import KafkaSourceError
from tests.connectors.kafka.sim import FakeMetadata


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("ü") == 252


def test_hash_owner_formula() -> None:
    assert (
        HashSplitAssigner().owner(TP("orders", 3), 4, ())
        == (topic_start_index("orders", 4) + 3) % 4
    )


@given(
    topics=st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers(1, 12), max_size=5
    ),
    parallelism=st.integers(1, 10),
)
def test_assign_all_balances(topics: dict[str, int], parallelism: int) -> None:
    tps = [TP(t, p) for t, n in topics.items() for p in range(n)]
    rr = RoundRobinSplitAssigner().assign_all(tps, parallelism)
    loads = [list(rr.values()).count(r) for r in range(parallelism)]
    assert max(loads) - min(loads) <= 1
    h = HashSplitAssigner().assign_all(tps, parallelism)
    for t in topics:
        per = [
            sum(1 for tp, o in h.items() if tp.topic == t and o == r) for r in range(parallelism)
        ]
        assert max(per) - min(per) <= 1


def test_round_robin_owner_is_least_loaded_then_lowest() -> None:
    assert RoundRobinSplitAssigner().owner(TP("a", 0), 3, [2, 1, 1]) == 1
    assert RoundRobinSplitAssigner().owner(TP("a", 0), 3, [0, 0, 0]) == 0
    with pytest.raises(ValueError, match="unknown split assigner"):
        create_assigner("roundrobin")


def test_split_state_moves_forward_only() -> None:
    state = KafkaPartitionSplitState(KafkaPartitionSplit("t", 0, 5, 10))
    state.advance_to(8)
    assert state.to_split() == KafkaPartitionSplit("t", 0, 8, 10)
    with pytest.raises(ValueError, match="backwards"):
        state.advance_to(7)
    state.advance_to(10)
    assert state.is_finished
    with pytest.raises(ValueError, match="concrete offset"):
        KafkaPartitionSplit("t", 0, -2)


def meta() -> FakeMetadata:
    m = FakeMetadata()
    m.add_topic("t", 3, records=50)
    m.earliest[TP("t", 0)] = 10
    m.committed["g"] = {TP("t", 0): 30, TP("t", 2): 5}
    return m


TPS = [TP("t", 0), TP("t", 1), TP("t", 2)]


def test_starting_offsets_resolve() -> None:
    m = meta()
    assert StartingOffsets.earliest().resolve(TPS, m, None) == {TPS[0]: 10, TPS[1]: 0, TPS[2]: 0}
    assert StartingOffsets.latest().resolve(TPS, m, None) == {tp: 50 for tp in TPS}
    committed = StartingOffsets.committed(OffsetReset.LATEST).resolve(TPS, m, "g")
    assert committed == {TPS[0]: 30, TPS[1]: 50, TPS[2]: 5}
    specific = StartingOffsets.offsets({TPS[0]: 3, TPS[1]: 20}).resolve(TPS, m, None)
    # 3 < earliest 10 on partition 0: reset to earliest; partition 2 not given: earliest
    assert specific == {TPS[0]: 10, TPS[1]: 20, TPS[2]: 0}
    assert StartingOffsets.timestamp(12_500).resolve(TPS, m, None) == {tp: 13 for tp in TPS}
    assert StartingOffsets.timestamp(10**9).resolve(TPS, m, None) == {tp: 50 for tp in TPS}
    with pytest.raises(KafkaSourceError, match=r"t-1.*'scan.startup.offset-reset' is 'none'"):
        StartingOffsets.committed(OffsetReset.NONE).resolve(TPS, m, "g")
    with pytest.raises(KafkaSourceError, match=r"properties\.group\.id"):
        StartingOffsets.committed().resolve(TPS, m, None)


def test_stopping_offsets_resolve() -> None:
    m = meta()
    assert StoppingOffsets.latest().resolve(TPS, m) == {tp: 50 for tp in TPS}
    assert StoppingOffsets.unbounded().resolve(TPS, m) == {tp: None for tp in TPS}
    with pytest.raises(KafkaSourceError, match=r"no stopping offset for partition.*t-2"):
        StoppingOffsets.offsets({TPS[0]: 1, TPS[1]: 2}).resolve(TPS, m)


def test_subscriptions() -> None:
    counts = {"orders": 2, "orders-eu": 1, "pay": 1}
    assert Subscription.of_pattern("orders.*").select(counts, strict=True) == {
        TP("orders", 0),
        TP("orders", 1),
        TP("orders-eu", 0),
    }
    assert not Subscription.of_pattern("orders").matches_topic("orders-eu")  # full match
    with pytest.raises(KafkaSourceError, match="nope"):
        Subscription.of_topics(["orders", "nope"]).select(counts, strict=True)
    assert Subscription.of_topics(["orders", "nope"]).select(counts, strict=False) == {
        TP("orders", 0),
        TP("orders", 1),
    }
    parts = Subscription.of_partitions([TP("pay", 0), TP("pay", 5)])
    with pytest.raises(KafkaSourceError, match="pay-5"):
        parts.select(counts, strict=True)
    assert parts.matches(TP("pay", 0)) and not parts.matches(TP("pay", 1))


def test_a_starting_offset_outside_the_partition_is_named_when_reset(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Below the earliest offset the records in between are gone; the reset said nothing
    (code review: an adopted Hudi Streamer checkpoint older than the topic's retention)."""
    import logging

    with caplog.at_level(logging.WARNING):
        got = StartingOffsets.offsets({TPS[0]: 3, TPS[1]: 20}).resolve(TPS, meta(), None)
    assert got[TPS[0]] == 10
    assert (f"partition {TPS[0].topic}-0: specific starting offset 3 is outside the available "
            "range [10, 50]; starting at offset 10 ('scan.startup.offset-reset' = 'earliest')"
            in caplog.text)
    assert f"{TPS[1].topic}-1" not in caplog.text  # in range: nothing to say
