"""Connections an engine of joblocks's own keeps between calls (sync face), the rows
read on them as Python values, and the per-user SQLite file.

A lock operation is one or two short statements; checking a connection out of
SQLAlchemy's pool and back in costs as much as the statement on a fast database. A
model whose engine joblocks made itself keeps its idle connections here instead: a
call takes one (a list pop), uses it, and puts it back. There are never more
connections than calls that ran at the same time, nor more than the engine's pool
allows: when every connection the pool allows is checked out, one that is done goes
back to the pool, where a call waiting for one gets it. A connection that sat idle is
pinged before use (a server may have restarted meanwhile); one that failed is
dropped; in a forked child the parent's connections are left untouched and unused.

Idle connections are bounded, so that a process at rest does not hold server slots
other processes need: the cache keeps at most :data:`MAX_IDLE` (1) idle connection for
good; the others that concurrent calls opened are closed once they have been idle for
:data:`IDLE_LINGER_S` (2 s) — by the next call, or by a one-shot timer thread when no
call comes. Closed means closed: the database connection ends (it does not go back to
the engine's pool, which would keep it open).

An engine passed in by the user is never cached: its connections go back to its pool
after every call.

Rows are read as Python values (:class:`JobLock`).

The per-user SQLite file: where it is, and that only its user can touch it.

The default file (``$XDG_STATE_HOME/joblocks/locks.db``) holds the locks of one user's
jobs and the ledger's error texts. Its directory is created ``0700`` and the file
``0600``, whatever the umask; SQLite gives its ``-wal``, ``-shm`` and ``-journal``
files the mode of the database file. A directory or file that is owned by another
user, or writable by group or others, is refused (another user could swap the file
and run the same job beside ours); one of ours that is merely readable by others
(as older versions created them) is tightened to ``0700``/``0600``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc

from .._sql.schema import decode_text
from .._sql.tables import IDLE_PING_AFTER_S
from .._util import process as _process
from .._util.drivers import overflow
from .._util.errors import LockBackendError

#: Idle connections a cache keeps however long they stay unused.
MAX_IDLE = 1
#: Idle connections beyond :data:`MAX_IDLE` are closed after this long unused (seconds).
IDLE_LINGER_S = 2.0

_thread = threading.local()


def never_wait_for_the_pool() -> None:
    """Calls from the current thread fail at once, instead of waiting (up to the pool's
    timeout, 30 s), when every connection the engine's pool allows is in use.

    For the keep-alive thread: a renewal that waited in the pool could not notice its
    lease run out meanwhile, nor serve the other leases; failing at once, it is tried
    again with backoff until the lease runs out (see ``_core.renewal.renewal_retry_s``).
    """
    _thread.no_pool_wait = True


_generation = 0  # bumped in a forked child
_abandoned: list[Any] = []  # the parent's connections, in a child: never used nor closed


def _after_fork() -> None:
    global _generation
    _generation += 1


_process.on_fork(_after_fork)


class ConnectionCache:
    """Idle connections of one engine, reused call after call (thread-safe)."""

    def __init__(self, engine: Engine, *, ping: bool) -> None:
        self._engine = engine
        self._ping = ping
        # Most recently used last: calls take from the end, the oldest age out at 0.
        self._free: list[tuple[Connection, float]] = []
        self._generation = _generation
        self._trim_lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def __len__(self) -> int:
        return len(self._free)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for one call (:meth:`take`, then :meth:`put` or
        :meth:`put_after_error`)."""
        conn = self.take()
        try:
            yield conn
        except BaseException:
            self.put_after_error(conn)
            raise
        self.put(conn)

    def put(self, conn: Connection) -> None:
        """Keep ``conn`` for the next call, or give it back to the pool when it is full.

        While every connection the pool allows is checked out (in use, or idle here),
        a call that found no idle one here may be waiting in the pool: the connection
        goes back to the pool, where that call gets it. Otherwise nobody waits.
        """
        if self._pool_full():
            with contextlib.suppress(Exception):
                conn.close()
            return
        now = time.monotonic()
        self._free.append((conn, now))
        if len(self._free) > MAX_IDLE:
            self._trim(now)

    def put_after_error(self, conn: Connection) -> None:
        """Like :meth:`put`, after the call failed: a connection it invalidated is
        dropped."""
        if conn.invalidated:
            with contextlib.suppress(Exception):
                conn.close()
            return
        self.put(conn)

    def _pool_full(self) -> bool:
        pool: Any = self._engine.pool
        limits = overflow(pool)
        if limits is None:
            return False  # no limit: nobody ever waits
        # The cheap test first: the pool is full only once it opened every overflow
        # connection it may (QueuePool counts them in ``_overflow``).
        max_overflow, opened = limits
        if opened < max_overflow:
            return False
        return bool(pool.checkedout() >= pool.size() + max_overflow)

    def take(self) -> Connection:
        """An idle connection (pinged if it sat idle), or a new one from the pool."""
        conn = self.take_idle()
        if conn is not None:
            return conn
        if getattr(_thread, "no_pool_wait", False) and self._pool_full():
            raise sa_exc.TimeoutError(
                "every connection of the pool is in use (not waited for)"
            ) from None
        return self._engine.connect()

    def take_idle(self) -> Connection | None:
        """An idle connection (pinged if it sat idle), or None when there is none."""
        if self._generation != _generation:
            _abandoned.extend(self._free)
            self._free = []
            # The parent's timer thread does not exist here; its lock may be held.
            self._trim_lock = threading.Lock()
            self._timer = None
            self._generation = _generation
        while True:
            try:
                conn, since = self._free.pop()
            except IndexError:
                return None
            if conn.invalidated or conn.closed:
                continue
            if (
                self._ping
                and time.monotonic() - since > IDLE_PING_AFTER_S
                and not self._alive(conn)
            ):
                continue
            return conn

    def _alive(self, conn: Connection) -> bool:
        dbapi_connection = conn.connection.dbapi_connection
        if dbapi_connection is None:
            return False
        try:
            return bool(self._engine.dialect.do_ping(dbapi_connection))
        except Exception as exc:
            conn.invalidate(exc)
            with contextlib.suppress(Exception):
                conn.close()
            return False

    def _trim(self, now: float) -> None:
        """Close the idle connections beyond :data:`MAX_IDLE` unused for IDLE_LINGER_S;
        while some are younger, have a timer come back for them."""
        with self._trim_lock:
            if self._generation != _generation:
                return
            while len(self._free) > MAX_IDLE:
                try:
                    conn, since = self._free.pop(0)  # the oldest
                except IndexError:
                    break
                if now - since < IDLE_LINGER_S and not (conn.invalidated or conn.closed):
                    self._free.insert(0, (conn, since))
                    break
                _really_close(conn)
            if len(self._free) > MAX_IDLE and self._timer is None:
                oldest = self._free[0][1] if self._free else now
                timer = threading.Timer(max(0.05, oldest + IDLE_LINGER_S - now), self._on_timer)
                timer.daemon = True
                timer.name = "joblocks-idle-trim"
                self._timer = timer
                timer.start()

    def _on_timer(self) -> None:
        with self._trim_lock:
            self._timer = None
        self._trim(time.monotonic())

    def close(self) -> None:
        """Close every idle connection (back to the pool, which the caller may dispose)."""
        free, self._free = self._free, []
        for conn, _since in free:
            with contextlib.suppress(Exception):
                conn.close()
        with self._trim_lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


def _really_close(conn: Connection) -> None:
    """End the database connection itself (the pool does not get it back)."""
    with contextlib.suppress(Exception):
        if not (conn.invalidated or conn.closed):
            conn.detach()
        conn.close()


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def from_ms(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime (exact, no float rounding)."""
    return _EPOCH + timedelta(milliseconds=int(ms))


@dataclass(frozen=True)
class JobLock:
    """One row of the ``job_locks`` table, as read at ``read_at`` (the database's time).

    ``key`` is the lock key (the ``id`` column), ``holder`` the worker that took it,
    ``fence`` the fencing token of its grant. All datetimes are timezone-aware UTC.
    """

    key: str
    holder: str
    acquired_at: datetime
    expires_at: datetime
    fence: int
    read_at: datetime

    @property
    def id(self) -> str:
        """The reference's name for the key (``_id``)."""
        return self.key

    @property
    def expired(self) -> bool:
        """Whether the lease had run out when the row was read (by the database's clock)."""
        return self.expires_at <= self.read_at

    @property
    def remaining(self) -> timedelta:
        """Time left on the lease when the row was read (zero once expired)."""
        return max(self.expires_at - self.read_at, timedelta(0))

    @classmethod
    def from_row(cls, row: Any) -> JobLock:
        key, holder, acquired, expires, fence, now = row
        return cls(
            key=decode_text(key),
            holder=decode_text(holder),
            acquired_at=from_ms(acquired),
            expires_at=from_ms(expires),
            fence=int(fence),
            read_at=from_ms(now),
        )


__all__ = ["default_sqlite_path", "prepare_default_file"]

#: The files SQLite keeps beside a database file.
SIDE_FILES = ("-wal", "-shm", "-journal")


def default_sqlite_path() -> Path:
    """The per-user SQLite file used when nothing is configured.

    ``$XDG_STATE_HOME/joblocks/locks.db`` (``~/.local/state/joblocks/locks.db`` when it
    is unset, empty or a relative path, which the XDG base directory specification says
    to ignore) on Linux and macOS; ``%LOCALAPPDATA%\\joblocks\\locks.db`` on Windows.
    Always an absolute path.
    """
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or ""
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return (base / "joblocks" / "locks.db").absolute()


def _refuse(path: Path, problem: str, fix: str) -> LockBackendError:
    return LockBackendError("open the per-user lock file", str(path), f"{problem}; {fix}")


def _check_owned(path: Path, info: os.stat_result, what: str, private_mode: int) -> None:
    """Refuse ``path`` unless this user owns it and only this user may write it;
    drop the group's and others' read bits of one of ours."""
    euid = os.geteuid()
    if info.st_uid != euid:
        raise _refuse(
            path,
            f"the {what} is owned by uid {info.st_uid}, not by this user (uid {euid})",
            "another user could swap the lock file: use a directory of your own "
            "(XDG_STATE_HOME, or --url/JOBLOCKS_URL)",
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        who = {0o022: "its group and others", 0o020: "its group", 0o002: "others"}
        raise _refuse(
            path,
            f"the {what} is writable by {who[mode & 0o022]} (mode {mode:04o})",
            "another user could swap the lock file: check it, then "
            f"`chmod {private_mode:o} {path}`",
        )
    if mode & 0o077:
        os.chmod(path, mode & 0o700)


def prepare_default_file(path: Path) -> None:
    """Create the default file's directory (``0700``) and the file (``0600``) when they
    do not exist, and refuse them (a :class:`~joblocks.LockBackendError` naming the
    path and the problem) when another user owns them or may write them."""
    if sys.platform == "win32" or not hasattr(os, "geteuid"):
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    directory = path.parent
    if not directory.exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(directory, 0o700)  # mkdir's mode is reduced by the umask only
    _check_owned(directory, os.stat(directory), "directory", 0o700)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    for name in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
        try:
            info = os.stat(name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(name, "it is not a regular file", "remove it")
        _check_owned(name, info, "file", 0o600)
