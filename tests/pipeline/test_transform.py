"""Record keying and per-round reduction (pure Arrow, no Spark)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from hoodline.connectors.files.plugin import FileRecords
from hoodline.connectors.files.rejections import rejected_records_batch
from hoodline.connectors.kafka import KAFKA_RECORD_SCHEMA
from hoodline.connectors.kafka.plugin import RAW_KAFKA_SCHEMA, KafkaRecords
from hoodline.errors import InvalidRecordsError
from hoodline.pipeline.transform import SEQ, Prepared, RecordSpec, keyed_schema, resolve
from hoodline.table.keygen.generator import LOCAL_MAX_FOLDER_BYTES, KeyGenerator
from hoodline.table.properties import TableConfig
from hoodline.table.write.context import WriteContext
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import IS_DELETE, RECORD_KEY

DECLARED = pa.schema([("id", pa.int64()), ("name", pa.string()), ("region", pa.string()),
                      ("ts", pa.int64()), ("deleted", pa.bool_())])


#: a file version's modification time: 2024-03-01T12:00:00Z
MTIME_NS = 1_709_294_400 * 1_000_000_000


def _spec(partitioned: bool = True, precombine: str | None = "ts",
          operation: str = "UPSERT") -> RecordSpec:
    config = TableConfig("t", ("id",), ("region",) if partitioned else (), precombine)
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", operation,
                       DECLARED)
    return RecordSpec(ctx, DECLARED, "deleted", 7)


def prepare_kafka(spec: RecordSpec, batch: pa.RecordBatch, raw: bool = False) -> Prepared:
    return KafkaRecords(raw).prepare_batch(spec, batch)


def _kafka(values: list[bytes | None], keys: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {"key": keys, "value": values, "topic": ["tp"] * n, "partition": [0] * n,
         "offset": list(range(100, 100 + n)), "timestamp": [None] * n, "headers": [None] * n},
        schema=KAFKA_RECORD_SCHEMA,
    )


def _rec(i: int, ts: int, deleted: bool = False) -> bytes:
    return json.dumps({"id": i, "name": f"n{ts}", "region": "r1", "ts": ts,
                       "deleted": deleted}).encode()


def test_kafka_batch_keys_records_deletes_tombstones_and_bad_records() -> None:
    batch = _kafka(
        [_rec(1, 1), _rec(2, 2, deleted=True), None, b"garbage", None,
         b'{"id": 9, "region": "r1"}', None],
        [b"k", b"k", json.dumps({"id": 3, "region": "r1"}).encode(), b"k", None, b"k",
         b'{"nope": 1}'],
    )
    out = prepare_kafka(_spec(), batch)
    recs = out.records
    assert recs.schema == keyed_schema(DECLARED)
    assert recs.column(RECORD_KEY).to_pylist() == ["1", "2", "3"]
    assert recs.column(IS_DELETE).to_pylist() == [False, True, True]
    assert recs.column(SEQ).to_pylist() == [100, 101, 102]
    assert recs.column("ts").to_pylist() == [1, 2, None]  # tombstones carry no ordering
    errors = out.errors.to_pylist()
    assert [(e["offset"], e["reason"]) for e in errors] == [
        (103, "unparseable"), (104, "null_value"), (105, "missing_key"),
        (106, "bad_tombstone_key"),
    ]
    assert errors[0]["value"] == b"garbage" and errors[0]["round_id"] == 7
    assert recs.num_rows + len(errors) == batch.num_rows  # nothing dropped


def test_plain_tombstone_key_for_a_single_unpartitioned_key() -> None:
    batch = _kafka([None, None], [b"42", b"x"])
    out = prepare_kafka(_spec(partitioned=False), batch)
    assert out.records.column("id").to_pylist() == [42]
    assert [e["reason"] for e in out.errors.to_pylist()] == ["bad_tombstone_key"]


def test_each_tombstone_key_is_read_on_its_own_plain_json_string_or_object() -> None:
    """A plain key was refused when another tombstone of the batch had a JSON-object key, and
    a JSON string key ("2", as JSON key serializers write) was taken with its quotes: a delete
    of a key that does not exist, silently."""
    keys = [b"1", b'"2"', b'{"id": 3}', b"4", b'"x"', b'"1\\u0030"']
    out = prepare_kafka(_spec(partitioned=False), _kafka([None] * len(keys), keys))
    assert sorted(out.records.column("id").to_pylist()) == [1, 2, 3, 4, 10]
    assert set(out.records.column(IS_DELETE).to_pylist()) == {True}
    assert [(e["offset"], e["reason"]) for e in out.errors.to_pylist()] == [
        (104, "bad_tombstone_key")]
    # without an object key in the batch, the same
    plain = prepare_kafka(_spec(partitioned=False), _kafka([None, None], [b"1", b'"2"']))
    assert sorted(plain.records.column("id").to_pylist()) == [1, 2]
    # string keys: the JSON string's text, escapes decoded
    config = TableConfig("t", ("name",), (), "ts")
    spec = RecordSpec(WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000",
                                   "UPSERT", DECLARED), DECLARED, "deleted", 7)
    named = prepare_kafka(spec, _kafka([None] * 4, [b"a1", b'"a2"', b'{"name": "a3"}',
                                                   b'"a\\"4"']))
    assert sorted(named.records.column(RECORD_KEY).to_pylist()) == ["a\"4", "a1", "a2", "a3"]


def _keyed(rows: list[tuple[int, int | None, bool, int]]) -> pa.Table:
    """(id, ts, is_delete, seq) rows in keyed schema."""
    schema = keyed_schema(DECLARED)
    cols = {f.name: pa.nulls(len(rows), f.type) for f in schema}
    cols["id"] = pa.array([r[0] for r in rows], pa.int64())
    cols["ts"] = pa.array([r[1] for r in rows], pa.int64())
    cols[RECORD_KEY] = pa.array([str(r[0]) for r in rows])
    cols["_hoodie_partition_path"] = pa.array(["region=r1"] * len(rows))
    cols[IS_DELETE] = pa.array([r[2] for r in rows])
    cols[SEQ] = pa.array([r[3] for r in rows], pa.int64())
    return pa.table(cols, schema=schema)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # highest ordering wins regardless of arrival order
        ([(1, 5, False, 1), (1, 3, False, 2)], [(1, 5, False)]),
        # a tombstone after the winner deletes; one before it loses
        ([(1, 5, False, 1), (1, None, True, 2)], [(1, None, True)]),
        ([(1, None, True, 1), (1, 5, False, 2)], [(1, 5, False)]),
        # delete-flagged records take part in ordering like any record
        ([(1, 9, True, 1), (1, 5, False, 2)], [(1, 9, True)]),
        # a key with only tombstones stays a delete; other keys untouched
        ([(2, None, True, 3), (1, 1, False, 1), (2, None, True, 4)],
         [(1, 1, False), (2, None, True)]),
    ],
)
def test_resolve(rows: list[tuple[int, int | None, bool, int]],
                 expected: list[tuple[int, int | None, bool]]) -> None:
    out = resolve(_keyed(rows), "ts")
    got = sorted(zip(out.column("id").to_pylist(), out.column("ts").to_pylist(),
                     out.column(IS_DELETE).to_pylist(), strict=True))
    assert got == expected


def test_resolve_without_ordering_is_last_by_sequence_not_input_order() -> None:
    rows = _keyed([(1, 1, False, 9), (1, 2, False, 3), (1, None, True, 5)])
    out = resolve(rows, None)
    assert out.column(SEQ).to_pylist() == [9]


def test_files_rows_without_key_become_error_rows_with_file_and_row() -> None:
    spec = _spec()
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "name": "a", "region": "r1", "ts": 1, "deleted": False},
         {"id": None, "name": "b", "region": "r1", "ts": 2, "deleted": False}],
        schema=DECLARED,
    )
    out = FileRecords.prepare_batch(spec, batch, "/in/f.jsonl", 40, MTIME_NS)
    assert out.records.column(SEQ).to_pylist() == [40]
    err = out.errors.to_pylist()
    # the day is the file version's, not the day it was read: a replay rewrites the same row
    assert [(e["file"], e["row"], e["reason"], e["error_id"], e["day"]) for e in err] == [
        ("/in/f.jsonl", 41, "missing_key", "file//in/f.jsonl/41", "2024-03-01")
    ]
    assert json.loads(err[0]["value"])["name"] == "b"


def test_missing_key_names_only_the_fields_that_are_null() -> None:
    spec = _spec()  # required: id (key), region (partition), ts (ordering)
    batch = pa.RecordBatch.from_pylist(
        [{"id": None, "name": "a", "region": "r1", "ts": 1, "deleted": False},
         {"id": 2, "name": "b", "region": None, "ts": None, "deleted": False},
         {"id": 3, "name": "c", "region": "r1", "ts": 3, "deleted": False},
         {"id": None, "name": "d", "region": "r2", "ts": 4, "deleted": False}],
        schema=DECLARED,
    )
    err = FileRecords.prepare_batch(spec, batch, "/in/f.jsonl", 0, MTIME_NS).errors.to_pylist()
    assert [(e["row"], e["detail"]) for e in err] == [
        (0, "null or missing in field(s) id"),
        (1, "null or missing in field(s) region, ts"),
        (3, "null or missing in field(s) id"),
    ]


def test_rejected_lines_become_error_rows_with_their_bytes_and_row() -> None:
    batch = rejected_records_batch(pa.array([b"{bad", b"[1]"]),
                                   pa.array(["unparseable", "not_object"]),
                                   pa.array(["line 12: invalid JSON", "line 14: an array"]))
    out = FileRecords.prepare_batch(_spec(), batch, "/in/f.jsonl", 10, MTIME_NS)
    assert out.records.num_rows == 0
    assert out.records.schema.equals(_spec().record_schema)
    err = out.errors.to_pylist()
    assert [(e["error_id"], e["row"], e["value"], e["reason"], e["detail"]) for e in err] == [
        ("file//in/f.jsonl/10", 10, b"{bad", "unparseable", "line 12: invalid JSON"),
        ("file//in/f.jsonl/11", 11, b"[1]", "not_object", "line 14: an array"),
    ]


def test_raw_format_passes_message_columns_through() -> None:
    config = TableConfig("t", ("topic", "partition", "offset"), ())
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       RAW_KAFKA_SCHEMA)
    spec = RecordSpec(ctx, RAW_KAFKA_SCHEMA, None, 1)
    out = prepare_kafka(spec, _kafka([b"\x00\x01binary", None], [None, b"k"]), raw=True)
    assert out.errors.num_rows == 0
    assert out.records.column("value").to_pylist() == [b"\x00\x01binary", None]
    assert out.records.column(RECORD_KEY).to_pylist() == [
        "topic:tp,partition:0,offset:100", "topic:tp,partition:0,offset:101"]


def test_error_rows_take_their_day_from_the_message_timestamp() -> None:
    import datetime as dt

    batch = _kafka([b"bad", b"worse"], [None, None])
    stamps = pa.array([dt.datetime(2023, 5, 6, 23, 59, tzinfo=dt.UTC), None],
                      pa.timestamp("ms", tz="UTC"))
    batch = batch.set_column(batch.schema.get_field_index("timestamp"), "timestamp", stamps)
    days = [e["day"] for e in prepare_kafka(_spec(), batch).errors.to_pylist()]
    assert days[0] == "2023-05-06"  # replays on another day land on the same row
    assert days[1] == dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")  # no timestamp: today


def _dated_spec() -> RecordSpec:
    """Partitioned by a date string the timestamp key generator reads."""
    p = "hoodie.keygen.timebased."
    config = TableConfig(
        "t", ("id",), ("region",), "ts", key_generator="timestamp",
        extra={p + "timestamp.type": "DATE_STRING", p + "input.dateformat": "yyyy-MM-dd",
               p + "input.timezone": "UTC", p + "output.timezone": "UTC",
               p + "output.dateformat": "yyyy/MM"},
    )
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       DECLARED)
    return RecordSpec(ctx, DECLARED, "deleted", 7)


def test_date_strings_no_format_reads_become_error_rows_not_a_failed_round() -> None:
    def rec(i: int, day: str | None) -> bytes:
        return json.dumps({"id": i, "name": "n", "region": day, "ts": 1,
                           "deleted": False}).encode()

    batch = _kafka([rec(1, "2024-05-01"), rec(2, "May 1st"), rec(3, None), rec(4, "2024-02-30"),
                    None],
                   [b"k"] * 4 + [json.dumps({"id": 5, "region": "someday"}).encode()])
    out = prepare_kafka(_dated_spec(), batch)
    assert out.records.column("_hoodie_partition_path").to_pylist() == ["region=2024/05"]
    errors = out.errors.to_pylist()
    assert sorted((e["offset"], e["reason"]) for e in errors) == [
        (101, "unreadable_partition"), (102, "missing_key"), (103, "unreadable_partition"),
        (104, "unreadable_partition"),
    ]
    assert "value 'May 1st' matches no input date format" in next(
        e["detail"] for e in errors if e["offset"] == 101)
    rows = pa.RecordBatch.from_pylist(
        [{"id": 1, "name": "a", "region": "2024-05-01", "ts": 1, "deleted": False},
         {"id": 2, "name": "b", "region": None, "ts": 2, "deleted": False},
         {"id": 3, "name": "c", "region": "05/01/2024", "ts": 3, "deleted": False}],
        schema=DECLARED,
    )
    files = FileRecords.prepare_batch(_dated_spec(), rows, "/in/f.jsonl", 0, MTIME_NS)
    assert files.records.column(SEQ).to_pylist() == [0]
    assert [(e["row"], e["reason"]) for e in files.errors.to_pylist()] == [
        (1, "missing_key"), (2, "unreadable_partition")
    ]


def test_a_multi_field_key_needs_one_of_its_fields() -> None:
    config = TableConfig("t", ("id", "name"), ("region",), "ts")
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       DECLARED)
    spec = RecordSpec(ctx, DECLARED, "deleted", 7)

    def rec(i: int | None, name: str | None) -> bytes:
        return json.dumps({"id": i, "name": name, "region": "r1", "ts": 1}).encode()

    out = prepare_kafka(spec, _kafka([rec(1, None), rec(None, ""), rec(None, "n")], [b"k"] * 3))
    assert out.records.column(RECORD_KEY).to_pylist() == ["id:1,name:__null__",
                                                          "id:__null__,name:n"]
    errors = out.errors.to_pylist()
    assert [(e["offset"], e["reason"]) for e in errors] == [(101, "missing_key")]
    assert "id, name are all null or empty" in errors[0]["detail"]


def test_empty_string_keys_and_partition_values_are_bad_records_not_a_failed_round() -> None:
    """An empty single-field key, an empty partition value and one that makes no folder name
    used to fail the round in the table layer (a record the job could not get past, named
    only by a batch row); they are bad records with their position, as a null key is."""
    config = TableConfig("t", ("name",), ("region",), "ts")
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       DECLARED)
    spec = RecordSpec(ctx, DECLARED, "deleted", 7)

    def rec(name: str, region: str) -> bytes:
        return json.dumps({"id": 1, "name": name, "region": region, "ts": 1}).encode()

    out = prepare_kafka(spec, _kafka(
        [rec("a", "eu"), rec("", "eu"), rec("c", ""), rec("d", "eu/../x"), rec("e", ".."),
         rec("", ""), rec("f", "x\x00y")], [b"k"] * 7))
    assert out.records.column(RECORD_KEY).to_pylist() == ["a"]
    assert [(e["offset"], e["reason"], e["detail"]) for e in out.errors.to_pylist()] == [
        (101, "missing_key", "record key field 'name' value '' is an empty string; every "
         "record needs a non-empty record key"),
        (102, "missing_key", "partition field 'region' value '' is an empty string; every "
         "record needs a non-empty partition"),
        (103, "unreadable_partition", "partition field 'region' value 'eu/../x' is not a valid "
         "folder name ('/', '.', '..' and the NUL character are not allowed); clean the "
         "value or partition by another field (a table created with "
         "'hoodie.datasource.write.partitionpath.urlencode' by Java Hudi, or url_encode_partitions "
         "by the Python API, escapes such values)"),
        (104, "unreadable_partition", "partition field 'region' value '..' is not a valid "
         "folder name ('/', '.', '..' and the NUL character are not allowed); clean the "
         "value or partition by another field (a table created with "
         "'hoodie.datasource.write.partitionpath.urlencode' by Java Hudi, or url_encode_partitions "
         "by the Python API, escapes such values)"),
        (105, "missing_key", "record key field 'name' value '' is an empty string; every "
         "record needs a non-empty record key"),
        # a NUL failed the round in mkdir ("embedded null byte"; data-types review)
        (106, "unreadable_partition", "partition field 'region' value 'x\x00y' is not a "
         "valid folder name ('/', '.', '..' and the NUL character are not allowed); clean the "
         "value or partition by another field (a table created with "
         "'hoodie.datasource.write.partitionpath.urlencode' by Java Hudi, or url_encode_partitions "
         "by the Python API, escapes such values)"),
    ]
    # with URL encoding the odd values are paths; only the empty ones stay bad
    encoded = TableConfig("t", ("name",), ("region",), "ts", url_encode_partitions=True)
    spec = RecordSpec(WriteContext("/nonexistent", encoded, WriteOptions(), "20240101000000000",
                                   "UPSERT", DECLARED), DECLARED, "deleted", 7)
    out = prepare_kafka(spec, _kafka([rec("d", "eu/../x"), rec("c", ""), rec("f", "x\x00y")],
                                     [b"k"] * 3))
    assert out.records.column("_hoodie_partition_path").to_pylist() == [
        "region=eu%2F..%2Fx", "region=x%00y"]  # as Java escapes it
    assert [e["offset"] for e in out.errors.to_pylist()] == [101]


def test_partition_values_making_too_long_or_outside_folders_are_bad_records() -> None:
    """A folder name longer than 255 bytes failed every retry of its round ('File name too
    long'), whatever the error tolerance, so the pipeline stopped for good (data-types
    review); with URL encoding and no hive-style folders, '..' wrote a base file into the
    table's parent folder and '.' into its root. Both are bad records now."""
    def rec(region: str) -> bytes:
        return json.dumps({"id": 1, "name": "n", "region": region, "ts": 1}).encode()

    def errors(config: TableConfig, regions: list[str],
               where: str = "/nonexistent") -> tuple[list[str], list[object]]:
        spec = RecordSpec(WriteContext(where, config, WriteOptions(),
                                       "20240101000000000", "UPSERT", DECLARED),
                          DECLARED, "deleted", 7)
        out = prepare_kafka(spec, _kafka([rec(r) for r in regions], [b"k"] * len(regions)))
        return (out.records.column("_hoodie_partition_path").to_pylist(),
                [(e["offset"], e["reason"], e["detail"]) for e in out.errors.to_pylist()])

    hive = TableConfig("t", ("name",), ("region",), "ts")
    fits, over = "é" * 124, "é" * 124 + "x"  # 'region=' + 248 bytes = 255; one more is 256
    paths, bad = errors(hive, ["eu", fits, over, "日" * 90])
    assert paths == ["region=eu", f"region={fits}"]
    assert [(o, r) for o, r, _ in bad] == [(102, "unreadable_partition"),
                                           (103, "unreadable_partition")]
    assert bad[0][2] == (
        f"partition field 'region' value '{over}' makes a folder name with its field name "
        "longer than 255 bytes, more than the file system takes; shorten the value or "
        "partition by another field")
    # object stores have no folders: such a value is a key like any, and rows stored under
    # one stay writable (review of the check); only the key's 1,024 bytes limit it: after
    # 't' (1 byte), two slashes and 128 bytes for a file name, 893 are left
    paths, bad = errors(hive, [over, "日" * 90, "x" * 886, "x" * 887], where="s3://bucket/t")
    assert paths == [f"region={over}", "region=" + "日" * 90, "region=" + "x" * 886]
    assert [(o, r) for o, r, _ in bad] == [(103, "unreadable_partition")]
    assert str(bad[0][2]).endswith(
        "makes a folder name with its field name longer than 893 bytes, more than an object "
        "store's key (1,024 bytes) takes after the table's path and a file name; shorten the "
        "value or partition by another field")
    # URL-encoded: the encoded name counts ('%2F' is three bytes for '/')
    encoded = TableConfig("t", ("name",), ("region",), "ts", url_encode_partitions=True,
                          hive_style_partitioning=False)
    paths, bad = errors(encoded, ["a/b", "..", ".", "/" * 85, "/" * 86, "x.."])
    assert paths == ["a%2Fb", "%2F" * 85, "x.."]
    assert [(o, r) for o, r, _ in bad] == [(101, "unreadable_partition"),
                                           (102, "unreadable_partition"),
                                           (104, "unreadable_partition")]
    assert bad[0][2] == ("partition field 'region' value '..' is not a valid folder name "
                         "('.' and '..' are not allowed); clean the value")
    assert "makes a folder name (URL-encoded) longer than 255 bytes" in str(bad[2][2])
    # the same rules where a batch is written as a whole (WriteClient): refused, value cut
    with pytest.raises(InvalidRecordsError,
                       match=r"partition column 'region' has value '日日日.*\.\.\. \(270 "
                             r"bytes\) at row 1, which makes a folder name with its field "
                             r"name longer than 255 bytes"):
        KeyGenerator(hive, LOCAL_MAX_FOLDER_BYTES).partition_paths(
            pa.table({"region": ["eu", "日" * 90]}))
    with pytest.raises(InvalidRecordsError, match=r"value '\.\.' at row 0, which is not a valid"):
        KeyGenerator(encoded).partition_paths(pa.table({"region": [".."]}))


def test_numeric_times_beyond_the_year_9999_are_unreadable_partitions() -> None:
    """Microseconds read as milliseconds made a path of year -9401 (pyarrow's year wraps past
    32767) without any error; such times are bad records now."""
    p = "hoodie.keygen.timebased."
    config = TableConfig(
        "t", ("id",), ("ts",), None, key_generator="timestamp",
        extra={p + "timestamp.type": "EPOCHMILLISECONDS", p + "output.timezone": "UTC",
               p + "output.dateformat": "yyyy/MM/dd"},
    )
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       DECLARED)
    spec = RecordSpec(ctx, DECLARED, "deleted", 7)

    def rec(i: int, ts: int) -> bytes:
        return json.dumps({"id": i, "name": "n", "region": "r", "ts": ts}).encode()

    out = prepare_kafka(spec, _kafka(
        [rec(1, 1709287200000), rec(2, 1709287200000000), rec(3, 2**62), rec(4, -2**62),
         rec(5, 253402300799999), rec(6, -62135596800000)], [b"k"] * 6))
    assert out.records.column("_hoodie_partition_path").to_pylist() == [
        "ts=2024/03/01", "ts=9999/12/31", "ts=0001/01/01"]
    errors = out.errors.to_pylist()
    assert [(e["offset"], e["reason"]) for e in errors] == [
        (101, "unreadable_partition"), (102, "unreadable_partition"),
        (103, "unreadable_partition")]
    assert "value '1709287200000000' matches no input date format of the table's key " \
           "generator, or is a time outside the years -9999 to 9999" in errors[0]["detail"]


def test_a_nan_ordering_value_is_a_bad_record() -> None:
    """A NaN ordering value decided one way in copy-on-write merges, another in hoodline's
    merge-on-read reader and a third in hudi-rs (Python API review): NaN has no order among
    numbers. Such records are bad records, as null ones are; the others are written."""
    schema = DECLARED.set(DECLARED.get_field_index("ts"), pa.field("ts", pa.float64()))
    config = TableConfig("t", ("id",), ("region",), "ts")
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       schema)
    spec = RecordSpec(ctx, schema, "deleted", 7)
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "name": "a", "region": "r1", "ts": float("nan"), "deleted": False},
         {"id": 2, "name": "b", "region": "r1", "ts": 2.0, "deleted": False},
         {"id": None, "name": "c", "region": "r1", "ts": float("nan"), "deleted": False}],
        schema=schema,
    )
    out = FileRecords.prepare_batch(spec, batch, "/in/f.jsonl", 0, MTIME_NS)
    assert out.records.column("id").to_pylist() == [2]
    assert sorted((e["row"], e["reason"], e["detail"]) for e in out.errors.to_pylist()) == [
        (0, "missing_key", "ordering field 'ts' is NaN, which has no order among numbers"),
        (2, "missing_key", "null or missing in field(s) id"),
    ]
