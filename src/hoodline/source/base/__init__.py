"""Base implementation of source readers (FLIP-27 "base Source implementation")."""

from hoodline.source.base.emitter import RecordEmitter
from hoodline.source.base.fetcher import (
    FetcherManager,
    SynchronousFetcherManager,
    ThreadedFetcherManager,
)
from hoodline.source.base.handover import HandoverQueue
from hoodline.source.base.reader_base import SourceReaderBase
from hoodline.source.base.records import RecordsBySplits, RecordsWithSplitIds
from hoodline.source.base.split_reader import SplitReader, SplitsAddition, SplitsChange

__all__ = [
    "FetcherManager",
    "HandoverQueue",
    "RecordEmitter",
    "RecordsBySplits",
    "RecordsWithSplitIds",
    "SourceReaderBase",
    "SplitReader",
    "SplitsAddition",
    "SplitsChange",
    "SynchronousFetcherManager",
    "ThreadedFetcherManager",
]
