"""librdkafka's own log lines, routed through Python logging and rate-limited.

Without a ``logger`` in its configuration, every confluent-kafka client writes librdkafka's log
lines straight to stderr (``%3|1795357108.159|FAIL|rdkafka#producer-1| ... Connection refused``),
repeated every reconnect attempt. Every client hoodline creates (source consumers, the metadata
client, the offset-commit consumer, the embedded broker's producers, the demo's admin client)
gets its configuration from :func:`with_client_logging` instead, so those lines go to the Python
logger ``hoodline.kafka.client`` at the level librdkafka gave them (confluent-kafka maps the
syslog levels: 0-2 critical, 3 error, 4 warning, 5-6 info, 7 debug), without the thread prefix,
and the same message at most once per :data:`REPEAT_WINDOW_S` seconds; the next line after a
window tells how many repeats were suppressed. A broker connection failing (facility ``FAIL``,
librdkafka's level 3) is logged as a warning: the client reconnects by itself, and hoodline
reports an outage it gives up on as an error of its own, so alerts on errors do not fire on
an outage the pipeline survives.

confluent-kafka delivers these lines (and ``error_cb`` calls) from the client's ``poll()``,
``consume()`` or ``flush()``, on the calling thread; an admin client must be polled for them.
The pipeline's own messages (e.g. brokers unreachable, naming ``bootstrap.servers``) come from
hoodline's loggers; these lines are the client's detail underneath.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REPEAT_WINDOW_S", "ClientLog", "client_log", "with_client_logging"]

#: Seconds within which the same client log message is shown only once.
REPEAT_WINDOW_S = 30.0

_THREAD_PREFIX = re.compile(r"^\[thrd:[^\]]*\]:\s*")
#: Parts of librdkafka messages that change between repeats of the same message.
_VARYING = re.compile(r"\b\d+ms\b|, \d+ identical error\(s\) suppressed")


class ClientLog:
    """The ``logger`` object handed to confluent-kafka clients (it calls :meth:`log`).

    ``confluent-kafka`` calls ``log(level, "%s [%s] %s", facility, client_name, message)``.
    Messages that differ only in durations (``after 0ms`` / ``after 3ms``), in librdkafka's own
    suppression count or in the client instance count as the same message for rate limiting.
    """

    def __init__(
        self,
        logger: logging.Logger,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        #: message key -> (time it was last shown, repeats suppressed since)
        self._seen: dict[tuple[int, str, str], tuple[float, int]] = {}

    def log(self, level: int, msg: str, *args: Any) -> None:
        facility, client, text = _parts(msg, args)
        if facility == "FAIL" and level > logging.WARNING:  # retried by the client itself
            level = logging.WARNING
        if not self._logger.isEnabledFor(level):
            return
        key = (level, facility, _VARYING.sub("", text))
        now = self._clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self._window_s:
                self._seen[key] = (last[0], last[1] + 1)
                return
            suppressed = last[1] if last is not None else 0
            self._seen[key] = (now, 0)
        more = (
            f" ({suppressed} repeat(s) in the last {self._window_s:.0f}s not shown)"
            if suppressed
            else ""
        )
        self._logger.log(level, "Kafka client %s %s: %s%s", client, facility, text, more)


#: librdkafka's instance name of a client with a ``client.id`` of its own: ``<id>#<type>-<n>``
#: (the type of an admin client is "producer", which it is not)
_INSTANCE = re.compile(r"^(?!rdkafka#)(.+)#(?:producer|consumer)-(\d+)$")


def _parts(msg: str, args: tuple[Any, ...]) -> tuple[str, str, str]:
    """(facility, client name, message) of a confluent-kafka log call; a client with its own
    ``client.id`` is named ``<client.id>-<n>``."""
    if len(args) == 3:
        facility, client, text = (str(a) for a in args)
    else:
        facility, client, text = "", "", (msg % args if args else msg)
    return facility, _INSTANCE.sub(r"\1-\2", client), _THREAD_PREFIX.sub("", text)


_SHARED = ClientLog(logging.getLogger("hoodline.kafka.client"))


def client_log() -> ClientLog:
    """The process-wide :class:`ClientLog` (shared, so repeats are limited across clients)."""
    return _SHARED


def with_client_logging(props: Mapping[str, Any], role: str = "") -> dict[str, Any]:
    """A copy of client configuration ``props`` whose librdkafka log lines go to
    :func:`client_log` (a ``logger`` given in ``props`` is kept). ``role`` names what the
    client is for (``metadata``, ``reader``, ...): its ``client.id`` is ``hoodline-<role>``
    unless ``props`` sets one, so brokers and log lines tell hoodline's clients apart (an
    admin client is otherwise "rdkafka#producer-1" in librdkafka's lines)."""
    out = dict(props)
    out.setdefault("logger", _SHARED)
    if role:
        out.setdefault("client.id", f"hoodline-{role}")
    return out
