"""The Kafka plug-in's record preparation (no broker): tombstones and their keys, and what the
error table says about messages that cannot become records or deletes."""

from __future__ import annotations

import pyarrow as pa

from hoodline.connectors.kafka import KAFKA_RECORD_SCHEMA
from hoodline.connectors.kafka.plugin import KafkaRecords
from hoodline.formats.registry_decoder import RegistryFormat
from hoodline.pipeline.transform import Prepared, RecordSpec
from hoodline.table.properties import TableConfig
from hoodline.table.write.context import WriteContext
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import RECORD_KEY

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


def _errors(out: Prepared) -> list[tuple[int, str, str]]:
    return [(e["offset"], e["reason"], e["detail"]) for e in out.errors.to_pylist()]


def test_a_tombstone_without_a_key_says_it_cannot_delete_anything() -> None:
    out = _prepare([b'{"id": "a1", "ts": 1}', None], [b"a1", None])
    assert out.records.column(RECORD_KEY).to_pylist() == ["a1"]
    ((offset, reason, detail),) = _errors(out)
    assert (offset, reason) == (101, "null_value")
    assert detail == ("tombstone without a key (null value and null key): it cannot delete "
                      "anything; produce deletes with the record's key as the message key")
