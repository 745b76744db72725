"""The asyncio face's own connections: on a server, those of one model on one event
loop (:class:`RawPool`),
for an engine joblocks made on a server (``_async.raw`` opens them and sends the
statements): never more than the engine's pool allows; one idle connection kept for
good, the others closed after ``IDLE_LINGER_S`` (as the sync face's
``_db.connections.ConnectionCache``); one that sat idle longer than
``IDLE_PING_AFTER_S`` pinged before use; one whose statement failed with a lost
connection, or that was cut off mid-statement (a cancellation, the deadline), never
used again; closed with its event loop, and left alone in a forked child.

On a SQLite file of joblocks' own making, the asyncio face's one-key operations run
on the event loop's thread through Python's ``sqlite3`` itself.

An uncontended SQLite statement takes a few microseconds; aiosqlite hands every call
(cursor, execute, fetch, close) to a thread of its own and back, and SQLAlchemy's async
pool adds a greenlet and a check-out per call, together several times the statement.
So an asyncio model made from a SQLite URL also keeps a *sync* engine on the same file
(``sqlite+pysqlite``, made by ``_engines.create`` with the same time-out and connect
hooks) with the sync face's :class:`~joblocks._db.connections.ConnectionCache`, and runs
the one-key operations of :data:`RERUN_SAFE` right on the loop's thread, the very
``_core.ops`` functions the sync face runs: no greenlet, no hand-off, no pool check-out.

The loop must never wait for another writer, so these connections rest with a busy
timeout of 0: a statement that meets another writer fails at once with
``SQLITE_BUSY``, having changed nothing. The whole operation is then sent again on a
worker thread (``run_in_executor``) whose connection waits for that writer with the
busy timeout the engine was made with (the model's ``timeout``), while the loop runs
on. Sending the whole operation again is safe for the operations of
:data:`RERUN_SAFE`: in each, a statement after the first runs only when the ones
before it changed nothing (``acquire``'s ``update_insert``/``portable`` paths insert
only when the ``UPDATE`` found nothing to take; ``release_lease`` deletes only when
its hold ``UPDATE`` matched nothing; the others are one statement or reads), so an
operation that met ``SQLITE_BUSY`` anywhere changed nothing at all.

The model's other work (first use, ``list``, ``count``, ``prune``, ``insert``,
``update``) runs on a worker thread the same way, with the busy timeout: such a model
opens no aiosqlite connection for its lock work (``model.engine`` stays for the
caller's own statements).

``sqlite3`` connections need no event loop to close: a model dropped without ``await
model.dispose()``, or used from several loops one after the other, leaves nothing
behind (``weakref.finalize`` closes them).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any, Callable, TypeVar

from sqlalchemy import URL, event
from sqlalchemy import exc as sa_exc

from .._core import ops as _ops
from .._db import engines as _engines
from .._db.connections import IDLE_LINGER_S, MAX_IDLE, ConnectionCache
from .._db.execute import busy, run
from .._sql.statements import Sent, Statements
from .._sql.tables import IDLE_PING_AFTER_S
from .._util.drivers import StatementFailed
from .raw import Link, Raw, close_now, generation, leave_alone


def forget(raw: Raw) -> None:
    """Close ``raw``, of a pool gone by (another loop's); in a forked child, leave the
    parent's connection alone."""
    if raw.born_in != generation():
        leave_alone((raw,))
        return
    close_now(raw)


class RawPool:
    """The asyncio driver's connections of one model on one event loop (see the module
    docstring). Not thread-safe: used from its loop's thread only."""

    def __init__(self, link: Link, loop: asyncio.AbstractEventLoop) -> None:
        self.link = link
        self.loop = loop
        # Most recently used last: calls take from the end, the oldest age out at 0.
        self._idle: list[Raw] = []
        #: Connections open or being opened (idle, in use, kept for renewals).
        self.open = 0
        self._waiters: collections.deque[asyncio.Future[Raw | None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._generation = generation()
        #: Connections made before this (monotonic) are suspect: a lost connection
        #: was found (the server went away), so they are not reused.
        self._stale_before = 0.0
        self._watch: AsyncGenerator[None, None] | None = None

    def __len__(self) -> int:
        return len(self._idle)

    @property
    def closed(self) -> bool:
        """Closed by :meth:`close` (or made in a parent process before a fork)."""
        return self._closed or self._generation != generation()

    def idle_now(self) -> Raw | None:
        """The idle connection used last when it needs no ping (no coroutine, no
        await); None otherwise (then :meth:`take`)."""
        idle = self._idle
        if idle and self._watch is not None and self._generation == generation():
            raw = idle[-1]
            if (
                not raw.lost
                and raw.born >= self._stale_before
                and raw.idle_since + IDLE_PING_AFTER_S >= time.monotonic()
            ):
                return idle.pop()
        return None

    async def take(self) -> Raw:
        """An idle connection (pinged if it sat idle), or a new one; when the pool's
        limit is reached, the next one given back (waited for no longer than the
        model's ``timeout``; then ``sqlalchemy.exc.TimeoutError``)."""
        if self._generation != generation():
            self._forked()
        if self._watch is None:
            # Closed with the loop: ``asyncio.run`` (``loop.shutdown_asyncgens()``)
            # closes this generator while the loop still runs.
            self._watch = _closed_with_the_loop(self)
            await self._watch.__anext__()
        idle = self._idle
        while idle:
            raw = idle.pop()
            if raw.lost or raw.born < self._stale_before:
                self._drop(raw)
                continue
            if raw.idle_since + IDLE_PING_AFTER_S < time.monotonic() and not (
                await self.link.alive(raw)
            ):
                self._drop(raw)
                continue
            return raw
        limit = self.link.limit
        if limit is None or self.open < limit:
            return await self._opened()
        return await self._waited()

    async def _opened(self) -> Raw:
        self.open += 1
        try:
            return await self.link.connect()
        except BaseException:
            self.open -= 1
            self._wake()
            raise

    async def _waited(self) -> Raw:
        """The next connection given back (or a slot freed: then a new connection)."""
        fut: asyncio.Future[Raw | None] = self.loop.create_future()
        self._waiters.append(fut)
        timer = self.loop.call_later(self.link.timeout_s, _expire, fut)
        try:
            got = await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                given = fut.result()
                if given is None:
                    self._wake()
                else:
                    self.put(given)
            raise
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(fut)
        if got is None:
            return await self._opened()
        return got

    def _wake(self) -> None:
        """A slot is free (a connection was closed): the first waiter opens one."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def put(self, raw: Raw) -> None:
        """Give ``raw`` back: to a call waiting for one, else idle; closed when it is
        not to be used again."""
        if raw.gone:
            self.stale()
        if raw.lost or self.closed or raw.born < self._stale_before:
            self._drop(raw)
            return
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(raw)
                return
        now = time.monotonic()
        raw.idle_since = now
        self._idle.append(raw)
        if len(self._idle) > MAX_IDLE and self._timer is None:
            self._timer = self.loop.call_later(IDLE_LINGER_S, self._trim)

    def stale(self) -> None:
        """A connection was lost: every one made before now is not reused."""
        self._stale_before = time.monotonic()

    def _drop(self, raw: Raw) -> None:
        if self._generation != generation():
            leave_alone((raw,))
            return
        close_now(raw)
        self.open -= 1
        self._wake()

    def _trim(self) -> None:
        """Close the idle connections beyond :data:`MAX_IDLE` unused for
        ``IDLE_LINGER_S``; while some are younger, come back for them."""
        self._timer = None
        if self.closed:
            return
        now = time.monotonic()
        idle = self._idle
        while len(idle) > MAX_IDLE and now - idle[0].idle_since >= IDLE_LINGER_S:
            self._drop(idle.pop(0))
        if len(idle) > MAX_IDLE:
            wait = max(0.05, idle[0].idle_since + IDLE_LINGER_S - now)
            self._timer = self.loop.call_later(wait, self._trim)

    def _forked(self) -> None:
        """In a forked child: the parent's connections are left alone."""
        leave_alone(self._idle)
        self._idle = []
        self._waiters.clear()
        self._timer = None
        self._closed = True

    def close(self) -> None:
        """Close every idle connection now; one in use is closed when given back."""
        if self._generation != generation():
            self._forked()
            return
        self._closed = True
        idle, self._idle = self._idle, []
        for raw in idle:
            self._drop(raw)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in self._waiters:
            if not fut.done():
                fut.set_exception(sa_exc.TimeoutError("the model's connections were closed"))
        self._waiters.clear()


async def _closed_with_the_loop(pool: RawPool) -> AsyncGenerator[None, None]:
    """Closes ``pool`` when it is closed: by the event loop's
    ``shutdown_asyncgens()`` (``asyncio.run`` calls it before the loop closes), so that
    the connections end on their own loop, not at garbage collection."""
    try:
        yield
        yield  # never resumed
    finally:
        pool.close()


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(
            sa_exc.TimeoutError(
                "every connection the engine's pool allows is in use (waited for the "
                "model's timeout)"
            )
        )


T = TypeVar("T")

#: Key in a pool record's ``info``: the busy timeout (ms) the connection was made with,
#: which it uses on a worker thread (on the loop's thread it has 0).
_BUSY_MS = "joblocks_loop_busy_ms"

#: The operations sent on the loop's thread: those of ``_ops.IN_PLACE`` that can be sent
#: again whole after ``SQLITE_BUSY`` (see the module docstring). ``insert`` (a read
#: after its write) and ``update`` (up to two writes) go through aiosqlite.
RERUN_SAFE: frozenset[Callable[..., Any]] = frozenset(
    {
        _ops.acquire,
        _ops.acquire_token,  # the plain acquire's: acquire's statements, the token alone
        _ops.release,
        _ops.refresh,
        _ops.refresh_lease,
        _ops.release_lease,
        _ops.is_held,
        _ops.peek,
        _ops.delete,
        _ops.now_ms,
    }
)

#: What :meth:`LoopSQLite.run` gives back when the operation must wait off the loop.
WAIT: Any = object()


def usable(url: URL) -> bool:
    """Whether an asyncio model on ``url`` (a SQLite URL joblocks makes its engine from)
    can run its one-key operations on the loop's thread: not when the URL asks for
    ``check_same_thread`` (a connection only its own thread may use)."""
    return "check_same_thread" not in url.query


class LoopSQLite:
    """A sync engine on the asyncio model's SQLite file and its idle connections."""

    def __init__(self, url: URL, timeout_ms: int) -> None:
        engine: Any = _engines.create(url, asynchronous=False, timeout_ms=timeout_ms)
        event.listen(engine, "connect", _rest_without_waiting)
        self.engine = engine
        self.cache = ConnectionCache(engine, ping=False)

    def run(self, fn: Callable[..., Sent[T]], st: Statements, args: tuple[Any, ...]) -> T:
        """The operation ``fn(st, *args)`` sent on an idle connection, on the calling
        (loop's) thread; :data:`WAIT` when there is no idle connection (a new one is
        opened off the loop) or the database's write lock is another writer's (the
        operation is then made anew and sent whole by :meth:`run_waiting`)."""
        cache = self.cache
        conn = cache.take_idle()
        if conn is None:
            return WAIT  # type: ignore[no-any-return]
        try:
            result = run(conn, fn(st, *args))
        except StatementFailed as exc:
            if busy(exc.orig) and not conn.invalidated:
                cache.put(conn)
                return WAIT  # type: ignore[no-any-return]
            cache.put_after_error(conn)
            raise
        except BaseException:
            cache.put_after_error(conn)
            raise
        cache.put(conn)
        return result

    async def run_waiting(
        self,
        fn: Callable[..., Any],
        st: Statements,
        args: tuple[Any, ...],
        connected: bool = False,
    ) -> Any:
        """The operation ``fn(st, *args)`` (``connected``: the function ``fn(conn, st,
        *args)``) on a worker thread, waiting for another writer up to the busy
        timeout; the loop runs on meanwhile. Cancelling the caller does not stop the
        thread: it finishes the operation and returns its connection."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._waiting, fn, st, args, connected)

    def _waiting(
        self, fn: Callable[..., Any], st: Statements, args: tuple[Any, ...], connected: bool
    ) -> Any:
        cache = self.cache
        conn = cache.take()
        fairy: Any = conn.connection
        raw = fairy.dbapi_connection
        raw.execute(f"PRAGMA busy_timeout = {int(fairy.info[_BUSY_MS])}")
        try:
            result = fn(conn, st, *args) if connected else run(conn, fn(st, *args))
        except BaseException:
            if not conn.invalidated:
                with contextlib.suppress(Exception):
                    raw.execute("PRAGMA busy_timeout = 0")
            cache.put_after_error(conn)
            raise
        raw.execute("PRAGMA busy_timeout = 0")
        cache.put(conn)
        return result

    def close(self) -> None:
        """Close the idle connections and the engine's pool."""
        self.cache.close()
        self.engine.dispose()


def _rest_without_waiting(dbapi_connection: Any, record: Any) -> None:
    """A new connection (after ``_connect.sqlite_pragmas``): keep the busy timeout it
    was made with for the worker thread, and rest with 0."""
    cursor = dbapi_connection.cursor()
    try:
        record.info[_BUSY_MS] = int(cursor.execute("PRAGMA busy_timeout").fetchone()[0])
        cursor.execute("PRAGMA busy_timeout = 0")
    finally:
        cursor.close()
