"""FLIP-27 source framework: the API (:mod:`.api`), versioned serializers (:mod:`.serialization`)
and the base reader (SplitReader, RecordsWithSplitIds, RecordEmitter, fetcher manager)."""

from hoodline.source.api import (
    Boundedness,
    InputStatus,
    ReaderInfo,
    ReaderOutput,
    Source,
    SourceEvent,
    SourceReader,
    SourceReaderContext,
    SourceSplit,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
    SupportsSplitReassignmentOnRecovery,
    supports_reassignment_on_recovery,
)
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    read_versioned,
    unsupported_version,
    write_versioned,
)

__all__ = [
    "BinaryReader",
    "BinaryWriter",
    "Boundedness",
    "InputStatus",
    "ReaderInfo",
    "ReaderOutput",
    "Source",
    "SourceEvent",
    "SourceReader",
    "SourceReaderContext",
    "SourceSplit",
    "SplitEnumerator",
    "SplitEnumeratorContext",
    "SplitsAssignment",
    "SupportsSplitReassignmentOnRecovery",
    "VersionedSerializer",
    "read_versioned",
    "supports_reassignment_on_recovery",
    "unsupported_version",
    "write_versioned",
]
