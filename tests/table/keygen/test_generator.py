"""Partition paths of the timestamp and custom key generators (pure, no I/O)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hoodline.errors import ConfigError, InvalidRecordsError
from hoodline.table.keygen.generator import LOCAL_MAX_FOLDER_BYTES, KeyGenerator
from hoodline.table.properties import TableConfig

P = "hoodie.keygen.timebased."
DAY_MS = 86_400_000
MILLIS = {P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.timezone": "UTC"}


def _config(fields: tuple[str, ...], kind: str, pattern: str, **kw: object) -> TableConfig:
    extra = dict(MILLIS, **{P + "output.dateformat": pattern})
    return TableConfig("t", ("id",), fields, key_generator=kind, extra=extra, **kw)  # type: ignore[arg-type]


def _batch() -> pa.Table:
    return pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"],
                     "ts": [0, 45 * DAY_MS + 3_600_000, -1]})


def test_timestamp_generator_writes_dated_folder_levels() -> None:
    kg = KeyGenerator(_config(("ts",), "timestamp", "yyyy/MM/dd"))
    assert kg.partition_paths(_batch()).to_pylist() == [
        "ts=1970/01/01", "ts=1970/02/15", "ts=1969/12/31"
    ]
    assert kg.record_keys(_batch()).to_pylist() == ["1", "2", "3"]  # Simple keys
    plain = KeyGenerator(_config(("ts",), "timestamp", "yyyyMMdd", hive_style_partitioning=False))
    assert plain.partition_paths(_batch()).to_pylist() == ["19700101", "19700215", "19691231"]
    encoded = KeyGenerator(_config(("ts",), "timestamp", "yyyy/MM", url_encode_partitions=True))
    assert encoded.partition_paths(_batch()).to_pylist()[0] == "ts=1970%2F01"


def test_custom_generator_mixes_simple_and_timestamp_fields() -> None:
    cfg = _config(("region", "ts"), "custom", "yyyy-MM",
                  partition_kinds=("simple", "timestamp"), hive_style_partitioning=False)
    kg = KeyGenerator(cfg)
    assert kg.partition_paths(_batch()).to_pylist() == ["eu/1970-01", "us/1970-02", "eu/1969-12"]
    two_keys = TableConfig("t", ("id", "region"), ("region",), key_generator="custom",
                           partition_kinds=("simple",))
    assert KeyGenerator(two_keys).record_keys(_batch()).to_pylist()[0] == "id:1,region:eu"


def test_null_and_unreadable_partition_values_are_refused_with_the_value() -> None:
    kg = KeyGenerator(_config(("ts",), "timestamp", "yyyy"))
    with pytest.raises(InvalidRecordsError, match="'ts' is null in 1 of 2"):
        kg.partition_paths(pa.table({"id": [1, 2], "ts": [1, None]}))
    with pytest.raises(InvalidRecordsError, match="holds strings"):
        kg.partition_paths(pa.table({"id": [1], "ts": ["2024"]}))
    empty_level = KeyGenerator(_config(("ts",), "timestamp", "yyyy//MM"))
    with pytest.raises(InvalidRecordsError, match=r"empty, '\.' or '\.\.' folder level"):
        empty_level.partition_paths(_batch())
    # microseconds read as milliseconds: year 56135, which pyarrow's year wraps to -9401
    with pytest.raises(InvalidRecordsError, match=r"'ts' value 1709287200000000 is a time "
                       r"outside the years -9999 to 9999 .*\(read as milliseconds: a number in the "
                       r"wrong unit\?\)"):
        kg.partition_paths(pa.table({"id": [1, 2], "ts": [0, 1709287200000000]}))
    assert kg.partition_paths(pa.table({"id": [1], "ts": [253402300799999]})).to_pylist() == [
        "ts=9999"]


@pytest.mark.parametrize(("settings", "message"), [
    ({P + "output.dateformat": "yyyy"}, "timestamp.type' is not set"),
    ({P + "timestamp.type": "SCALAR"}, "output.dateformat' is not set"),
    ({P + "timestamp.type": "SCALAR", P + "output.dateformat": "yyyy"},
     "JVM's default time zone"),
    ({P + "timestamp.type": "DATE_STRING", P + "output.dateformat": "yyyy",
      P + "output.timezone": "UTC"}, "input.dateformat' is not set"),
    ({P + "timestamp.type": "DATE_STRING", P + "output.dateformat": "yyyy",
      P + "output.timezone": "UTC", P + "input.dateformat": "yyyy-MM-dd"}, "no offset"),
    ({P + "timestamp.type": "SCALAR", P + "output.dateformat": "yyyy MMM",
      P + "output.timezone": "UTC"}, "month names"),
    ({P + "timestamp.type": "SCALAR", P + "output.dateformat": "yyyy",
      P + "output.timezone": "PST"}, "ambiguous"),
    ({P + "timestamp.type": "SCALAR", P + "output.dateformat": "yyyy",
      P + "output.timezone": "Mars/Olympus"}, "not a known IANA zone"),
    ({P + "timestamp.type": "SECONDS", P + "output.dateformat": "yyyy",
      P + "output.timezone": "UTC"}, "'SECONDS'"),
    ({P + "timestamp.type": "SCALAR", P + "output.dateformat": "yyyy EEE",
      P + "output.timezone": "UTC"}, "letter 'E'"),
])
def test_incomplete_or_ambiguous_settings_are_refused_naming_the_key(
    settings: dict[str, str], message: str
) -> None:
    cfg = TableConfig("t", ("id",), ("ts",), key_generator="timestamp", extra=settings)
    with pytest.raises(ConfigError, match=message):
        KeyGenerator(cfg)


def test_deprecated_zone_key_sets_both_zones() -> None:
    settings = {P + "timestamp.type": "DATE_STRING", P + "output.dateformat": "HH",
                P + "input.dateformat": "yyyy-MM-dd HH", P + "timezone": "GMT+02:00"}
    cfg = TableConfig("t", ("id",), ("ts",), key_generator="timestamp", extra=settings,
                      hive_style_partitioning=False)
    paths = KeyGenerator(cfg).partition_paths(pa.table({"id": [1], "ts": ["2024-01-05 10"]}))
    assert paths.to_pylist() == ["10"]


def test_multi_field_keys_write_null_and_empty_parts_as_java_does() -> None:
    """KeyGenUtils.getRecordKey: a null part is `f:__null__`, an empty one `f:__empty__`; a key
    whose parts are all null or empty is refused (by Java too)."""
    cfg = TableConfig("t", ("a", "b"), ())
    batch = pa.table({"a": pa.array([1, 2, 3, None], pa.int64()),
                      "b": pa.array(["x", "", None, "y"])})
    assert KeyGenerator(cfg).record_keys(batch).to_pylist() == [
        "a:1,b:x", "a:2,b:__empty__", "a:3,b:__null__", "a:__null__,b:y"
    ]
    keyless = pa.table({"a": pa.array([1, None], pa.int64()), "b": pa.array(["x", ""])})
    with pytest.raises(InvalidRecordsError, match="a, b are all null or empty at row 1"):
        KeyGenerator(cfg).record_keys(keyless)
    single = TableConfig("t", ("a",), ())
    with pytest.raises(InvalidRecordsError, match="'a' is null"):
        KeyGenerator(single).record_keys(batch)


@pytest.mark.parametrize("config", [
    _config(("ts",), "timestamp", "yyyy/MM/dd"),
    # timestamps of one year: several rows, distinct values, one path
    _config(("ts",), "timestamp", "yyyy"),
    _config(("ts",), "timestamp", "yyyy/MM", url_encode_partitions=True),
    _config(("region", "ts"), "custom", "yyyy-MM", partition_kinds=("simple", "timestamp")),
    TableConfig("t", ("id",), ("region",)),
    TableConfig("t", ("id",), ("region",), hive_style_partitioning=False),
    TableConfig("t", ("id",), ()),
], ids=["timestamp", "one-year", "url-encoded", "custom-two-fields", "hive", "plain", "none"])
def test_dictionary_partition_paths_decode_to_the_strings(config: TableConfig) -> None:
    from hoodline.table.write.records import dictionary_codes

    batch = pa.concat_tables([_batch(), _batch()])  # two chunks
    kg = KeyGenerator(config)
    strings = kg.partition_paths(batch)
    encoded = kg.partition_paths(batch, dictionary=True)
    assert encoded.cast(pa.string()).to_pylist() == strings.to_pylist()
    if len(config.partition_fields) <= 1:  # several fields join strings per row
        assert pa.types.is_dictionary(encoded.type)
    # rows group alike either way (a value twice in a dictionary still gets one code)
    codes, values = dictionary_codes(encoded)
    assert [values[c] for c in codes] == strings.to_pylist()
    assert len(set(values)) == len(values)


def test_a_nan_ordering_value_is_refused_naming_the_row() -> None:
    """Written as it came, a NaN ordering value decided differently in every writer and reader
    (Python API review)."""
    from hoodline.table.keygen.values import require_ordering

    batch = pa.table({"id": [1, 2, 3], "ver": [1.0, float("nan"), None]})
    with pytest.raises(InvalidRecordsError, match=r"'ver' is null in 1 of 3"):
        require_ordering(batch, "ver")
    with pytest.raises(InvalidRecordsError, match=r"ordering \(precombine\) column 'ver' is NaN "
                       r"in 1 of 2 record\(s\), first at row 1; NaN has no order among numbers"):
        require_ordering(batch.slice(0, 2), "ver")
    assert require_ordering(pa.table({"ver": [1, 2]}), "ver").to_pylist() == [1, 2]


def test_folder_checks_take_every_type_a_partition_field_may_have() -> None:
    """The per-row check of folder names looked at string columns only: a ``large_string``
    partition column failed every round (its folders could not be joined with the field
    name), and a number under a 250-character field name passed the check, then failed the
    batch where its path was made (review of the check)."""
    config = TableConfig("t", ("id",), ("day",), None)
    big = pa.table({"id": [1, 2], "day": pa.array(["2024-03-01", "x" * 300], pa.large_string())})
    keygen = KeyGenerator(config, LOCAL_MAX_FOLDER_BYTES)
    (bad,) = keygen.unusable_rows(big)
    assert (bad.field, bad.rows.to_pylist()) == ("day", [False, True])
    assert KeyGenerator(config, LOCAL_MAX_FOLDER_BYTES).partition_paths(
        big.slice(0, 1)).to_pylist() == ["day=2024-03-01"]
    name = "n" * 250
    numbers = pa.table({"id": [1, 2], name: pa.array([5, 12345], pa.int64())})
    (bad,) = KeyGenerator(TableConfig("t", ("id",), (name,), None),
                          LOCAL_MAX_FOLDER_BYTES).unusable_rows(numbers)
    assert bad.rows.to_pylist() == [False, True]  # f"{name}=5" is 252 bytes, 12345 is 256
    # without a limit (object stores) nothing is refused
    assert KeyGenerator(config).unusable_rows(big) == []
