"""A background producer of an :class:`~hoodline.demo.events.EventStream`'s waves (crash tests)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from hoodline.broker import ExactEndProducer
from hoodline.demo.events import EventStream, Message
from hoodline.demo.feed import produce
from hoodline.errors import EmbeddedBrokerError

log = logging.getLogger(__name__)


class WaveFeeder:
    """Produces waves of ``stream`` into ``topic`` from a background thread until paused.

    ``make_wave(stream)`` returns the next wave's messages (it runs on the feeder thread, the
    only thread touching the stream while the feeder runs). :meth:`pause` returns after the
    current wave is flushed; the stream's model then covers exactly what the topic holds.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        stream: EventStream,
        make_wave: Callable[[EventStream], list[Message]],
        interval_s: float = 0.3,
        max_waves: int | None = None,
    ) -> None:
        self._producer = ExactEndProducer(bootstrap_servers, log_level=3)
        self._topic = topic
        self.stream = stream
        self._make_wave = make_wave
        self._interval_s = interval_s
        self._max_waves = max_waves
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.waves = 0
        self.error: BaseException | None = None

    def start(self) -> WaveFeeder:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="wave-feeder", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                if self._max_waves is not None and self.waves >= self._max_waves:
                    return
                produce(self._producer, self._topic, self._make_wave(self.stream))
                self.waves += 1
                self._stop.wait(self._interval_s)
        except BaseException as exc:  # surfaced by pause()
            log.exception("wave feeder failed")
            self.error = exc

    def pause(self, timeout_s: float = 60.0) -> None:
        """Stop after the current wave (flushed); raise if the feeder failed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise EmbeddedBrokerError(f"the producer did not finish a wave in {timeout_s}s")
            self._thread = None
        if self.error is not None:
            raise EmbeddedBrokerError(f"producing failed: {self.error!r}") from self.error
