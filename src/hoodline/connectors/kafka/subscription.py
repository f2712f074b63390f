"""Which partitions a Kafka source reads: a topic list, a topic pattern, or explicit partitions."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import KafkaSourceError, KafkaTopicNotFoundError


@dataclass(frozen=True)
class Subscription:
    """Exactly one of ``topics``, ``pattern`` or ``partitions`` is set."""

    topics: tuple[str, ...] | None = None
    pattern: str | None = None
    partitions: frozenset[TopicPartition] | None = None

    def __post_init__(self) -> None:
        chosen = [x for x in (self.topics, self.pattern, self.partitions) if x is not None]
        if len(chosen) != 1:
            raise KafkaSourceError(
                "subscribe with exactly one of options 'topic', 'topic-pattern' or 'partitions'"
            )
        if self.topics is not None and not self.topics:
            raise KafkaSourceError("option 'topic' lists no topic")
        if self.partitions is not None and not self.partitions:
            raise KafkaSourceError("option 'partitions' lists no partition")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise KafkaSourceError(
                    f"option 'topic-pattern' has invalid regular expression {self.pattern!r}: {exc}"
                ) from None

    @classmethod
    def of_topics(cls, topics: Iterable[str]) -> Subscription:
        return cls(topics=tuple(dict.fromkeys(topics)))

    @classmethod
    def of_pattern(cls, pattern: str) -> Subscription:
        return cls(pattern=pattern)

    @classmethod
    def of_partitions(cls, partitions: Iterable[TopicPartition]) -> Subscription:
        return cls(partitions=frozenset(partitions))

    def matches_topic(self, topic: str) -> bool:
        if self.topics is not None:
            return topic in self.topics
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        assert self.partitions is not None
        return any(tp.topic == topic for tp in self.partitions)

    def matches(self, tp: TopicPartition) -> bool:
        if self.partitions is not None:
            return tp in self.partitions
        return self.matches_topic(tp.topic)

    def select(
        self, partition_counts: Mapping[str, int], strict: bool, brokers: str = ""
    ) -> set[TopicPartition]:
        """The subscribed partitions that exist; ``strict`` fails with
        :class:`KafkaTopicNotFoundError` on named topics/partitions that do not (``brokers``
        names where they were looked up, for the message)."""
        if strict:
            self.check_exists(partition_counts, brokers=brokers)
        if self.partitions is not None:
            return {
                tp for tp in self.partitions if tp.partition < partition_counts.get(tp.topic, 0)
            }
        return {
            TopicPartition(topic, p)
            for topic, count in partition_counts.items()
            if self.matches_topic(topic)
            for p in range(count)
        }

    def check_exists(self, partition_counts: Mapping[str, int], brokers: str = "",
                     held: frozenset[str] = frozenset()) -> None:
        """:class:`KafkaTopicNotFoundError` naming the topics of 'topic' (partitions of
        'partitions') that ``partition_counts`` lacks, except those of topics in ``held``."""
        where = f" on brokers {brokers}" if brokers else ""
        if self.partitions is not None:
            missing = sorted(tp for tp in self.partitions if tp.topic not in held
                             and tp.partition >= partition_counts.get(tp.topic, 0))
            if missing:
                raise KafkaTopicNotFoundError(
                    f"partition(s) {', '.join(map(str, missing))} of option 'partitions' do not "
                    f"exist{where} ({_existing(partition_counts)}); create them or fix the option"
                )
        elif self.topics is not None:
            absent = [t for t in self.topics if t not in partition_counts and t not in held]
            if absent:
                raise KafkaTopicNotFoundError(
                    f"topic(s) {', '.join(repr(t) for t in absent)} of option 'topic' do not "
                    f"exist{where} ({_existing(partition_counts)}). hoodline does not create "
                    f"topics: create them (e.g. kafka-topics.sh --create --topic "
                    f"{absent[0]} ...) or fix option 'topic'"
                )

    def describe(self) -> str:
        if self.topics is not None:
            return f"topics {list(self.topics)}"
        if self.pattern is not None:
            return f"topic pattern {self.pattern!r}"
        assert self.partitions is not None
        return f"partitions {sorted(map(str, self.partitions))}"


def _existing(partition_counts: Mapping[str, int], limit: int = 10) -> str:
    """A short list of the topics that do exist, for error messages."""
    if not partition_counts:
        return "the brokers have no topics"
    names = sorted(partition_counts)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return "existing topics: " + ", ".join(names[:limit]) + more
