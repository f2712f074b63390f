"""bench.avro_decode: a tiny run; hoodline's table equals both peers' (checked inside)."""

from __future__ import annotations

import pytest

from bench import avro_decode


def test_bench_avro_decode_small(capsys: pytest.CaptureFixture[str]) -> None:
    avro_decode.main(["--records", "3000", "--runs", "1"])
    out = capsys.readouterr().out
    assert "3,000 values of a 12-field record" in out
    for system in ("| hoodline |", "| confluent |", "| fastavro |"):
        assert system in out


def test_bench_avro_decode_debezium_small(capsys: pytest.CaptureFixture[str]) -> None:
    avro_decode.main(["--records", "2000", "--runs", "1", "--schema", "debezium"])
    assert "2,000 values of Debezium change events" in capsys.readouterr().out
