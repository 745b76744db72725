"""The asyncio face's own connections to a server, with no greenlet and no SQLAlchemy
pool on the path: for an engine joblocks made from a URL (``model.owns_engine``) on
PostgreSQL (psycopg's ``AsyncConnection``) or MariaDB/MySQL (aiomysql).

- :class:`Link`: how to open one (the engine's dialect reads the URL, the engine's
  ``connect_args`` are added: every URL spelling and query parameter works as through
  the engine) and the set-up joblocks runs on every new connection of an engine it
  made (``_sql.tables``): autocommit; on PostgreSQL one query for the backend's pid
  (no named prepared statements through a pooler) and the default isolation (a read
  committed transaction around each statement on a server whose default is stricter).
- the pool of these connections, one per model and event loop: ``_async.pool``.
- :func:`send`: one prepared statement awaited on the driver itself; its driver errors
  normalized as ``_db.execute`` normalizes them (``_sql.dialects.Profile.failed``).
- :func:`bounded_at`: the asyncio back-stop of a call the watchdog abandoned
  (``asyncio.timeout_at`` on Python 3.11+, ``wait_for`` before).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import sys
import time
import weakref
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .._db.deadline import Bound, abandon
from .._db.engines import driver_connect_args
from .._db.execute import pg_rows_came
from .._sql.dialects import profile
from .._sql.statements import Prepared, Result
from .._sql.tables import PG_PROBE_SQL, ReadCommitted, wrapper_for
from .._util import process as _process
from .._util.drivers import dbapi_error, overflow
from .._util.errors import NoReply

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")

#: How a connection sends one statement: ``await execute(driver, sql, params)``.
Execute = Callable[[Any, str, Any], Awaitable["Result"]]

#: The rows of a statement that returns none.
_NO_ROWS: tuple[Any, ...] = ()

_generation = 0  # bumped in a forked child
#: The parent's connections, in a forked child: never used, never closed (closing one
#: would end the parent's session).
_abandoned: list[Any] = []


def _after_fork() -> None:
    global _generation
    _generation += 1


def generation() -> int:
    """How many forks this process is from the one that imported joblocks (a forked
    child's connections are new; its parent's are never used nor closed)."""
    return _generation


def leave_alone(raws: Any) -> None:
    """Keep the parent's connections ``raws`` (in a forked child) referenced for good:
    never used, never closed (closing one would end the parent's session)."""
    _abandoned.extend(raws)


_process.on_fork(_after_fork)


class Raw:
    """One connection of the asyncio driver and what joblocks knows of it."""

    __slots__ = (
        "__weakref__",
        "born",
        "born_in",
        "cursor",
        "driver",
        "execute",
        "gone",
        "idle_since",
        "lost",
        "wrapper",
    )

    def __init__(self, driver: Any, cursor: Any, execute: Execute) -> None:
        self.driver = driver
        #: The driver's cursor every statement is sent on (one per connection: a
        #: connection runs one operation at a time).
        self.cursor = cursor
        #: ``await execute(cursor, sql, params)``: one statement, its result.
        self.execute = execute
        #: The read committed transaction each statement runs in (None: none needed).
        self.wrapper: ReadCommitted | None = None
        self.born = time.monotonic()
        self.born_in = _generation  # the process (a forked child's connections are new)
        self.idle_since = self.born
        #: Never to be used again (lost, or cut off mid-statement): closed on return.
        self.lost = False
        #: Lost to a disconnect error: the server may have gone away, so every
        #: connection of the pool made before now is suspect too.
        self.gone = False
        # A connection dropped without being closed (its model never disposed, its
        # loop closed without ``shutdown_asyncgens``) ends its session when it is
        # collected, as a pooled connection of SQLAlchemy's does, instead of leaving
        # it to the driver's own ``__del__`` (a ``ResourceWarning``).
        weakref.finalize(self, _collected, driver, _generation)


def usable(engine: AsyncEngine) -> bool:
    """Whether the model on ``engine`` (one joblocks made) sends its statements on
    connections of :class:`Link`: psycopg and aiomysql."""
    dialect = engine.sync_engine.dialect
    return bool(dialect.is_async) and dialect.driver in ("psycopg", "aiomysql")


class Link:
    """How to open, check and close the asyncio driver's connections of one engine
    joblocks made (see the module docstring)."""

    def __init__(self, engine: AsyncEngine, timeout_ms: int) -> None:
        sync_engine = engine.sync_engine
        self.dialect = sync_engine.dialect
        self.error: Any = dbapi_error(self.dialect)
        self.postgres = self.dialect.name == "postgresql"
        self.profile = profile(self.dialect)
        self.timeout_s = timeout_ms / 1000
        cargs, cparams = driver_connect_args(engine)
        if self.postgres:
            module = importlib.import_module("psycopg")
            creator = cparams.pop("async_creator_fn", module.AsyncConnection.connect)
            # ``?prepare_threshold=`` in the URL decides; otherwise the probe does.
            self.chosen = "prepare_threshold" in sync_engine.url.query
        else:
            module = importlib.import_module("aiomysql")
            creator = cparams.pop("async_creator_fn", module.connect)
            self.chosen = False
            self.cursor_class = _quiet_cursor(module)
        cparams["autocommit"] = True  # the engine's isolation_level="AUTOCOMMIT"
        self._creator = creator
        self._cargs = cargs
        self._cparams = cparams
        pool: Any = sync_engine.pool
        limits = overflow(pool)
        #: The most connections open at once (the engine's pool's size and overflow).
        self.limit: int | None = None if limits is None else pool.size() + limits[0]

    async def connect(self) -> Raw:
        """A new connection, set up; a driver error normalized as a statement's is
        (``Profile.failed``). Bounded by the model's ``timeout``."""
        try:
            driver = await self._creator(*self._cargs, **self._cparams)
        except self.error as exc:
            lost = bool(self.dialect.is_disconnect(exc, None, None))
            raise self.profile.failed(exc, lost) from exc
        if not self.postgres:
            try:
                cursor = await driver.cursor(self.cursor_class)
            except BaseException:
                close_now(Raw(driver, None, _my_sent))
                raise
            return Raw(driver, cursor, _my_sent)
        raw = Raw(driver, driver.cursor(), _pg_sent)
        try:
            rows = (await self._bounded(raw, PG_PROBE_SQL, None)).rows
        except BaseException:
            close_now(raw)
            raise
        pid, level = rows[0]
        if not self.chosen and pid != driver.info.backend_pid:
            # A pooler between: no named server-side prepared statements.
            driver.prepare_threshold = None
        wrapper = raw.wrapper = wrapper_for(str(level))
        if wrapper is not None:
            raw.execute = functools.partial(_pg_in_read_committed, wrapper=wrapper)
        return raw

    async def _bounded(self, raw: Raw, sql: str, params: Any) -> Result:
        at = time.monotonic() + self.timeout_s
        bound = Bound(at, raw.driver)
        try:
            result = await send_sql(self, raw, sql, params)
        except BaseException as exc:
            if bound.end():
                raw.lost = True
                raise NoReply(self.timeout_s * 1000) from exc
            raise
        if bound.end():
            raw.lost = True
            raise NoReply(self.timeout_s * 1000)
        return result

    async def alive(self, raw: Raw) -> bool:
        """Whether ``raw``, idle for a while, still answers (a server may have
        restarted meanwhile)."""
        try:
            if self.postgres:
                await self._bounded(raw, "SELECT 1", None)
            else:
                await _bounded_at(raw.driver.ping(reconnect=False), self.timeout_s)
        except Exception:
            raw.lost = True
            return False
        return True

    def failure(self, raw: Raw, sql: str, params: Any, exc: BaseException) -> BaseException | None:
        """What a statement's error ``exc`` comes out as (as ``_db.execute._failure``):
        a driver error normalized (``Profile.failed``), a lost connection never used
        again; None for any other error, raised as it is, its connection never used
        again either (cut off mid-statement: its protocol state is unknown)."""
        if not isinstance(exc, self.error):
            raw.lost = True
            return None
        lost = bool(self.dialect.is_disconnect(exc, raw.driver, None))
        if lost:
            raw.lost = raw.gone = True
        return self.profile.failed(exc, lost)


async def send(link: Link, raw: Raw, prepared: Prepared, values: Any) -> Result:
    """One prepared statement on ``raw``, awaited on the driver itself (no greenlet, no
    adapter); the driver's error wrapped as ``_db.execute`` wraps it, a lost or
    interrupted connection marked never to be used again (``raw.lost``)."""
    pick = prepared._pick  # prepared.params(values), inlined
    params = dict(values) if pick is None else pick(values)
    return await send_sql(link, raw, prepared.sql, params)


async def send_sql(link: Link, raw: Raw, sql: str, params: Any) -> Result:
    """:func:`send` of a driver SQL string and its parameters."""
    try:
        return await raw.execute(raw.cursor, sql, params)
    except BaseException as exc:
        failure = link.failure(raw, sql, params, exc)
        if failure is None:
            raise
        raise failure from exc


async def _pg_sent(cursor: Any, sql: str, params: Any) -> Result:
    await cursor.execute(sql, params)
    rows = await cursor.fetchall() if pg_rows_came(cursor) else _NO_ROWS
    return Result(rows, cursor.rowcount, None)


async def _pg_in_read_committed(
    cursor: Any, sql: str, params: Any, wrapper: ReadCommitted
) -> Result:
    """One statement in a read committed transaction of its own (a server whose default
    isolation is stricter, see ``_sql.tables.read_committed_wrapper``)."""
    await cursor.execute(wrapper.begin)
    try:
        await cursor.execute(sql, params)
        rows = await cursor.fetchall() if pg_rows_came(cursor) else _NO_ROWS
        outcome = Result(rows, cursor.rowcount, None)
        await cursor.execute(wrapper.commit)
    except Exception:
        with contextlib.suppress(Exception):
            await cursor.execute(wrapper.rollback)
        raise
    return outcome


def _quiet_cursor(aiomysql: Any) -> Any:
    """aiomysql's cursor without its warnings: after a statement the server reported
    warnings for (``CREATE TABLE IF NOT EXISTS`` of a table that exists), aiomysql asks
    for them (a round trip) and sends each to ``warnings.warn``; SQLAlchemy's adapter
    silences them the same way."""

    class QuietCursor(aiomysql.Cursor):  # type: ignore[misc]
        async def _show_warnings(self, conn: Any) -> None:
            pass

    return QuietCursor


async def _my_sent(cursor: Any, sql: str, params: Any) -> Result:
    await cursor.execute(sql, params)
    rows = await cursor.fetchall() if cursor.description else _NO_ROWS
    return Result(rows, cursor.rowcount, cursor.lastrowid)


if sys.version_info >= (3, 11):

    async def _bounded_at(awaitable: Awaitable[T], seconds: float) -> T:
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python < 3.11

    async def _bounded_at(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)


def bounded_at(awaitable: Awaitable[T], seconds: float) -> Awaitable[T]:
    """``awaitable``, cancelled after ``seconds`` (``TimeoutError``): the back-stop of a
    call the watchdog abandoned that does not end by itself (``asyncio.timeout`` on
    Python 3.11+, no task per call; ``asyncio.wait_for`` before)."""
    return _bounded_at(awaitable, seconds)


def close_now(raw: Raw) -> None:
    """End ``raw``'s database session now, without the event loop (which may be
    closed): libpq's ``PQfinish`` on psycopg; aiomysql's transport closed, or when its
    loop is gone its socket shut down (the server ends the session; the socket itself
    is closed with its transport)."""
    raw.lost = True
    _end(raw.driver)


def _end(driver: Any) -> None:
    try:
        if hasattr(driver, "pgconn"):
            driver.pgconn.finish()
        else:
            driver.close()
    except Exception:
        # aiomysql's loop is closed: the server ends the session when the socket is
        # shut down; the socket is closed with its transport.
        abandon(driver)
        _drop_transport(driver)


def _drop_transport(driver: Any) -> None:
    """aiomysql's connection whose event loop is closed: its transport can no longer be
    closed by the loop, so its socket is closed here (asyncio would warn of an unclosed
    transport when it is collected)."""
    writer, driver._writer, driver._reader = driver._writer, None, None
    transport: Any = getattr(writer, "transport", None)
    sock = getattr(transport, "_sock", None)
    if sock is not None:
        with contextlib.suppress(Exception):
            sock.close()
        transport._sock = None


def _collected(driver: Any, born_in: int) -> None:
    """A :class:`Raw` was collected: end its session unless it is closed already or a
    parent's (in a forked child, never closed)."""
    if born_in != _generation or getattr(driver, "closed", False):
        return
    with contextlib.suppress(Exception):
        _end(driver)
