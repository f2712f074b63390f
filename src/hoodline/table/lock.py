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
A writer that takes a lock over because its heartbeat expired leaves a note
``writer.lock.taken-<old token>`` naming itself and why: the old holder, when it wakes up and
finds the lock lost, reads it to say who took the lock, also when the taker has released it
since (notes nobody came back for are removed by a later takeover after :data:`NOTE_KEEP_S`).
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
TAKEN_NOTE = "writer.lock.taken-"
#: takeover notes older than this are removed by the next takeover (their holder never woke up)
NOTE_KEEP_S = 7 * 86400.0

log = logging.getLogger(__name__)


def _heartbeat(ref: weakref.ref[WriterLock], stop: threading.Event, interval: float) -> None:
    """The heartbeat thread: refreshes the lock ``ref`` names until it is released, lost, or
    collected (it holds the lock only while refreshing it)."""
    while not stop.wait(interval):
        lock = ref()
        if lock is None or not lock._beat():
            return
        del lock


#: tokens of the locks this process's writers hold now: a lock file of this process with
#: another token was left by a writer whose release failed (the store did not answer), and
#: the next writer of the process takes it over instead of waiting for its expiry (S3 review:
#: a start retried during an outage found its own earlier attempt's lock)
_HELD_HERE: set[str] = set()


def _give_up(stop: threading.Event, path: TablePath, objects: _ObjectLockFiles | None,
             token: str, owner: str) -> None:
    """A lock collected while held (its writer dropped without release): stop its heartbeat
    and remove the lock file if it is still this holder's."""
    stop.set()
    _HELD_HERE.discard(token)
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

    @property
    def lost(self) -> str | None:
        """Why this writer no longer holds the lock it took (who took it over), once the
        heartbeat or :meth:`ensure_held` found out; None while it holds it."""
        return self._lost

    def lost_reason(self) -> str | None:
        """:attr:`lost`, finding out now (one read of the lock): for a writer that failed and
        must tell a lost lock from other errors. None when it holds the lock, never took it, or
        the lock cannot be read."""
        if self._lost is None and self._held:
            try:
                self.ensure_held()
            except WriterLockError:
                pass
            except (OSError, HoodlineError):
                return None
        return self._lost

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
            self._leave_note(holder, reason)
        self.path = files.path(gen + 1)
        files.remove_below(gen + 1)

    def acquire(self) -> WriterLock:
        if self._held:
            return self
        # known as this process's before the lock file exists: a contender of this process
        # reading it meanwhile must not take it for one left behind (see _released_here)
        _HELD_HERE.add(self._token)
        try:
            return self._acquire()
        except BaseException:
            _HELD_HERE.discard(self._token)
            raise

    def _acquire(self) -> WriterLock:
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
                self._leave_note(holder, reason)
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
        # not held from here on, also when removing the file fails (storage unreachable):
        # its heartbeat stopped, so it expires for the next writer (of this process: at once)
        self._held = False
        _HELD_HERE.discard(self._token)
        if self._objects is not None:
            holder = self._read()
            if holder is not None and holder.get("token") == self._token:
                self.path.unlink(missing_ok=True)
            return
        assert isinstance(self.dir, Path) and isinstance(self.path, Path)
        with _guard(self.dir / GUARD_FILE):
            holder = self._read()
            if holder is not None and holder.get("token") == self._token:
                os.unlink(self.path)

    def ensure_held(self) -> None:
        """Raise :class:`WriterLockError` unless this writer still holds the lock."""
        if not self._held:
            raise WriterLockError(f"writer '{self.owner}' does not hold the lock on {self.path}")
        if self._lost is not None:
            raise WriterLockError(self._lost)
        holder = self._read()
        if holder is None or holder.get("token") != self._token:
            self._lost = self._lost_message(holder)
            raise WriterLockError(self._lost)

    def heartbeat(self) -> None:
        """Refresh the heartbeat now (the background thread does this periodically)."""
        holder = self._read()
        if holder is None or holder.get("token") != self._token:
            self._lost = self._lost_message(holder)
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
        the holder recorded, else (a lock of an older hoodline, or unreadable) this writer's,
        but not below the default: an older hoodline paced its heartbeat for that, and a
        writer with a short expiry took the lock of a live older pipeline (upgrade review)."""
        recorded = holder.get("expiry")
        if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
            return float(recorded), "the holder's expiry"
        return (max(self.expiry, LOCK_EXPIRY_SECONDS.default),
                "this writer's expiry, at least the default (the lock records none)")

    def _stale_reason(self, holder: dict[str, Any]) -> str | None:
        age = self._age()
        if age is None:
            return "lock file vanished"
        expiry, whose = self._holder_expiry(holder)
        if age > expiry:
            return f"the heartbeat was {age:.1f}s old, older than {whose} of {expiry:g}s"
        if self._gone(holder):
            return f"process {holder.get('pid')} on this host is gone"
        if self._released_here(holder):
            return "an earlier writer of this process released it, but removing it failed"
        return None

    @staticmethod
    def _released_here(holder: dict[str, Any]) -> bool:
        """Whether ``holder`` is a writer of this process that holds the lock no more."""
        return (holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid()
                and holder.get("token") not in _HELD_HERE)

    @staticmethod
    def _gone(holder: dict[str, Any]) -> bool:
        """Whether ``holder`` ran on this host in a process that no longer exists."""
        pid = holder.get("pid")
        return (holder.get("host") == socket.gethostname() and isinstance(pid, int)
                and pid != os.getpid() and not _pid_alive(pid))

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

    @staticmethod
    def _note_name(token: object) -> str | None:
        """The takeover note's name for a holder's ``token`` (None: no usable token)."""
        if not isinstance(token, str) or not token.isalnum():
            return None
        return f"{TAKEN_NOTE}{token}"

    def _leave_note(self, holder: dict[str, Any], reason: str) -> None:
        """Tell ``holder``, should it still run, who took its lock over and why (best effort:
        without the note it is told less). A holder whose process is gone gets none."""
        name = self._note_name(holder.get("token"))
        if name is None or self._gone(holder):
            return
        note = json.dumps({"by": self._body(), "reason": reason}).encode()
        try:
            (self.dir / name).write_bytes(note)
            self._remove_old_notes()
        except (OSError, HoodlineError) as exc:
            log.debug("cannot leave a takeover note in '%s': %s", self.dir, exc)

    def _remove_old_notes(self) -> None:
        now = self._clock()
        if isinstance(self.dir, ObjectPath):
            objects, _folders = self.dir.listing()
            old = [n for n, _size, mtime in objects
                   if n.startswith(TAKEN_NOTE) and now - mtime > NOTE_KEEP_S]
        else:
            old = [p.name for p in self.dir.glob(f"{TAKEN_NOTE}*")
                   if now - p.stat().st_mtime > NOTE_KEEP_S]
        for n in old:
            (self.dir / n).unlink(missing_ok=True)

    def _taken_by(self) -> tuple[dict[str, Any], str] | None:
        """The note a writer that took this one's lock over left (and removed here): the
        taker's lock body and its reason; None if there is none."""
        name = self._note_name(self._token)
        assert name is not None
        path = self.dir / name
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, HoodlineError):
            note = None
        with contextlib.suppress(OSError, HoodlineError):
            path.unlink(missing_ok=True)
        if not isinstance(note, dict) or not isinstance(note.get("by"), dict):
            return None
        return note["by"], str(note.get("reason") or "")

    def _lost_message(self, holder: dict[str, Any] | None) -> str:
        """What a writer that lost its lock is told: who took it (from the taker's note, else
        the lock's present holder) and why. Callers add what they stopped."""
        base = f"writer '{self.owner}' lost the lock on table '{self.table.base_path}'"
        taken = self._taken_by()
        if taken is not None:
            taker, reason = taken
            current = holder is not None and holder.get("token") == taker.get("token")
            since = "" if current else ", and has released it since"
            why = f" ({reason})" if reason else ""
            return f"{base}: writer {self._who(taker)} took it over{why}{since}"
        if holder is not None:
            return f"{base}: it is now held by writer {self._who(holder)}"
        return (f"{base}: another writer took it over (its heartbeat had expired) and has "
                "released it since")

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
