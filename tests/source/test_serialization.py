from __future__ import annotations

import pytest

from hoodline.errors import SplitSerializationError
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    read_versioned,
    unsupported_version,
    write_versioned,
)


class _TextSerializer(VersionedSerializer[str]):
    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: str) -> bytes:
        return BinaryWriter().write_str(obj).to_bytes()

    def deserialize(self, version: int, data: bytes) -> str:
        if version == 1:
            return data.decode("ascii")
        if version == 2:
            reader = BinaryReader(data, "text")
            text = reader.read_str()
            reader.expect_end()
            return text
        raise unsupported_version(self, version)


def test_binary_round_trip_of_every_primitive() -> None:
    data = (
        BinaryWriter()
        .write_bool(True)
        .write_int(-7)
        .write_long(2**40)
        .write_optional_long(None)
        .write_optional_long(5)
        .write_str("päth/ä")
        .write_bytes(b"\x00\x01")
        .write_str_list(["a", "", "c"])
        .to_bytes()
    )
    r = BinaryReader(data)
    assert r.read_bool() is True
    assert r.read_int() == -7
    assert r.read_long() == 2**40
    assert r.read_optional_long() is None
    assert r.read_optional_long() == 5
    assert r.read_str() == "päth/ä"
    assert r.read_bytes() == b"\x00\x01"
    assert r.read_str_list() == ["a", "", "c"]
    r.expect_end()


def test_truncated_bytes_name_offset() -> None:
    data = BinaryWriter().write_str("hello").to_bytes()[:-2]
    with pytest.raises(SplitSerializationError, match=r"truncated split.*offset 4"):
        BinaryReader(data, "split").read_str()


def test_trailing_bytes_are_refused() -> None:
    r = BinaryReader(b"\x00\x00\x00\x01", "state")
    r.read_bool()
    with pytest.raises(SplitSerializationError, match="3 unexpected trailing bytes in state"):
        r.expect_end()


def test_versioned_envelope_round_trip_and_old_version() -> None:
    ser = _TextSerializer()
    data = write_versioned(ser, "abc")
    assert read_versioned(ser, data) == "abc"
    # bytes of version 1 (plain ascii) written by an earlier release, with the envelope
    v1 = b"HLV1\x00\x00\x00\x01abc"
    assert read_versioned(ser, v1) == "abc"


def test_unknown_version_and_bad_magic_fail_clearly() -> None:
    ser = _TextSerializer()
    with pytest.raises(SplitSerializationError, match=r"format version 9; it reads versions 1, 2"):
        read_versioned(ser, b"HLV1\x00\x00\x00\x09abc")
    with pytest.raises(SplitSerializationError, match="marker"):
        read_versioned(ser, b"XXXX\x00\x00\x00\x01abc")
    with pytest.raises(SplitSerializationError, match="too short"):
        read_versioned(ser, b"HL")
