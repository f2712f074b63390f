"""The one error hierarchy of hoodline.

Every error raised on purpose by hoodline derives from :class:`HoodlineError`. Each area has its own
subtype; add specific errors under the area they belong to. Messages must name the offending value
(column, file, option, offset ...) and, where possible, say what to do about it.

Each class says whether it is **retryable** (:attr:`HoodlineError.retryable`): whether running
the same work again (a failed pipeline round rolled back and retried) may succeed. Errors are
deterministic unless their class says otherwise: bad configuration, bad records, a table written
by someone else or an incompatible checkpoint fail the same way every time, so the pipeline stops
at once instead of retrying them. Errors that are not hoodline's own (I/O errors, a lost Spark
executor) count as retryable.
"""

from __future__ import annotations


class HoodlineError(Exception):
    """Root of every error hoodline raises on purpose."""

    #: True when doing the same work again may succeed (see module docs).
    retryable: bool = False


def is_retryable(error: BaseException) -> bool:
    """Whether a failed round that raised ``error`` should be rolled back and retried."""
    if isinstance(error, HoodlineError):
        return error.retryable
    return isinstance(error, Exception)  # not on KeyboardInterrupt / SystemExit


# --- configuration -----------------------------------------------------------------------------
class ConfigError(HoodlineError):
    """An option is missing, unknown, or has an invalid value. The message names the option."""


# --- storage -----------------------------------------------------------------------------------
class StorageError(HoodlineError):
    """An object store (``s3://``, ``gs://``, ``abfs://``) refused or failed an operation: a
    missing bucket, missing or rejected credentials, an unreachable endpoint, a server error.
    The message names the URL, the action and the store's reason, and says what to do.

    Retryable per error (:attr:`retryable` is set on each): an endpoint that did not answer, a
    timeout or an HTTP 5xx may pass in a retried round; a missing bucket, bad credentials, a
    denied permission or an invalid path fail the same way every time."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.retryable))


# --- table layer -------------------------------------------------------------------------------
class TableError(HoodlineError):
    """Anything wrong with a Hudi table or an operation on it."""


class TableNotFoundError(TableError):
    """The path holds no Hudi table (no .hoodie/hoodie.properties)."""


class UnsupportedTableError(TableError):
    """The table exists but its version, timeline layout or type is not supported."""


class DamagedFileError(TableError):
    """A file of the table cannot be read as what its name says it is (truncated or overwritten
    outside hoodline): reading it again would fail again."""


class TimelineError(TableError):
    """The timeline is inconsistent or a state transition is not allowed."""


class SchemaEvolutionError(TableError):
    """A write would change the table schema incompatibly. The message names the column."""


class InvalidRecordsError(TableError):
    """Input records are unusable (missing column, null key, wrong type, empty batch)."""


class WriterLockError(TableError):
    """Another live writer holds the table's writer lock."""


class CommitError(TableError):
    """Committing an instant failed before anything became visible."""

    retryable = True


class UnsharedTableError(TableError):
    """Files a round's tasks wrote are not visible where the commit is made: the table's path
    is not storage every executor and the driver share (a node-local disk on a cluster)."""


class CommitOutcomeUnknownError(CommitError):
    """Writing the completed instant file failed part-way: the commit may or may not have
    landed. The table decides: re-read the timeline before rolling back or retrying."""

    def __init__(self, message: str, instant: str) -> None:
        super().__init__(message)
        self.instant = instant

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.instant))


# --- sources -----------------------------------------------------------------------------------
class SourceError(HoodlineError):
    """Errors of the source framework and connectors."""


class SplitSerializationError(SourceError):
    """Split or enumerator-state bytes cannot be (de)serialized, e.g. an unknown version."""


class FetchError(SourceError):
    """A split reader failed while fetching records; raised to the caller, never swallowed."""

    retryable = True


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


class KafkaMetadataNotReadyError(KafkaSourceError):
    """The brokers answered for partitions they list as if they did not know them: a topic
    created (or given partitions) a moment ago, whose metadata has not reached every broker
    or the client yet."""

    #: The next round asks again, when the metadata has spread.
    retryable = True


class EmbeddedBrokerError(HoodlineError):
    """The embedded test/demo broker (Tansu) cannot be found, started or stopped."""


class SchemaRegistryError(SourceError):
    """The Schema Registry could not be reached or answered with an error other than "schema
    not found" (which makes bad records, not a failed round). Names the registry URL."""

    #: A registry that answered with an error may answer the retried round.
    retryable = True


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The Schema Registry stayed unreachable (or answered 408/429/5xx) longer than
    ``schema.registry.unavailable.timeout``; hoodline asked again with backoff all that time.
    Names the registry URL."""

    #: Retrying at once cannot help: the registry was already asked for the whole timeout.
    retryable: bool = False


class SchemaChangedError(SourceError):
    """A record was written with a schema newer than the one the round reads into: the round is
    retried after the pipeline fetched the subject's latest version (the table evolves)."""

    retryable = True


class FileSourceError(SourceError):
    """File source errors (unparseable file, unreadable directory, ...)."""


# --- pipeline / runtime ------------------------------------------------------------------------
class PipelineError(HoodlineError):
    """Errors of the streaming pipeline (rounds, coordination, deserialization)."""


class BadRecordError(PipelineError):
    """A record cannot be ingested and errors.tolerance is 'none'. Names the record's position."""


class RoundFailedError(PipelineError):
    """A checkpoint round failed too many times in a row."""


class EngineJobError(PipelineError):
    """A round's job failed in the engine (a task failed, an executor was lost, a task's result
    is missing): the round is rolled back and retried."""

    retryable = True


class SparkRuntimeError(PipelineError):
    """Spark could not be started/used as hoodline needs (master, executors, active context)."""


class CheckpointMismatchError(PipelineError):
    """The table's stored checkpoint belongs to another source (type, topics, directory)."""
