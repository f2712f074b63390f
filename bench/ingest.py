"""Kafka -> table ingest benchmark: hoodline ``run --once`` (insert, upsert) vs the single-process
limit vs a hand-written ``write_deltalake`` consumer.

    PYTHONPATH=src .venv/bin/python -m bench.ingest [--messages 5000000] [--batch-records 250000]
        [--systems hoodline-insert,hoodline-upsert,limit,delta] [--runs 3] [--record]

The parent starts the bundled broker (``hoodline.broker.EmbeddedBroker``, Tansu, memory engine,
127.0.0.1 only, stopped by PID at the end), creates one topic with 8 partitions and loads
``--messages`` JSON messages of ~200 bytes (fixed seed; message ``i`` goes to partition
``i % 8``) with the hold-back producer (``ExactEndProducer``) so end offsets are exact on Tansu.
The load is not timed as part of any system. Then every system runs in its own child process on
the same topic, reading all partitions from offset 0 (``assign``, no group join) until it has
seen every message:

* ``limit``: confluent-kafka ``consume`` + ``pyarrow.json`` parse + ``pyarrow.parquet`` write of
  one file per ``--batch-records`` records; no table semantics (the speed limit of one process).
* ``delta``: the peer a user would write: the same consume + parse loop calling
  ``deltalake.write_deltalake(mode="append")`` per batch.
* ``hoodline-insert`` / ``hoodline-upsert`` (``-mor``: into a merge-on-read table with the
  default inline compaction): ``hoodline run --once`` through the pipeline API the
  CLI calls (:func:`run_hoodline`; config in :func:`hoodline_config`), Spark ``local[2]``, 2
  readers, timed from before Spark starts to the last commit. ``-s3``: the same with the table
  on S3, served by moto's server on 127.0.0.1 (started by the parent, a bucket per run, the
  children configured through the standard ``AWS_*`` environment).

Each child reports wall time (consumer creation / Spark start to last write), CPU seconds of its
process tree (approximate for Spark: the JVM and Python workers), messages/s, MB/s of JSON and
peak RSS of its process tree (sampled every 10 ms); the parent measures the broker's CPU seconds
during each child (the same messages for every system: the difference is how the reader fetches)
and checks every output holds exactly
the messages produced (row count, distinct ids, sum of ids) and prints ratios (time / limit time,
time / hoodline-insert time). Timestamps are ``timestamp[us, UTC]`` for every system (Spark's
Arrow bridge rejected ``timestamp[ms, UTC]`` in the pipeline).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from bench import common
from hoodline.config.arrow_types import format_type
from hoodline.pipeline.config import ROUND_MAX_RECORDS
from hoodline.table.properties import IndexType, TableType
from hoodline.table.write.operation import WriteOperation

PARTITIONS = 8
TOPIC = "bench-ingest"
EVENTS = ("click", "view", "purchase", "signup", "refund", "logout")
COUNTRIES = ("de", "fr", "us", "br", "in", "jp", "za", "au")
DEVICES = ("ios", "android", "web", "tv")

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("user", pa.string()),
        ("event", pa.string()),
        ("amount", pa.float64()),
        ("count", pa.int32()),
        ("ok", pa.bool_()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("country", pa.string()),
        ("device", pa.string()),
        ("session", pa.string()),
        ("note", pa.string()),
    ]
)


# --- data loader ---------------------------------------------------------------------------------
def messages(n: int, seed: int = 3, start: int = 0) -> list[bytes]:
    """``n`` JSON messages of ~200 bytes (ids ``start .. start+n-1``)."""
    rng = np.random.default_rng(seed + start)
    users = rng.integers(0, 1_000_000, size=n)
    events = rng.integers(0, len(EVENTS), size=n)
    amounts = np.round(rng.random(n) * 1000, 2)
    counts = rng.integers(0, 1000, size=n)
    oks = rng.random(n) < 0.5
    secs = rng.integers(0, 86_400 * 30, size=n)
    countries = rng.integers(0, len(COUNTRIES), size=n)
    devices = rng.integers(0, len(DEVICES), size=n)
    sessions = rng.integers(0, 2**63 - 1, size=(n, 2), dtype=np.int64)
    note_len = rng.integers(2, 20, size=n)
    out = []
    for i in range(n):
        s = int(secs[i])
        out.append(
            (
                f'{{"id":{start + i},"user":"user-{users[i]:07d}","event":"{EVENTS[events[i]]}",'
                f'"amount":{amounts[i]},"count":{counts[i]},"ok":{"true" if oks[i] else "false"},'
                f'"ts":"2024-03-{1 + s // 86400:02d}T{s // 3600 % 24:02d}:{s // 60 % 60:02d}:'
                f'{s % 60:02d}Z","country":"{COUNTRIES[countries[i]]}",'
                f'"device":"{DEVICES[devices[i]]}",'
                f'"session":"{sessions[i, 0]:016x}{sessions[i, 1]:016x}",'
                f'"note":"{"n" * int(note_len[i])}"}}'
            ).encode()
        )
    return out


def produce_messages(bootstrap: str, start: int, n: int, chunk: int = 500_000) -> dict[str, Any]:
    """Produce ids ``start .. start+n-1`` to the existing topic (id ``i`` goes to partition
    ``i % PARTITIONS``; hold-back producer, so end offsets are exact afterwards)."""
    from hoodline.broker import ExactEndProducer

    t0 = time.perf_counter()
    total_bytes = 0
    with ExactEndProducer(
        bootstrap,
        **{
            "queue.buffering.max.messages": 10_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "linger.ms": 20,
            "batch.size": 1_000_000,
        },
    ) as producer:
        for s in range(start, start + n, chunk):
            for j, value in enumerate(messages(min(chunk, start + n - s), start=s)):
                total_bytes += len(value)
                producer.produce(TOPIC, (s + j) % PARTITIONS, value)
    return {"load_s": time.perf_counter() - t0, "bytes": total_bytes}


def load_topic(bootstrap: str, n: int, chunk: int = 500_000) -> dict[str, Any]:
    """Create the topic and produce ``n`` messages (ids 0 .. n-1)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(timeout=30)
    loaded = produce_messages(bootstrap, 0, n, chunk)
    loaded["avg_message_bytes"] = loaded["bytes"] / max(n, 1)
    return loaded


def end_offsets(bootstrap: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ingest-check"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        c.close()


# --- the shared consume + parse loop --------------------------------------------------------------
def consume_batches(bootstrap: str, total: int, batch_records: int, group: str) -> Any:
    """Yield parsed Arrow tables of ``batch_records`` messages (the last may be smaller) until
    ``total`` were read."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 8 << 20,
            "queued.max.messages.kbytes": 512 << 10,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    parse = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
    read = pj.ReadOptions(block_size=16 << 20)
    seen = 0
    pending: list[bytes] = []
    idle_since = time.monotonic()
    try:
        while seen < total:
            msgs = consumer.consume(
                num_messages=min(10_000, batch_records - len(pending)), timeout=0.5
            )
            if not msgs:
                if time.monotonic() - idle_since > 60:
                    raise RuntimeError(f"no messages for 60 s after {seen} of {total}")
                continue
            idle_since = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is not None:
                    raise KafkaException(err)
                value = m.value()
                if value is None:
                    raise ValueError(f"message {m.partition()}@{m.offset()} has no value")
                pending.append(value)
            seen += len(msgs)
            if len(pending) >= batch_records or seen >= total:
                yield pj.read_json(io.BytesIO(b"\n".join(pending)), read, parse)
                pending = []
    finally:
        consumer.close()


# --- systems -------------------------------------------------------------------------------------
def run_limit(bootstrap: str, total: int, batch_records: int, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    files = 0
    for i, table in enumerate(consume_batches(bootstrap, total, batch_records, "bench-limit")):
        pq.write_table(table, out / f"part-{i:05d}.parquet")
        files += 1
    return {"files": files}


def run_delta(bootstrap: str, total: int, batch_records: int, out: Path) -> dict[str, Any]:
    from deltalake import write_deltalake

    commits = 0
    for table in consume_batches(bootstrap, total, batch_records, "bench-delta"):
        write_deltalake(str(out), table, mode="append")
        commits += 1
    return {"files": commits}


def hoodline_config(
    bootstrap: str,
    out: Path | str,
    operation: WriteOperation,
    index: IndexType = IndexType.BUCKET,
    table_type: TableType = TableType.COPY_ON_WRITE,
) -> str:
    """Pipeline TOML for ``hoodline run --once``: the topic into a non-partitioned table keyed by
    ``id`` (BUCKET index with 8 buckets, or BLOOM), the message schema, 2 readers on
    ``local[2]``, default round size (1M records / 256 MiB), no minimum round interval."""
    fields = "\n".join(f'{f.name} = "{format_type(f.type)}"' for f in SCHEMA)
    return f"""
[source]
type = "kafka"
format = "json"
[source.options]
topic = "{TOPIC}"
scan.startup.mode = "earliest-offset"
properties.bootstrap.servers = "{bootstrap}"
[table]
path = "{out}"
record-key = ["id"]
precombine-field = "ts"
type = "{table_type.config_text}"
index = "{index.config_text}"
bucket-count = 8
operation = "{operation.config_text}"
[schema]
{fields}
[runtime]
master = "local[2]"
reader-parallelism = 2
round.min-interval = 0
"""


def s3_location(out: Path) -> str:
    """The table URL of an ``-s3`` system's run (bucket made by the parent, see :func:`run`)."""
    return f"s3://{os.environ[BUCKET_ENV]}/{out.name}"


def run_hoodline(
    bootstrap: str,
    total: int,
    batch_records: int,
    out: Path | str,
    operation: WriteOperation,
    index: IndexType = IndexType.BUCKET,
    table_type: TableType = TableType.COPY_ON_WRITE,
) -> dict[str, Any]:
    """hoodline ``run --once`` (the pipeline API the CLI calls) of the topic into a table."""
    from hoodline.pipeline.api import Pipeline
    from hoodline.pipeline.config import parse_config

    toml = hoodline_config(bootstrap, out, operation, index, table_type)
    cfg = parse_config(toml, "bench-ingest")
    rounds: list[Any] = []
    first_commit: list[float] = []
    t0 = time.perf_counter()

    def on_round(report: Any) -> None:
        rounds.append(report)
        if report.committed and not first_commit:
            first_commit.append(time.perf_counter() - t0)

    cpu0 = _tree_cpu()
    with Pipeline(cfg) as pipeline:
        pipeline.engine  # noqa: B018 - start Spark (timed separately)
        spark_start = time.perf_counter() - t0
        summary = pipeline.run(once=True, on_round=on_round)
        # before Spark stops: its JVM and Python workers are running children until then
        cpu = _tree_cpu() - cpu0
    if summary.records_read != total:
        raise RuntimeError(f"hoodline read {summary.records_read} of {total} messages")
    from hoodline.table.table import HudiTable

    table = HudiTable.open(out)
    compactions = sum(
        1 for inst in table.timeline.completed_commits()
        if table.timeline.read_commit_metadata(inst).compacted
    )
    stats = [
        st
        for inst in table.timeline.completed_commits()
        for group in table.timeline.read_commit_metadata(inst).partition_to_write_stats.values()
        for st in group
    ]
    return {
        # copy-on-write: rows/bytes of every file version written (rewrites of grown files count)
        "rows_written_total": sum(st.num_writes for st in stats),
        "bytes_written_total": sum(st.total_write_bytes for st in stats),
        "files": summary.commits,
        "rounds": summary.rounds,
        "compactions": compactions,
        "cpu_s": cpu,
        "spark_start_s": spark_start,
        "first_commit_s": first_commit[0] if first_commit else None,
        "records_written": summary.records_written,
        "error_records": summary.error_records,
        # per-round breakdown the pipeline reports (sums over rounds)
        "round_read_s": sum(r.read_seconds for r in rounds),
        "round_write_s": sum(r.write_seconds for r in rounds),
        "round_commit_s": sum(r.commit_seconds for r in rounds),
        "round_total_s": sum(r.duration_seconds for r in rounds),
        "round_retries": sum(r.retries for r in rounds),
    }


def run_hoodline_insert(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(bootstrap, total, batch, out, WriteOperation.INSERT)


def run_hoodline_upsert(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(bootstrap, total, batch, out, WriteOperation.UPSERT)


def run_hoodline_bulk_insert(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(bootstrap, total, batch, out, WriteOperation.BULK_INSERT)


def run_hoodline_bulk_insert_bloom(
    bootstrap: str, total: int, batch: int, out: Path
) -> dict[str, Any]:
    """bulk_insert with the BLOOM index: new file groups per round, no rewrite (append-only)."""
    return run_hoodline(bootstrap, total, batch, out, WriteOperation.BULK_INSERT, IndexType.BLOOM)


def run_hoodline_upsert_mor(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    """upsert into a merge-on-read table (BUCKET): rounds append logs, inline compaction."""
    return run_hoodline(
        bootstrap, total, batch, out, WriteOperation.UPSERT, table_type=TableType.MERGE_ON_READ
    )


def run_hoodline_insert_s3(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(bootstrap, total, batch, s3_location(out), WriteOperation.INSERT)


def run_hoodline_upsert_s3(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(bootstrap, total, batch, s3_location(out), WriteOperation.UPSERT)


def run_hoodline_insert_mor(bootstrap: str, total: int, batch: int, out: Path) -> dict[str, Any]:
    return run_hoodline(
        bootstrap, total, batch, out, WriteOperation.INSERT, table_type=TableType.MERGE_ON_READ
    )


SYSTEMS: dict[str, Callable[[str, int, int, Path], dict[str, Any]]] = {
    "limit": run_limit,
    "delta": run_delta,
    "hoodline-insert": run_hoodline_insert,
    "hoodline-upsert": run_hoodline_upsert,
    "hoodline-bulk_insert": run_hoodline_bulk_insert,
    "hoodline-bulk_insert-bloom": run_hoodline_bulk_insert_bloom,
    "hoodline-upsert-mor": run_hoodline_upsert_mor,
    "hoodline-insert-mor": run_hoodline_insert_mor,
    "hoodline-insert-s3": run_hoodline_insert_s3,
    "hoodline-upsert-s3": run_hoodline_upsert_s3,
}
#: environment variable naming the bucket of the ``-s3`` systems' current run
BUCKET_ENV = "HOODLINE_BENCH_BUCKET"
DEFAULT_SYSTEMS = (
    "limit", "delta", "hoodline-insert", "hoodline-bulk_insert-bloom", "hoodline-upsert",
)


def read_output(system: str, out: Path) -> pa.Table:
    if system == "limit":
        return pq.read_table(out, columns=["id", "amount"])
    if system == "delta":
        from deltalake import DeltaTable

        return pa.table(DeltaTable(str(out)).to_pyarrow_table(columns=["id", "amount"]))
    if system.startswith("hoodline"):
        from hoodline.table.read import read_snapshot
        from hoodline.table.table import HudiTable

        where = s3_location(out) if system.endswith("-s3") else out
        return read_snapshot(HudiTable.open(where), columns=["id", "amount"])
    raise ValueError(system)


def check_output(table: pa.Table, n: int) -> str | None:
    """None when the output holds exactly ids 0..n-1 once each."""
    ids = table.column("id")
    if table.num_rows != n:
        return f"{table.num_rows} rows, expected {n}"
    distinct = int(pc.count_distinct(ids).as_py())
    if distinct != n:
        return f"{distinct} distinct ids, expected {n}"
    if int(pc.sum(ids).as_py()) != n * (n - 1) // 2 or int(pc.min(ids).as_py()) != 0:
        return "ids are not exactly 0..n-1"
    return None


def _tree_cpu() -> float:
    """CPU seconds of this process plus its finished and running children (Spark JVM, workers)."""
    import os

    import psutil

    own = time.process_time()
    done = os.times()
    running = 0.0
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            running += t.user + t.system
        except psutil.Error:
            pass
    return own + done.children_user + done.children_system + running


def _process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    import psutil

    if pid is None:
        raise RuntimeError("the broker is not running")
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def child(system: str, bootstrap: str, total: int, batch_records: int, out: Path) -> dict[str, Any]:
    with common.PeakRss(children=True) as mem:
        t0 = time.perf_counter()
        cpu0 = _tree_cpu()
        facts = SYSTEMS[system](bootstrap, total, batch_records, out)
        elapsed = time.perf_counter() - t0
        cpu = _tree_cpu() - cpu0
    # systems with children that end with them (Spark) measure their own CPU before they stop
    return {"system": system, "time_s": elapsed, "cpu_s": cpu, "peak_rss": mem.peak, **facts}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, every run's wall and CPU time beside it (see
    :func:`bench.common.median_run`)."""
    return common.median_run(
        runs, "time_s", ("time_s", "cpu_s", "peak_rss", "broker_cpu_s", "steal_s")
    )


def run(
    n: int,
    batch_records: int,
    systems: list[str],
    timeout: float | None = None,
    runs: int = 1,
) -> dict[str, Any]:
    from hoodline.broker import EmbeddedBroker

    info = common.machine()
    wd = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    broker = EmbeddedBroker(log_dir=wd)
    broker.start()
    moto = None
    if any(s.endswith("-s3") for s in systems):
        from tests.helpers.moto_s3 import MotoS3

        moto = MotoS3(wd / "moto.log").start()
        os.environ.update(moto.env)  # the children find the store as a user's job would
    try:
        loaded = load_topic(broker.bootstrap_servers, n)
        ends = end_offsets(broker.bootstrap_servers)
        if sum(ends) != n:
            raise RuntimeError(f"broker end offsets {ends} do not add up to {n} messages")
        measured: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
        # Runs interleave the systems (A B C, A B C, ...) so a change in the machine's load
        # hits every system alike.
        for _attempt, name in ((a, nm) for a in range(runs) for nm in systems):
            out = wd / name
            if moto is not None and name.endswith("-s3"):
                os.environ[BUCKET_ENV] = moto.new_bucket()
            broker_cpu0 = _process_cpu(broker.pid)
            res = common.run_child(
                "bench.ingest",
                [
                    "--child",
                    name,
                    "--bootstrap",
                    broker.bootstrap_servers,
                    "--messages",
                    str(n),
                    "--batch-records",
                    str(batch_records),
                    "--out",
                    str(out),
                ],
                timeout=timeout,
            )
            # the broker serves every system the same messages: what it spends beyond the
            # limit's share is the reader's doing (how often and how far ahead it fetches)
            res["broker_cpu_s"] = _process_cpu(broker.pid) - broker_cpu0
            if "error" not in res:
                res["difference"] = check_output(read_output(name, out), n)
            shutil.rmtree(out, ignore_errors=True)
            measured[name].append(res)
            print(f"  {name}: {res.get('time_s', res.get('error'))}", file=sys.stderr, flush=True)
        results = {name: median_run(rs) for name, rs in measured.items()}
        return {
            "messages": n,
            "runs": runs,
            "batch_records": batch_records,
            "loaded": loaded,
            "end_offsets": ends,
            "machine": info,
            "results": results,
        }
    finally:
        broker.stop()
        if moto is not None:
            moto.stop()
        shutil.rmtree(wd, ignore_errors=True)


def report(rep: dict[str, Any]) -> str:
    n = rep["messages"]
    res = rep["results"]
    limit = res.get("limit", {}).get("time_s")
    delta = res.get("delta", {}).get("time_s")
    rows = []
    for name, r in res.items():
        if "error" in r:
            rows.append([name, "error: " + r["error"].splitlines()[-1][:100], *[""] * 14])
            continue
        steady = r.get("round_total_s")
        rows.append(
            [
                name,
                common.secs(r["time_s"]),
                common.secs(r["cpu_s"]),
                " / ".join(f"{c:.2f}" for c in r.get("runs_broker_cpu_s", [r["broker_cpu_s"]])),
                " / ".join(f"{w:.1f}" for w in r.get("runs_time_s", [r["time_s"]])),
                common.rate(n, r["time_s"]),
                f"{limit / r['time_s']:.2f}x" if limit else "-",
                common.rate(n, steady) if steady else "-",
                f"{limit / steady:.2f}x" if limit and steady else "-",
                f"{r['time_s'] / delta:.2f}" if delta else "-",
                common.secs(r["first_commit_s"]) if r.get("first_commit_s") else "-",
                common.mib(r["peak_rss"]),
                " / ".join(f"{m / 2**20:,.0f}" for m in r.get("runs_peak_rss", [r["peak_rss"]])),
                "exact" if r["difference"] is None else "WRONG: " + r["difference"],
                f"{r['load_before'][0]}",
                common.steal_text(r.get("runs_steal_s", [r.get("steal_s")])),
            ]
        )
    if not any(name.startswith("hoodline") for name in res):
        rows.append(["hoodline", "not measured in this run", *[""] * 14])
    notes = [
        f"- {name}: Spark start {r['spark_start_s']:.1f} s; {r['rounds']} rounds summing "
        f"{r['round_total_s']:.1f} s = read/key (slowest reader) {r['round_read_s']:.1f} s + "
        f"shuffle/write {r['round_write_s']:.1f} s + commit {r['round_commit_s']:.1f} s "
        f"(+ planning/other); {r['round_retries']} retries; file versions written hold "
        f"{r.get('rows_written_total', 0):,} rows, "
        f"{r.get('bytes_written_total', 0) / 2**20:,.0f} MiB"
        + (f"; {r['compactions']} compaction(s)" if r.get("compactions") else "")
        for name, r in res.items()
        if name.startswith("hoodline") and "error" not in r and "round_total_s" in r
    ]
    mb = rep["loaded"]["bytes"] / 1e6
    intro = (
        f"{n:,} JSON messages, {rep['loaded']['avg_message_bytes']:.0f} bytes on average "
        f"({mb:,.0f} MB), 8 partitions, bundled Tansu broker (memory engine) on 127.0.0.1; "
        f"peers write batches of {rep['batch_records']:,} messages, hoodline rounds of its "
        f"default size ({ROUND_MAX_RECORDS.default:,} records); loading took "
        f"{rep['loaded']['load_s']:.1f} s (not counted). Output checked: exactly ids 0..n-1 once. "
        "Speed vs limit = limit time / system time (>= 0.8x is issue 10's target); end to end "
        "includes Spark start, steady state is the records over the summed round time; "
        "first commit is counted from before Spark starts; CPU is the system's process tree, "
        "broker CPU what the broker spent serving it, steal the CPU time the hypervisor took "
        "from this machine during the run (all cores). "
        f"Each system ran {rep.get('runs', 1)} time(s), interleaved with the others; a row "
        "shows the run with the median wall time."
    )
    header = [
        "system", "wall", "CPU", "broker CPU of each run (s)", "wall of each run (s)", "msg/s",
        "speed vs limit (end to end)",
        "steady msg/s",
        "speed vs limit (steady)", "wall / delta", "first commit", "peak RSS",
        "peak RSS of each run (MiB)", "output",
        "load avg (1 min)", "steal of each run (s)",
    ]
    table = common.markdown_table(header, rows)
    return intro + "\n\n" + table + ("\n\n" + "\n".join(notes) if notes else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=5_000_000)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --messages")
    ap.add_argument("--batch-records", type=int, default=250_000)
    ap.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--runs", type=int, default=3, help="runs of each system; the median is shown")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        common.emit_result(
            child(args.child, args.bootstrap, args.messages, args.batch_records, args.out)
        )
        return common.end_child(args.child)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    rep = run(
        int(args.messages * args.scale), args.batch_records, systems, args.timeout, args.runs
    )
    text = report(rep)
    common.publish("Kafka -> table ingest", text, rep, args.json, args.record)
    bad = [n for n, r in rep["results"].items() if "error" in r or r.get("difference")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
