"""Reading Kafka partition splits into Arrow record batches (confluent-kafka / librdkafka).

:class:`KafkaPartitionSplitReader` reads each split's range ``[start, stop)``; one ``fetch`` pulls
up to ``scan.fetch.max-records`` messages with ``Consumer.consume`` and turns each split's share
into one :class:`pyarrow.RecordBatch` (columns built in bulk from the message batch; no per-record
dicts or row objects). The batch goes to :class:`KafkaRecordEmitter` together with the offset to
continue from, which is how gaps (compacted topics, transaction markers) are stepped over: the
end of a range is detected from a record at/after the last offset *or* from the partition-end event
(its high watermark), never by waiting for an offset that does not exist.

Broker outages are reported by librdkafka only through ``error_cb`` (``_ALL_BROKERS_DOWN``,
``_TRANSPORT``); they are logged, librdkafka keeps reconnecting (with backoff), and when the brokers
stay unreachable longer than ``scan.broker-unavailable.timeout`` the fetch fails with
:class:`~hoodline.errors.KafkaBrokerUnavailableError`. Offsets that no longer exist follow
``offsets.out-of-range``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hoodline.connectors.kafka.client_log import with_client_logging
from hoodline.connectors.kafka.offsets import OffsetsOutOfRange
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.split import KafkaPartitionSplit, KafkaPartitionSplitState
from hoodline.errors import (
    ConfigError,
    FetchError,
    KafkaBrokerUnavailableError,
    KafkaOffsetOutOfRangeError,
    KafkaSourceError,
)
from hoodline.source.api import ReaderOutput, SourceReaderContext
from hoodline.source.base import (
    RecordEmitter,
    RecordsBySplits,
    RecordsWithSplitIds,
    SourceReaderBase,
    SplitReader,
    SplitsChange,
)

log = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

#: Schema of the batches the Kafka source emits.
KAFKA_RECORD_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("headers", HEADER_TYPE),
    ]
)

#: librdkafka properties the reader's consumer gets unless the user sets them
#: (``properties.<name>``).
#:
#: - ``fetch.queue.backoff.ms``: once the prefetch queue is over ``queued.min.messages`` /
#:   ``queued.max.messages.kbytes``, librdkafka waits this long before fetching a partition
#:   again (its default: 1000 ms), so a reader that drains the queue in less than a second sits
#:   idle for the rest of it. Measured with bench.bench_kafka_reader (1M messages, bundled
#:   broker): 6.2 s wall at 1000 ms, 1.3-2.1 s at 1-100 ms, same CPU.
#: - ``queued.min.messages`` / ``queued.max.messages.kbytes``: a reader's consumer lives for one
#:   round and reads up to its splits' stopping offsets; whatever librdkafka prefetched beyond
#:   them is thrown away when the round ends and fetched again by the next round's consumer.
#:   With librdkafka's defaults (100,000 messages per partition, 64 MiB) a reader of 4 x 62,500
#:   messages fetched 407-431k messages from the broker; with 10,000 / 16 MiB 311-335k. On the
#:   2M-message ingest that lowered the bundled broker's CPU from 1.72-1.86 s to 1.22-1.34 s and
#:   the pipeline's peak memory by ~90 MiB (BENCHMARKS.md, 2026-11-27 evening). 10,000 messages
#:   per partition still keep a fetch response or two queued ahead of the reader.
CONSUMER_DEFAULTS: Mapping[str, Any] = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 10_000,
    "queued.max.messages.kbytes": 16 * 1024,
}

_DEFAULT_GROUP_ID = "hoodline-source"
_OUTAGE_CODES = ("_ALL_BROKERS_DOWN", "_TRANSPORT")
#: what librdkafka says of a response larger than ``receive.message.max.bytes`` ("Invalid
#: response size N (0..M): increase receive.message.max.bytes"); it then drops the connection
#: and tries again forever, the same response each time
_TOO_LARGE = "receive.message.max.bytes"
_OUT_OF_RANGE_CODES = ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE")
_PARTITION_EOF = "_PARTITION_EOF"
#: seconds a read may go without progress before the partitions it waits for are looked at: a
#: topic deleted (or deleted and re-created) while a round read it never delivers the records
#: the round was planned to, and the read waited for them forever (day-two review)
STALL_CHECK_S = 15.0


@dataclass(frozen=True)
class KafkaFetch:
    """Records read from one split plus the offset to continue from (may jump over gaps)."""

    batch: pa.RecordBatch
    next_offset: int


def messages_to_batch(messages: Sequence[Any], topic: str, partition: int) -> pa.RecordBatch:
    """One Arrow batch from confluent-kafka messages of one partition (columns built in bulk).

    One list comprehension per message field (no per-message tuples or generators), headers
    converted only when some message has them, topic and partition columns made without lists.
    """
    n = len(messages)
    keys = pa.array([m.key() for m in messages], pa.binary())
    values = pa.array([m.value() for m in messages], pa.binary())
    offsets = pa.array(np.fromiter([m.offset() for m in messages], dtype=np.int64, count=n))
    ts_raw = np.fromiter([m.timestamp()[1] for m in messages], dtype=np.int64, count=n)
    timestamps = pa.array(ts_raw, pa.int64(), mask=ts_raw < 0).cast(pa.timestamp("ms", tz="UTC"))
    raw_headers = [m.headers() for m in messages]
    if raw_headers.count(None) != n:
        headers = pa.array(raw_headers, HEADER_TYPE)
    else:
        headers = pa.nulls(n, HEADER_TYPE)
    topics = pa.repeat(pa.scalar(topic, pa.string()), n)
    partitions = pa.array(np.full(n, partition, dtype=np.int32))
    return pa.RecordBatch.from_arrays(
        [keys, values, topics, partitions, offsets, timestamps, headers],
        schema=KAFKA_RECORD_SCHEMA,
    )


class _Outage:
    """Tracks a broker outage reported through ``error_cb`` (called from librdkafka threads)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.since: float | None = None
        self.last_error = ""
        self._last_logged = 0.0
        #: errors reported through error_cb, and outages (first error to recovery) so far
        self.error_count = 0
        self.outage_count = 0
        #: a fetch response the client refused for its size (see :data:`_TOO_LARGE`)
        self.too_large: str | None = None

    def on_error(self, err: Any) -> None:
        name = err.name() if hasattr(err, "name") else str(err)
        text = str(err)
        now = self._clock()
        with self._lock:
            self.error_count += 1
            if name in _OUTAGE_CODES:
                if self.since is None:
                    self.since = now
                    self.outage_count += 1
                    log.warning("Kafka brokers unreachable (%s); librdkafka keeps retrying", text)
                elif now - self._last_logged >= 5.0:
                    log.warning(
                        "Kafka brokers still unreachable after %.1fs: %s", now - self.since, text
                    )
                else:
                    return
                self._last_logged = now
                self.last_error = text
            elif _TOO_LARGE in text:
                if self.too_large is None:
                    self.too_large = text
                    log.warning("Kafka client error: %s", text)
            else:
                log.warning("Kafka client error: %s", text)

    def clear(self) -> None:
        with self._lock:
            if self.since is not None:
                log.info("Kafka brokers reachable again after %.1fs", self._clock() - self.since)
            self.since = None

    def duration(self) -> float:
        with self._lock:
            return 0.0 if self.since is None else self._clock() - self.since


class KafkaPartitionSplitReader(SplitReader[KafkaFetch, KafkaPartitionSplit]):
    """Reads the ranges of the Kafka splits it was given (see module docs).

    ``consumer_factory`` builds a confluent-kafka ``Consumer`` from a config dict (injectable so
    the range/gap/outage logic can be unit-tested with a fake consumer).
    """

    def __init__(
        self,
        config: KafkaSourceConfig,
        *,
        consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._clock = clock
        self._outage = _Outage(clock)
        props = consumer_properties(config)
        props["error_cb"] = self._outage.on_error
        if consumer_factory is None:
            from confluent_kafka import Consumer

            consumer_factory = Consumer
        self._consumer: Any = consumer_factory(with_client_logging(props, "reader"))
        #: split id -> (split, next offset expected)
        self._splits: dict[str, KafkaPartitionSplit] = {}
        self._next: dict[str, int] = {}
        self._by_tp: dict[tuple[str, int], str] = {}
        self._finished_now: list[str] = []
        self._records_read = 0
        self._skipped_out_of_range = 0
        #: since when no split made progress, and when that was last looked into
        self._stalled_since: float | None = None
        self._stall_checked = 0.0

    def metrics(self) -> dict[str, float]:
        """Counters for monitoring: records read, client errors, broker outages and the seconds
        the current outage has lasted, records skipped by the 'earliest' out-of-range policy."""
        return {
            "records_read": self._records_read,
            "client_errors": self._outage.error_count,
            "broker_outages": self._outage.outage_count,
            "current_outage_seconds": self._outage.duration(),
            "records_skipped_out_of_range": self._skipped_out_of_range,
        }

    # --- SplitReader ----------------------------------------------------------------------------
    def handle_splits_changes(self, change: SplitsChange[KafkaPartitionSplit]) -> None:
        from confluent_kafka import TopicPartition as CTP

        to_assign = []
        for split in change.splits:
            sid = split.split_id
            # Offsets deleted by retention are reported by librdkafka (auto.offset.reset=error)
            # as an error event on the partition and handled per 'offsets.out-of-range'.
            start = split.starting_offset
            if split.stopping_offset is not None and start >= split.stopping_offset:
                self._finished_now.append(sid)
                continue
            self._splits[sid] = split
            self._next[sid] = start
            self._by_tp[(split.topic, split.partition)] = sid
            to_assign.append(CTP(split.topic, split.partition, start))
        if to_assign:
            self._consumer.incremental_assign(to_assign)

    def _out_of_range(self, topic: str, partition: int, offset: int, earliest: int | None) -> int:
        if self._config.offsets_out_of_range is OffsetsOutOfRange.EARLIEST and earliest is not None:
            self._skipped_out_of_range += max(0, earliest - offset)
            log.warning(
                "offset %d of %s-%d is no longer available (retention deleted it); skipping to "
                "the earliest available offset %d: %d records are lost",
                offset,
                topic,
                partition,
                earliest,
                max(0, earliest - offset),
            )
            return earliest
        where = f" (earliest available: {earliest})" if earliest is not None else ""
        raise KafkaOffsetOutOfRangeError(
            f"offset {offset} of topic {topic!r} partition {partition} is out of range{where}: "
            f"the records were deleted by retention before they were read. Set "
            f"'offsets.out-of-range' to 'earliest' to skip to the earliest available offset "
            f"(losing the deleted records), or restore from a newer checkpoint."
        )

    def fetch(self) -> RecordsWithSplitIds[KafkaFetch]:
        result: RecordsBySplits[KafkaFetch] = RecordsBySplits()
        for sid in self._finished_now:
            result.finish(sid)
        self._finished_now = []
        if not self._splits:
            return result
        # consume() waits for its whole timeout unless num_messages arrive: never ask for more
        # than the ranges still hold, so a read that reaches its planned ends returns at once.
        messages = self._consumer.consume(
            num_messages=min(self._config.fetch_max_records, self._left_in_ranges()),
            timeout=self._config.fetch_timeout_s,
        )
        if not messages:
            self._check_outage()
            self._check_stalled(progressed=bool(result.finished_splits()))
            return result
        self._outage.clear()
        self._check_too_large()  # (other partitions' messages may still arrive)
        eof: dict[str, int] = {}
        good = [m for m in messages if m.error() is None]
        if len(good) != len(messages):  # events (partition end, out of range, ...)
            for m in messages:
                err = m.error()
                if err is not None:
                    self._on_message_error(m, err, eof)
            messages = good
        for sid, msgs in self._group_by_split(messages).items():
            if sid not in self._splits:
                continue  # a late message of a split that finished in this fetch
            self._emit_range(sid, msgs, result)
        for sid, hwm in eof.items():
            split = self._splits.get(sid)
            if split is None:
                continue
            stop = split.stopping_offset
            if stop is not None and hwm >= stop:
                # Gap at the end (transaction markers, compaction): nothing left below stop.
                result.add(sid, KafkaFetch(_empty_batch(), stop))
                self._finish(sid, result)
        self._check_stalled(progressed=bool(result.records_by_split() or result.finished_splits()))
        return result

    def _check_stalled(self, progressed: bool) -> None:
        """Fail the read (retryably: the round is planned again, from what the brokers hold
        then) when a partition it waits for lost the records the round was planned to read:
        its end offset fell below the planned end (the topic was deleted and re-created, or
        truncated) or it is gone. Looked at after :data:`STALL_CHECK_S` without progress,
        then every as many seconds; a partition that still holds its records is only named."""
        if progressed or not self._splits:
            self._stalled_since = None
            return
        now = self._clock()
        if self._stalled_since is None:
            self._stalled_since = now
            return
        if (now - self._stalled_since < STALL_CHECK_S or now - self._stall_checked < STALL_CHECK_S
                or self._outage.duration() > 0):  # an outage has its own clock and message
            return
        self._stall_checked = now
        from confluent_kafka import TopicPartition as CTP

        lost: list[str] = []
        waiting: list[str] = []
        for sid, split in self._splits.items():
            stop = split.stopping_offset
            if stop is None:
                continue  # unbounded: waiting for records is what it does
            name = f"{split.topic}-{split.partition}"
            try:
                _, high = self._consumer.get_watermark_offsets(
                    CTP(split.topic, split.partition), timeout=5.0, cached=False)
            except Exception as exc:  # named in the error; the round is retried
                lost.append(f"{name} cannot be read ({exc})")
                continue
            if int(high) < stop:
                lost.append(f"{name} ends at offset {high} now, before the round's planned end "
                            f"{stop}")
            else:
                waiting.append(f"{name} at {self._next[sid]} of {stop}")
        if lost:
            raise FetchError(
                f"no records for {now - self._stalled_since:.0f}s: partition "
                f"{'; '.join(lost)}: was the topic deleted (or deleted and created again) while "
                "the round read it? The round is planned again from what the brokers hold")
        if waiting:
            log.warning("no records for %.0fs though the brokers hold them (%s); still waiting",
                        now - self._stalled_since, ", ".join(waiting))

    def _group_by_split(self, messages: list[Any]) -> dict[str, list[Any]]:
        """Messages per split id (messages of unknown partitions under ""), in arrival order.

        librdkafka hands each partition's messages over in runs (one per fetched batch), so the
        messages are grouped run by run: a list slice per run, not a dict update per message.
        """
        by_split: dict[str, list[Any]] = {}
        n = len(messages)
        if not n:
            return by_split
        partitions = np.fromiter([m.partition() for m in messages], dtype=np.int64, count=n)
        topics = [m.topic() for m in messages]
        changed = partitions[1:] != partitions[:-1]
        if topics.count(topics[0]) != n:
            changed |= np.array(topics[1:], dtype=object) != np.array(topics[:-1], dtype=object)
        bounds = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
        for lo, hi in itertools.pairwise(bounds):
            sid = self._by_tp.get((topics[lo], int(partitions[lo])), "")
            by_split.setdefault(sid, []).extend(messages[lo:hi])
        return by_split

    def _left_in_ranges(self) -> int:
        """Most records the assigned splits can still yield (unbounded splits: no limit)."""
        left = 0
        for sid, split in self._splits.items():
            if split.stopping_offset is None:
                return self._config.fetch_max_records
            left += max(1, split.stopping_offset - self._next[sid])
        return max(1, left)

    def _emit_range(self, sid: str, msgs: list[Any], result: RecordsBySplits[KafkaFetch]) -> None:
        split = self._splits[sid]
        stop = split.stopping_offset
        expected = self._next[sid]
        first = msgs[0].offset()
        if first < expected:
            msgs = [m for m in msgs if m.offset() >= expected]  # never emit an offset twice
            if not msgs:
                return
        done = False
        if stop is not None and msgs[-1].offset() >= stop - 1:
            cut = len(msgs)
            while cut > 0 and msgs[cut - 1].offset() >= stop:
                cut -= 1
            msgs = msgs[:cut]
            done = True
        if msgs:
            batch = messages_to_batch(msgs, split.topic, split.partition)
            self._records_read += len(msgs)
            next_offset = msgs[-1].offset() + 1
        else:
            batch, next_offset = _empty_batch(), expected
        if done:
            # A record at/after stop - 1 arrived, so nothing is left below stop (even if the last
            # offsets before stop are gaps).
            assert stop is not None
            next_offset = stop
        self._next[sid] = next_offset
        result.add(sid, KafkaFetch(batch, next_offset))
        if done:
            self._finish(sid, result)

    def _finish(self, sid: str, result: RecordsBySplits[KafkaFetch]) -> None:
        from confluent_kafka import TopicPartition as CTP

        split = self._splits.pop(sid)
        self._next.pop(sid, None)
        self._by_tp.pop((split.topic, split.partition), None)
        self._consumer.incremental_unassign([CTP(split.topic, split.partition)])
        result.finish(sid)

    def _on_message_error(self, m: Any, err: Any, eof: dict[str, int]) -> None:
        name = err.name()
        sid = self._by_tp.get((m.topic(), m.partition()))
        if name == _PARTITION_EOF:
            if sid is not None:
                eof[sid] = max(eof.get(sid, -1), int(m.offset()))
            return
        if name in _OUT_OF_RANGE_CODES and sid is not None:
            split = self._splits[sid]
            offset = self._next[sid]
            earliest, lookup_error = self._earliest(split)
            if (earliest is None
                    and self._config.offsets_out_of_range is OffsetsOutOfRange.EARLIEST):
                # the refusal below would ask for 'earliest', which is set: try the round again
                raise FetchError(
                    f"offset {offset} of {split.topic}-{split.partition} is out of range and "
                    f"its earliest available offset could not be looked up "
                    f"({lookup_error}); the round is tried again")
            new_start = self._out_of_range(split.topic, split.partition, offset, earliest)
            self._reposition(sid, new_start)
            return
        if err.fatal() if hasattr(err, "fatal") else False:
            raise KafkaSourceError(
                f"fatal Kafka consumer error on {m.topic()}-{m.partition()}: {err}; the consumer "
                f"cannot continue (check the client properties and broker compatibility)"
            )
        log.warning("Kafka consumer error on %s-%s: %s", m.topic(), m.partition(), err)

    def _earliest(self, split: KafkaPartitionSplit) -> tuple[int | None, str]:
        """The partition's earliest available offset, or None and why it is not known."""
        from confluent_kafka import TopicPartition as CTP

        try:
            low, _ = self._consumer.get_watermark_offsets(
                CTP(split.topic, split.partition), timeout=10.0
            )
            return int(low), ""
        except Exception as exc:  # librdkafka's KafkaException, timeouts
            return None, f"{type(exc).__name__}: {exc}"

    def _reposition(self, sid: str, offset: int) -> None:
        from confluent_kafka import TopicPartition as CTP

        split = self._splits[sid]
        tp = CTP(split.topic, split.partition)
        self._consumer.incremental_unassign([tp])
        self._consumer.incremental_assign([CTP(split.topic, split.partition, offset)])
        self._next[sid] = offset

    def _check_outage(self) -> None:
        self._check_too_large()
        down_for = self._outage.duration()
        if down_for <= 0:
            return
        self._check_down_for(down_for)

    def _check_too_large(self) -> None:
        if self._outage.too_large is not None:
            # retrying cannot help: the brokers answer metadata requests, so this looked like
            # an outage that never timed out, and the pipeline hung with a warning every 0.2 s
            # (Kafka review)
            raise KafkaSourceError(
                f"a fetch response from the Kafka brokers {self._config.bootstrap_servers} is "
                f"larger than the consumer accepts ({self._outage.too_large}) while reading "
                f"splits {sorted(self._splits)}: a message, or a batch of messages, in the "
                "topic is bigger than 'receive.message.max.bytes'. Set "
                "properties.receive.message.max.bytes above it (with "
                "properties.fetch.max.bytes and properties.max.partition.fetch.bytes below it), "
                "or leave all three at librdkafka's defaults"
            )

    def _check_down_for(self, down_for: float) -> None:
        try:  # a metadata round trip tells whether the brokers are back (idle partitions)
            self._consumer.list_topics(timeout=min(1.0, self._config.fetch_timeout_s + 0.5))
            self._outage.clear()
            return
        except Exception:
            pass
        if down_for > self._config.broker_unavailable_timeout_s:
            raise KafkaBrokerUnavailableError(
                f"Kafka brokers {self._config.bootstrap_servers} unreachable for {down_for:.1f}s "
                f"(more than 'scan.broker-unavailable.timeout' = "
                f"{self._config.broker_unavailable_timeout_s}s) while reading splits "
                f"{sorted(self._splits)}; last error: {self._outage.last_error}. Check the "
                f"brokers and the network; the job can restart from its last checkpoint."
            )

    def wake_up(self) -> None:
        # consume() returns within the fetch timeout; nothing else to interrupt.
        pass

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception as exc:  # closing must not hide the error that caused it
            log.debug("closing the Kafka consumer failed: %s", exc)

    # --- offset commits (monitoring only) -----------------------------------------------------
    def commit_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit ``offsets`` (next offset to read per partition) to the consumer group."""
        from confluent_kafka import TopicPartition as CTP

        if not offsets:
            return
        self._consumer.commit(
            offsets=[CTP(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=False
        )


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=KAFKA_RECORD_SCHEMA)


class KafkaRecordEmitter(RecordEmitter[KafkaFetch, KafkaPartitionSplitState]):
    """Emits a fetched batch and moves the split state to the fetch's continue-from offset."""

    def emit_record(
        self, element: KafkaFetch, output: ReaderOutput, split_state: KafkaPartitionSplitState
    ) -> None:
        if element.batch.num_rows:
            output.emit(element.batch, split_state.split_id)
        if element.next_offset > split_state.current_offset:
            split_state.advance_to(element.next_offset)


#: consumer properties the readers set whatever ``properties.*`` says, and what decides instead
_OWN_PROPERTIES: dict[str, tuple[Any, str]] = {
    "enable.auto.commit": (False, "offsets are stored in the table's commits (consumer group "
                                  "offsets: 'commit.offsets.on.checkpoint')"),
    "enable.auto.offset.store": (False, "offsets are stored in the table's commits"),
    "enable.partition.eof": (True, "the readers need it to end their ranges"),
    "auto.offset.reset": ("error", "where a partition without a position starts is "
                                   "'scan.startup.mode', and offsets deleted by retention "
                                   "follow 'offsets.out-of-range'"),
}


def consumer_properties(config: KafkaSourceConfig) -> dict[str, Any]:
    """The librdkafka properties of the readers' consumers (without callbacks)."""
    props: dict[str, Any] = {**CONSUMER_DEFAULTS, **config.client_properties}
    props.setdefault("group.id", _DEFAULT_GROUP_ID)
    props.update({key: value for key, (value, _) in _OWN_PROPERTIES.items()})
    return props


class _DroppedClientLog:
    """A confluent-kafka ``logger`` that drops every line."""

    def log(self, level: int, msg: str, *args: Any) -> None:
        del level, msg, args


_DROPPED_CLIENT_LOG = _DroppedClientLog()


def check_consumer_properties(config: KafkaSourceConfig) -> None:
    """librdkafka's verdict on the readers' consumer properties, before any round: an unknown
    or invalid ``properties.*`` key failed every reader task, retried round after round, and
    the message never named the option. (A consumer is made and closed at once. It connects to
    the brokers like any consumer; what its client logs meanwhile is dropped: brokers that do not
    answer are reported by the metadata client, naming the option.)"""
    from confluent_kafka import Consumer, KafkaException

    for key, (value, instead) in _OWN_PROPERTIES.items():
        given = config.client_properties.get(key)
        if given is not None and str(given).lower() != str(value).lower():
            log.warning("properties.%s = %r is not used: the readers set it to %r (%s)",
                        key, given, value, instead)
    try:
        Consumer({**consumer_properties(config), "logger": _DROPPED_CLIENT_LOG}).close()
    except KafkaException as exc:
        err: Any = exc.args[0] if exc.args else None
        text = err.str() if err is not None and hasattr(err, "str") else str(exc)
        raise ConfigError(
            f"[source.options] properties: librdkafka refuses the consumer configuration: "
            f"{text} (keys under 'properties.' go to librdkafka as they are: see its "
            "CONFIGURATION.md for their names and values)"
        ) from None


class KafkaSourceReader(
    SourceReaderBase[KafkaFetch, KafkaPartitionSplit, KafkaPartitionSplitState]
):
    """The Kafka source reader: split reader + emitter + per-split mutable state.

    Finished splits stay in the snapshot with their final offset (a split bounded to the end of a
    round continues from there in the next round). With ``properties.group.id`` set and
    ``commit.offsets.on.checkpoint`` on, offsets of a completed checkpoint are committed to the
    consumer group (monitoring only; recovery never reads them).
    """

    def __init__(
        self,
        config: KafkaSourceConfig,
        context: SourceReaderContext,
        *,
        consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
        threaded: bool = True,
    ) -> None:
        self._config = config
        self._split_reader: KafkaPartitionSplitReader | None = None

        def factory() -> KafkaPartitionSplitReader:
            self._split_reader = KafkaPartitionSplitReader(
                config, consumer_factory=consumer_factory
            )
            return self._split_reader

        super().__init__(factory, KafkaRecordEmitter(), context, threaded=threaded)
        self._offsets_to_commit: dict[int, dict[tuple[str, int], int]] = {}

    def metrics(self) -> dict[str, float]:
        """Monitoring counters (see :meth:`KafkaPartitionSplitReader.metrics`)."""
        return self._split_reader.metrics() if self._split_reader is not None else {}

    def initialized_state(self, split: KafkaPartitionSplit) -> KafkaPartitionSplitState:
        return KafkaPartitionSplitState(split)

    def to_split(self, split_id: str, state: KafkaPartitionSplitState) -> KafkaPartitionSplit:
        return state.to_split()

    def keep_finished_split(self, split_id: str, state: KafkaPartitionSplitState) -> bool:
        return True

    def snapshot_state(self, checkpoint_id: int) -> list[KafkaPartitionSplit]:
        splits = super().snapshot_state(checkpoint_id)
        if self._config.group_id and self._config.commit_offsets_on_checkpoint:
            self._offsets_to_commit[checkpoint_id] = {
                (s.topic, s.partition): s.starting_offset for s in splits
            }
        return splits

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        offsets = self._offsets_to_commit.pop(checkpoint_id, None)
        for older in [c for c in self._offsets_to_commit if c < checkpoint_id]:
            del self._offsets_to_commit[older]
        if not offsets or self._split_reader is None:
            return
        try:
            self._split_reader.commit_offsets(offsets)
        except Exception as exc:  # monitoring only: never fail the job for it
            log.warning("committing offsets of checkpoint %d failed: %s", checkpoint_id, exc)
