"""Feed an :class:`~hoodline.demo.events.EventStream` into a Kafka topic (demo and crash tests).

Waves are produced with :class:`~hoodline.broker.ExactEndProducer`, so the bundled broker's end
offsets are exact after every wave (a Tansu quirk, see ``hoodline.broker``) and a pipeline that
drains "what is there" sees every record of the waves produced so far.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from hoodline.broker import ExactEndProducer
from hoodline.connectors.kafka.client_log import with_client_logging
from hoodline.demo.events import EventStream, Message
from hoodline.errors import EmbeddedBrokerError

log = logging.getLogger(__name__)


def create_topic(bootstrap_servers: str, topic: str, partitions: int,
                 timeout_s: float = 15.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(
        with_client_logging({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    )
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    try:
        for future in futures.values():
            try:
                future.result(timeout=timeout_s)
            except Exception as exc:
                raise EmbeddedBrokerError(
                    f"could not create topic {topic!r} on {bootstrap_servers}: {exc}"
                ) from exc
    finally:
        admin.poll(0)  # hand its queued log lines to Python logging


def produce(producer: ExactEndProducer, topic: str, messages: Sequence[Message]) -> None:
    """Send ``messages`` and flush (end offsets exact afterwards)."""
    for m in messages:
        producer.produce(topic, m.partition, m.value, m.key)
    producer.flush()


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
