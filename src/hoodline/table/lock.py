"""Single-writer lock with heartbeat and expiry.

The lock is the file ``.hoodie/.hoodline/writer.lock`` holding JSON ``{owner, pid, host, since,
token, expiry, heartbeat}``; its modification time is the heartbeat, refreshed by a background
thread. Another writer is refused with :class:`WriterLockError` naming the holder while the lock
is live. A lock is stale, and may be taken over, when its heartbeat is older than the expiry *its
holder* recorded (the contender's own only for a lock that records none, written by an older
hoodline), or at once when its holder ran on this host and that process no longer exists (e.g.
killed with ``kill -9``). The holder's expiry decides because the holder paces its heartbeat by
it: a contender with a short expiry took the lock of a healthy pipeline between two of its
heartbeats, and the pipeline died.

Acquisition and takeover happen under an ``fcntl`` lock on a guard file, so two contenders
cannot both take a stale lock. On an object store (no ``fcntl``, no atomic rename) the lock is a
sequence of generations ``writer.lock.<n>``: the highest one holds it, each is created only if
absent (conditional PUT), a stale holder is taken over by creating the next generation — of two
contenders exactly one succeeds — and the heartbeat rewrites the holder's own generation.

If the heartbeat thread finds the lock taken over (this process was considered dead), the lock
is marked lost and :meth:`WriterLock.ensure_held` raises — call it right before committing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from hoodline.config.options import option
from hoodline.errors import HoodlineError, WriterLockError
from hoodline.storage.paths import ObjectPath, TablePath
from hoodline.table.table import HudiTable

LOCK_EXPIRY_SECONDS = option(
    "hoodline.writer.lock.expiry.seconds",
    float,
    60.0,
    "Seconds without a heartbeat after which this writer's lock counts as abandoned and another "
    "writer may take it over (a holder on the same host that no longer runs is detected at once). "
    "The lock records it: other writers go by the holder's expiry, not by their own.",
    minimum=0.1,
)
LOCK_HEARTBEAT_SECONDS = option(
    "hoodline.writer.lock.heartbeat.seconds",
    float,
    10.0,
    "Seconds between heartbeats of the writer lock; keep it well below the expiry.",
    minimum=0.01,
)

LOCK_DIR = ".hoodline"
LOCK_FILE = "writer.lock"
GUARD_FILE = "writer.lock.guard"

log = logging.getLogger(__name__)


def _heartbeat(ref: weakref.ref[WriterLock], stop: threading.Event, interval: float) -> None:
    """The heartbeat thread: refreshes the lock ``ref`` names until it is released, lost, or
    collected (it holds the lock only while refreshing it)."""
    while not stop.wait(interval):
        lock = ref()
        if lock is None or not lock._beat():
            return
        del lock


def _give_up(stop: threading.Event, path: TablePath, objects: _ObjectLockFiles | None,
             token: str, owner: str) -> None:
    """A lock collected while held (its writer dropped without release): stop its heartbeat
    and remove the lock file if it is still this holder's."""
    stop.set()
    try:
        if objects is not None:
            holder = objects.current()[1]
            if holder is not None and holder.get("token") == token:
                path.unlink(missing_ok=True)
        else:
            assert isinstance(path, Path)
            with _guard(path.parent / GUARD_FILE):
                body = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(body, dict) and body.get("token") == token:
                    os.unlink(path)
        log.warning("writer '%s' was dropped without closing it: its lock on '%s' is released; "
                    "close writers (or use them in a with block)", owner, path)
    except (OSError, ValueError, HoodlineError):
        pass  # gone already, or unreadable: its heartbeat stopped, it expires


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _guard(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class WriterLock:
    """Context manager guarding a table against a second live writer."""

    def __init__(
        self,
        table: HudiTable,
        owner: str | None = None,
        heartbeat_interval: float = LOCK_HEARTBEAT_SECONDS.default,
        expiry: float = LOCK_EXPIRY_SECONDS.default,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if heartbeat_interval >= expiry:
            raise WriterLockError(
                f"heartbeat interval {heartbeat_interval}s must be below the lock expiry {expiry}s"
            )
        self.table = table
        self.owner = owner or f"hoodline-{os.getpid()}"
        self.heartbeat_interval = heartbeat_interval
        self.expiry = expiry
        self._clock = clock
        self.dir = table.meta_path / LOCK_DIR
        self.path: TablePath = self.dir / LOCK_FILE
        self._objects = (
            _ObjectLockFiles(self.dir, clock) if isinstance(self.dir, ObjectPath) else None
        )
        self._token = uuid.uuid4().hex
        self._held = False
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._finalizer: weakref.finalize[Any, WriterLock] | None = None
        #: when the heartbeat first failed in the current outage (None: it works)
        self._failing_since: float | None = None

    # -- public ---------------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        return self._held and self._lost is None

    def _body(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "token": self._token,
            # what contenders go by (see the module docs); the heartbeat interval for people
            "expiry": self.expiry,
            "heartbeat": self.heartbeat_interval,
        }

    def _acquire_object(self, files: _ObjectLockFiles) -> None:
        gen, holder = files.current()
        reason: str | None = None
        if holder is not None:
            reason = self._stale_reason(holder)
            if reason is None:
                raise WriterLockError(self._describe_refusal(holder))
        if not files.create(gen + 1, self._body()):
            _gen, winner = files.current()
            raise WriterLockError(self._describe_refusal(winner or {"owner": "another writer"}))
        if holder is not None and reason is not None:
            self._log_takeover(holder, reason)
        self.path = files.path(gen + 1)
        files.remove_below(gen + 1)

    def acquire(self) -> WriterLock:
        if self._held:
            return self
        if self._objects is not None:
            self._acquire_object(self._objects)
            self._start_heartbeat()
            return self
        assert isinstance(self.dir, Path) and isinstance(self.path, Path)
        self.dir.mkdir(parents=True, exist_ok=True)
        with _guard(self.dir / GUARD_FILE):
            holder = self._read()
            if holder is not None:
                reason = self._stale_reason(holder)
                if reason is None:
                    raise WriterLockError(self._describe_refusal(holder))
                self._log_takeover(holder, reason)
                os.replace(self.path, self.dir / f"{LOCK_FILE}.stale-{uuid.uuid4().hex[:8]}")
                self._cleanup_stale_files()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as fh:
                json.dump(self._body(), fh)
                fh.flush()
                os.fsync(fh.fileno())
        self._start_heartbeat()
        return self

    def _start_heartbeat(self) -> None:
        self._held = True
        self._lost = None
        self._stop.clear()
        # the thread holds the lock weakly, and a lock collected while held gives itself up: a
        # writer dropped without release() (a notebook cell run again) kept its heartbeat going
        # and the table locked against every writer until the process ended
        self._thread = threading.Thread(
            target=_heartbeat, args=(weakref.ref(self), self._stop, self.heartbeat_interval),
            name=f"hoodline-lock-heartbeat-{self.owner}", daemon=True,
        )
        self._finalizer = weakref.finalize(
            self, _give_up, self._stop, self.path, self._objects, self._token, self.owner)
        self._thread.start()

    def release(self) -> None:
        if not self._held:
            return
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, self.heartbeat_interval * 2))
        if self._objects is not None:
            holder = self._read()
            if holder is not None and holder.get("token") == self._token:
                self.path.unlink(missing_ok=True)
            self._held = False
            return
        assert isinstance(self.dir, Path) and isinstance(self.path, Path)
        with _guard(self.dir / GUARD_FILE):
            holder = self._read()
            if holder is not None and holder.get("token") == self._token:
                os.unlink(self.path)
        self._held = False

    def ensure_held(self) -> None:
        """Raise :class:`WriterLockError` unless this writer still holds the lock."""
        if not self._held:
            raise WriterLockError(f"writer '{self.owner}' does not hold the lock on {self.path}")
        if self._lost is not None:
            raise WriterLockError(self._lost)
        holder = self._read()
        if holder is None or holder.get("token") != self._token:
            self._lost = (
                f"writer '{self.owner}' lost the lock on '{self.path}' "
                f"(now held by {self._who(holder) if holder else 'nobody'}); stop writing"
            )
            raise WriterLockError(self._lost)

    def heartbeat(self) -> None:
        """Refresh the heartbeat now (the background thread does this periodically)."""
        holder = self._read()
        if holder is None or holder.get("token") != self._token:
            self._lost = (
                f"writer '{self.owner}' lost the lock on '{self.path}': it was taken over "
                f"by {self._who(holder) if holder else 'nobody'} after its heartbeat expired"
            )
            return
        if self._objects is not None:
            self._objects.touch(self.path, holder)
            return
        assert isinstance(self.path, Path)
        now = self._clock()
        os.utime(self.path, (now, now))

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # -- internals ------------------------------------------------------------------------------
    def _beat(self) -> bool:
        """One refresh of the background heartbeat; False once the lock is lost. A failed
        refresh (the disk or object store unreachable: ``OSError``,
        :class:`~hoodline.errors.HoodlineError` such as StorageError) is tried again at the
        next interval, warned about once per outage: the thread ended at the first object-store
        error, and another writer could take the lock over once the heartbeat had expired,
        while this one kept writing."""
        try:
            self.heartbeat()
        except (OSError, HoodlineError) as exc:
            if self._failing_since is None:
                self._failing_since = self._clock()
                log.warning(
                    "cannot refresh the writer lock's heartbeat on '%s' (%s); retrying "
                    "every %.0fs: if this lasts %.0fs, another writer may take the lock "
                    "over and this one stops before its next commit",
                    self.path, exc, self.heartbeat_interval, self.expiry)
            return True
        if self._failing_since is not None:
            log.warning("the writer lock's heartbeat on '%s' is refreshed again after %.0fs",
                        self.path, self._clock() - self._failing_since)
            self._failing_since = None
        return self._lost is None

    def _read(self) -> dict[str, Any] | None:
        if self._objects is not None:
            return self._objects.current()[1]
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return {"owner": "unknown (unreadable lock file)", "token": None}
        return body

    def _age(self) -> float | None:
        if self._objects is not None:
            return self._objects.age()
        try:
            return self._clock() - self.path.stat().st_mtime
        except FileNotFoundError:
            return None

    def _holder_expiry(self, holder: dict[str, Any]) -> tuple[float, str]:
        """The expiry that decides whether ``holder``'s lock is stale, and whose it is: the one
        the holder recorded, else (a lock of an older hoodline, or unreadable) this writer's."""
        recorded = holder.get("expiry")
        if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
            return float(recorded), "the holder's expiry"
        return self.expiry, "this writer's expiry (the lock records none)"

    def _stale_reason(self, holder: dict[str, Any]) -> str | None:
        age = self._age()
        if age is None:
            return "lock file vanished"
        expiry, whose = self._holder_expiry(holder)
        if age > expiry:
            return f"its heartbeat is {age:.1f}s old, older than {whose} of {expiry:g}s"
        pid = holder.get("pid")
        if holder.get("host") == socket.gethostname() and isinstance(pid, int):
            if pid != os.getpid() and not _pid_alive(pid):
                return f"process {pid} on this host is gone"
        return None

    @staticmethod
    def _who(holder: dict[str, Any]) -> str:
        return (
            f"'{holder.get('owner')}' (pid {holder.get('pid')} on host {holder.get('host')}, "
            f"since {holder.get('since')})"
        )

    def _describe_refusal(self, holder: dict[str, Any]) -> str:
        age = self._age()
        beat = f"last heartbeat {age:.1f}s ago" if age is not None else "no heartbeat"
        expiry, whose = self._holder_expiry(holder)
        return (
            f"table '{self.table.base_path}' is locked by writer {self._who(holder)}, {beat}; "
            f"only one writer may write at a time. Stop that writer, or wait {expiry:g}s "
            f"({whose}) after it died for the lock to expire."
        )

    def _log_takeover(self, holder: dict[str, Any], reason: str) -> None:
        log.warning("writer '%s' takes over the lock on '%s' from writer %s: %s", self.owner,
                    self.table.base_path, self._who(holder), reason)

    def _cleanup_stale_files(self) -> None:
        assert isinstance(self.dir, Path)
        for p in self.dir.glob(f"{LOCK_FILE}.stale-*"):
            with contextlib.suppress(OSError):
                p.unlink()


class _ObjectLockFiles:
    """The lock's generations in an object store folder (see the module docs)."""

    def __init__(self, folder: ObjectPath, clock: Callable[[], float]) -> None:
        self.folder = folder
        self._clock = clock

    def path(self, gen: int) -> ObjectPath:
        return self.folder / f"{LOCK_FILE}.{gen:010d}"

    def _generations(self) -> list[tuple[int, float]]:
        objects, _folders = self.folder.listing()
        out = []
        for name, _size, mtime in objects:
            suffix = name[len(LOCK_FILE) + 1:] if name.startswith(f"{LOCK_FILE}.") else ""
            if suffix.isdigit():
                out.append((int(suffix), mtime))
        return sorted(out)

    def current(self) -> tuple[int, dict[str, Any] | None]:
        """(highest generation, its body); (0, None) when there is none (or it was released)."""
        gens = self._generations()
        if not gens:
            return 0, None
        gen = gens[-1][0]
        try:
            body = json.loads(self.path(gen).read_text())
        except FileNotFoundError:
            return gen, None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return gen, {"owner": "unknown (unreadable lock file)", "token": None}
        return gen, body

    def age(self) -> float | None:
        gens = self._generations()
        return self._clock() - gens[-1][1] if gens else None

    def create(self, gen: int, body: dict[str, Any]) -> bool:
        return self.path(gen).create_exclusive(json.dumps(body).encode())

    def touch(self, path: TablePath, body: dict[str, Any]) -> None:
        path.write_bytes(json.dumps(body).encode())  # the store's time is the heartbeat

    def remove_below(self, gen: int) -> None:
        for g, _mtime in self._generations():
            if g < gen:
                self.path(g).unlink(missing_ok=True)
