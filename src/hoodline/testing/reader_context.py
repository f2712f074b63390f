"""A source reader context for unit tests: it records what the reader sends."""

from __future__ import annotations

from hoodline.source.api import SourceEvent, SourceReaderContext

__all__ = ["RecordingReaderContext"]


class RecordingReaderContext(SourceReaderContext):
    """Records events sent to the enumerator and counts split requests."""

    def __init__(self, subtask_id: int = 0, parallelism: int = 1, location: str = "localhost"):
        self._subtask_id = subtask_id
        self._parallelism = parallelism
        self._location = location
        self.sent_events: list[SourceEvent] = []
        self.split_requests = 0

    @property
    def subtask_id(self) -> int:
        return self._subtask_id

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def location(self) -> str:
        return self._location

    def send_event_to_enumerator(self, event: SourceEvent) -> None:
        self.sent_events.append(event)

    def send_split_request(self) -> None:
        self.split_requests += 1
