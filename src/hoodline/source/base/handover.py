"""A bounded hand-over queue between a fetcher thread and the polling thread."""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

__all__ = ["HandoverQueue"]

T = TypeVar("T")


class HandoverQueue(Generic[T]):
    """Bounded FIFO: the producer blocks when full, the consumer never blocks on :meth:`poll`.

    :meth:`close` wakes everybody up; after it :meth:`put` refuses new elements. :meth:`notify`
    wakes a waiting consumer without adding anything (used to surface a fetch error).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"hand-over queue capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._items: deque[T] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._signalled = False

    def put(self, item: T) -> bool:
        """Append ``item``, waiting while the queue is full; False if the queue was closed."""
        with self._cond:
            while len(self._items) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def poll(self) -> T | None:
        """The oldest element, or None if empty (never blocks)."""
        with self._cond:
            if not self._items:
                self._signalled = False
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def wait_available(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an element, a :meth:`notify` or :meth:`close`."""
        with self._cond:
            self._cond.wait_for(
                lambda: bool(self._items) or self._closed or self._signalled, timeout
            )
            return bool(self._items) or self._closed or self._signalled

    def notify(self) -> None:
        with self._cond:
            self._signalled = True
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
