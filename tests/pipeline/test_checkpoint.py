"""The pipeline checkpoint: round trip, versioning, refusing another source."""

from __future__ import annotations

import pytest

from hoodline.errors import CheckpointMismatchError, SplitSerializationError
from hoodline.pipeline.checkpoint import PipelineCheckpoint
from hoodline.runtime.source_rounds import SourceCheckpoint


def _cp() -> PipelineCheckpoint:
    src = SourceCheckpoint(12, 3, b"enum-state", {0: [b"a", b"b"], 2: [b"c"]})
    return PipelineCheckpoint(12, "kafka", "topics:events", src)


def test_round_trip() -> None:
    cp = _cp()
    text = cp.encode()
    assert text.isascii() and "events" not in text  # base64, stored as a string
    assert PipelineCheckpoint.decode(text) == cp


def test_garbage_and_future_versions_are_refused() -> None:
    with pytest.raises(SplitSerializationError, match="not base64"):
        PipelineCheckpoint.decode("***")
    with pytest.raises(SplitSerializationError, match="not the marker b'HLPC'"):
        PipelineCheckpoint.decode("aGVsbG8gd29ybGQ=")
    import base64

    raw = bytearray(base64.b64decode(_cp().encode()))
    raw[4:8] = (99).to_bytes(4, "big")
    with pytest.raises(SplitSerializationError, match="version 99"):
        PipelineCheckpoint.decode(base64.b64encode(bytes(raw)).decode())


#: The checkpoint of _cp() as hoodline 0.1 stored it in commit metadata (version 1). A change of
#: the format must keep reading these bytes (add a version, never change this one).
GOLDEN_V1 = (
    "SExQQwAAAAEAAAAAAAAADAAAAAVrYWZrYQAAAA10b3BpY3M6ZXZlbnRzAAAARUhMU0MAAAABAAAAAAAAAAwAAAADAAAA"
    "CmVudW0tc3RhdGUAAAACAAAAAAAAAAIAAAABYQAAAAFiAAAAAgAAAAEAAAABYw=="
)


def test_golden_bytes_of_version_1() -> None:
    assert PipelineCheckpoint.decode(GOLDEN_V1) == _cp()
    assert _cp().encode() == GOLDEN_V1


def test_compatibility() -> None:
    cp = _cp()
    cp.check_compatible("kafka", "topics:events", "/t")
    with pytest.raises(CheckpointMismatchError, match=r"'kafka' source.*'files' source"):
        cp.check_compatible("files", "/landing|jsonl", "/t")
    with pytest.raises(CheckpointMismatchError, match="'topics:other'"):
        cp.check_compatible("kafka", "topics:other", "/t")
