"""Round bounding of Kafka splits: deterministic, fair, within budget, never past a stop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hoodline.connectors.kafka.rounds import after_round, past_end, plan_round, restarted
from hoodline.connectors.kafka.split import KafkaPartitionSplit as S
from hoodline.connectors.kafka.split import TopicPartition as TP


def test_small_backlogs_read_fully_rest_shared() -> None:
    splits = {0: [S("t", 0, 10), S("t", 1, 0)], 1: [S("t", 2, 5, 8)]}
    ends = {TP("t", 0): 1010, TP("t", 1): 4, TP("t", 2): 100}
    plan = plan_round(splits, ends, max_records=107)
    # t-2 is bounded at 8 (3 records), t-1 has 4: both read fully; t-0 gets the other 100
    assert plan == {0: [S("t", 0, 10, 110), S("t", 1, 0, 4)], 1: [S("t", 2, 5, 8)]}
    assert plan_round(splits, ends) == {
        0: [S("t", 0, 10, 1010), S("t", 1, 0, 4)],
        1: [S("t", 2, 5, 8)],
    }


def test_positions_past_the_end_are_found_and_moved() -> None:
    """A position past its partition's end means the partition lost records it had (a topic
    deleted and created again): found in partition order; an unknown partition is not."""
    splits = {0: [S("t", 1, 100), S("t", 0, 100, 500)], 1: [S("t", 2, 7), S("u", 0, 3)]}
    ends = {TP("t", 0): 30, TP("t", 1): 100, TP("t", 2): 5}
    assert past_end(splits, ends) == [S("t", 0, 100, 500), S("t", 2, 7)]
    assert restarted(splits, {TP("t", 0): 0, TP("t", 2): 2}) == {
        0: [S("t", 1, 100), S("t", 0, 0, 500)], 1: [S("t", 2, 2), S("u", 0, 3)]}


def test_after_round_restores_the_real_stop() -> None:
    assert after_round(S("t", 0, 10), S("t", 0, 110, 110)) == S("t", 0, 110)
    assert after_round(S("t", 0, 10, 500), S("t", 0, 110, 110)) == S("t", 0, 110, 500)


@given(
    lags=st.lists(st.integers(0, 1000), min_size=1, max_size=12),
    budget=st.one_of(st.none(), st.integers(1, 5000)),
)
def test_budget_respected_and_fair(lags: list[int], budget: int | None) -> None:
    splits = {0: [S("t", p, 100) for p in range(len(lags))]}
    ends = {TP("t", p): 100 + lag for p, lag in enumerate(lags)}
    plan = plan_round(splits, ends, budget)
    assert plan == plan_round(splits, ends, budget)  # deterministic
    takes = [s.stopping_offset - s.starting_offset for s in plan[0]]  # type: ignore[operator]
    assert all(0 <= t <= lag for t, lag in zip(takes, lags, strict=True))
    if budget is None or sum(lags) <= budget:
        assert takes == lags
    else:
        assert sum(takes) == budget
        # fairness: a split that did not get all its backlog got at least as much as any other - 1
        for t, lag in zip(takes, lags, strict=True):
            if t < lag:
                assert t >= max(takes) - 1
