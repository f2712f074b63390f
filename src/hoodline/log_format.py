"""How hoodline's log records read when they are plain lines (a log file, CI, an executor's
stderr): time, level, logger, message, one record per line."""

from __future__ import annotations

import logging
import sys

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TIME_FORMAT = "%H:%M:%S"


def plain_handler() -> logging.Handler:
    """A stderr handler writing :data:`PLAIN_FORMAT` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(PLAIN_FORMAT, datefmt=TIME_FORMAT))
    return handler


def ensure_task_logging() -> None:
    """In a process where nothing configured logging (a Spark executor's Python worker), give
    hoodline's records the driver's plain format: Python's last-resort handler printed a
    task's warnings as bare messages, without time or logger, beside the driver's lines (an S3
    outage's slow-call warnings, chaos review). Does nothing where handlers exist."""
    root = logging.getLogger("hoodline")
    if root.handlers or logging.getLogger().handlers:
        return
    root.addHandler(plain_handler())
    root.propagate = False
