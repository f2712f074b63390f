"""The one error hierarchy of hoodline.

Every error raised on purpose by hoodline derives from :class:`HoodlineError`. Each area has its own
subtype; add specific errors under the area they belong to. Messages must name the offending value
(column, file, option, offset ...) and, where possible, say what to do about it.
"""

from __future__ import annotations


class HoodlineError(Exception):
    """Root of every error hoodline raises on purpose."""


# --- configuration -----------------------------------------------------------------------------
class ConfigError(HoodlineError):
    """An option is missing, unknown, or has an invalid value. The message names the option."""


# --- table layer -------------------------------------------------------------------------------
class TableError(HoodlineError):
    """Anything wrong with a Hudi table or an operation on it."""


class TableNotFoundError(TableError):
    """The path holds no Hudi table (no .hoodie/hoodie.properties)."""


class UnsupportedTableError(TableError):
    """The table exists but its version, timeline layout or type is not supported."""


class TimelineError(TableError):
    """The timeline is inconsistent or a state transition is not allowed."""


class SchemaEvolutionError(TableError):
    """A write would change the table schema incompatibly. The message names the column."""


class InvalidRecordsError(TableError):
    """Input records are unusable (missing column, null key, wrong type, empty batch)."""


class WriterLockError(TableError):
    """Another live writer holds the table's writer lock."""


class CommitError(TableError):
    """Committing an instant failed."""

    #: True when retrying the same commit may succeed (nothing was made visible).
    retryable: bool = True


class CommitOutcomeUnknownError(CommitError):
    """The commit may or may not have landed; the caller must re-read the timeline to know."""

    retryable = False


# --- sources -----------------------------------------------------------------------------------
class SourceError(HoodlineError):
    """Errors of the source framework and connectors."""


class SplitSerializationError(SourceError):
    """Split or enumerator-state bytes cannot be (de)serialized, e.g. an unknown version."""


class FetchError(SourceError):
    """A split reader failed while fetching records; raised to the caller, never swallowed."""


class KafkaSourceError(SourceError):
    """Kafka connector errors (broker unreachable, offsets out of range, ...)."""


class KafkaOffsetOutOfRangeError(KafkaSourceError):
    """A split's next offset no longer exists on the broker (retention deleted it)."""


class KafkaBrokerUnavailableError(KafkaSourceError):
    """The Kafka brokers stayed unreachable longer than ``scan.broker-unavailable.timeout``
    (hoodline retried with backoff all that time). Names the bootstrap servers."""

    #: Retrying at once cannot help: the brokers were already retried for the whole timeout.
    retryable: bool = False


class KafkaTopicNotFoundError(KafkaSourceError):
    """A topic of option 'topic' (or a partition of option 'partitions') does not exist on the
    brokers. hoodline never creates topics; the message names the missing ones."""

    #: The topic will not appear by retrying the round; create it or fix the option.
    retryable: bool = False


class EmbeddedBrokerError(HoodlineError):
    """The embedded test/demo broker (Tansu) cannot be found, started or stopped."""


class FileSourceError(SourceError):
    """File source errors (unparseable file, unreadable directory, ...)."""


# --- pipeline / runtime ------------------------------------------------------------------------
class PipelineError(HoodlineError):
    """Errors of the streaming pipeline (rounds, coordination, deserialization)."""


class BadRecordError(PipelineError):
    """A record cannot be ingested and errors.tolerance is 'none'. Names the record's position."""


class RoundFailedError(PipelineError):
    """A checkpoint round failed too many times in a row."""


class SparkRuntimeError(PipelineError):
    """Spark could not be started/used as hoodline needs (master, executors, active context)."""


class CheckpointMismatchError(PipelineError):
    """The table's stored checkpoint belongs to another source (type, topics, directory)."""
