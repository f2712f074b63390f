"""The Kafka connector's pipeline plug-in: round bounding (driver) and record preparation (tasks).

Driver side (:class:`KafkaPlugin`): a round reads ``[position, end)`` of every held partition;
ends come from the brokers' end offsets and the round's record budget, spread fairly
(:func:`hoodline.connectors.kafka.rounds.plan_round`). Deterministic: a retried task reads the
same messages. ``--once`` stops when every partition found by the first plan reached the end
offset it had then. After a commit, offsets go to the consumer group (monitoring only).

Task side (:class:`KafkaRecords`):

* ``format = json``: values are parsed in bulk into the declared schema (blocks of about
  :data:`BLOCK_RECORDS` messages: fewer, faster vectorised calls); key, partition and ordering
  fields must be present and non-null. A *tombstone* (null value, non-null key) deletes its key:
  the message key is either a JSON object holding the key (and partition) fields, or -- for a
  single-field key of an unpartitioned table -- the key value itself as UTF-8 text. A message
  with neither value nor key is a bad record (``null_value``): it can delete nothing.
* ``format = raw``: the message as columns (:data:`RAW_KAFKA_SCHEMA`); key fields name some of
  these.
* ``format = avro`` (and ``json-schema``, ``protobuf``): Confluent-framed values decoded in
  bulk with their writer schemas from the Schema Registry
  (:mod:`hoodline.formats.registry_decoder`) into the table's record schema: the subject's
  version fetched by the driver (:meth:`KafkaPlugin.table_schema`; refetched after a
  round failed on a newer schema), or the declared [schema]. Tombstone keys may be
  Confluent-framed Avro too (a record with the key fields, or a primitive for a single key);
  each key is read on its own, so framed and JSON/text keys may share a batch.

Bad records become error rows positioned by topic, partition and offset (error id
``kafka/<topic>/<partition>/<offset>``, day from the message timestamp).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodline.connectors.kafka.admin import KafkaMetadataClient
from hoodline.connectors.kafka.events import PartitionsDeletedEvent
from hoodline.connectors.kafka.java_checkpoints import ConnectOffsets, StreamerCheckpoint
from hoodline.connectors.kafka.offsets import (
    OffsetReset,
    OffsetsOutOfRange,
    StartingOffsets,
    StartupMode,
)
from hoodline.connectors.kafka.reader import check_consumer_properties
from hoodline.connectors.kafka.rounds import after_round, past_end, plan_round, restarted
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import (
    ConfigError,
    KafkaBrokerUnavailableError,
    KafkaMetadataNotReadyError,
    KafkaOffsetOutOfRangeError,
    KafkaSourceError,
    PipelineError,
)
from hoodline.formats.debezium import (
    EVENT_COLUMNS,
    DebeziumJsonDecoder,
    change_rows,
    envelope_schema,
    moved_images,
)
from hoodline.formats.json_decoder import NULL_VALUE, BadRecords, DecodeResult, JsonDecoder
from hoodline.formats.registry import (
    RegistrySettings,
    SchemaKind,
    SubjectSchema,
    fetch_subject_schema,
    registry_options,
    take_unavailable_timeout,
)
from hoodline.formats.registry_decoder import RegistryFormat
from hoodline.pipeline.config import ChangeDeletes, PipelineConfig, SourceFormat
from hoodline.pipeline.errors_table import build_error_batch
from hoodline.pipeline.plugin import (
    ReadOutcome,
    ReadTask,
    RecordPreparer,
    RoundPlan,
    SourcePlugin,
)
from hoodline.pipeline.plugins import SourceType
from hoodline.pipeline.transform import (
    Prepared,
    RecordSpec,
    concat_bad,
    delete_flags,
    empty_errors,
    key_records,
    remap_bad,
    unkeyable_records,
    unkeyable_values,
    without_rows,
)
from hoodline.runtime.source_rounds import ReaderPlan, SourceRounds
from hoodline.source.api import SourceSplit
from hoodline.table.commit_metadata import (
    CONNECT_OFFSETS_KEY,
    STREAMER_CHECKPOINT_KEY,
    STREAMER_FLAG_KEYS,
)
from hoodline.table.write.records import PARTITION_PATH

__all__ = ["BAD_TOMBSTONE_KEY", "BLOCK_RECORDS", "RAW_KAFKA_SCHEMA", "KafkaPlugin", "KafkaRecords"]

#: Messages decoded together in a task (bigger blocks: fewer, faster vectorised calls). A
#: block's decoding peaks at ~2 KB of Arrow memory per message (raw batches, decoded columns,
#: keys, the payload sent on): 65,536 took a reader task's Arrow pool to 124 MiB and the Python
#: worker to ~470 MiB; 16,384 to 48-63 MiB and ~330-380 MiB at the same speed (BENCHMARKS.md).
BLOCK_RECORDS = 16_384
BAD_TOMBSTONE_KEY = "bad_tombstone_key"
_KEYLESS = ("tombstone without a key (null value and null key): it cannot delete anything; "
            "produce deletes with the record's key as the message key")

#: The columns of a Kafka message in ``format = raw`` pipelines.
RAW_KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)

_POSITIONS = ["topic", "partition", "offset", "key", "timestamp"]

log = logging.getLogger(__name__)

#: Commit metadata key of the topic ids the checkpoint's positions refer to (JSON object)
TOPIC_IDS_KEY = "hoodline.kafka.topic-ids"


@dataclass(frozen=True)
class KafkaRecords(RecordPreparer):
    """Kafka messages -> keyed records and error rows (see module docs)."""

    raw: bool
    #: format = avro: the registry and the reader schema's id and defaults
    avro: RegistryFormat | None = None
    #: Debezium change events (JSON, or Avro with ``avro`` set)
    changes: bool = False
    #: Debezium deletes kept as rows marked ``_event_op = 'd'`` instead of deleting
    mark_deletes: bool = False

    def prepare(
        self, spec: RecordSpec, task: ReadTask, batches: Iterator[tuple[pa.RecordBatch, str | None]]
    ) -> Iterator[Prepared]:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch, _ in batches:
            pending.append(batch)
            rows += batch.num_rows
            if rows >= BLOCK_RECORDS:
                yield from self._blocks(spec, pending)
                pending, rows = [], 0
        if pending:
            yield from self._blocks(spec, pending)

    def _blocks(self, spec: RecordSpec, batches: list[pa.RecordBatch]) -> Iterator[Prepared]:
        for block in pa.Table.from_batches(batches).combine_chunks().to_batches():
            yield self.prepare_batch(spec, block)

    def prepare_batch(self, spec: RecordSpec, batch: pa.RecordBatch) -> Prepared:
        """Keyed records and error rows of one batch of messages (``KAFKA_RECORD_SCHEMA``)."""
        offsets = batch.column("offset")
        if self.raw:
            data = pa.Table.from_batches([batch]).select(RAW_KAFKA_SCHEMA.names)
            bad = unkeyable_records(spec, data)
            data, seq = without_rows(data, offsets, bad)
            recs = key_records(spec, data, delete_flags(spec, data), seq)
            return Prepared(recs, _errors(spec, batch, bad))

        if self.changes:
            return self._prepare_changes(spec, batch)
        n = batch.num_rows
        all_rows = pa.array(np.arange(n, dtype=np.int64))
        values = batch.column("value")
        keys = batch.column("key")
        tomb = pc.and_(values.is_null(), keys.is_valid())
        has_tomb = pc.any(tomb).as_py()
        keyless = pc.and_(values.is_null(), keys.is_null()) if values.null_count else None
        has_keyless = keyless is not None and pc.any(keyless).as_py()
        no_value = pc.or_(tomb, keyless) if has_keyless else tomb
        cut = has_tomb or has_keyless
        value_rows = pc.filter(all_rows, pc.invert(no_value)) if cut else all_rows
        decoder = (JsonDecoder(spec.declared, spec.required) if self.avro is None
                   else self.avro.decoder(spec.declared, spec.required))
        decoded = decoder.decode(pc.take(values, value_rows) if cut else values)
        bad_parts = [remap_bad(decoded.errors, value_rows)]
        if has_keyless:
            at = pc.filter(all_rows, keyless)
            bad_parts.append(BadRecords(at, pa.array([NULL_VALUE] * len(at), pa.string()),
                                        pa.array([_KEYLESS] * len(at), pa.string())))
        good_rows = pc.take(value_rows, decoded.row_index)
        data, seq = decoded.records, pc.take(offsets, good_rows)
        unkeyable = unkeyable_values(spec, data)  # the decoder refused null fields
        if len(unkeyable):
            bad_parts.append(remap_bad(unkeyable, good_rows))
            data, seq = without_rows(data, seq, unkeyable)
        tables = [key_records(spec, data, delete_flags(spec, data), seq)]
        if has_tomb:
            tomb_rows = pc.filter(all_rows, tomb)
            key_cols, ok_rows, bad = _tombstone_keys(spec, pc.take(keys, tomb_rows), self.avro)
            bad_parts.append(remap_bad(bad, tomb_rows))
            rows = pc.take(tomb_rows, ok_rows)
            unkeyable = unkeyable_values(spec, key_cols)
            if len(unkeyable):
                bad_parts.append(remap_bad(unkeyable, rows))
                key_cols, rows = without_rows(key_cols, rows, unkeyable)
            if key_cols.num_rows:
                flags = pa.array(np.ones(key_cols.num_rows, dtype=bool))
                tables.append(key_records(spec, key_cols, flags, pc.take(offsets, rows)))
        recs = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        return Prepared(recs, _errors(spec, batch, concat_bad(bad_parts)))


    def _prepare_changes(self, spec: RecordSpec, batch: pa.RecordBatch) -> Prepared:
        """Debezium events: upserts of after images, deletes of before keys; Debezium's own
        tombstones (null values) skipped."""
        offsets = batch.column("offset")
        values = batch.column("value")
        event_rows = pa.array(np.flatnonzero(np.asarray(values.is_valid())))
        row = pa.schema([f for f in spec.declared if f.name not in EVENT_COLUMNS.names])
        required = [r for r in spec.required if r in row.names]
        taken = pc.take(values, event_rows)
        if self.avro is None:
            changes = DebeziumJsonDecoder(row, required).decode(taken)
            decoded, deletes, before = changes.result, changes.deletes, changes.before
        else:
            parsed = self.avro.decoder(envelope_schema(row, wrapped=False),
                                       nested=("before", "after")).decode(taken)
            data_, index, deletes, more_bad, before = change_rows(
                parsed.records, parsed.row_index, row, required)
            decoded = DecodeResult(data_, index, concat_bad([parsed.errors, more_bad]))
        bad_parts = [remap_bad(decoded.errors, event_rows)]
        good_rows = pc.take(event_rows, decoded.row_index)
        data, seq = decoded.records, pc.take(offsets, good_rows)
        unkeyable = unkeyable_values(spec, data)
        if len(unkeyable):
            bad_parts.append(remap_bad(unkeyable, good_rows))
            keep = np.ones(data.num_rows, dtype=bool)
            keep[np.asarray(unkeyable.index)] = False
            deletes = deletes.filter(pa.array(keep))
            before = before.filter(pa.array(keep))
            data, seq = without_rows(data, seq, unkeyable)
        if self.mark_deletes:  # the delete's before image stays as a marked row
            deletes = pa.array(np.zeros(data.num_rows, dtype=bool))
        recs = key_records(spec, data, deletes, seq)
        moved = self._moved_out(spec, data, before, row, seq, recs)
        if moved is not None:
            recs = pa.concat_tables([moved, recs])
        return Prepared(recs, _errors(spec, batch, concat_bad(bad_parts)))

    def _moved_out(self, spec: RecordSpec, data: pa.Table, before: pa.StructArray,
                   row: pa.Schema, seq: pa.Array, recs: pa.Table) -> pa.Table | None:
        """Deletes (marked rows with ``change-deletes = mark``) of the rows that updates moved
        to another partition, from their old partition (:func:`moved_images`); None if none."""
        cfg = spec.ctx.config
        images, at = moved_images(data, before, row, cfg.partition_fields, cfg.record_key_fields)
        # an image whose old row cannot be named gives no delete
        images, at = without_rows(images, at, unkeyable_values(spec, images))
        if not len(at):
            return None
        flags = pa.array(np.full(len(at), not self.mark_deletes))
        old = key_records(spec, images, flags, pc.take(seq, at))
        # another partition path (not only other values: a date partition of two times of one
        # day is the same folder, and the update alone must land there)
        away = pc.not_equal(old.column(PARTITION_PATH),
                            pc.take(recs.column(PARTITION_PATH), at))
        old = old.filter(away)
        return old if old.num_rows else None


def _tombstone_keys(
    spec: RecordSpec, keys: pa.Array, avro: RegistryFormat | None = None
) -> tuple[pa.Table, pa.Array, BadRecords]:
    """Key/partition field columns decoded from message keys (+ their rows, + bad ones).

    Each key is read on its own (split vectorised, never decided for the whole batch): with a
    Schema Registry format a Confluent-framed key (magic byte 0) as Avro, every other key as
    JSON or text (:func:`_text_tombstone_keys`)."""
    cfg = spec.ctx.config
    names = list(dict.fromkeys((*cfg.record_key_fields, *cfg.partition_fields)))
    schema = pa.schema([spec.declared.field(n) for n in names])
    if avro is None or not len(keys):
        return _text_tombstone_keys(schema, keys)
    framed = pc.fill_null(
        pc.equal(pc.binary_slice(keys, 0, 1), pa.scalar(b"\x00", pa.binary())), False)
    decoder = avro.decoder(schema, names, primitive_field=names[0] if len(names) == 1 else None)

    def read_avro(taken: pa.Array) -> tuple[pa.Table, pa.Array, BadRecords]:
        return _tombstone_result(decoder.decode(taken), "tombstone key must be a Confluent "
                                 "Avro record with the key/partition fields: ")

    return _split_keys(keys, framed, read_avro, lambda taken: _text_tombstone_keys(schema, taken))


_KeyReader = Callable[[pa.Array], tuple[pa.Table, pa.Array, BadRecords]]


def _split_keys(keys: pa.Array, mask: pa.BooleanArray, where_true: _KeyReader,
                where_false: _KeyReader) -> tuple[pa.Table, pa.Array, BadRecords]:
    """``keys`` read by ``where_true`` where ``mask`` is, by ``where_false`` elsewhere (one
    call each; a side without keys is not called)."""
    if pc.all(mask).as_py():
        return where_true(keys)
    if not pc.any(mask).as_py():
        return where_false(keys)
    rows = pa.array(np.arange(len(keys), dtype=np.int64))
    parts = []
    for side, read in ((mask, where_true), (pc.invert(mask), where_false)):
        these = pc.filter(rows, side)
        cols, ok, bad = read(pc.take(keys, these))
        parts.append((cols, pc.take(these, ok), remap_bad(bad, these)))
    schema = parts[0][0].schema
    return (pa.concat_tables([parts[0][0], parts[1][0].cast(schema)]),
            pa.concat_arrays([p[1] for p in parts]),
            concat_bad([p[2] for p in parts]))


def _text_tombstone_keys(schema: pa.Schema, keys: pa.Array) -> tuple[pa.Table, pa.Array,
                                                                      BadRecords]:
    """Keys that are JSON objects with the key (and partition) fields, or -- for one key field
    of an unpartitioned table -- the key's value as text or as a JSON string (as JSON key
    serializers write string keys), each key on its own."""
    names = schema.names

    def read_objects(taken: pa.Array) -> tuple[pa.Table, pa.Array, BadRecords]:
        return _tombstone_result(JsonDecoder(schema, names).decode(taken), _OBJECT_KEY_PREFIX)

    if len(names) != 1:
        return read_objects(keys)
    starts_obj = pc.fill_null(
        pc.equal(pc.binary_slice(keys, 0, 1), pa.scalar(b"{", pa.binary())), False)
    return _split_keys(keys, starts_obj, read_objects,
                       lambda taken: _plain_tombstone_keys(schema, taken))


_OBJECT_KEY_PREFIX = "tombstone key must be a JSON object with the key/partition fields: "


def _plain_tombstone_keys(schema: pa.Schema, keys: pa.Array) -> tuple[pa.Table, pa.Array,
                                                                       BadRecords]:
    """Keys of one field: the UTF-8 value, or a JSON string holding it (quotes removed)."""
    field = schema.field(0)
    texts, refused = _unquoted(keys)
    rows = np.arange(len(keys), dtype=np.int64)
    if refused:
        keep = np.ones(len(keys), dtype=bool)
        keep[list(refused)] = False
        rows = rows[keep]
        texts = texts.filter(pa.array(keep))
    try:
        values = pc.cast(pc.cast(texts, pa.string()), field.type)
        good = pa.array(rows)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # rare path, only when some tombstone's key is bad: each key on its own
        good_vals: list[object] = []
        good_rows: list[int] = []
        for row, text in zip(rows.tolist(), texts.to_pylist(), strict=True):
            try:
                good_vals.append(pc.cast(pa.array([text.decode("utf-8")]),
                                         field.type)[0].as_py())
                good_rows.append(row)
            except UnicodeDecodeError:
                refused[row] = f"tombstone key {_shown_key(keys[row].as_py())} is not UTF-8 text"
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                refused[row] = (f"tombstone key {_shown_key(keys[row].as_py())} is not "
                                f"{_article(field.type)} {field.type} value")
        values, good = pa.array(good_vals, field.type), pa.array(good_rows, pa.int64())
    hint = (f"; give the record key as plain text, a JSON string or a JSON object such as "
            f'{{"{field.name}": ...}}')
    order = sorted(refused)
    bad = BadRecords(
        pa.array(order, pa.int64()),
        pa.array([BAD_TOMBSTONE_KEY] * len(order), pa.string()),
        pa.array([refused[i] + hint for i in order], pa.string()),
    )
    return pa.table([values], schema=schema), good, bad


def _unquoted(keys: pa.Array) -> tuple[pa.Array, dict[int, str]]:
    """Binary keys with JSON strings (``"a2"``) replaced by the text they hold, and the keys
    (by row) that look like a JSON string but do not decode as one, with why."""
    quoted = pc.fill_null(pc.and_(
        pc.match_substring_regex(keys, '^".*"$'), pc.greater_equal(pc.binary_length(keys), 2)),
        False)
    if not pc.any(quoted).as_py():
        return keys, {}
    inner = pc.binary_slice(keys, 1, -1)
    out = pc.if_else(quoted, inner, keys)
    # an escape or an inner quote: decoded as JSON (rare), which also refuses '"a"b"'
    odd = pc.and_(quoted, pc.fill_null(pc.match_substring_regex(inner, r'[\\"]'), False))
    if not pc.any(odd).as_py():
        return out, {}
    values = out.to_pylist()
    refused: dict[int, str] = {}
    for i in np.flatnonzero(np.asarray(odd)).tolist():
        raw = keys[i].as_py()
        try:
            values[i] = json.loads(raw).encode()
        except (ValueError, UnicodeDecodeError) as exc:
            refused[i] = (f"tombstone key {_shown_key(raw)} is a JSON string that does not "
                          f"decode (invalid JSON: {exc})")
    return pa.array(values, pa.binary()), refused


def _shown_key(raw: bytes) -> str:
    """A message key for a detail: its text when it is UTF-8, else its bytes (80 at most)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = repr(raw)
    return text if len(text) <= 80 else text[:77] + "..."


def _article(t: pa.DataType) -> str:
    return "an" if str(t)[:1] in ("a", "e", "i", "o") else "a"


def _tombstone_result(result: DecodeResult, prefix: str) -> tuple[pa.Table, pa.Array, BadRecords]:
    bad = result.errors
    bad = BadRecords(
        bad.index,
        pa.array([BAD_TOMBSTONE_KEY] * len(bad), pa.string()),
        pc.binary_join_element_wise(pa.scalar(prefix), bad.detail, "") if len(bad)
        else bad.detail,
    )
    return result.records, result.row_index, bad


def change_table_schema(envelope: pa.Schema, subject: str) -> pa.Schema:
    """The table's schema for Debezium Avro events: the fields of the envelope's ``after``
    image, then the event columns."""
    image = envelope.field("after").type if "after" in envelope.names else None
    if image is None or not pa.types.is_struct(image):
        raise ConfigError(
            f"Schema Registry subject '{subject}' is not a Debezium change event schema (no "
            "'after' record field); check source.schema-subject"
        )
    return pa.schema([*(image.field(i).with_nullable(True) for i in range(image.num_fields)),
                      *EVENT_COLUMNS])


def _errors(spec: RecordSpec, batch: pa.RecordBatch, bad: BadRecords) -> pa.RecordBatch:
    if not len(bad):
        return empty_errors()
    order = pc.sort_indices(bad.index)
    bad = BadRecords(pc.take(bad.index, order), pc.take(bad.reason, order),
                     pc.take(bad.detail, order))
    positions = pa.Table.from_batches([batch]).select(_POSITIONS)
    return build_error_batch(bad, batch.column("value"), positions, source=KafkaPlugin.name,
                             id_prefix="kafka", id_columns=("topic", "partition", "offset"),
                             round_id=spec.round_id)


class KafkaPlugin(SourcePlugin):
    """Driver side of the Kafka connector (see module docs)."""

    name = SourceType.KAFKA
    source: KafkaSource

    def __init__(
        self, source: KafkaSource, *, raw: bool = False,
        registry: RegistrySettings | None = None, declared: bool = False,
        changes: bool = False, kind: SchemaKind = SchemaKind.AVRO,
        mark_deletes: bool = False,
    ) -> None:
        super().__init__(source)
        self._mark_deletes = mark_deletes
        self._raw = raw
        self._changes = changes
        self._kind = kind
        self._registry = registry
        #: format = avro with a declared [schema] (the subject's schema is not used)
        self._declared = declared
        self._subject: SubjectSchema | None = None
        self._client: KafkaMetadataClient | None = None
        self._targets: dict[TopicPartition, int] | None = None
        self._positions: dict[TopicPartition, int] = {}
        self._unassigned_plans = 0
        #: topic -> id the checkpoint's positions refer to: stored by the resumed commit, then
        #: by every commit of this run (a failed round's readers go back to those positions)
        self._stored_ids: dict[str, str] | None = None
        #: topic -> id of the topics the positions are in now (stored with every commit)
        self._ids: dict[str, str] = {}
        #: topics whose ids were asked for (a topic the brokers give no id is asked once)
        self._asked: set[str] = set()
        #: per reader subtask: splits of deleted topics dropped this round (-> position)
        self._dropping: dict[int, dict[TopicPartition, int]] = {}
        #: this round moves positions (offsets.out-of-range = earliest): it commits them
        self._moved = False
        #: the positions the first discovery gave the partitions are in no commit yet, and a
        #: restart would resolve 'scan.startup.mode' again to other offsets (latest-offset:
        #: the records produced in between would be skipped); cleared by a restored checkpoint
        #: and by the first commit
        self._unsaved_starts = (
            source.config.starting_offsets.mode is not StartupMode.EARLIEST)
        #: the last plan held splits
        self._holding = False
        #: the positions the last commit stored for Java's writers (or that the run started
        #: from), updated by bounded partitions read to their end: what Hudi Streamer's
        #: checkpoint says of partitions no reader holds
        self._stored_positions: dict[TopicPartition, int] = {}
        #: the topic of the Hudi Streamer checkpoint stored last (or that the run started from)
        self._stored_topic: str | None = None
        #: the positions of partitions no reader holds were checked against the brokers
        self._stored_checked = False
        #: partitions per topic, as the brokers listed them for that check
        self._counts: dict[str, int] = {}
        #: Hudi Streamer's --checkpoint / --ignore-checkpoint marks, passed on with its key
        self._streamer_flags: dict[str, str] = {}
        #: the subscription differs from the one the table's checkpoint was stored with
        self._changed_subscription = False

    @classmethod
    def from_config(cls, config: PipelineConfig) -> KafkaPlugin:
        own, client = registry_options(dict(config.source.options))
        source = KafkaSource.from_options(own)
        fmt = config.source.format
        kind = fmt.registry_kind
        if kind is None:
            if client:
                formats = ", ".join(f"'{f}'" for f in SourceFormat if f.uses_registry)
                raise ConfigError(
                    f"[source.options] {', '.join('schema.registry.' + k for k in client)}: "
                    f"a Schema Registry is only used with source.format = {formats} (it is "
                    f"'{fmt}')"
                )
            return cls(source, raw=fmt is SourceFormat.RAW, changes=fmt.change_events,
                       mark_deletes=config.source.change_deletes is ChangeDeletes.MARK)
        subject = config.source.schema_subject
        if not subject:
            topics = source.config.subscription.topics
            if topics is None or len(topics) != 1:
                example = (f" (a table started from topic '{topics[0]}' follows "
                           f"'{topics[0]}-value')" if topics else "")
                raise ConfigError(
                    f"[source] schema-subject is required with format = '{fmt}' unless the "
                    "subscription is one topic (then it is '<topic>-value'); name the subject "
                    f"the table's schema follows{example}"
                )
            subject = f"{next(iter(topics))}-value"
        timeout = take_unavailable_timeout(client)
        settings = RegistrySettings(tuple(sorted(client.items())), subject,
                                    config.source.schema_version, config.source.schema_message,
                                    timeout)
        return cls(source, registry=settings, declared=len(config.schema) > 0,
                   changes=fmt.change_events, kind=kind,
                   mark_deletes=config.source.change_deletes is ChangeDeletes.MARK)

    @property
    def identity(self) -> str:
        sub = self.source.config.subscription
        if sub.topics is not None:
            return "topics:" + ",".join(sorted(sub.topics))
        if sub.pattern is not None:
            return "pattern:" + sub.pattern
        parts = sorted(f"{tp.topic}:{tp.partition}" for tp in sub.partitions or ())
        return "partitions:" + ",".join(parts)

    def identity_change(self, stored: str) -> str | None:
        """A topic list that gains or loses topics (or a partition list partitions) and keeps
        at least one: the enumerator drops the positions of what left the subscription
        (FLIP-537's removed topics) and reads what joined it from the earliest offset, as any
        partition found after the first discovery. Anything else (a pattern, a list sharing
        nothing with the stored one, which is more likely another pipeline's table) is refused."""
        kind, _, items = stored.partition(":")
        new_kind, _, new_items = self.identity.partition(":")
        if kind != new_kind or kind not in ("topics", "partitions"):
            return None
        old, new = set(items.split(",")) - {""}, set(new_items.split(",")) - {""}
        if not old & new:
            return None
        noun = "topic" if kind == "topics" else "partition"
        changes = []
        if added := sorted(new - old):
            changes.append(
                f"{noun}(s) {', '.join(added)} joined it and are read from their earliest "
                "offset (one this table read before is read again from its start: its records "
                "are written again, and unless the payload class compares the ordering field "
                "an older value of a key replaces a newer one)")
        if removed := sorted(old - new):
            changes.append(
                f"{noun}(s) {', '.join(removed)} left it: their positions are dropped with the "
                "next commit and records not read yet stay unread (named again later, they are "
                "read from their earliest offset)")
        # the next round commits the new subscription also when it reads nothing: a run that
        # committed nothing left the old one stored, and named the change again every start
        self._changed_subscription = True
        return ("the Kafka subscription changed since the table's last checkpoint: "
                + "; ".join(changes))

    def preflight(self) -> None:
        """librdkafka takes the readers' consumer properties (no broker is asked)."""
        check_consumer_properties(self.source.config)

    def table_schema(self, config: PipelineConfig) -> pa.Schema:
        if self._raw:
            return RAW_KAFKA_SCHEMA
        if self._registry is None or self._declared:
            return config.schema
        if self._subject is None:
            self._subject = fetch_subject_schema(self._registry, self._kind)
        if self._changes:
            return change_table_schema(self._subject.arrow, self._registry.subject)
        return self._subject.arrow

    def preparer(self, config: PipelineConfig) -> KafkaRecords:
        if self._registry is None:
            return KafkaRecords(self._raw, changes=self._changes,
                                mark_deletes=self._mark_deletes)
        subject = None if self._declared else self._subject
        follows_latest = subject is not None and self._registry.version is None
        defaults = dict(subject.defaults) if subject and not self._changes else {}
        return KafkaRecords(False, RegistryFormat(
            self._registry,
            reader_id=subject.schema_id if follows_latest and subject else None,
            defaults=json.dumps(defaults), kind=self._kind,
        ), changes=self._changes, mark_deletes=self._mark_deletes)

    def _ends(
        self, tps: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], set[str], set[TopicPartition]]:
        """The partitions' end offsets; the topics among them that no longer exist when the
        subscription is a topic pattern (deleted: their partitions have no end); and with
        'offsets.out-of-range' = earliest, the partitions that no longer exist in a topic
        created again with fewer partitions. A deleted topic named by option 'topic' or
        'partitions' stops the source, as does a missing partition otherwise."""
        if self._client is None:
            self._client = self.source.metadata_client()
        try:
            return self._client.latest_offsets(tps), set(), set()
        except KafkaBrokerUnavailableError:
            raise
        except KafkaSourceError as exc:
            # a topic or partition the positions name may be gone: say so rather than "check
            # the brokers"
            try:
                present = self._client.topic_partition_counts()
            except KafkaSourceError:
                raise exc from None
            gone = sorted({tp.topic for tp in tps} - set(present))
            missing = sorted(tp for tp in tps
                             if tp.topic in present and tp.partition >= present[tp.topic])
            if not gone and not missing:
                if _unknown_partition(exc):
                    raise KafkaMetadataNotReadyError(
                        f"{exc} The brokers list every partition asked for: their metadata "
                        "is likely still spreading (a topic created or given more partitions "
                        "a moment ago, or a broker restarting); the round is retried"
                    ) from exc
                raise
            if gone and self.source.config.subscription.pattern is None:
                raise self._deleted(gone) from exc
            if missing:
                self._refuse_missing(missing, present)
            left = [tp for tp in tps if tp.topic not in gone and tp not in missing]
            return (self._client.latest_offsets(left) if left else {}), set(gone), set(missing)

    @property
    def _servers(self) -> str:
        return str(self.source.config.client_properties.get("bootstrap.servers", "?"))

    def _refuse_missing(self, missing: list[TopicPartition], present: Mapping[str, int]) -> None:
        """Partitions the checkpoint holds that no longer exist (Kafka never removes a topic's
        partitions: the topic was deleted and created again with fewer): the error that stops
        the source, unless 'offsets.out-of-range' = earliest (they are dropped)."""
        if self.source.config.offsets_out_of_range is OffsetsOutOfRange.EARLIEST:
            return
        counts = ", ".join(f"'{t}' has {present[t]}" for t in sorted({tp.topic
                                                                       for tp in missing}))
        raise KafkaOffsetOutOfRangeError(
            f"partition(s) {', '.join(map(str, missing))} of the table's checkpoint no longer "
            f"exist on the brokers ({self._servers}): {counts} now; a topic's partitions are "
            "never removed, so it was deleted and created again with fewer. Create it again "
            "with its old number of partitions, set 'offsets.out-of-range' = 'earliest' to "
            "stop reading the missing partitions (records they held past the table's "
            "positions are not read) and read the topic as it is now from its earliest "
            "offsets, or write to a new table"
        )

    def _drop_deleted(
        self, held: Mapping[int, Sequence[KafkaPartitionSplit]], gone: set[str],
        missing: set[TopicPartition],
    ) -> None:
        """Splits of topics found deleted (their end offsets failed or lie before the
        positions, and the brokers' metadata lacks them), and of partitions a topic created
        again no longer has, leave their readers with this round (:meth:`continuing`,
        :meth:`forward_events`): a topic-pattern subscription reads the topics that match
        while they exist."""
        self._dropping = {}
        if not gone and not missing:
            return
        # nor does Hudi Streamer's checkpoint name them (it fails on a partition that is not)
        self._stored_positions = {tp: o for tp, o in self._stored_positions.items()
                                  if tp.topic not in gone and tp not in missing}
        for reader, splits in held.items():
            for s in splits:
                if s.topic in gone or s.topic_partition in missing:
                    self._dropping.setdefault(reader, {})[s.topic_partition] = s.starting_offset
        for topic in gone:
            self._ids.pop(topic, None)
            self._asked.discard(topic)
        if self._targets is not None:
            self._targets = {tp: e for tp, e in self._targets.items()
                             if tp.topic not in gone and tp not in missing}

        def read(dropped: Callable[[TopicPartition], bool]) -> str:
            return ", ".join(f"{tp.topic}-{tp.partition}={o}" for tp, o in sorted(
                (tp, o) for d in self._dropping.values() for tp, o in d.items()
                if dropped(tp))) or "(none held)"

        if gone:
            log.warning(
                "topic(s) %s matched by topic-pattern %r no longer exist on the brokers: they "
                "were deleted. Their partitions are no longer read; they had been read up to "
                "offsets %s (records they held past these were not read). A topic created again "
                "under the name is read as a new one, from its earliest offset",
                ", ".join(repr(t) for t in sorted(gone)),
                self.source.config.subscription.pattern, read(lambda tp: tp.topic in gone))
        if missing:
            log.warning(
                "partition(s) %s no longer exist on the brokers: their topic was deleted and "
                "created again with fewer partitions. They are no longer read ('offsets.out-of-"
                "range' = 'earliest'); they had been read up to offsets %s (records they held "
                "past these were not read)", ", ".join(map(str, sorted(missing))),
                read(lambda tp: tp in missing))

    def restored(self, metadata: Mapping[str, str]) -> None:
        starting = self.source.config.starting_offsets.mode
        if starting is not StartupMode.EARLIEST:
            log.warning(
                "option 'scan.startup.mode' = '%s' is not used: the table's checkpoint holds "
                "the positions this run resumes from (partitions it does not hold start from "
                "their earliest offset). It applies to a new table only; to skip records of an "
                "existing table, write to a new table", starting.config_text)
        self._unsaved_starts = False
        previous = StreamerCheckpoint.parse(metadata.get(STREAMER_CHECKPOINT_KEY, ""))
        if previous is not None:
            self._stored_positions = dict(previous.positions())
            self._stored_topic = previous.topic
        self._streamer_flags = _streamer_flags(metadata)
        stored = metadata.get(TOPIC_IDS_KEY)
        if stored is not None:
            try:
                self._stored_ids = {str(k): str(v) for k, v in json.loads(stored).items()}
            except (ValueError, AttributeError):
                log.warning("the checkpoint's topic ids (%s) are unreadable; not compared",
                            TOPIC_IDS_KEY)

    def adopt(self, instant: str, metadata: Mapping[str, str],
              resumed: Mapping[str, str] | None) -> bool:
        """Go on where one of Java Hudi's Kafka writers stopped reading this pipeline's topic,
        as from a checkpoint of hoodline's ('scan.startup.mode' is not used): Hudi Streamer's
        checkpoint of the topic; the Kafka Connect sink's offsets (they name no topic) only
        after this pipeline's own commits, whose topic and positions they continue. Positions
        it cannot take: a resumed pipeline goes on from its own (a warning says what that
        writer wrote may be written again); a new one must say where it starts."""
        config = self.source.config
        topic = self._one_topic()
        positions, said, _options = self._java_positions(instant, metadata, resumed, topic)
        if positions is not None:
            self.source.config = replace(config, starting_offsets=StartingOffsets.offsets(
                positions, reset=OffsetReset.EARLIEST))
            self._unsaved_starts = True  # the first round commits them, even with no records
            self._stored_positions = dict(positions)
            self._stored_topic = topic
            # Hudi Streamer's flag marks: of its commit; of the pipeline's own after the sink's
            streamer = bool(metadata.get(STREAMER_CHECKPOINT_KEY, "").strip())
            self._streamer_flags = _streamer_flags(metadata if streamer else resumed or {})
            where = ",".join(f"{tp.partition}:{o}" for tp, o in sorted(positions.items()))
            unused = (f"; 'scan.startup.mode' = '{config.starting_offsets.mode.config_text}' "
                      "is not used" if config.startup_stated else "")
            log.warning("%s: going on from there (topic '%s', next offset per partition %s; "
                        "partitions it does not name start at their earliest offset%s)", said,
                        topic, where, unused)
            return True
        if resumed is not None:
            log.warning("%s; not taken: the pipeline resumes from its own checkpoint, older "
                        "than that commit, so records that writer wrote since may be written "
                        "again", said)
            return False
        refused = self.refusal(instant, metadata, resumed)
        if refused is not None:
            raise refused
        log.warning("%s; this run starts as 'scan.startup.mode' = '%s' says", said,
                    config.starting_offsets.mode.config_text)
        return False

    def refusal(self, instant: str, metadata: Mapping[str, str],
                resumed: Mapping[str, str] | None) -> ConfigError | None:
        """The error :meth:`adopt` raises for these positions, or None: a new pipeline (no
        ``resumed`` checkpoint) that cannot take them and states no start."""
        if resumed is not None or self.source.config.startup_stated:
            return None
        topic = self._one_topic()
        positions, said, options = self._java_positions(instant, metadata, resumed, topic)
        if positions is not None:
            return None
        return ConfigError(
            f"{said}; this pipeline cannot tell where to go on from it: say where it starts in "
            f"[source.options]: {options}, or scan.startup.mode = \"earliest-offset\" to read "
            "the topic from its start")

    def _java_positions(
        self, instant: str, metadata: Mapping[str, str], resumed: Mapping[str, str] | None,
        topic: str | None,
    ) -> tuple[dict[TopicPartition, int] | None, str, str]:
        """(positions to go on from, or None; what the commit holds; the options that state a
        start there) for a commit of Java Hudi's Kafka writers."""
        example = ("scan.startup.mode = \"specific-offsets\" and scan.startup.specific-offsets "
                   "= [\"TOPIC:PARTITION:OFFSET\", ...]")
        text = metadata.get(STREAMER_CHECKPOINT_KEY, "")
        if text.strip():
            found = StreamerCheckpoint.parse(text)
            if found is None:
                return None, (f"table commit {instant} carries a Hudi Streamer checkpoint "
                              f"({STREAMER_CHECKPOINT_KEY} = {text[:200]!r}) that is not Kafka "
                              "positions ('topic,partition:offset,...')"), example
            said = f"table commit {instant} carries Hudi Streamer's checkpoint {found.format()}"
            if found.topic != topic:
                return None, (f"{said}, of topic '{found.topic}', which is not this pipeline's "
                              f"subscription ({self.identity})"), example
            return found.positions(), said, example
        text = metadata.get(CONNECT_OFFSETS_KEY, "")
        sink = ConnectOffsets.parse(text)
        if sink is None:
            return None, (f"table commit {instant} carries Kafka Connect sink offsets "
                          f"({CONNECT_OFFSETS_KEY} = {text[:200]!r}) that are not "
                          "'partition=offset,...'"), example
        said = (f"table commit {instant} was written by Hudi's Kafka Connect sink, which keeps "
                f"where it stopped without naming the topic ({CONNECT_OFFSETS_KEY} = "
                f"'{sink.format()}')")
        options = (f"if the sink read topic '{topic or 'TOPIC'}', scan.startup.mode = "
                   "\"specific-offsets\" and scan.startup.specific-offsets = "
                   f"{json.dumps(sink.option_values(topic or 'TOPIC'))}")
        # after this pipeline: the sink started from the offsets the pipeline stored (it reads
        # the newest commit's), so they are of the pipeline's topic if they go on from them
        own = StreamerCheckpoint.parse((resumed or {}).get(STREAMER_CHECKPOINT_KEY, ""))
        if (own is None or own.topic != topic or not set(sink.offsets) <= set(own.offsets)
                or any(o < own.offsets[p] for p, o in sink.offsets.items())):
            return None, said, options
        merged = {**own.offsets, **sink.offsets}
        return {TopicPartition(own.topic, p): o for p, o in sorted(merged.items())}, (
            f"{said}, after this pipeline's commits"), options

    def commit_metadata(self, rounds: SourceRounds[Any, Any]) -> dict[str, str]:
        out = {TOPIC_IDS_KEY: json.dumps(dict(sorted(self._ids.items())))} if self._ids else {}
        streamer = self._streamer_checkpoint(rounds)
        if streamer is not None:
            # what Java Hudi's Kafka writers resume from: either takes the table over here
            out[STREAMER_CHECKPOINT_KEY] = streamer.format()
            out.update(self._streamer_flags)
            # the sink's offsets name no topic: only of a pipeline reading that one topic
            if (self._one_topic() == streamer.topic
                    or (self.source.config.subscription.pattern is not None
                        and self._topics_read(rounds) <= {streamer.topic})):
                out[CONNECT_OFFSETS_KEY] = ConnectOffsets(streamer.offsets).format()
        return out

    def _one_topic(self) -> str | None:
        """The topic of a subscription of one: option 'topic' naming one, or 'partitions' all
        of one topic."""
        sub = self.source.config.subscription
        topics = (set(sub.topics) if sub.topics is not None
                  else {tp.topic for tp in sub.partitions} if sub.partitions is not None
                  else set())
        return next(iter(topics)) if len(topics) == 1 else None

    def _streamer_checkpoint(self, rounds: SourceRounds[Any, Any]) -> StreamerCheckpoint | None:
        """The positions after the round as Java's Hudi Streamer stores its checkpoint, so it
        can take the table over where the pipeline stopped. Hudi Streamer reads one topic: the
        subscription's only one; else the topic of the checkpoint stored last (Hudi Streamer
        resumes from the newest commit that has a checkpoint: a commit without one would send
        it back to an older commit's positions); else the one topic read now (a
        'topic-pattern' matching one). Partitions no reader holds (a bounded source's, read
        to their end, also in an earlier run; others Hudi Streamer read) keep the position
        the last checkpoint gave them."""
        held = [s for splits in rounds.held_splits().values() for s in splits]
        topic = self._one_topic() or self._stored_topic
        if topic is None and self.source.config.subscription.pattern is not None:
            now = self._topics_read(rounds)
            topic = next(iter(now)) if len(now) == 1 else None
        if topic is None:
            return None
        offsets = {tp.partition: o for tp, o in self._stored_positions.items()
                   if tp.topic == topic}
        for s in held:
            if s.topic == topic:
                offsets[s.partition] = s.starting_offset
        if not offsets and self._counts.get(topic, 0) > 0:
            # every position was dropped (the topic created again): a commit without the key
            # would send Hudi Streamer back to the older commit's stale positions; it starts
            # partitions at offset 0 as it does those its checkpoint does not name
            offsets = dict.fromkeys(range(self._counts[topic]), 0)
        return StreamerCheckpoint(topic, offsets) if offsets else None

    def _topics_read(self, rounds: SourceRounds[Any, Any]) -> set[str]:
        """The topics the readers hold, and those of the positions kept (partitions read to
        their bound, held no longer): a bounded pattern subscription whose other topic ended
        reads more than one."""
        held = {s.topic for splits in rounds.held_splits().values() for s in splits}
        return held | {tp.topic for tp in self._stored_positions}

    def _check_stored(self, held: set[TopicPartition], recreated: Mapping[str, object]) -> None:
        """Positions kept for Hudi Streamer's checkpoint of partitions no reader holds (a
        bounded run's finished ones, a 'partitions' list's others, Hudi Streamer's own) are
        dropped when the partition no longer exists (Hudi Streamer fails on it) or its topic
        was created again (it would skip the new partition's first records): asked at the
        run's first plan, and for a topic found created again while the pipeline runs."""
        unheld = [tp for tp in self._stored_positions if tp not in held]
        if not unheld:
            return
        drop = {tp for tp in unheld if tp.topic in recreated}
        if not self._stored_checked:
            if self._client is None:
                self._client = self.source.metadata_client()
            counts = self._counts = self._client.topic_partition_counts()
            again = self._recreated({tp.topic for tp in unheld})
            self._stored_checked = True
            drop |= {tp for tp in unheld
                     if tp.partition >= counts.get(tp.topic, 0) or tp.topic in again}
        if drop:
            log.warning(
                "Hudi Streamer's checkpoint stored with the next commit no longer names "
                "partition(s) %s (no reader of this pipeline holds them): they no longer exist "
                "or their topic was created again since their positions were stored",
                ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(drop)))
            self._stored_positions = {tp: o for tp, o in self._stored_positions.items()
                                      if tp not in drop}

    def _recreated(self, topics: set[str]) -> dict[str, tuple[str, str]]:
        """Topics of the positions whose id differs from the id the checkpoint's positions
        were read at (deleted and created again since, while the pipeline was stopped or while
        it runs): topic -> (old, new). Asked at every plan (one DescribeTopics request); a topic
        the brokers give no id is asked once."""
        ask = {t for t in topics if t in self._ids or t not in self._asked}
        if ask:
            if self._client is None:
                self._client = self.source.metadata_client()
            self._ids.update(self._client.topic_ids(ask))
            self._asked |= ask
        stored = self._stored_ids
        if not stored:
            return {}
        return {t: (stored[t], self._ids[t]) for t in sorted(topics)
                if t in stored and t in self._ids and stored[t] != self._ids[t]}

    def _deleted(self, topics: Collection[str]) -> KafkaSourceError:
        """The error of topics named by option 'topic' or 'partitions' that no longer exist."""
        return KafkaSourceError(
            f"topic(s) {', '.join(repr(t) for t in sorted(topics))} no longer exist on the "
            f"brokers ({self._servers}), but the table's checkpoint holds positions in them: "
            "they were deleted. Create them again to go on ('offsets.out-of-range' decides "
            "where a re-created topic is read from), or write to a new table"
        )

    def _restart_points(
        self, past: list[KafkaPartitionSplit], ends: Mapping[TopicPartition, int],
        recreated: Mapping[str, tuple[str, str]],
    ) -> dict[TopicPartition, int]:
        """Where splits positioned past their partition's end, or in a topic created again,
        go on (``offsets.out-of-range`` = earliest: the partition's earliest offset), or the
        error that stops the source."""
        where = ", ".join(f"{s.topic}-{s.partition} (position {s.starting_offset}, end offset "
                          f"{ends.get(s.topic_partition, '?')})" for s in past[:5])
        more = f" and {len(past) - 5} more" if len(past) > 5 else ""
        again = "".join(f"; topic '{t}' has another id than when it was read ({old} -> {new})"
                        for t, (old, new) in recreated.items())
        other = (f" (or 'properties.bootstrap.servers', now {self._servers}, names another "
                 "cluster than the one they were read from: then set it back; 'earliest' would "
                 "mix the two clusters' records in one table)") if recreated else ""
        if self.source.config.offsets_out_of_range is not OffsetsOutOfRange.EARLIEST:
            raise KafkaOffsetOutOfRangeError(
                f"the table's checkpoint holds positions of partition(s) {where}{more} that no "
                f"longer mean the records they were read at{again}: the topic was deleted and "
                f"re-created, or its records were deleted, after they were read{other}. Set "
                "'offsets.out-of-range' = 'earliest' to read such partitions from their "
                "earliest offset, or write to a new table"
            )
        assert self._client is not None  # _ends made it
        earliest = self._client.earliest_offsets([s.topic_partition for s in past])
        log.warning("positions of partition(s) %s%s no longer mean the records they were read "
                    "at%s (the topic was deleted and re-created, or truncated): reading them "
                    "from their earliest offsets %s ('offsets.out-of-range' = 'earliest')",
                    where, more, again, ", ".join(f"{tp.topic}-{tp.partition}={o}"
                                                  for tp, o in sorted(earliest.items())))
        return earliest

    def bound(
        self, plans: Mapping[int, ReaderPlan[Any]], round_id: int, max_records: int
    ) -> RoundPlan:
        held = {i: list(p.splits) for i, p in plans.items()}
        tps = sorted({s.topic_partition for splits in held.values() for s in splits})
        self._holding = bool(tps)
        ends, gone, missing = self._ends(tps) if tps else ({}, set(), set())
        past = past_end(held, ends)
        if past:
            # positions past their partition's end: a deleted topic may still answer with end
            # offsets (some brokers give 0 for a topic they no longer have)
            assert self._client is not None  # _ends made it
            present = self._client.topic_partition_counts()
            deleted = {s.topic for s in past if s.topic not in present}
            if deleted and self.source.config.subscription.pattern is None:
                raise self._deleted(deleted)  # not "re-created", nor "check the brokers"
            gone |= deleted
            ends = {tp: e for tp, e in ends.items() if tp.topic not in gone}
            past = [s for s in past if s.topic not in gone]
        self._drop_deleted(held, gone, missing)
        recreated = self._recreated({tp.topic for tp in tps if tp.topic not in gone})
        self._check_stored(set(tps), recreated)
        # a new partition (position 0) is read from its start anyway; a dropped one not at all
        past += [s for splits in held.values() for s in splits
                 if s.topic in recreated and s not in past and s.starting_offset > 0
                 and s.topic_partition not in missing]
        self._moved = bool(past)
        if past:
            held = restarted(held, self._restart_points(past, ends, recreated))
        readable = self._committed_ends(held, ends)
        if self._targets is None:
            if tps:
                self._targets = dict(readable)
            else:
                self._unassigned_plans += 1
        elif past:  # restarted (topic created again, position past its end): drain to new ends
            moved = {s.topic_partition for s in past}
            self._targets.update({tp: e for tp, e in readable.items() if tp in moved})
        bounded = plan_round(held, readable, max_records)
        lag: dict[str, int] = {}
        for splits in bounded.values():
            for s in splits:
                if s.topic in gone:
                    continue
                end = ends.get(s.topic_partition, s.stopping_offset or 0)
                lag[f"{s.topic}-{s.partition}"] = max(0, end - (s.stopping_offset or 0))
                self._positions[s.topic_partition] = s.stopping_offset or s.starting_offset
        tasks = {
            i: ReadTask(i, len(plans), round_id, self.source, tuple(bounded[i]),
                        empty=all(s.stopping_offset == s.starting_offset for s in bounded[i]))
            for i in plans
        }
        return RoundPlan(tasks, lag)

    def _committed_ends(
        self, held: Mapping[int, Sequence[KafkaPartitionSplit]], ends: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Where the round's reads end: the end offsets, or for a ``read_committed`` consumer
        (librdkafka's default) the last stable offsets, which are lower while a transaction is
        open. Such a consumer delivers nothing past them, and a round planned to the end offset
        waited there, with every other partition's records, until the transaction ended or the
        read timed out (Kafka review: 75 s with nothing said). Never below where a split
        stands: a broker's odd answer does not move a position back."""
        level = str(self.source.config.client_properties.get("isolation.level",
                                                             "read_committed"))
        if level != "read_committed" or not ends:
            return dict(ends)
        assert self._client is not None  # _ends made it
        stable = self._client.stable_offsets(list(ends))
        starts = {s.topic_partition: s.starting_offset
                  for splits in held.values() for s in splits}
        out: dict[TopicPartition, int] = {}
        for tp, end in ends.items():
            out[tp] = max(min(end, stable.get(tp, end)), min(end, starts.get(tp, 0)))
            if out[tp] < end:
                log.debug("%s-%s: offsets %d to %d are in a transaction still open; this round "
                          "reads up to %d", tp.topic, tp.partition, out[tp], end, out[tp])
        return out

    def continuing(self, held: Sequence[SourceSplit], outcome: ReadOutcome) -> list[SourceSplit]:
        read = {s.split_id: s for s in outcome.splits}
        deleted = self._dropping.get(outcome.subtask, {})
        out: list[SourceSplit] = []
        for s in held:
            assert isinstance(s, KafkaPartitionSplit)
            if s.topic_partition in deleted:
                continue
            state = read.get(s.split_id)
            if state is None:  # the reader keeps finished splits: a missing one is a bug
                raise PipelineError(
                    f"reader subtask {outcome.subtask} reported no state for split "
                    f"'{s.split_id}' of its plan; not committing"
                )
            cont = after_round(s, state)
            if cont.stopping_offset is not None and cont.starting_offset >= cont.stopping_offset:
                self._stored_positions[cont.topic_partition] = cont.starting_offset  # bounded: read
                continue
            out.append(cont)
        return out

    def forward_events(
        self, rounds: SourceRounds[Any, Any], outcomes: Sequence[ReadOutcome]
    ) -> None:
        super().forward_events(rounds, outcomes)
        for reader, deleted in sorted(self._dropping.items()):
            rounds.coordinator.handle_source_event(
                reader, PartitionsDeletedEvent(tuple(sorted(deleted))))
        self._dropping = {}

    def commit_pending(self, rounds: SourceRounds[Any, Any]) -> bool:
        # dropped splits and moved positions reach the checkpoint with a commit, also when the
        # round reads nothing (an empty topic created again would be found again every round);
        # so do the first positions of a new table that a restart would not find again
        return (bool(self._dropping) or self._moved
                or ((self._unsaved_starts or self._changed_subscription) and self._holding))

    def drained(self) -> bool:
        if self._targets is None:  # no partition found (yet): give discovery a few rounds
            return self._unassigned_plans >= 3
        return all(self._positions.get(tp, 0) >= end for tp, end in self._targets.items())

    def after_commit(self, rounds: SourceRounds[Any, Any]) -> None:
        self._unsaved_starts = self._changed_subscription = False
        stored = self._streamer_checkpoint(rounds)
        if stored is not None:  # what the commit stored: the fallback of unheld partitions
            self._stored_positions.update(stored.positions())  # (other topics' ended ones kept)
            self._stored_topic = stored.topic
        self._stored_ids = dict(self._ids)  # the committed positions refer to these topics
        splits = [s for held in rounds.held_splits().values() for s in held]
        self.source.commit_offsets(splits)

    def reset(self) -> None:
        self._subject = None  # a round may have failed on a newer schema: fetch it again
        self.close()

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


def _streamer_flags(metadata: Mapping[str, str]) -> dict[str, str]:
    """Hudi Streamer's flag marks of a commit (see
    :data:`~hoodline.table.commit_metadata.STREAMER_FLAG_KEYS`)."""
    return {k: metadata[k] for k in STREAMER_FLAG_KEYS if metadata.get(k)}


def _unknown_partition(exc: BaseException) -> bool:
    """The Kafka error under ``exc`` says a partition or topic is unknown (to the client or to
    the broker asked), or that it has no leader yet: ``_NOENT`` ("No leaders found"), what
    librdkafka says while a restarted broker takes its partitions back (a review: the
    pipeline stopped each time the broker came back, 3 of 3)."""
    from confluent_kafka import KafkaError

    cause = exc.__cause__
    inner = cause.args[0] if cause is not None and cause.args else None
    code = getattr(inner, "code", None)
    return callable(code) and code() in (
        KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._NOENT)
