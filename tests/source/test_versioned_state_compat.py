"""Bytes written by earlier format versions must keep restoring.

The hex literals were produced once by the writers of each version and must never be regenerated:
if a test here fails, a format change broke compatibility with existing checkpoints.
"""

from __future__ import annotations

import pytest

from hoodline.errors import SplitSerializationError
from hoodline.source.serialization import read_versioned, write_versioned
from hoodline.testing.number_source import NumberSplit, NumberSplitSerializer
from hoodline.testing.reference_enumerator import (
    ReferenceEnumState,
    ReferenceEnumStateSerializer,
)

# NumberSplit format 1 (id, start, end): NumberSplit("orders-3", 17, 40)
SPLIT_V1 = "484c563100000001000000086f72646572732d3300000000000000110000000000000028"
# NumberSplit format 2 (id, start, optional end): NumberSplit("orders-3", 17, None)
SPLIT_V2 = "484c563100000002000000086f72646572732d33000000000000001100"
# ReferenceEnumState format 1: parallelism 2, owners a->0 b->1 c->0, pending [split c 5..9 (v1)]
STATE_V1 = (
    "484c5631000000010000000200000003000000016100000000000000016200000001000000016300000000"
    "000000010000001d484c563100000001000000016300000000000000050000000000000009"
)
# ReferenceEnumState format 2: parallelism 3, owners a0 b1 c2 d0, pending {2: c 5.., 0: d 0..10},
# awaiting {a}, discovery done
STATE_V2 = (
    "484c56310000000200000003010000000400000001610000000000000001620000000100000001630000000200"
    "000001640000000000000002000000000000001e484c5631000000020000000164000000000000000001000000"
    "000000000a0000000200000016484c5631000000020000000163000000000000000500000000010000000161"
)


def test_split_format_1_restores() -> None:
    split = read_versioned(NumberSplitSerializer(), bytes.fromhex(SPLIT_V1))
    assert split == NumberSplit("orders-3", 17, 40)


def test_split_format_2_restores_and_is_what_we_write() -> None:
    ser = NumberSplitSerializer()
    split = read_versioned(ser, bytes.fromhex(SPLIT_V2))
    assert split == NumberSplit("orders-3", 17, None)
    assert write_versioned(ser, split).hex() == SPLIT_V2


def test_enumerator_state_format_1_restores() -> None:
    ser = ReferenceEnumStateSerializer(NumberSplitSerializer())
    state = read_versioned(ser, bytes.fromhex(STATE_V1))
    assert state.parallelism == 2
    assert state.owners == {"a": 0, "b": 1, "c": 0}
    assert state.pending == {0: {"c": NumberSplit("c", 5, 9)}}
    assert state.awaiting_report == set()
    assert state.discovery_done is False


def test_enumerator_state_format_2_restores_and_is_what_we_write() -> None:
    ser = ReferenceEnumStateSerializer(NumberSplitSerializer())
    state = read_versioned(ser, bytes.fromhex(STATE_V2))
    expected = ReferenceEnumState(
        3,
        {"a": 0, "b": 1, "c": 2, "d": 0},
        {2: {"c": NumberSplit("c", 5, None)}, 0: {"d": NumberSplit("d", 0, 10)}},
        {"a"},
        True,
    )
    assert state == expected
    assert write_versioned(ser, expected).hex() == STATE_V2


def test_future_versions_are_refused_with_a_clear_error() -> None:
    future = bytes.fromhex(SPLIT_V2.replace("484c563100000002", "484c563100000003", 1))
    with pytest.raises(
        SplitSerializationError, match="NumberSplitSerializer cannot read format version 3"
    ):
        read_versioned(NumberSplitSerializer(), future)


def test_corrupt_state_names_the_problem() -> None:
    truncated = bytes.fromhex(STATE_V2)[:-3]
    with pytest.raises(SplitSerializationError, match="truncated reference enumerator state"):
        read_versioned(ReferenceEnumStateSerializer(NumberSplitSerializer()), truncated)
