"""Split reader logic with a fake consumer: ranges, gaps, out-of-range policy, outages."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.reader import KafkaFetch, KafkaPartitionSplitReader
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.errors import KafkaBrokerUnavailableError, KafkaOffsetOutOfRangeError
from hoodline.source.base import SplitsAddition


class FakeError:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name

    def fatal(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"KafkaError{{code={self._name}}}"


class FakeMsg:
    def __init__(self, topic: str, partition: int, offset: int, err: FakeError | None = None):
        self._t, self._p, self._o, self._e = topic, partition, offset, err

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def error(self) -> FakeError | None:
        return self._e

    def key(self) -> bytes:
        return b"k%d" % self._o

    def value(self) -> bytes:
        return b"v%d" % self._o

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self._o)

    def headers(self) -> None:
        return None


class FakeConsumer:
    """Partition logs are lists of existing offsets (gaps allowed)."""

    def __init__(self, logs: dict[tuple[str, int], list[int]], low: dict[tuple[str, int], int]):
        self.logs = logs
        self.low = low
        self.props: dict[str, Any] = {}
        self.positions: dict[tuple[str, int], int] = {}
        self.down = False
        self.eof_sent: set[tuple[str, int]] = set()
        self.committed: list[Any] = []

    def __call__(self, props: dict[str, Any]) -> FakeConsumer:
        self.props = props
        return self

    def incremental_assign(self, tps: list[Any]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            assert key not in self.positions, f"{key} assigned twice"
            self.positions[key] = tp.offset

    def incremental_unassign(self, tps: list[Any]) -> None:
        for tp in tps:
            self.positions.pop((tp.topic, tp.partition), None)

    def get_watermark_offsets(
        self, tp: Any, timeout: float, cached: bool = False
    ) -> tuple[int, int]:
        key = (tp.topic, tp.partition)
        log = self.logs.get(key, [])
        return self.low.get(key, 0), (log[-1] + 1 if log else 0)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMsg]:
        if self.down:
            self.props["error_cb"](FakeError("_ALL_BROKERS_DOWN"))
            return []
        out: list[FakeMsg] = []
        for key, pos in list(self.positions.items()):
            if pos < self.low.get(key, 0):
                out.append(FakeMsg(*key, pos, FakeError("_AUTO_OFFSET_RESET")))
                continue
            for off in self.logs.get(key, []):
                if off >= pos and len(out) < num_messages:
                    out.append(FakeMsg(*key, off))
                    self.positions[key] = off + 1
            log = self.logs.get(key, [])
            end = log[-1] + 1 if log else 0
            if self.positions[key] >= end and len(out) < num_messages:
                out.append(FakeMsg(*key, end, FakeError("_PARTITION_EOF")))
        return out

    def list_topics(self, timeout: float) -> None:
        if self.down:
            raise RuntimeError("down")

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.committed.append(offsets)

    def close(self) -> None:
        pass


def config(**kw: object) -> KafkaSourceConfig:
    return KafkaSourceConfig.from_options(
        {"properties.bootstrap.servers": "127.0.0.1:1", "topic": "t", **kw}
    )


def drain(
    reader: KafkaPartitionSplitReader, rounds: int = 20
) -> tuple[list[int], dict[str, int], set[str]]:
    offsets: list[int] = []
    nexts: dict[str, int] = {}
    finished: set[str] = set()
    for _ in range(rounds):
        res = reader.fetch()
        for sid, elems in res.records_by_split().items():
            for el in elems:
                assert isinstance(el, KafkaFetch)
                offsets.extend(el.batch.column("offset").to_pylist())
                nexts[sid] = el.next_offset
        finished |= res.finished_splits()
    return offsets, nexts, finished


def test_gaps_inside_and_at_end_of_range() -> None:
    fake = FakeConsumer({("t", 0): [0, 1, 2, 5, 6, 9]}, {})
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    assert fake.props["auto.offset.reset"] == "error"
    assert fake.props["enable.auto.commit"] is False
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 1, 9)]))
    offsets, nexts, finished = drain(reader)
    # 9 >= stop arrived: the range ends at 9 even though 7 and 8 do not exist
    assert offsets == [1, 2, 5, 6]
    assert nexts == {"t-0": 9}
    assert finished == {"t-0"}
    assert ("t", 0) not in fake.positions  # unassigned once finished


def test_range_end_from_partition_eof_when_last_offsets_are_markers() -> None:
    fake = FakeConsumer({("t", 0): [0, 1, 2, 4, 5]}, {})
    fake.logs[("t", 0)] = [0, 1, 2, 4, 5]
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)

    # high watermark 7 (offset 6 = commit marker): fake end is log[-1] + 1 = 6, so emulate 7
    def watermark_consume(num_messages: int, timeout: float) -> list[FakeMsg]:
        msgs = FakeConsumer.consume(fake, num_messages, timeout)
        return [FakeMsg("t", 0, 7, FakeError("_PARTITION_EOF")) if m.error() else m for m in msgs]

    fake.consume = watermark_consume  # type: ignore[method-assign]
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 0, 7)]))
    offsets, nexts, finished = drain(reader)
    assert offsets == [0, 1, 2, 4, 5]
    assert nexts == {"t-0": 7}
    assert finished == {"t-0"}


def test_interleaved_runs_of_topics_and_partitions_are_grouped_per_split_in_order() -> None:
    # librdkafka hands messages over in per-partition runs that interleave; the same partition
    # number of another topic is another split, and a partition not assigned is left out.
    fake = FakeConsumer({}, {})
    arrivals = [("t", 0, 0), ("t", 0, 1), ("u", 0, 0), ("t", 1, 0), ("t", 0, 2), ("u", 0, 1),
                ("x", 5, 0), ("t", 1, 1)]
    fake.consume = lambda num_messages, timeout: [  # type: ignore[method-assign]
        FakeMsg(*a) for a in arrivals
    ]
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    splits = [KafkaPartitionSplit("t", 0, 0), KafkaPartitionSplit("t", 1, 0),
              KafkaPartitionSplit("u", 0, 0)]
    reader.handle_splits_changes(SplitsAddition(splits))
    by_split = reader.fetch().records_by_split()
    got = {
        sid: [(b.column("topic")[0].as_py(), b.column("partition")[0].as_py(),
               b.column("offset").to_pylist()) for b in (f.batch for f in fetches)]
        for sid, fetches in by_split.items()
    }
    assert got == {
        "t-0": [("t", 0, [0, 1, 2])],
        "u-0": [("u", 0, [0, 1])],
        "t-1": [("t", 1, [0, 1])],
    }


def test_empty_range_finishes_without_assigning() -> None:
    fake = FakeConsumer({("t", 0): [0]}, {})
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 5, 5)]))
    assert fake.positions == {}
    assert reader.fetch().finished_splits() == {"t-0"}


class BlockingConsumer(FakeConsumer):
    """consume() as librdkafka's: it returns early only once ``num_messages`` arrived, otherwise
    it waits out its whole timeout (recorded, not slept)."""

    def __init__(self, logs: dict[tuple[str, int], list[int]]) -> None:
        super().__init__(logs, {})
        self.calls: list[tuple[int, bool]] = []  # (num_messages, waited for the timeout)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMsg]:
        positions, eof_sent = dict(self.positions), set(self.eof_sent)
        available = len(FakeConsumer.consume(self, 1_000_000, timeout))
        self.positions, self.eof_sent = positions, eof_sent
        self.calls.append((num_messages, available < num_messages))
        return FakeConsumer.consume(self, num_messages, timeout)


@pytest.mark.parametrize(
    "ranges",
    [[(3, 4)], [(0, 2), (5, 8)], [(9, 10)]],
    ids=["one-record", "two-ranges", "last-record"],
)
def test_read_reaching_its_planned_ends_returns_without_waiting_for_the_timeout(
    ranges: list[tuple[int, int]],
) -> None:
    logs = {("t", p): list(range(10)) for p in range(len(ranges))}
    fake = BlockingConsumer(logs)
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    splits = [KafkaPartitionSplit("t", p, a, b) for p, (a, b) in enumerate(ranges)]
    reader.handle_splits_changes(SplitsAddition(splits))
    offsets, nexts, finished = drain(reader)
    assert sorted(offsets) == sorted(o for a, b in ranges for o in range(a, b))
    assert finished == {s.split_id for s in splits}
    assert nexts == {s.split_id: s.stopping_offset for s in splits}
    assert fake.calls, "the reader never consumed"
    assert not any(waited for _, waited in fake.calls), fake.calls
    # records past one range's end may use up a call's count (read again by the next call);
    # once every range reached its end there is no further consume
    assert len(fake.calls) <= len(ranges)


def test_unbounded_split_still_fetches_up_to_max_records() -> None:
    fake = BlockingConsumer({("t", 0): list(range(10))})
    reader = KafkaPartitionSplitReader(
        config(**{"scan.fetch.max-records": 500}), consumer_factory=fake
    )
    reader.handle_splits_changes(
        SplitsAddition([KafkaPartitionSplit("t", 0, 0), KafkaPartitionSplit("t", 1, 0, 3)])
    )
    reader.fetch()
    assert fake.calls[0][0] == 500  # no planned end: a full batch may come, waiting is right


def test_out_of_range_fails_by_default_naming_topic_partition_offset() -> None:
    fake = FakeConsumer({("t", 3): list(range(100, 120))}, {("t", 3): 100})
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 3, 40)]))
    with pytest.raises(
        KafkaOffsetOutOfRangeError, match=r"offset 40 of topic 't' partition 3.*100"
    ):
        reader.fetch()


def test_out_of_range_reported_while_reading_fails_too() -> None:
    fake = FakeConsumer({("t", 0): list(range(0, 20))}, {})
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake)
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 5)]))
    drain(reader, rounds=1)
    fake.low[("t", 0)] = 50  # retention deleted everything before 50 meanwhile
    fake.logs[("t", 0)] = list(range(50, 60))
    fake.positions[("t", 0)] = 20
    with pytest.raises(KafkaOffsetOutOfRangeError, match="offset 20 of topic 't' partition 0"):
        drain(reader, rounds=1)


def test_out_of_range_earliest_skips_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeConsumer({("t", 3): list(range(100, 120))}, {("t", 3): 100})
    reader = KafkaPartitionSplitReader(
        config(**{"offsets.out-of-range": "earliest"}), consumer_factory=fake
    )
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 3, 40, 110)]))
    with caplog.at_level(logging.WARNING):
        offsets, nexts, _ = drain(reader)
    assert "skipping to the earliest available offset 100: 60 records are lost" in caplog.text
    assert reader.metrics()["records_skipped_out_of_range"] == 60
    assert offsets == list(range(100, 110))
    assert nexts == {"t-3": 110}


def test_out_of_range_earliest_whose_lookup_fails_is_retried_not_refused() -> None:
    """The earliest offset's lookup failed silently and the round stopped for good with
    'set offsets.out-of-range to earliest', which was set (code review)."""
    from hoodline.errors import FetchError

    fake = FakeConsumer({("t", 3): list(range(100, 120))}, {("t", 3): 100})

    def timed_out(tp: Any, timeout: float, cached: bool = False) -> tuple[int, int]:
        raise RuntimeError("KafkaError{code=_TIMED_OUT}")

    fake.get_watermark_offsets = timed_out  # type: ignore[method-assign]
    reader = KafkaPartitionSplitReader(
        config(**{"offsets.out-of-range": "earliest"}), consumer_factory=fake
    )
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 3, 40, 110)]))
    with pytest.raises(FetchError, match=r"could not be looked up .*_TIMED_OUT") as err:
        drain(reader)
    assert err.value.retryable


def test_outage_is_retried_then_fails_with_clear_error(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    fake = FakeConsumer({("t", 0): [0, 1]}, {})
    reader = KafkaPartitionSplitReader(
        config(**{"scan.broker-unavailable.timeout": 10}),
        consumer_factory=fake,
        clock=lambda: now[0],
    )
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 0)]))
    fake.down = True
    with caplog.at_level(logging.WARNING):
        for t in (0.0, 3.0, 9.0):
            now[0] = t
            assert reader.fetch().is_empty()
    assert "unreachable" in caplog.text
    # the brokers come back: the outage clock resets
    fake.down = False
    now[0] = 9.5
    drain(reader, rounds=1)
    fake.down = True
    now[0] = 10.0
    reader.fetch()
    now[0] = 19.0
    reader.fetch()  # 9 s into the new outage: still retrying
    now[0] = 21.0
    with pytest.raises(KafkaBrokerUnavailableError, match=r"127\.0\.0\.1:1 unreachable for 11\.0s"):
        reader.fetch()
    metrics = reader.metrics()
    assert metrics["broker_outages"] == 2
    assert metrics["current_outage_seconds"] == 11.0
    assert metrics["records_read"] == 2


def test_client_properties_reach_the_consumer_secrets_not_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeConsumer({}, {})
    cfg = config(
        **{
            "properties.security.protocol": "SASL_SSL",
            "properties.sasl.mechanism": "SCRAM-SHA-512",
            "properties.sasl.username": "svc",
            "properties.sasl.password": "hunter2-secret",
            "properties.ssl.ca.location": "/etc/ca.pem",
            "properties.group.id": "monitor",
        }
    )
    with caplog.at_level(logging.DEBUG):
        reader = KafkaPartitionSplitReader(cfg, consumer_factory=fake)
        logging.getLogger("x").info("%s", cfg)
    assert fake.props["sasl.password"] == "hunter2-secret"
    assert fake.props["security.protocol"] == "SASL_SSL"
    assert fake.props["ssl.ca.location"] == "/etc/ca.pem"
    assert fake.props["group.id"] == "monitor"
    assert "hunter2-secret" not in caplog.text
    reader.close()


def test_fetch_backoff_default_reaches_the_consumer_unless_the_user_sets_it() -> None:
    # librdkafka's 1000 ms fetch.queue.backoff.ms stalls a reader that drains its prefetch queue
    # faster than in a second; hoodline's default is short, a user's setting wins.
    fake = FakeConsumer({}, {})
    KafkaPartitionSplitReader(config(), consumer_factory=fake)
    assert fake.props["fetch.queue.backoff.ms"] == 10
    KafkaPartitionSplitReader(
        config(**{"properties.fetch.queue.backoff.ms": "250"}), consumer_factory=fake
    )
    assert fake.props["fetch.queue.backoff.ms"] == "250"


def test_prefetch_defaults_bound_what_a_round_fetches_beyond_its_ranges() -> None:
    # a reader's consumer lives for one round: what it prefetched past the stopping offsets is
    # fetched again next round, so hoodline queues less ahead than librdkafka's defaults
    # (100,000 messages per partition, 64 MiB); a user's settings win.
    fake = FakeConsumer({}, {})
    KafkaPartitionSplitReader(config(), consumer_factory=fake)
    assert fake.props["queued.min.messages"] == 10_000
    assert fake.props["queued.max.messages.kbytes"] == 16 * 1024
    KafkaPartitionSplitReader(
        config(**{"properties.queued.min.messages": "100000",
                  "properties.queued.max.messages.kbytes": "65536"}),
        consumer_factory=fake,
    )
    assert fake.props["queued.min.messages"] == "100000"
    assert fake.props["queued.max.messages.kbytes"] == "65536"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("deleted", [False, True])
def test_a_read_whose_partition_lost_its_planned_records_fails_instead_of_waiting_forever(
    deleted: bool,
) -> None:
    """A topic deleted, or deleted and created again, while a round read it: the records the
    round was planned to read never came and the pipeline waited forever, silently, not even
    stopping on SIGTERM (day-two review, 7 of 7). The read now fails retryably once it made no
    progress for STALL_CHECK_S and the partition no longer holds them."""
    from hoodline.connectors.kafka.reader import STALL_CHECK_S
    from hoodline.errors import FetchError

    fake = FakeConsumer({("t", 0): [0, 1, 2]}, {})  # the new topic: 3 records, planned 10
    if deleted:
        def gone(tp: Any, timeout: float, cached: bool = False) -> tuple[int, int]:
            raise RuntimeError("KafkaError{code=UNKNOWN_TOPIC_OR_PART}")

        fake.get_watermark_offsets = gone  # type: ignore[method-assign]
    clock = Clock()
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake, clock=clock)
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 0, 10)]))
    offsets, _, finished = drain(reader, rounds=3)  # reads 0..2, then only end-of-partition
    assert offsets == [0, 1, 2] and not finished
    clock.now += STALL_CHECK_S - 1
    reader.fetch()  # not yet
    clock.now += 2
    want = ("UNKNOWN_TOPIC_OR_PART" if deleted
            else "t-0 ends at offset 3 now, before the round's planned end 10")
    with pytest.raises(FetchError, match=rf"no records for 16s: partition .*{want}.*was the "
                                         "topic deleted") as info:
        reader.fetch()
    assert info.value.retryable


def test_a_read_that_waits_for_records_the_brokers_hold_says_so_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hoodline.connectors.kafka.reader import STALL_CHECK_S

    fake = FakeConsumer({("t", 0): [0, 1, 2, 3, 4]}, {})
    fake.consume = lambda num_messages, timeout: []  # type: ignore[method-assign]
    clock = Clock()
    reader = KafkaPartitionSplitReader(config(), consumer_factory=fake, clock=clock)
    reader.handle_splits_changes(SplitsAddition([KafkaPartitionSplit("t", 0, 0, 5)]))
    reader.fetch()
    clock.now += STALL_CHECK_S + 1
    with caplog.at_level(logging.WARNING):
        reader.fetch()
    assert "no records for 16s though the brokers hold them (t-0 at 0 of 5)" in caplog.text


def test_consumer_properties_the_readers_override_are_named_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """properties.auto.offset.reset = earliest was dropped without a word (day-two review):
    the readers set it to 'error' and follow their own options."""
    from hoodline.connectors.kafka.reader import check_consumer_properties

    with caplog.at_level(logging.WARNING):
        check_consumer_properties(config(**{"properties.auto.offset.reset": "earliest",
                                            "properties.enable.partition.eof": "true"}))
    assert ("properties.auto.offset.reset = 'earliest' is not used: the readers set it to "
            "'error' (where a partition without a position starts is 'scan.startup.mode'"
            ) in caplog.text
    assert "enable.partition.eof" not in caplog.text  # what they set anyway: nothing to say
