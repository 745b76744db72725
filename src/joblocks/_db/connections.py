"""Connections an engine of joblocks's own keeps between calls (sync face).

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
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy import exc as sa_exc

from .._sql.connect import IDLE_PING_AFTER_S
from .._util import process as _process
from .._util.sqla import overflow

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
