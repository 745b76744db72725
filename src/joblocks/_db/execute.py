"""How one prepared statement reaches the driver: :func:`execute` (binds the
parameters and sends the compiled string on the driver's cursor; a driver's error
comes out normalized, ``_util.drivers.StatementFailed``), in a read committed
transaction of its own where the connection's default isolation is stricter; and
:func:`in_place` (the asyncio face on SQLite: one key's operation sent on the event
loop's thread, a statement that meets another writer sent again on aiosqlite's thread
to wait). On psycopg's ``AsyncConnection`` a statement is awaited on the driver
directly (:func:`_awaited`), past SQLAlchemy's adapter.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from .._sql.dialects import profile
from .._sql.statements import Prepared, Result, Sent, Statements
from .._sql.tables import ISOLATION_INFO, ReadCommitted, read_committed_wrapper
from .._util.drivers import (
    awaited,
    awaits_psycopg,
    dbapi_error,
    driver_connection,
    hands_off_per_statement,
    invalidate_pool,
    on_driver_thread,
)

T = TypeVar("T")


def run(conn: Connection, sent: Sent[T]) -> T:
    """Send the statements of the operation ``sent`` (a generator of ``_core.ops``) on
    ``conn``, one after the other, each with :func:`execute`: its result is sent back
    in, its error thrown in at the ``yield``; the operation's return value.

    Written once for every face's path that sends statements on a SQLAlchemy
    connection; a one-statement operation costs one generator and one tuple more
    than the statement itself."""
    try:
        stmt, values = next(sent)  # ``next``: cheaper than ``send(None)``
        while True:
            try:
                result = execute(conn, stmt, values)
            except BaseException as exc:
                stmt, values = sent.throw(exc)
            else:
                stmt, values = sent.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def connected(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn(conn, statements, *args)``, a function that sends statements through
    SQLAlchemy on a connection (the ledger's writes, the history's reads), with its
    driver errors normalized as :func:`execute` normalizes a statement's
    (``_util.drivers.StatementFailed``)."""

    @functools.wraps(fn)
    def call(conn: Connection, st: Statements, *args: Any) -> T:
        try:
            return fn(conn, st, *args)
        except sa_exc.DBAPIError as exc:
            orig = exc.orig
            if not isinstance(orig, Exception):
                raise
            lost = exc.connection_invalidated
            raise profile(conn.dialect).failed(orig, lost) from exc

    return call


def execute(conn: Connection, stmt: Prepared, values: Mapping[str, Any]) -> Result:
    """Send one prepared statement on the connection's driver connection.

    The thinnest path SQLAlchemy allows: no compilation, no result wrapping, no
    SQLAlchemy-level transaction (the connection is in autocommit mode; on a
    PostgreSQL connection whose default isolation is not read committed, the
    statement gets a read committed transaction of its own). A driver's error comes
    out normalized (``_util.drivers.StatementFailed``: ``DuplicateKey``,
    ``Transient``, or the class itself), and a lost connection is invalidated so the
    pool replaces it.

    What a connection needs is decided by its first statement and kept in its pool
    record's ``info`` for the life of its driver connection: a connection that needs
    nothing around its statements (no read committed wrapper, not awaited on psycopg,
    not aiosqlite's) keeps its :class:`Direct` under :data:`_DIRECT`, and each later
    statement is one dictionary lookup away from the driver's cursor.
    """
    fairy = conn.connection
    info = fairy.info
    direct: Direct | None = info.get(_DIRECT)
    if direct is None:
        return _planned(conn, fairy, stmt, values)
    pick = stmt._pick  # stmt.params(values), inlined
    params = dict(values) if pick is None else pick(values)
    try:
        return direct.send(direct.cursor, stmt.sql, params)
    except BaseException as exc:
        # The kept cursor is not used again after an error: the next statement
        # decides afresh (with a new cursor) unless the connection is gone.
        info.pop(_DIRECT, None)
        with contextlib.suppress(Exception):
            direct.cursor.close()
        failure = _failure(conn, direct.connection, direct.cursor, stmt.sql, params, exc)
        if failure is None:
            raise
        raise failure from exc


class Direct:
    """A connection whose statements need nothing around them (see :func:`execute`):
    its driver connection, the cursor kept for its statements (one cursor for the life
    of the connection: psycopg's costs microseconds to make and close), and how a
    statement is sent on it (:func:`_sent`, or :func:`_sent_pg` on psycopg)."""

    __slots__ = ("connection", "cursor", "send")

    def __init__(self, connection: Any, cursor: Any, send: Callable[[Any, str, Any], Result]):
        self.connection = connection
        self.cursor = cursor
        self.send = send


def _planned(conn: Connection, fairy: Any, stmt: Prepared, values: Mapping[str, Any]) -> Result:
    """:func:`execute` on a connection not known to need nothing around its statements
    (its first statement, a read committed wrapper, awaited on psycopg, in place on
    aiosqlite); decides, on the first statement, whether it is :data:`_DIRECT`."""
    info = fairy.info
    in_place_ = info.get(_IN_PLACE)
    dbapi_connection = fairy.dbapi_connection if in_place_ is None else in_place_[0]
    assert dbapi_connection is not None  # noqa: S101 - checked out by the caller
    params = stmt.params(values)
    cursor: Any = None
    try:
        if info.get(_AWAITED):
            return awaited(_awaited(dbapi_connection.driver_connection, stmt.sql, params))
        cursor = dbapi_connection.cursor()
        wrapper = info.get(ISOLATION_INFO, False)
        if wrapper is False:
            wrapper = info[ISOLATION_INFO] = read_committed_wrapper(conn.dialect, cursor)
        if wrapper is not None:
            return _in_read_committed(cursor, wrapper, stmt.sql, params)
        if in_place_ is not None:
            return _sent_in_place(cursor, in_place_[1], stmt.sql, params)
        if _AWAITED not in info:
            # Known now: no read committed wrapper on this connection; from the next
            # statement on, psycopg's AsyncConnection is awaited directly, and any
            # other driver's cursor is used directly (aiosqlite's connection is left
            # to this path: ``in_place`` changes where its statements go).
            awaits = info[_AWAITED] = awaits_psycopg(conn.dialect)
            if not awaits and not hands_off_per_statement(conn.dialect):
                send = _sent_pg if hasattr(cursor, "pgresult") else _sent
                info[_DIRECT] = Direct(dbapi_connection, cursor, send)
                cursor = None  # kept by the Direct, which sends this statement too
                return execute(conn, stmt, values)
        return _sent(cursor, stmt.sql, params)
    except BaseException as exc:
        failure = _failure(conn, dbapi_connection, cursor, stmt.sql, params, exc)
        if failure is None:
            raise
        raise failure from exc
    finally:
        if cursor is not None:
            with contextlib.suppress(Exception):
                cursor.close()


def _failure(
    conn: Connection,
    dbapi_connection: Any,
    cursor: Any,
    sql: str,
    params: Any,
    exc: BaseException,
) -> BaseException | None:
    """What a statement's error ``exc`` comes out as: a driver's error normalized
    (``Profile.failed``; a lost connection invalidated, and every connection of its
    pool made before now); None for any other error, raised as it is. Interrupted
    mid-statement (KeyboardInterrupt, cancellation), the connection's protocol state is
    unknown, so it is never used again."""
    if not isinstance(exc, Exception):
        conn.invalidate()
        return None
    dialect = conn.dialect
    if not isinstance(exc, dbapi_error(dialect)):
        return None
    lost = dialect.is_disconnect(exc, dbapi_connection, cursor)
    if lost:
        # As SQLAlchemy does: every connection of the pool made before now is
        # suspect (the server went away), so all are replaced on their next use.
        invalidate_pool(conn, exc)
        conn.invalidate(exc)
    return profile(dialect).failed(exc, lost)


async def _awaited(driver: Any, sql: str, params: Any) -> Result:
    """One statement on psycopg's ``AsyncConnection`` ``driver`` itself, awaited from the
    greenlet in one switch to the loop (SQLAlchemy's adapter makes a cursor of its own
    around psycopg's, and copies the rows)."""
    cursor = driver.cursor()
    try:
        await cursor.execute(sql, params)
        rows = await cursor.fetchall() if pg_rows_came(cursor) else _NO_ROWS
        return Result(rows, cursor.rowcount, None)
    finally:
        await cursor.close()


def _sent(cursor: Any, sql: str, params: Any) -> Result:
    cursor.execute(sql, params)
    rows = cursor.fetchall() if cursor.description else _NO_ROWS
    return Result(rows, cursor.rowcount, getattr(cursor, "lastrowid", None))


def _sent_pg(cursor: Any, sql: str, params: Any) -> Result:
    """:func:`_sent` on psycopg's cursor (:func:`pg_rows_came`)."""
    cursor.execute(sql, params)
    return Result(cursor.fetchall() if pg_rows_came(cursor) else _NO_ROWS, cursor.rowcount, None)


def pg_rows_came(cursor: Any) -> bool:
    """Whether the statement just run on psycopg's ``cursor`` (sync or async) returned
    rows: read off its result's status, not ``description`` (which builds a column
    object per column each time)."""
    result = cursor.pgresult
    return result is not None and bool(result.status == _PGRES_TUPLES_OK)


def _sent_in_place(
    cursor: Any, wait: Callable[[Callable[[Any], Result]], Result], sql: str, params: Any
) -> Result:
    """One statement under :func:`in_place`: at once, or, when another writer has the
    database (SQLite's "database is locked" without waiting), again on the driver's
    thread, waiting for that writer as long as the connection's busy timeout allows."""
    try:
        return _sent(cursor, sql, params)
    except Exception as exc:
        if not busy(exc):
            raise

    def again(driver_connection: Any) -> Result:
        retry = driver_connection.cursor()
        try:
            return _sent(retry, sql, params)
        finally:
            retry.close()

    return wait(again)


def busy(exc: BaseException) -> bool:
    """SQLite's SQLITE_BUSY (another connection holds the write lock), any variant."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # Python < 3.11
        return "database is locked" in str(exc)
    return bool(code & 0xFF == _SQLITE_BUSY)


_SQLITE_BUSY = 5
#: libpq's ``PGRES_TUPLES_OK`` (``psycopg.pq.ExecStatus.TUPLES_OK``): rows came back.
_PGRES_TUPLES_OK = 2
#: The busy timeout (ms) of an aiosqlite connection, kept in its pool record's info
#: (-1: the connection cannot be used from the event loop's thread).
_BUSY_INFO = "joblocks_busy_timeout_ms"


def in_place(conn: Connection, st: Statements, fn: Callable[..., Sent[T]], args: Any) -> T:
    """The operation ``fn(st, *args)`` (one of ``_ops.IN_PLACE``) on the asyncio face over
    aiosqlite, from a ``greenlet_spawn``: each statement is sent on the ``sqlite3``
    connection behind aiosqlite right here, on the event loop's thread, without
    waiting for another writer (busy timeout 0); one that meets another writer is sent
    again on aiosqlite's thread, which waits for it with the connection's busy timeout
    (the model's ``timeout``) while the loop runs on.

    aiosqlite hands every call (cursor, execute, fetch, close) to its thread and back;
    an uncontended SQLite statement takes microseconds, a hand-off far longer on a
    busy machine. A statement that fails with SQLITE_BUSY has changed nothing, so it
    is safe to send again.
    """
    fairy = conn.connection
    adapted = fairy.dbapi_connection
    raw = driver_connection(adapted)
    info = fairy.info
    busy_ms = info.get(_BUSY_INFO)
    if busy_ms is None:
        try:
            busy_ms = int(raw.execute("PRAGMA busy_timeout").fetchone()[0])
        except dbapi_error(conn.dialect):
            # E.g. ``check_same_thread=True`` in the engine's connect_args: only
            # aiosqlite's thread may use this connection; so be it, through aiosqlite.
            busy_ms = -1
        info[_BUSY_INFO] = busy_ms
    if busy_ms < 0:
        return run(conn, fn(st, *args))

    def waiting(run: Callable[[Any], T]) -> T:
        def on_thread(driver_connection: Any) -> T:
            driver_connection.execute(f"PRAGMA busy_timeout = {busy_ms}")
            try:
                return run(driver_connection)
            finally:
                driver_connection.execute("PRAGMA busy_timeout = 0")

        return on_driver_thread(adapted, on_thread)

    raw.execute("PRAGMA busy_timeout = 0")
    info[_IN_PLACE] = (raw, waiting)
    try:
        result = run(conn, fn(st, *args))
    except Exception:
        info.pop(_IN_PLACE, None)
        if not conn.invalidated:
            raw.execute(f"PRAGMA busy_timeout = {busy_ms}")
        raise
    except BaseException:
        # Cancelled while aiosqlite's thread may still be running a statement on it.
        info.pop(_IN_PLACE, None)
        if not conn.invalidated:
            conn.invalidate()
        raise
    del info[_IN_PLACE]
    raw.execute(f"PRAGMA busy_timeout = {busy_ms}")
    return result


def _in_read_committed(cursor: Any, wrapper: ReadCommitted, sql: str, params: Any) -> Result:
    """Run one statement in a read committed transaction of its own (a connection whose
    default isolation is stricter, see ``_connect.read_committed_wrapper``)."""
    cursor.execute(wrapper.begin)
    try:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else _NO_ROWS
        result = Result(rows, cursor.rowcount, getattr(cursor, "lastrowid", None))
        cursor.execute(wrapper.commit)
    except Exception:
        with contextlib.suppress(Exception):
            cursor.execute(wrapper.rollback)
        raise
    return result


#: Key, in the pool record's ``info`` of a connection :func:`in_place` runs an
#: operation on (and only meanwhile), of ``(driver connection, wait)``: the driver's
#: own connection the statements go to, and how one that met another writer waits.
#: Kept with the connection (checked out by that operation alone), not with the
#: thread: while one operation waits, others run on the same event loop's thread.
_IN_PLACE = "joblocks_in_place"
#: Key in a pool record's ``info`` (for the life of its driver connection): whether its
#: statements are awaited on psycopg's ``AsyncConnection`` directly (:func:`_awaited`).
#: Set by the connection's first statement, once its read committed wrapper is known
#: (a connection that needs one keeps SQLAlchemy's adapter).
_AWAITED = "joblocks_awaited"
#: Key in a pool record's ``info`` (for the life of its driver connection): its
#: :class:`Direct`, once its first statement found that its statements need nothing
#: around them (:func:`execute` then sends each on the kept cursor directly).
_DIRECT = "joblocks_direct"
#: The rows of a statement that returns none.
_NO_ROWS: tuple[Any, ...] = ()
