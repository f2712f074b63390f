"""Options of the Kafka source and the validated configuration built from them.

Keys follow Flink's Kafka SQL connector where one exists. Everything starting with ``properties.``
is handed to librdkafka with the prefix removed (``properties.security.protocol``,
``properties.sasl.password`` ...); secrets among them are masked whenever the configuration is
shown.
Every value is checked when :func:`KafkaSourceConfig.from_options` runs: an invalid one fails fast
with a :class:`~hoodline.errors.ConfigError` naming the option.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodline.config import ConfigOption, Options, option
from hoodline.config.masking import mask_secrets
from hoodline.connectors.kafka.assigners import AssignerKind
from hoodline.connectors.kafka.offsets import (
    BoundedMode,
    OffsetReset,
    OffsetsOutOfRange,
    StartingOffsets,
    StartupMode,
    StoppingOffsets,
)
from hoodline.connectors.kafka.split import TopicPartition
from hoodline.connectors.kafka.subscription import Subscription
from hoodline.errors import ConfigError, KafkaSourceError

PROPERTIES_PREFIX = "properties."

BOOTSTRAP_SERVERS = option(
    "properties.bootstrap.servers",
    str,
    "",
    "Comma-separated host:port list of Kafka brokers (required).",
    validator=lambda v: None if v.strip() else "give at least one host:port",
)
TOPIC = option(
    "topic",
    tuple,
    (),
    "Topics to read (list or comma-separated). Exactly one of 'topic', 'topic-pattern' and "
    "'partitions' must be set. A table's checkpoint holds positions of the topics it was "
    "read from. The list may gain and lose topics between runs, keeping at least one: a run "
    "names the change in a warning, reads a topic that joined from its earliest offset, and "
    "drops the positions of one that left (its unread records stay unread). Any other change "
    "(a list sharing no topic with the stored one, a pattern instead) is refused; write it to a "
    "new table (`hoodline table show` lists the old table's next offsets, for the new "
    "pipeline's 'scan.startup.specific-offsets'). To take in topics created later without "
    "changing the pipeline, subscribe with 'topic-pattern'.",
)
TOPIC_PATTERN = option(
    "topic-pattern",
    str,
    "",
    "Regular expression (full match) of the topics to read (internal topics, whose names start "
    "with '__', such as Kafka's __consumer_offsets and Debezium's __debezium-heartbeat.*, are "
    "never matched); topics created later that match are "
    "picked up by partition discovery and read from their earliest offset. A matching topic "
    "that is deleted stops being read, with a warning naming the offsets its partitions were "
    "read up to (a topic named by 'topic' that is deleted stops the pipeline instead). The "
    "pattern itself is kept by the table: a pipeline with another pattern or a topic list is "
    "refused.",
)
PARTITIONS = option(
    "partitions",
    tuple,
    (),
    "Explicit partitions to read, as 'topic:partition' items (list or comma-separated). The "
    "list may gain and lose partitions between runs, as 'topic' may topics.",
)
STARTUP_MODE = option(
    "scan.startup.mode",
    StartupMode,
    StartupMode.EARLIEST,
    "Where partitions found by the first discovery start: 'earliest-offset', 'latest-offset', "
    "'group-offsets' (committed offsets of 'properties.group.id', see "
    "'scan.startup.offset-reset'), "
    "'specific-offsets' (see 'scan.startup.specific-offsets') or 'timestamp' (see "
    "'scan.startup.timestamp-millis'). Used by a new table only: its first round commits the "
    "positions found (also when there is nothing to read yet, so a restart neither skips nor "
    "repeats records); a table with a checkpoint resumes from it (a warning says the option is "
    "not used). So does the newer checkpoint of Java's Hudi Streamer (or Kafka Connect sink) "
    "of the topic; a new pipeline on a table such a writer fed from positions it cannot take "
    "must set this option (see the README, 'Sharing a table with Java Hudi'). Partitions "
    "discovered later always start at their earliest offset.",
)
STARTUP_SPECIFIC_OFFSETS = option(
    "scan.startup.specific-offsets",
    tuple,
    (),
    "Starting offsets for 'specific-offsets' mode, as 'topic:partition:offset' items.",
)
STARTUP_TIMESTAMP = option(
    "scan.startup.timestamp-millis",
    int,
    -1,
    "Start timestamp in epoch milliseconds for 'timestamp' mode: each partition starts at its "
    "first record at or after it (at the end if there is none).",
)
STARTUP_OFFSET_RESET = option(
    "scan.startup.offset-reset",
    OffsetReset,
    OffsetReset.EARLIEST,
    "Used when 'group-offsets' finds no committed offset or 'specific-offsets' names none (or one "
    "outside the available range) for a partition: 'earliest', 'latest' or 'none' (fail).",
)
BOUNDED_MODE = option(
    "scan.bounded.mode",
    BoundedMode,
    BoundedMode.UNBOUNDED,
    "'unbounded' (default, reads forever), 'latest-offset' (stop at the end offsets found when "
    "the source starts) or 'specific-offsets' (see 'scan.bounded.specific-offsets'). A bounded "
    "source does not discover partitions after its first discovery. A partition a bounded run "
    "read to its end keeps no position: later runs on the table do not read it again (a "
    "warning names it). For repeated runs that each take in what is new, keep 'unbounded' and "
    "run `hoodline run --once`.",
)
BOUNDED_SPECIFIC_OFFSETS = option(
    "scan.bounded.specific-offsets",
    tuple,
    (),
    "Stopping offsets (exclusive) for 'specific-offsets' bounded mode, as "
    "'topic:partition:offset' items, one for every subscribed partition.",
)
DISCOVERY_INTERVAL = option(
    "scan.topic-partition-discovery.interval",
    float,
    300.0,
    "Seconds between discoveries of new partitions and new topics matching the subscription "
    "(a warning names the partitions found and the offset each starts at); 0 disables "
    "periodic discovery (only the first discovery runs).",
    minimum=0.0,
)
SPLIT_ASSIGNER = option(
    "scan.split-assigner",
    AssignerKind,
    AssignerKind.HASH,
    "The strategy for assigning splits to source readers. 'hash' distributes splits by topic "
    "hash, so the splits of each topic are evenly assigned across readers; the overall "
    "distribution may be imbalanced when topics have different partition counts. 'round-robin' "
    "assigns splits in a round-robin fashion so all splits are evenly distributed across readers "
    "regardless of topic; the splits of one topic may then be scattered unevenly, and if data "
    "throughput varies a lot between topics the load can be imbalanced even though the number "
    "of splits is balanced. A split keeps its reader across failovers and restarts until the "
    "parallelism changes; then a completely new assignment is made.",
)
GROUP_ID = option(
    "properties.group.id",
    str,
    "",
    "Kafka consumer group id. Needed for 'group-offsets' startup and for committing offsets.",
)
COMMIT_ON_CHECKPOINT = option(
    "commit.offsets.on.checkpoint",
    bool,
    True,
    "Commit the read offsets to the consumer group when a checkpoint completes (only when "
    "'properties.group.id' is set). For monitoring only: recovery always uses checkpointed "
    "offsets, never committed ones.",
)
OFFSETS_OUT_OF_RANGE = option(
    "offsets.out-of-range",
    OffsetsOutOfRange,
    OffsetsOutOfRange.FAIL,
    "What happens when a split's next offset no longer exists: retention deleted it, or the "
    "position stored in the table's checkpoint is past the partition's end (the topic was "
    "deleted and created again, or truncated, after it was read). 'fail' (default): stop with "
    "an error naming topic, partition, offset (and end offset). 'earliest': go on from the "
    "earliest available offset and log a warning (records deleted by retention are lost; a "
    "re-created topic is read from its start). A re-created topic is known by its end below "
    "the stored position, or by its topic id, asked at every round and compared with the one "
    "every commit stores beside the positions, also across restarts (brokers that give no "
    "topic ids: by its end only). A topic deleted (or deleted and created again) while a "
    "round reads it fails that round once its reads made no progress for 15 s and the "
    "partition no longer holds the records the round was planned to read; the round is then "
    "planned again, and this option applies.",
)
FETCH_MAX_RECORDS = option(
    "scan.fetch.max-records",
    int,
    10_000,
    "Most records a reader turns into one Arrow record batch.",
    minimum=1,
)
FETCH_TIMEOUT = option(
    "scan.fetch.timeout",
    float,
    0.5,
    "Seconds a reader waits for records in one fetch before reporting that nothing is available "
    "(a read that reaches the end of its round returns at once).",
    minimum=0.0,
)
BROKER_TIMEOUT = option(
    "scan.broker-unavailable.timeout",
    float,
    60.0,
    "Seconds hoodline keeps retrying while all brokers are unreachable (readers, partition "
    "discovery and planning, with backoff and a warning per step) before it fails with an error "
    "naming the bootstrap servers.",
    minimum=0.0,
)

ALL_OPTIONS: tuple[ConfigOption[Any], ...] = (
    BOOTSTRAP_SERVERS,
    TOPIC,
    TOPIC_PATTERN,
    PARTITIONS,
    STARTUP_MODE,
    STARTUP_SPECIFIC_OFFSETS,
    STARTUP_TIMESTAMP,
    STARTUP_OFFSET_RESET,
    BOUNDED_MODE,
    BOUNDED_SPECIFIC_OFFSETS,
    DISCOVERY_INTERVAL,
    SPLIT_ASSIGNER,
    GROUP_ID,
    COMMIT_ON_CHECKPOINT,
    OFFSETS_OUT_OF_RANGE,
    FETCH_MAX_RECORDS,
    FETCH_TIMEOUT,
    BROKER_TIMEOUT,
)

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def _number(text: str) -> int | None:
    """A non-negative decimal number written in ASCII digits (``str.isdigit`` also takes
    '²', which ``int`` refuses), else None."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _split_partition(item: str) -> TopicPartition | None:
    topic, sep, part = item.rpartition(":")
    number = _number(part)
    return TopicPartition(topic, number) if sep and _TOPIC_RE.match(topic) and number is not None \
        else None


def _parse_partition(opt: ConfigOption[Any], item: str) -> TopicPartition:
    tp = _split_partition(item)
    if tp is None:
        raise ConfigError(
            f"option '{opt.key}' has invalid item {item!r}; expected 'topic:partition'"
        )
    return tp


def _parse_offsets(opt: ConfigOption[Any], items: tuple[str, ...]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for item in items:
        head, sep, off = str(item).rpartition(":")
        tp, offset = _split_partition(head), _number(off)
        if not sep or tp is None or offset is None:
            raise ConfigError(
                f"option '{opt.key}' has invalid item {item!r}; expected 'topic:partition:offset' "
                f"with a non-negative partition and offset"
            )
        out[tp] = offset
    return out


@dataclass(frozen=True)
class KafkaSourceConfig:
    """Validated configuration of a Kafka source (build with :meth:`from_options` or the builder).

    ``client_properties`` are librdkafka properties (``bootstrap.servers`` included); the
    :func:`repr` of a config masks secrets among them.
    """

    client_properties: Mapping[str, Any]
    subscription: Subscription
    starting_offsets: StartingOffsets = field(default_factory=StartingOffsets)
    #: 'scan.startup.mode' was given, not defaulted (a table another writer started needs it)
    startup_stated: bool = False
    stopping_offsets: StoppingOffsets = field(default_factory=StoppingOffsets)
    discovery_interval_s: float = DISCOVERY_INTERVAL.default
    #: an :class:`AssignerKind` (a string naming one is converted)
    split_assigner: AssignerKind = AssignerKind.HASH
    commit_offsets_on_checkpoint: bool = True
    #: an :class:`OffsetsOutOfRange` (a string naming one is converted)
    offsets_out_of_range: OffsetsOutOfRange = OffsetsOutOfRange.FAIL
    fetch_max_records: int = FETCH_MAX_RECORDS.default
    fetch_timeout_s: float = FETCH_TIMEOUT.default
    broker_unavailable_timeout_s: float = BROKER_TIMEOUT.default

    def __post_init__(self) -> None:
        if not str(self.client_properties.get("bootstrap.servers", "")).strip():
            raise ConfigError(
                f"option '{BOOTSTRAP_SERVERS.key}' is required: give the Kafka brokers' host:port"
            )
        object.__setattr__(self, "split_assigner", SPLIT_ASSIGNER.convert(self.split_assigner))
        object.__setattr__(
            self, "offsets_out_of_range", OFFSETS_OUT_OF_RANGE.convert(self.offsets_out_of_range)
        )
        DISCOVERY_INTERVAL.convert(self.discovery_interval_s)

    @property
    def group_id(self) -> str | None:
        gid = self.client_properties.get("group.id")
        return str(gid) if gid else None

    @property
    def bounded(self) -> bool:
        return self.stopping_offsets.is_bounded

    @property
    def bootstrap_servers(self) -> str:
        return str(self.client_properties["bootstrap.servers"])

    def masked_client_properties(self) -> dict[str, object]:
        return mask_secrets(self.client_properties)

    def __repr__(self) -> str:
        return (
            f"KafkaSourceConfig(client_properties={self.masked_client_properties()}, "
            f"subscription={self.subscription.describe()}, "
            f"starting={self.starting_offsets.mode}, "
            f"bounded={self.stopping_offsets.mode}, assigner={self.split_assigner}, "
            f"discovery_interval_s={self.discovery_interval_s})"
        )

    __str__ = __repr__

    @classmethod
    def from_options(cls, raw: Mapping[str, object]) -> KafkaSourceConfig:
        """Parse and validate ``raw`` options (see the module's option declarations)."""
        opts = Options(raw, known=ALL_OPTIONS, passthrough_prefixes=(PROPERTIES_PREFIX,))
        props: dict[str, Any] = {
            k: v for k, v in opts.with_prefix(PROPERTIES_PREFIX).items() if k != "group.id"
        }
        props["bootstrap.servers"] = opts.get(BOOTSTRAP_SERVERS)
        group_id = opts.get(GROUP_ID)
        if group_id:
            props["group.id"] = group_id

        chosen = [o.key for o in (TOPIC, TOPIC_PATTERN, PARTITIONS) if opts.contains(o)]
        if len(chosen) != 1:
            raise ConfigError(
                "set exactly one of options 'topic', 'topic-pattern' and 'partitions' "
                f"(got {chosen or 'none'})"
            )
        try:
            if opts.contains(TOPIC):
                topics = opts.get(TOPIC)
                for t in topics:
                    if not _TOPIC_RE.match(str(t)):
                        raise ConfigError(f"option 'topic' has invalid topic name {t!r}")
                subscription = Subscription.of_topics(str(t) for t in topics)
            elif opts.contains(TOPIC_PATTERN):
                subscription = Subscription.of_pattern(opts.get(TOPIC_PATTERN))
            else:
                subscription = Subscription.of_partitions(
                    _parse_partition(PARTITIONS, str(i)) for i in opts.get(PARTITIONS)
                )
        except KafkaSourceError as exc:
            raise ConfigError(str(exc)) from None

        mode = opts.get(STARTUP_MODE)
        reset = opts.get(STARTUP_OFFSET_RESET)
        if mode is StartupMode.SPECIFIC:
            if not opts.contains(STARTUP_SPECIFIC_OFFSETS):
                raise ConfigError(
                    f"option '{STARTUP_MODE.key}' is 'specific-offsets' but option "
                    f"'{STARTUP_SPECIFIC_OFFSETS.key}' is not set"
                )
            starting = StartingOffsets.offsets(
                _parse_offsets(STARTUP_SPECIFIC_OFFSETS, opts.get(STARTUP_SPECIFIC_OFFSETS)), reset
            )
        elif mode is StartupMode.TIMESTAMP:
            ts = opts.get(STARTUP_TIMESTAMP)
            if ts < 0:
                raise ConfigError(
                    f"option '{STARTUP_MODE.key}' is 'timestamp' but option "
                    f"'{STARTUP_TIMESTAMP.key}' is not set to a timestamp >= 0 (got {ts})"
                )
            starting = StartingOffsets.timestamp(ts)
        elif mode is StartupMode.COMMITTED:
            if not group_id:
                raise ConfigError(
                    f"option '{STARTUP_MODE.key}' is 'group-offsets' but option "
                    f"'{GROUP_ID.key}' is not set"
                )
            starting = StartingOffsets.committed(reset)
        else:
            starting = StartingOffsets(mode, reset=reset)

        bmode = opts.get(BOUNDED_MODE)
        if bmode is BoundedMode.SPECIFIC:
            if not opts.contains(BOUNDED_SPECIFIC_OFFSETS):
                raise ConfigError(
                    f"option '{BOUNDED_MODE.key}' is 'specific-offsets' but option "
                    f"'{BOUNDED_SPECIFIC_OFFSETS.key}' is not set"
                )
            stopping = StoppingOffsets.offsets(
                _parse_offsets(BOUNDED_SPECIFIC_OFFSETS, opts.get(BOUNDED_SPECIFIC_OFFSETS))
            )
        else:
            stopping = StoppingOffsets(bmode)

        return cls(
            client_properties=props,
            subscription=subscription,
            starting_offsets=starting,
            startup_stated=opts.contains(STARTUP_MODE),
            stopping_offsets=stopping,
            discovery_interval_s=opts.get(DISCOVERY_INTERVAL),
            split_assigner=opts.get(SPLIT_ASSIGNER),
            commit_offsets_on_checkpoint=opts.get(COMMIT_ON_CHECKPOINT),
            offsets_out_of_range=opts.get(OFFSETS_OUT_OF_RANGE),
            fetch_max_records=opts.get(FETCH_MAX_RECORDS),
            fetch_timeout_s=opts.get(FETCH_TIMEOUT),
            broker_unavailable_timeout_s=opts.get(BROKER_TIMEOUT),
        )
