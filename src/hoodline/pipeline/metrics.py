"""Prometheus metrics of a running pipeline (``hoodline run --metrics-port N``).

One :class:`PipelineMetrics` per pipeline, fed by the round driver's reports (every round,
committed or empty) and failures, on its own registry; :meth:`PipelineMetrics.serve` exposes it
over HTTP (``/metrics``) with prometheus-client. Every metric carries the labels ``table`` (the
table's name) and ``source`` (kafka / files).

========================================  =========  =========================================
name                                      type       what
========================================  =========  =========================================
``hoodline_rounds_total``                 counter    rounds, label ``outcome``: committed/empty
``hoodline_records_read_total``           counter    records read by committed rounds
``hoodline_bytes_read_total``             counter    bytes of those records (message values)
``hoodline_records_written_total``        counter    rows inserted or updated
``hoodline_records_deleted_total``        counter    rows deleted
``hoodline_bytes_written_total``          counter    bytes of the files the commits wrote
``hoodline_files_written_total``          counter    files written
``hoodline_error_records_total``          counter    bad records (error table, tolerance all),
                                                     label ``reason`` (the error table's code)
``hoodline_round_duration_seconds``       histogram  committed rounds, start to the end of
                                                     their table services
``hoodline_round_phase_seconds``          histogram  label ``phase``: read / write / commit /
                                                     services (compaction, cleaning, archival)
``hoodline_commit_latency_seconds``       histogram  error-table write + the instant's commit
``hoodline_lag_records``                  gauge      records behind the end, label ``partition``
                                                     (``topic-partition``; Kafka only; a
                                                     partition no longer read loses its series)
``hoodline_round_failures_total``         counter    failed rounds, label ``retried``: true
                                                     (rolled back and retried) / false (fatal)
``hoodline_round_retries_total``          counter    failed attempts retried by later rounds
``hoodline_last_commit_timestamp_seconds``  gauge    Unix time of the table's last commit
``hoodline_last_round_timestamp_seconds``  gauge     Unix time of the last round (committed or
                                                     empty; the start before the first): a run
                                                     waiting for its source or stuck stops it
``hoodline_compactions_total``            counter    compactions completed (merge-on-read)
``hoodline_pending_compactions``          gauge      compactions planned, not completed
``hoodline_table_service_failures_total``  counter   rounds whose services failed after commit
``hoodline_files_waiting``                gauge      files not yet read to their end (files)
========================================  =========  =========================================
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from hoodline.pipeline.report import RoundReport

if TYPE_CHECKING:
    from hoodline.table.table import HudiTable

__all__ = ["METRIC_NAMES", "PipelineMetrics"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

#: Every metric name (as scraped; counters get ``_total``) -- the documented set.
METRIC_NAMES = (
    "hoodline_rounds_total", "hoodline_records_read_total", "hoodline_bytes_read_total",
    "hoodline_records_written_total", "hoodline_records_deleted_total",
    "hoodline_bytes_written_total", "hoodline_files_written_total",
    "hoodline_error_records_total", "hoodline_round_duration_seconds",
    "hoodline_round_phase_seconds", "hoodline_commit_latency_seconds", "hoodline_lag_records",
    "hoodline_round_failures_total", "hoodline_round_retries_total",
    "hoodline_last_commit_timestamp_seconds", "hoodline_compactions_total",
    "hoodline_pending_compactions", "hoodline_table_service_failures_total",
    "hoodline_files_waiting", "hoodline_last_round_timestamp_seconds",
)


class PipelineMetrics:
    """The metrics of one pipeline (see module docs)."""

    def __init__(self, table: str, source: str, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._labels = {"table": table, "source": source}
        names = ("table", "source")
        reg = self.registry

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, (*names, *extra), registry=reg)

        self.rounds = counter("hoodline_rounds", "Rounds run, by outcome.", ("outcome",))
        self.records_read = counter("hoodline_records_read", "Records read by committed rounds.")
        self.bytes_read = counter("hoodline_bytes_read", "Bytes of the records read.")
        self.records_written = counter("hoodline_records_written", "Rows inserted or updated.")
        self.records_deleted = counter("hoodline_records_deleted", "Rows deleted.")
        self.bytes_written = counter("hoodline_bytes_written", "Bytes of the files written.")
        self.files_written = counter("hoodline_files_written", "Files written.")
        self.error_records = counter("hoodline_error_records",
                                     "Bad records (error table), by reason code.", ("reason",))
        self.failures = counter("hoodline_round_failures", "Failed rounds.", ("retried",))
        self.retries = counter("hoodline_round_retries",
                               "Failed attempts retried before rounds committed.")
        self.duration = Histogram("hoodline_round_duration_seconds",
                                  "Committed rounds, start to the end of their table services.",
                                  names,
                                  buckets=_BUCKETS, registry=reg)
        self.phase = Histogram("hoodline_round_phase_seconds", "Round phases.",
                               (*names, "phase"), buckets=_BUCKETS, registry=reg)
        self.commit_latency = Histogram("hoodline_commit_latency_seconds",
                                        "Error-table write and the commit of the instant.",
                                        names, buckets=_BUCKETS, registry=reg)
        self.lag = Gauge("hoodline_lag_records", "Records behind the end, per partition.",
                         (*names, "partition"), registry=reg)
        self.last_commit = Gauge("hoodline_last_commit_timestamp_seconds",
                                 "Unix time of the table's last commit.", names, registry=reg)
        self.last_round = Gauge(
            "hoodline_last_round_timestamp_seconds",
            "Unix time of the last round, committed or empty (before the first: the start).",
            names, registry=reg)
        self._lag_partitions: set[str] = set()
        self.compactions = counter("hoodline_compactions",
                                   "Compactions completed (merge-on-read; inline or background).")
        self.service_failures = counter(
            "hoodline_table_service_failures",
            "Rounds whose table services (compaction, cleaning, archival) failed after the "
            "commit (retried after later rounds).")
        self.files_waiting = Gauge(
            "hoodline_files_waiting",
            "Files found and not yet read after the latest round (file source).", names,
            registry=reg)
        self.pending_compactions = Gauge(
            "hoodline_pending_compactions",
            "Compactions planned and not completed (merge-on-read): a growing value is a "
            "backlog.", names, registry=reg)
        # series exist (at 0) from the start, so dashboards and rate() see them at once
        for metric in (self.records_read, self.bytes_read, self.records_written,
                       self.records_deleted, self.bytes_written, self.files_written,
                       self.retries, self.compactions,
                       self.service_failures, self.pending_compactions):
            metric.labels(**self._labels)
        if source == "files":
            self.files_waiting.labels(**self._labels)
        for outcome in ("committed", "empty"):
            self.rounds.labels(**self._labels, outcome=outcome)
        for retried in ("true", "false"):
            self.failures.labels(**self._labels, retried=retried)
        self.last_round.labels(**self._labels).set(clock())
        self._server: Any = None

    def observe_round(self, report: RoundReport) -> None:
        """Count one round (committed or empty)."""
        lb = self._labels
        self.last_round.labels(**lb).set(self._clock())
        for partition, behind in report.lag.items():
            self.lag.labels(**lb, partition=partition).set(behind)
        if lb["source"] != "files":  # a deleted topic's lag stayed at its last value for good
            for gone in self._lag_partitions - report.lag.keys():
                self.lag.remove(lb["table"], lb["source"], gone)
            self._lag_partitions = set(report.lag)
        if report.files_waiting is not None:
            self.files_waiting.labels(**lb).set(report.files_waiting)
        # a failed attempt retried by an empty round too (it had counted as a failure only)
        self.retries.labels(**lb).inc(report.retries)
        if not report.committed:
            self.rounds.labels(**lb, outcome="empty").inc()
            return
        self.rounds.labels(**lb, outcome="committed").inc()
        self.records_read.labels(**lb).inc(report.records_read)
        self.bytes_read.labels(**lb).inc(report.bytes_read)
        self.records_written.labels(**lb).inc(report.records_written)
        self.records_deleted.labels(**lb).inc(report.records_deleted)
        self.bytes_written.labels(**lb).inc(report.bytes_written)
        self.files_written.labels(**lb).inc(report.files_written)
        for reason, count in report.error_reasons.items():
            self.error_records.labels(**lb, reason=reason).inc(count)
        self.duration.labels(**lb).observe(report.duration_seconds)
        for phase, seconds in (("read", report.read_seconds), ("write", report.write_seconds),
                               ("commit", report.commit_seconds),
                               ("services", report.services_seconds)):
            self.phase.labels(**lb, phase=phase).observe(seconds)
        if report.compaction is not None:
            self.compactions.labels(**lb).inc()
        if report.services_failed:
            self.service_failures.labels(**lb).inc()
        self.pending_compactions.labels(**lb).set(report.pending_compactions)
        self.commit_latency.labels(**lb).observe(report.commit_seconds)
        self.last_commit.labels(**lb).set(self._clock())

    def start_from(self, table: HudiTable) -> None:
        """Set the last-commit time from ``table``'s last completed commit (when its completed
        instant file was written): a restarted pipeline reports it before it commits again, so
        a "time since the last commit" alert has a value from the start."""
        last = table.timeline.last_completed_commit()
        if last is None:
            return
        try:
            written = table.timeline.path_of(last).stat().st_mtime
        except OSError:  # unreadable now: the first commit of this run sets it
            return
        self.last_commit.labels(**self._labels).set(written)

    def observe_failure(self, error: BaseException, retried: bool) -> None:
        """Count a failed round (``retried``: it is rolled back and tried again)."""
        self.failures.labels(**self._labels, retried="true" if retried else "false").inc()

    def serve(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: a free one); returns the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
