"""Versioned serializers: round trips, pinned version-1 bytes, clear errors on bad bytes.

Only format version 1 exists so far. The pinned bytes below were written by version 1; when a
version 2 is introduced these tests must keep passing unchanged (old checkpoints must restore).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.connectors.files import (
    FileEnumeratorState,
    FileEnumeratorStateSerializer,
    FileSourceSplit,
    FileSplitSerializer,
    RejectedFile,
    SplitKind,
)
from hoodline.errors import SplitSerializationError
from hoodline.source.serialization import read_versioned, write_versioned

SPLIT = FileSourceSplit("/d/a.parquet", 1000, 1700000000123456789, SplitKind.ROW_GROUPS, 2, 4, 17)
STATE = FileEnumeratorState(
    processed={"/d/a.parquet": (1000, 1700000000123456789)},
    pending=[SPLIT],
    assignment={"/d/b.jsonl": 1},
    rejected=[RejectedFile("/d/c.csv", "/d/c.csv", "bad", 3)],
    discovery_done=True,
)
SPLIT_V1 = bytes.fromhex(
    "484c5631000000010000000c2f642f612e7061727175657400000000000003e817979cfe3d85cd15000000010000"
    "00000000000200000000000000040000000000000011"
)
STATE_V1 = bytes.fromhex(
    "484c563100000001789c63606060646060e0d14fd14fd42b482c2a2c4d2d610003e617e2d3e7fcb36d3d2bca40bc"
    "1a106082d22c505a102ac705d49fa497559c9f97031501610ea068b25e7271191a9b392931056a003323005cef1c88"
)


def test_version_1_bytes_still_restore() -> None:
    assert read_versioned(FileSplitSerializer(), SPLIT_V1) == SPLIT
    assert read_versioned(FileEnumeratorStateSerializer(), STATE_V1) == STATE


splits = st.builds(
    lambda path, size, mtime, kind, a, n, skip: FileSourceSplit(
        path, size, mtime, kind, *((a, a + n) if kind is not SplitKind.FILE else (0, size)),
        skip),
    st.text(min_size=1, max_size=40), st.integers(0, 2**40), st.integers(0, 2**62),
    st.sampled_from(SplitKind), st.integers(0, 2**30), st.integers(0, 2**30),
    st.integers(0, 2**40))


@given(splits)
def test_split_round_trip(split: FileSourceSplit) -> None:
    ser = FileSplitSerializer()
    assert read_versioned(ser, write_versioned(ser, split)) == split


@given(st.lists(splits, max_size=5), st.dictionaries(st.text(max_size=20), st.integers(-1, 64),
                                                     max_size=5), st.booleans())
def test_state_round_trip(pending: list[FileSourceSplit], assignment: dict[str, int],
                          done: bool) -> None:
    state = FileEnumeratorState(
        processed={s.path: (s.size, s.mtime_ns) for s in pending}, pending=pending,
        assignment=assignment, rejected=[RejectedFile("p", "p#x", "why ü", 4)],
        discovery_done=done)
    ser = FileEnumeratorStateSerializer()
    assert read_versioned(ser, write_versioned(ser, state)) == state


def test_unknown_version_and_corrupt_bytes_are_clear_errors() -> None:
    with pytest.raises(SplitSerializationError, match="cannot read format version 9"):
        FileSplitSerializer().deserialize(9, b"")
    with pytest.raises(SplitSerializationError, match="truncated"):
        read_versioned(FileSplitSerializer(), SPLIT_V1[:-3])
    with pytest.raises(SplitSerializationError, match="corrupt"):
        read_versioned(FileEnumeratorStateSerializer(), STATE_V1[:8] + b"garbage")
    bad_kind = bytearray(SPLIT_V1)
    bad_kind[-25] = 7  # low byte of the kind field (followed by three longs)
    with pytest.raises(SplitSerializationError, match="unknown kind 7"):
        read_versioned(FileSplitSerializer(), bytes(bad_kind))
