"""Timestamp-based partition paths equal the ones Java Hudi's TimestampBasedAvroKeyGenerator
makes, computed by ``fixtures/JodaTimestampPath.java`` with the Joda-Time jar pyspark ships."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hoodline.errors import InvalidRecordsError
from hoodline.table.keygen.timestamp import TimestampKeyOptions
from tests.helpers.java_reference import pyspark_jars, run_java

FIX = Path(__file__).parent / "fixtures"
P = "hoodie.keygen.timebased."
RNG = np.random.default_rng(11)


def _java_paths(
    tmp_path: Path, settings: dict[str, str], values: list[tuple[str, str]]
) -> list[str]:
    (tmp_path / "settings.txt").write_text(
        "".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8"
    )
    (tmp_path / "values.txt").write_text(
        "".join(f"{k}\t{v}\n" for k, v in values), encoding="utf-8"
    )
    out = run_java(FIX / "JodaTimestampPath.java", str(tmp_path / "settings.txt"),
                   str(tmp_path / "values.txt"), classpath=pyspark_jars("joda-time-"),
                   options=["-Duser.timezone=UTC"])
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split("\n")[: len(values)]
    assert len(lines) == len(values)
    return lines


def _options(settings: dict[str, str]) -> TimestampKeyOptions:
    keys = {
        "type": "timestamp.type", "unit": "timestamp.scalar.time.unit",
        "inputFormats": "input.dateformat", "inputZone": "input.timezone",
        "outputZone": "output.timezone", "outputFormat": "output.dateformat",
    }
    return TimestampKeyOptions.from_settings({P + keys[k]: v for k, v in settings.items()}, "t")


def _compare(
    tmp_path: Path, settings: dict[str, str], column: pa.Array, kind: str,
    java_values: list[str] | None = None,
) -> list[str]:
    """hoodline's paths for ``column`` equal Java's; values Java fails on are refused."""
    texts = java_values if java_values is not None else [str(v) for v in column.to_pylist()]
    expected = _java_paths(tmp_path, settings, [(kind, t) for t in texts])
    opts = _options(settings)
    good = [i for i, e in enumerate(expected) if e != "ERROR"]
    ours = opts.partition_values(column.take(pa.array(good, pa.int64())), "ts").to_pylist()
    wrong = [(texts[i], o, expected[i]) for i, o in zip(good, ours, strict=True)
             if o != expected[i]]
    assert not wrong, f"{len(wrong)} of {len(good)} paths differ from Java's, first: {wrong[:5]}"
    for i, e in enumerate(expected):
        if e == "ERROR":
            with pytest.raises(InvalidRecordsError, match="ts"):
                opts.partition_values(column.slice(i, 1), "ts")
    return expected


def _longs(scale: float, n: int = 300) -> np.ndarray:
    edge = np.array([0, 1, -1, 999, -999, 1000, -1000, 86_399_999, -86_400_001])
    return np.concatenate([edge, (RNG.standard_normal(n) * scale).astype(np.int64)])


def test_epoch_milliseconds_as_dated_folders(tmp_path: Path) -> None:
    settings = {"type": "EPOCHMILLISECONDS", "outputZone": "UTC", "outputFormat": "yyyy/MM/dd"}
    paths = _compare(tmp_path, settings, pa.array(_longs(3e12)), "long")
    assert paths[0] == "1970/01/01" and paths[2] == "1969/12/31"


def test_unix_seconds_and_doubles_in_a_zone_with_an_offset(tmp_path: Path) -> None:
    settings = {"type": "UNIX_TIMESTAMP", "outputZone": "Asia/Kolkata",
                "outputFormat": "yyyyMMddHH"}
    _compare(tmp_path, settings, pa.array(_longs(2e9)), "long")
    doubles = np.concatenate([[0.5, -0.5, -1.7, 1.7], RNG.standard_normal(200) * 2e9])
    _compare(tmp_path, settings, pa.array(doubles), "double",
             java_values=[repr(float(d)) for d in doubles])


def test_scalar_microseconds_with_fraction_and_offset_in_a_dst_zone(tmp_path: Path) -> None:
    settings = {
        "type": "SCALAR", "unit": "MICROSECONDS", "outputZone": "America/New_York",
        "outputFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS ZZ 'h'H Z",
    }
    paths = _compare(tmp_path, settings, pa.array(_longs(3e15)), "long")
    assert paths[2] == "1969-12-31T19:00:00.000 -05:00 h19 -0500"  # -1 µs truncates to 0 ms


def test_scalar_days_of_a_date_column(tmp_path: Path) -> None:
    settings = {"type": "SCALAR", "unit": "DAYS", "outputZone": "UTC",
                "outputFormat": "yy/M/d-DDD-yyyyy"}
    days = np.concatenate([[0, -1, 59, 365, 10_957, 19_782], RNG.integers(-30_000, 60_000, 200)])
    _compare(tmp_path, settings, pa.array(days.astype(np.int32), pa.date32()), "epochday",
             java_values=[str(int(d)) for d in days])


def test_timestamp_column_with_consistent_logical_timestamps(tmp_path: Path) -> None:
    settings = {"type": "EPOCHMILLISECONDS", "outputZone": "Europe/Paris",
                "outputFormat": "yyyy/MM/dd/HH"}
    micros = _longs(2e15)
    millis = [str(int(np.sign(m) * (abs(int(m)) // 1000))) for m in micros]  # Java's m / 1000
    column = pa.array(micros, pa.timestamp("us"))
    expected = _java_paths(tmp_path, settings, [("instantmillis", m) for m in millis])
    opts = TimestampKeyOptions.from_settings(
        {P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.timezone": "Europe/Paris",
         P + "output.dateformat": "yyyy/MM/dd/HH",
         "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled": "true"},
        "t",
    )
    assert opts.partition_values(column, "ts").to_pylist() == expected
    with pytest.raises(InvalidRecordsError, match=r"consistent\.logical\.timestamp"):
        _options(settings).partition_values(column, "ts")


DATE_STRINGS = [
    "2024-01-05T10:11:12.345+0100", "2024-01-05T10:11:12.3+0100", "2024-01-05T10:11:12.123456Z",
    "2024-01-05T10:11:12+05:30", "2024-01-05T10:11:12-0800", "2024-01-05T10:11:12Z",
    "20240105", "2024015", "202401", "20241305", "20240230", "20240229", "20230229",
    "2024-03-31T02:30:00", "2024-03-31T02:30:00+0200", "2024-10-27T02:30:00",
    "2024-1-5T1:2:3", "2024-01-05", "garbage", "", "2024-01-05T24:00:00Z", "2024-01-05T23:60:00Z",
    "0999-12-31T23:59:59Z", "-0044-03-15T12:00:00Z", "2024-01-05T10:11:12.345 +0100",
    "2024-01-05T10:11:12.1234+0100", "2024-01-05T10:11:12+01", "2024-01-05T10:11:12+01:30:15",
    "2024-01-05T10:11:12z", "2024-01-05T10:11:12+013", "2024-01-05T10:11:12+25:00",
    "2024-01-05T10:11:12.5-00:00", "2044-07-01T12:00:00", "2044-10-30T02:30:00",
    "2044-03-27T02:30:00",
]


def test_date_strings_with_several_input_formats(tmp_path: Path) -> None:
    settings = {
        "type": "DATE_STRING",
        "inputFormats": "yyyy-MM-dd'T'HH:mm:ss.SSSZ,yyyy-MM-dd'T'HH:mm:ssZZ,yyyyMMdd,"
        "yyyy-MM-dd'T'HH:mm:ss",
        "inputZone": "Europe/Paris", "outputZone": "GMT+05:30",
        "outputFormat": "yyyy/MM/dd/HH-mm-ss.SS Z",
    }
    expected = _compare(tmp_path, settings, pa.array(DATE_STRINGS), "string")
    assert expected.count("ERROR") >= 8  # the malformed ones really are refused by both


def test_mixed_strings_in_utc_with_short_fields(tmp_path: Path) -> None:
    settings = {
        "type": "MIXED", "inputFormats": "yyyy-MM-dd HH:mm|dd.MM.yyyy", "inputZone": "UTC",
        "outputZone": "UTC", "outputFormat": "yyyy/M/d",
    }
    values = ["2024-01-05 10:11", "05.01.2024", "5.1.2024", "2024-01-05", "31.04.2024"]
    settings_java = dict(settings, delimiter="\\|")
    expected = _java_paths(tmp_path, settings_java, [("string", v) for v in values])
    opts = TimestampKeyOptions.from_settings(
        {P + "timestamp.type": "MIXED", P + "input.dateformat": settings["inputFormats"],
         P + "input.dateformat.list.delimiter.regex": "\\|", P + "input.timezone": "UTC",
         P + "output.timezone": "UTC", P + "output.dateformat": "yyyy/M/d"}, "t")
    for value, want in zip(values, expected, strict=True):
        if want == "ERROR":
            with pytest.raises(InvalidRecordsError):
                opts.partition_values(pa.array([value]), "ts")
        else:
            assert opts.partition_values(pa.array([value]), "ts").to_pylist() == [want]
    assert expected[:3] == ["2024/1/5"] * 3
