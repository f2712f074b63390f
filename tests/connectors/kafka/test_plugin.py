"""The Kafka plug-in's record preparation (no broker): tombstones and their keys, and what the
error table says about messages that cannot become records or deletes."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.connectors.kafka import KAFKA_RECORD_SCHEMA
from hoodline.connectors.kafka.plugin import BAD_TOMBSTONE_KEY, KafkaRecords
from hoodline.formats.registry import RegistrySettings
from hoodline.formats.registry_decoder import RegistryFormat
from hoodline.pipeline.transform import Prepared, RecordSpec
from hoodline.table.properties import TableConfig
from hoodline.table.write.context import WriteContext
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import IS_DELETE, RECORD_KEY
from tests.helpers.pipeline_stream import unique
from tests.helpers.schema_registry import SchemaRegistry

#: a table keyed by one string field, unpartitioned: tombstone keys may be plain text
DECLARED = pa.schema([("id", pa.string()), ("amount", pa.float64()), ("ts", pa.int64())])


def _spec() -> RecordSpec:
    config = TableConfig("t", ("id",), (), "ts")
    ctx = WriteContext("/nonexistent", config, WriteOptions(), "20240101000000000", "UPSERT",
                       DECLARED)
    return RecordSpec(ctx, DECLARED, None, 7)


def _batch(values: list[bytes | None], keys: list[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict(
        {"key": keys, "value": values, "topic": ["tp"] * n, "partition": [0] * n,
         "offset": list(range(100, 100 + n)), "timestamp": [None] * n, "headers": [None] * n},
        schema=KAFKA_RECORD_SCHEMA,
    )


def _prepare(values: list[bytes | None], keys: list[bytes | None],
             avro: RegistryFormat | None = None) -> Prepared:
    return KafkaRecords(False, avro).prepare_batch(_spec(), _batch(values, keys))


def _deleted(out: Prepared) -> list[str]:
    recs = out.records
    assert set(recs.column(IS_DELETE).to_pylist()) <= {True}
    return sorted(recs.column(RECORD_KEY).to_pylist())


def _errors(out: Prepared) -> list[tuple[int, str, str]]:
    return [(e["offset"], e["reason"], e["detail"]) for e in out.errors.to_pylist()]


def test_tombstone_keys_of_one_batch_are_read_each_on_its_own() -> None:
    """The review's case: a plain key, a JSON string key (quotes included, as JSON key
    serializers write it) and a JSON-object key in one batch each delete their record."""
    out = _prepare([None, None, None], [b"a1", b'"a2"', b'{"id": "a3"}'])
    assert _deleted(out) == ["a1", "a2", "a3"]
    assert _errors(out) == []


def test_a_tombstone_without_a_key_says_it_cannot_delete_anything() -> None:
    out = _prepare([b'{"id": "a1", "ts": 1}', None], [b"a1", None])
    assert out.records.column(RECORD_KEY).to_pylist() == ["a1"]
    ((offset, reason, detail),) = _errors(out)
    assert (offset, reason) == (101, "null_value")
    assert detail == ("tombstone without a key (null value and null key): it cannot delete "
                      "anything; produce deletes with the record's key as the message key")


@pytest.mark.parametrize(
    ("key", "detail"),
    [
        # a JSON string that is not valid JSON: neither its text nor the bytes as they are
        (b'"a\\q"', 'tombstone key "a\\q" is a JSON string that does not decode (invalid '
                    "JSON: Invalid \\escape: line 1 column 3 (char 2)); give the record key as "
                    'plain text, a JSON string or a JSON object such as {"id": ...}'),
        (b"\xffa", "tombstone key b'\\xffa' is not UTF-8 text; give the record key as plain "
                   'text, a JSON string or a JSON object such as {"id": ...}'),
    ],
)
def test_a_tombstone_key_that_gives_no_record_key_is_reported_with_the_key(
    key: bytes, detail: str
) -> None:
    out = _prepare([None, None], [b"a1", key])
    assert _deleted(out) == ["a1"]
    assert _errors(out) == [(101, BAD_TOMBSTONE_KEY, detail)]


def test_a_tombstone_key_of_the_wrong_type_is_shown_with_the_type() -> None:
    declared = pa.schema([("n", pa.int64()), ("ts", pa.int64())])
    ctx = WriteContext("/nonexistent", TableConfig("t", ("n",), (), "ts"), WriteOptions(),
                       "20240101000000000", "UPSERT", declared)
    spec = RecordSpec(ctx, declared, None, 7)
    out = KafkaRecords(False).prepare_batch(spec, _batch([None, None, None], [b"7", b'"8"', b"x"]))
    assert sorted(out.records.column("n").to_pylist()) == [7, 8]
    assert _errors(out) == [(102, BAD_TOMBSTONE_KEY, (
        'tombstone key x is not an int64 value; give the record key as plain text, a JSON '
        'string or a JSON object such as {"n": ...}'))]


def _avro_string_key(schema_id: int, text: str) -> bytes:
    data = text.encode()
    return struct.pack(">bI", 0, schema_id) + bytes([2 * len(data)]) + data


@pytest.mark.kafka  # the registry fixture lives with the broker's
def test_avro_and_plain_tombstone_keys_in_one_batch_each_delete(
    schema_registry: SchemaRegistry,
) -> None:
    """With format = avro, an Avro-framed key was read as Avro only when every tombstone of
    the batch had one: beside a plain key it was taken as text (a delete of a key that does
    not exist, reported nowhere)."""
    subject = unique("tomb")
    schema_id = schema_registry.register(f"{subject}-key", '"string"')  # Avro's JSON text
    avro = RegistryFormat(RegistrySettings((("url", schema_registry.url),), f"{subject}-value"))
    framed = _avro_string_key(schema_id, "a1")
    out = _prepare([None, None, None], [framed, b"a2", b'{"id": "a3"}'], avro)
    assert _errors(out) == []
    assert _deleted(out) == ["a1", "a2", "a3"]
    # all framed: the Avro path alone, as before
    only = _prepare([None, None], [framed, _avro_string_key(schema_id, "a4")], avro)
    assert _deleted(only) == ["a1", "a4"]


class _StaleMetadata:
    """A metadata client whose ListOffsets does not know partitions its topic listing has (a
    topic created or given partitions a moment ago), or fails for another reason."""

    def __init__(self, code: int) -> None:
        self.code = code

    def latest_offsets(self, tps: object) -> dict[object, int]:
        from confluent_kafka import KafkaError, KafkaException

        from hoodline.errors import KafkaSourceError

        try:
            raise KafkaException(KafkaError(self.code, "as the broker said"))
        except KafkaException as exc:
            raise KafkaSourceError("listing latest offsets failed against b:9092") from exc

    def topic_partition_counts(self) -> dict[str, int]:
        return {"orders": 8}


def test_partitions_the_brokers_list_but_cannot_answer_for_yet_fail_the_round_retryably() -> None:
    """A topic given more partitions while the pipeline ran stopped it at once, not retried:
    the end offsets of the new partitions were asked before the client's metadata knew them
    ("Unknown partition", "check that the brokers are reachable"). The round is retried now;
    another failure of the listing is not."""
    from confluent_kafka import KafkaError

    from hoodline.connectors.kafka.plugin import KafkaPlugin
    from hoodline.connectors.kafka.source import KafkaSource
    from hoodline.connectors.kafka.split import TopicPartition
    from hoodline.errors import KafkaMetadataNotReadyError, KafkaSourceError, is_retryable

    source = KafkaSource.from_options({"topic": "orders",
                                       "properties.bootstrap.servers": "b:9092"})
    tps = [TopicPartition("orders", p) for p in (0, 7)]
    # _NOENT: "No leaders found", while a restarted broker takes its partitions back
    for code in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
                 KafkaError._NOENT):
        plugin = KafkaPlugin(source)
        plugin._client = _StaleMetadata(code)  # type: ignore[assignment]
        with pytest.raises(KafkaMetadataNotReadyError, match="the round is retried") as info:
            plugin._ends(tps)
        assert is_retryable(info.value)
    plugin = KafkaPlugin(source)
    plugin._client = _StaleMetadata(KafkaError.TOPIC_AUTHORIZATION_FAILED)  # type: ignore[assignment]
    with pytest.raises(KafkaSourceError) as info:
        plugin._ends(tps)
    assert not is_retryable(info.value)


@pytest.mark.parametrize(("stored", "now", "says"), [
    ("topics:a,b", "a,c", ["topic(s) c joined it", "topic(s) b left it"]),
    ("topics:a", "a,b", ["topic(s) b joined it"]),
    ("topics:a,b", "b", ["topic(s) a left it: their positions are dropped"]),
])
def test_a_topic_list_may_gain_and_lose_topics_keeping_one(
    stored: str, now: str, says: list[str]
) -> None:
    from hoodline.connectors.kafka.plugin import KafkaPlugin
    from tests.helpers.pipeline_stream import kafka_config

    plugin = KafkaPlugin.from_config(kafka_config(Path("/nonexistent"), "127.0.0.1:9", now))
    note = plugin.identity_change(stored)
    assert note is not None
    for text in says:
        assert text in note, note
    assert ("joined" in note) == ("joined" in " ".join(says))
    assert ("left" in note) == ("left" in " ".join(says))


@pytest.mark.parametrize(("stored", "options"), [
    ("topics:a,b", {"topic": "c"}),  # shares nothing: more likely another pipeline's table
    ("pattern:a.*", {"topic": "a"}),
    ("topics:a", {"topic-pattern": "a.*"}),
    ("pattern:a.*", {"topic-pattern": "[ab].*"}),
    ("partitions:a:0", {"topic": "a"}),
])
def test_other_subscription_changes_are_not_accepted(
    stored: str, options: dict[str, str]
) -> None:
    from hoodline.connectors.kafka.plugin import KafkaPlugin
    from hoodline.pipeline.config import config_from_dict

    cfg = config_from_dict({
        "source": {"type": "kafka", "options": {
            **options, "properties": {"bootstrap.servers": "127.0.0.1:9"}}},
        "table": {"path": "/nonexistent", "record-key": ["id"]}, "schema": {"id": "int64"}})
    assert KafkaPlugin.from_config(cfg).identity_change(stored) is None


def test_a_partition_list_may_gain_and_lose_partitions() -> None:
    from hoodline.connectors.kafka.plugin import KafkaPlugin
    from hoodline.pipeline.config import config_from_dict

    cfg = config_from_dict({
        "source": {"type": "kafka", "options": {
            "partitions": "a:0,a:2", "properties": {"bootstrap.servers": "127.0.0.1:9"}}},
        "table": {"path": "/nonexistent", "record-key": ["id"]}, "schema": {"id": "int64"}})
    note = KafkaPlugin.from_config(cfg).identity_change("partitions:a:0,a:1")
    assert note is not None and "partition(s) a:2 joined" in note and "a:1 left" in note
