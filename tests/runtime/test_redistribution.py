from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.errors import SourceError
from hoodline.runtime import redistribute_split_states


def test_same_parallelism_keeps_each_subtask_its_own_splits() -> None:
    states = {0: ["a", "b"], 1: [], 2: ["c"]}
    assert redistribute_split_states(states, 3) == {0: ["a", "b"], 1: [], 2: ["c"]}
    # a missing (empty) subtask with the old parallelism given explicitly
    assert redistribute_split_states({0: ["a"], 2: ["c"]}, 3, old_parallelism=3) == {
        0: ["a"],
        1: [],
        2: ["c"],
    }


def test_changed_parallelism_deals_round_robin_in_subtask_order() -> None:
    states = {0: ["a", "b"], 1: ["c", "d"]}
    assert redistribute_split_states(states, 3) == {0: ["a", "d"], 1: ["b"], 2: ["c"]}
    assert redistribute_split_states(states, 1) == {0: ["a", "b", "c", "d"]}
    assert redistribute_split_states({}, 2) == {0: [], 1: []}


def test_invalid_parallelism() -> None:
    with pytest.raises(SourceError, match="parallelism must be >= 1, got 0"):
        redistribute_split_states({0: ["a"]}, 0)


@given(
    st.dictionaries(st.integers(0, 6), st.lists(st.integers(), max_size=5), max_size=7),
    st.integers(1, 8),
)
def test_every_split_lands_at_exactly_one_new_subtask(
    states: dict[int, list[int]], parallelism: int
) -> None:
    tagged = {k: [(k, i, v) for i, v in enumerate(vs)] for k, vs in states.items()}
    result = redistribute_split_states(tagged, parallelism)
    assert sorted(result) == list(range(parallelism))
    flat = [s for splits in result.values() for s in splits]
    assert sorted(flat) == sorted(s for splits in tagged.values() for s in splits)
    sizes = [len(v) for v in result.values()]
    if parallelism != (max(states) + 1 if states else parallelism):
        assert max(sizes) - min(sizes) <= 1
