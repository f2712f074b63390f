"""Kafka reader alone against a raw confluent-kafka consume loop on the same topic (not a test).

    PYTHONPATH=src .venv/bin/python -m bench.bench_kafka_reader [--messages 1000000]
        [--runs 3] [--max-records 10000] [--property fetch.max.bytes=...]

Starts the bundled broker (``hoodline.broker.EmbeddedBroker``, memory engine), loads
``--messages`` JSON messages of ~215 bytes into one topic of 8 partitions (``bench.ingest``'s
loader and data; not timed), then alternates, ``--runs`` times each:

* ``raw``: one confluent-kafka ``Consumer`` assigned to every partition from offset 0,
  ``consume(num_messages=10000)`` in a loop collecting every value until all were seen (the
  speed limit of reading in Python: no Arrow, no bookkeeping), with the librdkafka settings
  hoodline's reader uses by default (``CONSUMER_DEFAULTS``; ``--librdkafka-defaults`` drops
  them from both), so the comparison is of the code, not of the settings;
* ``hoodline``: one :class:`~hoodline.connectors.kafka.reader.KafkaSourceReader` (threaded
  fetcher, as round tasks use it) reading the splits ``[0, end)`` of every partition through
  :class:`~hoodline.source.drive.BoundedRead`, i.e. Arrow batches of ``KAFKA_RECORD_SCHEMA``.

Prints wall and CPU seconds (the process: Python, librdkafka and the fetcher threads) and the
broker process's CPU seconds of every run and their medians, plus messages/s from the wall
median. Both check they saw exactly the loaded messages.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import psutil

from bench import ingest
from hoodline.broker import EmbeddedBroker
from hoodline.connectors.kafka.reader import CONSUMER_DEFAULTS, KAFKA_RECORD_SCHEMA
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.source.drive import BoundedRead
from hoodline.testing.reader_context import RecordingReaderContext

#: librdkafka's own values of the properties in CONSUMER_DEFAULTS (for --librdkafka-defaults).
LIBRDKAFKA_DEFAULTS = {"fetch.queue.backoff.ms": "1000"}


def raw_consume(bootstrap: str, ends: list[int], properties: dict[str, str]) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    total = sum(ends)
    consumer = Consumer(
        {
            **CONSUMER_DEFAULTS,
            "bootstrap.servers": bootstrap,
            "group.id": "bench-raw",
            "enable.auto.commit": False,
            **properties,
        }
    )
    values: list[bytes | None] = []
    try:
        consumer.assign(
            [TopicPartition(ingest.TOPIC, p, 0) for p in range(ingest.PARTITIONS)]
        )
        while len(values) < total:
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                values.append(m.value())
    finally:
        consumer.close()
    return len(values)


def hoodline_read(
    bootstrap: str, ends: list[int], properties: dict[str, str], max_records: int
) -> int:
    builder = (
        KafkaSource.builder()
        .bootstrap_servers(bootstrap)
        .topics(ingest.TOPIC)
        .fetch(max_records=max_records)
    )
    for key, value in properties.items():
        builder = builder.property(key, value)
    source = builder.build()
    reader = source.create_reader(RecordingReaderContext(0, 1))
    splits = [KafkaPartitionSplit(ingest.TOPIC, p, 0, end) for p, end in enumerate(ends)]
    rows = 0
    for batch, _ in BoundedRead(reader, splits, checkpoint_id=1, timeout=300):
        assert batch.schema == KAFKA_RECORD_SCHEMA
        rows += batch.num_rows
    return rows


def timed(run: Callable[[], int], expected: int, broker: psutil.Process) -> tuple[float, ...]:
    b0 = sum(broker.cpu_times()[:2])
    t0, c0 = time.perf_counter(), time.process_time()
    seen = run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    broker_cpu = sum(broker.cpu_times()[:2]) - b0
    if seen != expected:
        raise SystemExit(f"saw {seen} messages, expected {expected}")
    return wall, cpu, broker_cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-records", type=int, default=10_000, help="scan.fetch.max-records")
    ap.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE",
        help="librdkafka consumer property for both readers (repeatable)",
    )
    ap.add_argument(
        "--librdkafka-defaults", action="store_true",
        help="override hoodline's consumer defaults with librdkafka's own in both readers",
    )
    args = ap.parse_args()
    properties = dict(p.split("=", 1) for p in args.property)
    if args.librdkafka_defaults:
        if LIBRDKAFKA_DEFAULTS.keys() != CONSUMER_DEFAULTS.keys():
            raise SystemExit("LIBRDKAFKA_DEFAULTS must name the properties of CONSUMER_DEFAULTS")
        properties = {**LIBRDKAFKA_DEFAULTS, **properties}
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        loaded = ingest.load_topic(bootstrap, args.messages)
        ends = ingest.end_offsets(bootstrap)
        assert sum(ends) == args.messages, ends
        print(
            f"{args.messages} messages ({loaded['avg_message_bytes']:.0f} B avg) in "
            f"{ingest.PARTITIONS} partitions; properties {properties or 'default'}; "
            f"scan.fetch.max-records {args.max_records}"
        )
        systems: dict[str, Callable[[], int]] = {
            "raw": lambda: raw_consume(bootstrap, ends, properties),
            "hoodline": lambda: hoodline_read(bootstrap, ends, properties, args.max_records),
        }
        assert broker.pid is not None
        broker_proc = psutil.Process(broker.pid)
        results: dict[str, list[tuple[float, ...]]] = {name: [] for name in systems}
        for i in range(args.runs):
            for name, run in systems.items():
                wall, cpu, broker_cpu = timed(run, args.messages, broker_proc)
                results[name].append((wall, cpu, broker_cpu))
                print(
                    f"  run {i + 1} {name:9s} wall {wall:6.3f} s cpu {cpu:6.3f} s "
                    f"(broker cpu {broker_cpu:6.3f} s)"
                )
        for name, runs in results.items():
            wall, cpu, broker_cpu = (statistics.median(r[k] for r in runs) for k in range(3))
            print(
                f"{name:9s} median wall {wall:6.3f} s cpu {cpu:6.3f} s "
                f"(broker cpu {broker_cpu:6.3f} s) {args.messages / wall:>11,.0f} msg/s"
            )


if __name__ == "__main__":
    main()
