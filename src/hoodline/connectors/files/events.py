"""Custom events between the file enumerator and its readers."""

from __future__ import annotations

from dataclasses import dataclass

from hoodline.connectors.files.rejections import RejectedFile
from hoodline.source.api import SourceEvent


@dataclass(frozen=True)
class SplitsFinishedEvent(SourceEvent):
    """Reader -> enumerator: these splits were read to their end (or rejected).

    The enumerator uses it to forget finished splits in its global assignment once a checkpoint
    that follows covers them, and to record rejected files in its checkpointed state.
    """

    split_ids: tuple[str, ...]
    rejected: tuple[RejectedFile, ...] = ()
