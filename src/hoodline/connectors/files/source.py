"""The file source: bounded or continuous reading of a directory tree of Parquet / JSONL / CSV.

Create it from options (see :mod:`hoodline.connectors.files.options`)::

    source = FileSource.from_options({"path": "/landing", "format": "parquet",
                                      "source.mode": "continuous"})

It implements :class:`~hoodline.source.api.SupportsSplitReassignmentOnRecovery` (FLIP-537):
restored readers report their in-progress splits and the enumerator hands them out again. For
files this is the better contract: a split carries its own progress, so any reader can continue
it; after a restart with a different parallelism the enumerator (not a fixed redistribution of
reader states) decides, and in-progress splits are never stranded on a subtask that is gone.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from hoodline.config import Options
from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.enumerator import FileSplitEnumerator
from hoodline.connectors.files.reader import FileSourceReader
from hoodline.connectors.files.serializers import (
    FileEnumeratorStateSerializer,
    FileSplitSerializer,
)
from hoodline.connectors.files.split import FileSourceSplit
from hoodline.connectors.files.state import FileEnumeratorState
from hoodline.source.api import (
    Boundedness,
    Source,
    SourceReaderContext,
    SplitEnumeratorContext,
    SupportsSplitReassignmentOnRecovery,
)
from hoodline.source.serialization import VersionedSerializer


class FileSource(
    Source[FileSourceSplit, FileEnumeratorState], SupportsSplitReassignmentOnRecovery
):
    """FLIP-27 source over files (see module docs). Picklable: holds only its config."""

    def __init__(self, config: FileSourceConfig, *, threaded_reader: bool = True) -> None:
        self.config = config
        self.threaded_reader = threaded_reader

    @classmethod
    def from_options(
        cls,
        options: Mapping[str, object] | Options,
        schema: pa.Schema | None = None,
        required_fields: tuple[str, ...] = (),
    ) -> FileSource:
        """Validate ``options`` (unknown keys are refused); ``schema`` overrides 'schema';
        ``required_fields``: see :class:`FileSourceConfig`."""
        return cls(FileSourceConfig.from_options(options, schema=schema,
                                                 required_fields=required_fields))

    @property
    def boundedness(self) -> Boundedness:
        if self.config.continuous:
            return Boundedness.CONTINUOUS_UNBOUNDED
        return Boundedness.BOUNDED

    def create_reader(self, context: SourceReaderContext) -> FileSourceReader:
        return FileSourceReader(self.config, context, threaded=self.threaded_reader)

    def create_enumerator(
        self, context: SplitEnumeratorContext[FileSourceSplit]
    ) -> FileSplitEnumerator:
        return FileSplitEnumerator(context, self.config)

    def restore_enumerator(
        self, context: SplitEnumeratorContext[FileSourceSplit], checkpoint: FileEnumeratorState
    ) -> FileSplitEnumerator:
        return FileSplitEnumerator(context, self.config, checkpoint)

    def split_serializer(self) -> VersionedSerializer[FileSourceSplit]:
        return FileSplitSerializer()

    def enumerator_checkpoint_serializer(self) -> VersionedSerializer[FileEnumeratorState]:
        return FileEnumeratorStateSerializer()

