"""File source: bounded and continuous reading of Parquet, JSON-lines and CSV directory trees.

See :mod:`.source` (the source), :mod:`.options` (every option, documented), :mod:`.split`,
:mod:`.enumerator` (discovery, bookkeeping, recovery), :mod:`.reader` and :mod:`.formats`.
"""

from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.enumerator import FileSplitEnumerator
from hoodline.connectors.files.events import SplitsFinishedEvent
from hoodline.connectors.files.reader import FileSourceReader
from hoodline.connectors.files.rejections import RejectedFile
from hoodline.connectors.files.serializers import (
    FileEnumeratorStateSerializer,
    FileSplitSerializer,
)
from hoodline.connectors.files.source import FileSource
from hoodline.connectors.files.split import FileSourceSplit, FileSplitState, SplitKind
from hoodline.connectors.files.state import FileEnumeratorState

__all__ = [
    "FileEnumeratorState",
    "FileEnumeratorStateSerializer",
    "FileSource",
    "FileSourceConfig",
    "FileSourceReader",
    "FileSourceSplit",
    "FileSplitEnumerator",
    "FileSplitSerializer",
    "FileSplitState",
    "RejectedFile",
    "SplitKind",
    "SplitsFinishedEvent",
]
