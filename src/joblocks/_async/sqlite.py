"""The asyncio face's one-key operations on a SQLite file of joblocks' own making, run
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
import contextlib
from typing import Any, Callable, TypeVar

from sqlalchemy import URL, event
from sqlalchemy import exc as sa_exc

from .._core import ops as _ops
from .._db import engines as _engines
from .._db.connections import ConnectionCache
from .._db.execute import busy, run
from .._sql.statements import Sent, Statements

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
        except sa_exc.OperationalError as exc:
            if exc.orig is not None and busy(exc.orig) and not conn.invalidated:
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
