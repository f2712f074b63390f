"""The checkpointed state of the file enumerator."""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodline.connectors.files.rejections import RejectedFile
from hoodline.connectors.files.split import FileSourceSplit


@dataclass
class FileEnumeratorState:
    """What a restarted enumerator needs so that no file is skipped or read twice.

    * ``processed``: every file version (path -> (size, mtime_ns)) already cut into splits. A
      file is added here in the same step its splits enter ``pending``, so a file is either
      unknown (will be discovered again) or fully accounted for by splits.
    * ``pending``: splits discovered, given back or reported by restored readers, not assigned.
    * ``assignment``: split id -> reader subtask of splits handed out and not yet known to be
      finished (the FLIP-537 global assignment).
    * ``rejected``: files skipped under ``errors.tolerance=all`` (and processed files that were
      modified later, whose new content is not read).
    * ``discovery_done``: bounded mode: the directory listing of this start has been taken
      (kept for the format; a restored enumerator lists again, see the enumerator's docs).
    """

    processed: dict[str, tuple[int, int]] = field(default_factory=dict)
    pending: list[FileSourceSplit] = field(default_factory=list)
    assignment: dict[str, int] = field(default_factory=dict)
    rejected: list[RejectedFile] = field(default_factory=list)
    discovery_done: bool = False
