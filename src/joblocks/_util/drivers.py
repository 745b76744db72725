"""The libraries under joblocks: what a driver's exception says, and the SQLAlchemy
internals joblocks relies on.

A driver's exception says its code (SQLSTATE, MariaDB error number, SQLite
result name) and its kind, as a word that :mod:`joblocks._util.errors` turns into the
:class:`~joblocks.LockBackendError` subclass of that kind.

The SQLAlchemy internals joblocks relies on are each behind one small function.

joblocks runs its statements on the driver's cursor (one round trip, no SQLAlchemy
result machinery) and so does a few things SQLAlchemy does inside itself. Every use of a
name SQLAlchemy does not document lives here, nowhere else; ``tests/test_sqla_seams.py``
checks that the installed SQLAlchemy has each of them and is in the range
``pyproject.toml`` allows, and fails loudly otherwise.

- :func:`invalidate_pool`: ``Pool._invalidate(connection, exc, _checkin=False)``, what
  SQLAlchemy does on a disconnect error (every pooled connection made before it is
  replaced on its next use).
- :func:`dbapi_error`: ``Dialect.loaded_dbapi.Error``, the driver's base exception.
- :func:`checkout_dialect`: ``proxy._pool._dialect``, the dialect of a pool, reached
  from the connection proxy a ``checkout`` event gets.
- :func:`overflow`: ``QueuePool._max_overflow`` and ``._overflow``, how many overflow
  connections the pool may open and has open.
- :func:`greenlet_spawn`: ``sqlalchemy.util.greenlet_spawn``, which runs sync code that
  awaits the asyncio driver (what ``AsyncConnection.run_sync`` uses), in one greenlet.
- :func:`driver_connection` and :func:`on_driver_thread`: the ``sqlite3`` connection
  behind aiosqlite (``aiosqlite.Connection._conn``) and aiosqlite's
  ``Connection._execute`` (what its own methods use to run a call on the connection's
  thread), reached through the adapter SQLAlchemy wraps it in
  (``AsyncAdapt_aiosqlite_connection._connection``); :func:`hands_off_per_statement`
  names the drivers that have them.
- :data:`BinaryType`: ``sqlalchemy.sql.sqltypes._Binary``, the base class of reflected
  binary column types.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Awaitable
from typing import Any, Callable, Literal, TypeVar

from sqlalchemy import Dialect
from sqlalchemy import exc as sa_exc
from sqlalchemy.sql.sqltypes import _Binary
from sqlalchemy.util import await_only
from sqlalchemy.util import greenlet_spawn as _greenlet_spawn

DRIVER_MODULES = frozenset({"psycopg", "pymysql", "aiomysql", "sqlite3", "aiosqlite", "asyncio"})
_MYSQL_MODULES = frozenset({"pymysql", "aiomysql", "MySQLdb"})

Kind = Literal[
    "connection", "timeout", "table missing", "driver missing", "permission", "read-only", "other"
]

# PostgreSQL SQLSTATEs (exact code, then class) and MariaDB error numbers -> kind.
_PG_CODES: dict[str, Kind] = {
    "25006": "read-only",  # read_only_sql_transaction
    "57014": "timeout",  # query_canceled (statement_timeout)
    "55P03": "timeout",  # lock_not_available (lock_timeout)
    "42501": "permission",  # insufficient_privilege
    "42P01": "table missing",  # undefined_table
    "3F000": "table missing",  # invalid_schema_name
    "3D000": "connection",  # invalid_catalog_name (no such database)
    "53300": "connection",  # too_many_connections
    "57P01": "connection",  # admin_shutdown
    "57P02": "connection",  # crash_shutdown
    "57P03": "connection",  # cannot_connect_now
}
_PG_CLASSES: dict[str, Kind] = {
    "08": "connection",  # connection exception
    "28": "connection",  # invalid authorization specification
}
_MYSQL_CODES: dict[int, Kind] = {
    1290: "read-only",  # ER_OPTION_PREVENTS_STATEMENT (--read-only)
    1792: "read-only",  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    1969: "timeout",  # ER_STATEMENT_TIMEOUT (max_statement_time)
    3024: "timeout",  # ER_QUERY_TIMEOUT (MySQL max_execution_time)
    1205: "timeout",  # ER_LOCK_WAIT_TIMEOUT
    1142: "permission",  # ER_TABLEACCESS_DENIED_ERROR
    1143: "permission",  # ER_COLUMNACCESS_DENIED_ERROR
    1044: "permission",  # ER_DBACCESS_DENIED_ERROR
    1146: "table missing",  # ER_NO_SUCH_TABLE
    1045: "connection",  # ER_ACCESS_DENIED_ERROR (user or password)
    1049: "table missing",  # ER_BAD_DB_ERROR: the database (schema) does not exist
    1040: "connection",  # ER_CON_COUNT_ERROR
    2003: "connection",  # CR_CONN_HOST_ERROR
    2006: "connection",  # CR_SERVER_GONE_ERROR
    2013: "connection",  # CR_SERVER_LOST
    1047: "connection",  # ER_UNKNOWN_COM_ERROR: a Galera node without quorum
}
# SQLite result codes (primary code: the low byte of the extended one).
_SQLITE_CODES: dict[int, Kind] = {
    5: "timeout",  # SQLITE_BUSY: the busy time-out ran out
    6: "timeout",  # SQLITE_LOCKED
    3: "permission",  # SQLITE_PERM
    8: "read-only",  # SQLITE_READONLY
    14: "connection",  # SQLITE_CANTOPEN
}
# Before Python 3.11 sqlite3 exceptions carry no result code: their fixed messages.
_SQLITE_MESSAGES: dict[str, Kind] = {
    "no such table": "table missing",
    "database is locked": "timeout",
    "attempt to write a readonly database": "read-only",
    "unable to open database file": "connection",
}


_SQLITE_NAMES: dict[str, str] = {"file is not a database": "SQLITE_NOTADB"}

# The server's messages for a refused login (libpq passes them on without their SQLSTATE).
_PG_LOGIN_MESSAGES = tuple(
    (re.compile(pattern), code)
    for pattern, code in (
        (r'FATAL:  role "[^"]*" does not exist', "28000"),
        (r'FATAL:  database "[^"]*" does not exist', "3D000"),
        (r"FATAL:  password authentication failed", "28P01"),
        (r"FATAL:  no pg_hba\.conf entry", "28000"),
        (r"FATAL:  sorry, too many clients already", "53300"),
        (r"FATAL:  the database system is (starting up|shutting down)", "57P03"),
    )
)

#: Operations that begin with a connection: a connection failure in them is reported
#: as the connect that failed (not as "create table failed").
FIRST_USE = frozenset({"create table", "open database"})


class StatementFailed(Exception):
    """A statement the driver failed, normalized: what a driver throws into an
    operation (``_core.ops``) at its ``yield`` (private: it comes out as the
    :class:`~joblocks.LockBackendError` of its kind). ``orig`` is the driver's own
    exception; ``lost``, whether the connection went with it (never used again).

    The kinds an operation tells apart are subclasses: :class:`DuplicateKey`,
    :class:`Transient`, :class:`ConnectionLost` (a call abandoned for want of a reply
    comes out as ``_util.errors.NoReply``); any other failure is this class itself
    (its kind, for the caller, is the driver's exception's: see :func:`kind_of`). A
    driver normalizes with :meth:`joblocks._sql.dialects.Profile.failed`."""

    def __init__(self, orig: BaseException, lost: bool = False) -> None:
        super().__init__(str(orig))
        self.orig = orig
        self.lost = lost

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.orig, self.lost))


class DuplicateKey(StatementFailed):
    """The row's key was there already (the driver's ``IntegrityError``)."""


class ConnectionLost(StatementFailed):
    """The connection went with the statement (the server went away, the socket was
    shut): its outcome is unknown, and the connection is never used again."""


class Transient(StatementFailed):
    """A deadlock or serialization failure, the connection still good: safe to send
    again."""


def driver_error(exc: BaseException) -> BaseException:
    """The driver's own exception behind ``exc`` (a normalized failure's, or the one
    SQLAlchemy wrapped), else ``exc``."""
    if isinstance(exc, StatementFailed):
        return exc.orig
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        return exc.orig
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (drivers re-raise a
    socket's ``TimeoutError`` as their own error)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


#: A socket's time-out (``socket.timeout`` is ``TimeoutError`` from Python 3.10 on).
_SOCKET_TIMEOUTS = (TimeoutError, socket.timeout)


def reply_timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver giving up on a reply by its own socket time-out
    (PyMySQL's ``read_timeout``, for one): the statement may have reached the server,
    so its outcome is unknown, as when joblocks's own deadline abandons a call."""
    return any(isinstance(link, _SOCKET_TIMEOUTS) for link in _chain(driver_error(exc)))


def driver_code(exc: BaseException) -> str | int | None:
    """The SQLSTATE (PostgreSQL), error number (MariaDB) or SQLite result name of a
    driver failure (``exc`` or the driver exception SQLAlchemy wrapped), else None."""
    orig = driver_error(exc)
    if type(orig).__module__.split(".")[0] in _MYSQL_MODULES:
        # MariaDB's errors carry a SQLSTATE too, but the number is the precise one.
        args = getattr(orig, "args", ())
        if args and isinstance(args[0], int):
            return args[0]
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        return sqlstate
    if type(orig).__module__.split(".")[0] == "psycopg":
        # libpq reports a refused login without its SQLSTATE: the server's own message.
        text = str(orig)
        for message, code in _PG_LOGIN_MESSAGES:
            if message.search(text):
                return code
    name = getattr(orig, "sqlite_errorname", None)
    if name is None and type(orig).__module__.split(".")[0] in ("sqlite3", "aiosqlite"):
        # Before Python 3.11 sqlite3 exceptions carry no result code: their fixed messages.
        name = _SQLITE_NAMES.get(str(orig).strip().lower())
    return name if isinstance(name, str) else None


def kind_of(exc: BaseException) -> Kind:
    """The kind of a driver failure (``"other"`` when it is of no known kind)."""
    if isinstance(exc, ImportError):
        return "driver missing"
    orig = driver_error(exc)
    chain = _chain(orig)
    if any(
        isinstance(link, _SOCKET_TIMEOUTS) or type(link).__name__ == "ConnectionTimeout"
        for link in chain
    ):
        return "timeout"
    code = driver_code(orig)
    if isinstance(code, str) and not code.startswith("SQLITE"):
        found = _PG_CODES.get(code) or _PG_CLASSES.get(code[:2])
        if found is not None:
            return found
    elif isinstance(code, int):
        if code == 1180 and "primary component" in str(orig).lower():
            return "connection"  # a commit on a Galera node that lost quorum
        return _MYSQL_CODES.get(code, "other")
    sqlite_code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(sqlite_code, int) and sqlite_code & 0xFF in _SQLITE_CODES:
        return _SQLITE_CODES[sqlite_code & 0xFF]
    if type(orig).__module__.split(".")[0] in ("sqlite3", "aiosqlite"):
        text = str(orig).lower()
        for message, kind in _SQLITE_MESSAGES.items():
            if message in text:
                return kind
    module = type(orig).__module__.split(".")[0]
    if module == "psycopg" and code is None and type(orig).__name__ == "OperationalError":
        # psycopg's errors without a SQLSTATE come from the connection itself (refused,
        # closed by the server, a broken socket); the server's errors all carry one.
        return "connection"
    if isinstance(orig, (ConnectionError, OSError)):
        return "connection"
    return "other"


T = TypeVar("T")

#: The SQLAlchemy versions joblocks supports (``pyproject.toml`` allows the same).
SUPPORTED_MIN = (2, 0, 20)
SUPPORTED_BELOW = (3,)

#: The base class SQLAlchemy reflects binary columns (``VARBINARY``, ``BLOB``) as.
BinaryType: type[Any] = _Binary


def invalidate_pool(conn: Any, exc: BaseException) -> None:
    """Mark every connection ``conn``'s pool made so far as stale, as SQLAlchemy does
    when a statement fails with a disconnect error (``conn`` itself stays checked out;
    invalidate it too). ``conn``: a ``Connection``."""
    pool: Any = conn.engine.pool
    pool._invalidate(conn.connection, exc, _checkin=False)


def awaits_psycopg(dialect: Dialect) -> bool:
    """Whether the dialect's driver is psycopg's ``AsyncConnection`` (behind SQLAlchemy's
    adapter, whose ``driver_connection`` it is), whose calls :func:`awaited` can await
    directly."""
    return bool(dialect.is_async and dialect.driver == "psycopg")


def awaited(awaitable: Awaitable[T]) -> T:
    """From a greenlet of :data:`greenlet_spawn`: ``awaitable`` awaited on the event loop
    (``sqlalchemy.util.await_only``: one switch to the loop and back)."""
    result: T = await_only(awaitable)
    return result


def dbapi_error(dialect: Dialect) -> Any:
    """The base exception class of the dialect's (loaded) driver module (typed as the
    driver's own: ``Any``)."""
    return dialect.loaded_dbapi.Error


def checkout_dialect(proxy: Any) -> Dialect:
    """The dialect of the pool behind the connection proxy of a ``checkout`` event."""
    dialect: Dialect = proxy._pool._dialect
    return dialect


def overflow(pool: Any) -> tuple[int, int] | None:
    """``(max_overflow, overflow)`` of a ``QueuePool``: the overflow connections it may
    open and the count it keeps of them; None for a pool without a limit (``NullPool``,
    ``StaticPool``, ``max_overflow=-1``)."""
    max_overflow = getattr(pool, "_max_overflow", -1)
    if max_overflow < 0:
        return None
    return max_overflow, getattr(pool, "_overflow", max_overflow)


#: Run ``fn(*args)`` in a greenlet where it may call the asyncio driver through
#: SQLAlchemy's sync API (as ``AsyncConnection.run_sync`` does); await the result.
greenlet_spawn: Callable[..., Awaitable[Any]] = _greenlet_spawn


def hands_off_per_statement(dialect: Dialect) -> bool:
    """Whether the dialect's asyncio driver runs each call on a thread of its own
    (aiosqlite), so that :func:`on_driver_thread` can run a whole operation there."""
    return bool(dialect.is_async and dialect.driver == "aiosqlite")


def driver_connection(adapted: Any) -> Any:
    """The ``sqlite3`` connection behind SQLAlchemy's aiosqlite adapter ``adapted``."""
    return adapted._connection._conn


def on_driver_thread(adapted: Any, fn: Callable[[Any], T]) -> T:
    """From a greenlet of :data:`greenlet_spawn`: ``fn(sqlite3 connection)`` on the
    thread of the aiosqlite connection behind SQLAlchemy's adapter ``adapted``, awaited:
    one hand-off to that thread and back (aiosqlite runs calls in order, one at a time)."""
    aio = adapted._connection
    result: T = await_only(aio._execute(lambda: fn(aio._conn)))
    return result
