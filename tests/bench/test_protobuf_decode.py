"""bench.protobuf_decode: a tiny run; hoodline's table equals both peers' (checked inside)."""

from __future__ import annotations

import pytest

from bench import protobuf_decode


def test_bench_protobuf_decode_small(capsys: pytest.CaptureFixture[str]) -> None:
    protobuf_decode.main(["--records", "3000", "--runs", "1"])
    out = capsys.readouterr().out
    assert "3,000 values of a 12-field Protobuf message" in out
    for system in ("| hoodline |", "| runtime |", "| confluent |"):
        assert system in out


def test_bench_protobuf_decode_nested_small(capsys: pytest.CaptureFixture[str]) -> None:
    protobuf_decode.main(["--records", "2000", "--runs", "1", "--message", "event"])
    assert "2,000 values of an event Protobuf message" in capsys.readouterr().out
