"""The public pipeline API: run a stream (Kafka or files -> Hudi table) as checkpoint rounds.

Example::

    from hoodline.pipeline.api import run_pipeline

    summary = run_pipeline("pipeline.toml", once=True, on_round=print)

or, keeping the engine (a Spark session) across runs::

    with Pipeline(load_config("pipeline.toml")) as pipeline:
        summary = pipeline.run(once=False, on_round=show, stop=stop_event)

Each round reads a bounded slice of the source, writes it as one Hudi instant (the source
checkpoint rides in the commit's extra metadata) and reports a :class:`RoundReport` to
``on_round`` -- also for rounds that committed nothing. ``run`` returns a :class:`RunSummary`.
The rounds are driven by :class:`~hoodline.pipeline.driver.RoundDriver`; the engine that runs
their tasks is Spark unless another :class:`~hoodline.pipeline.engine.Engine` is given.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from hoodline.errors import PipelineError
from hoodline.pipeline.config import PipelineConfig, load_config
from hoodline.pipeline.driver import RoundDriver
from hoodline.pipeline.engine import Engine, default_engine
from hoodline.pipeline.report import RoundReport, RunSummary, StopReason

__all__ = ["Pipeline", "RoundReport", "RunSummary", "StopReason", "load_config", "run_pipeline"]

log = logging.getLogger(__name__)


@contextmanager
def _ctrl_c_stops(stop: threading.Event | None) -> Iterator[threading.Event | None]:
    """A run on the main thread that was given no ``stop`` event (a script, a notebook cell)
    stops after the current round at the first Ctrl-C (a notebook's interrupt), as ``hoodline
    run`` does, and returns its summary; a second one raises KeyboardInterrupt at once. Before,
    the first one cancelled the round under way with screens of Spark and py4j tracebacks.
    A caller's own ``stop`` event, or another thread, leaves signals alone."""
    if stop is not None or threading.current_thread() is not threading.main_thread():
        yield stop
        return
    requested = threading.Event()

    def interrupt(signum: int, frame: object) -> None:
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()
        log.warning("Ctrl-C: stopping after the current round (again to stop at once)")

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


class Pipeline:
    """A configured pipeline bound to an engine (started on first use and closed by
    :meth:`close` when the pipeline started it). Use as a context manager."""

    def __init__(self, config: PipelineConfig, engine: Engine | None = None) -> None:
        self.config = config
        self._engine = engine
        self._owns_engine = engine is None
        self._closed = False

    @property
    def engine(self) -> Engine:
        """The engine; the default one (Spark on ``runtime.master``) starts on first use."""
        if self._closed:
            raise PipelineError("the pipeline is closed; create a new one")
        if self._engine is None:
            self._engine = default_engine(self.config.runtime, f"hoodline-{self.config.table.name}")
        return self._engine

    def run(
        self,
        once: bool = False,
        on_round: Callable[[RoundReport], None] | None = None,
        stop: threading.Event | None = None,
        on_failure: Callable[[BaseException, bool], None] | None = None,
    ) -> RunSummary:
        """Run rounds until ``stop`` is set (continuous), or -- with ``once`` -- until what the
        source held when the run started is committed. Raises :class:`BadRecordError` (bad
        record with tolerance none), :class:`RoundFailedError` (too many failed rounds in a
        row), a non-retryable error of a round, or the restore errors (incompatible checkpoint,
        table locked by another writer). ``on_failure(error, retried)`` hears of every failed
        round (metrics). On the main thread and without ``stop``, the first Ctrl-C stops the
        run after the current round (the summary says ``stopped``) and a second one raises
        KeyboardInterrupt."""
        engine = self.engine  # Spark first: on the main thread it installs a SIGINT handler
        with _ctrl_c_stops(stop) as stopping:
            return RoundDriver(self.config, engine).run(
                once=once, on_round=on_round, stop=stopping, on_failure=on_failure)

    def close(self) -> None:
        """Close the engine if this pipeline started it."""
        if self._closed:
            return
        self._closed = True
        if self._owns_engine and self._engine is not None:
            self._engine.close()
            self._engine = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def run_pipeline(
    config: PipelineConfig | str | Path,
    once: bool = False,
    on_round: Callable[[RoundReport], None] | None = None,
    stop: threading.Event | None = None,
    engine: Engine | None = None,
) -> RunSummary:
    """Load ``config`` (a TOML path or a :class:`PipelineConfig`), run it, close the engine it
    started."""
    cfg = config if isinstance(config, PipelineConfig) else load_config(config)
    with Pipeline(cfg, engine) as pipeline:
        return pipeline.run(once=once, on_round=on_round, stop=stop)
