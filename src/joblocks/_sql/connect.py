"""What joblocks does on every new connection of an engine it made, and on check-out.

- SQLite: WAL and ``synchronous = NORMAL`` (:func:`sqlite_pragmas`).
- PostgreSQL: one query per new connection (:func:`postgres_connect`) reads the backend's
  pid (to tell a direct connection from a pooler's, see below) and the default
  isolation (:func:`read_committed_wrapper`).
- Every database: a connection idle for longer than ``IDLE_PING_AFTER_S`` is pinged when
  it is checked out again (:func:`ping_if_idle`).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from sqlalchemy import Dialect
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import ConnectionPoolEntry

from .._util.sqla import checkout_dialect
from .dialects import profile

#: The default of ``timeout=`` (ms): how long a connection attempt, a reply of the
#: server and SQLite's wait for another writer may take before ``LockBackendError``.
#: One value for every database and both faces (see ``docs/reliability.md``).
TIMEOUT_MS = 5_000
#: How long a new SQLite connection waits to switch a fresh file to WAL (ms); the
#: model's ``timeout`` bounds every other wait for another writer.
SQLITE_BUSY_TIMEOUT_MS = TIMEOUT_MS
#: A pooled connection idle for longer than this is pinged before use (seconds).
IDLE_PING_AFTER_S = 1.0


def sqlite_pragmas(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # Switching a fresh file to WAL needs a moment alone with it; several processes
        # opening it at once get "database is locked" here without the busy handler.
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                cursor.execute("PRAGMA journal_mode = WAL")
                break
            except Exception as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def postgres_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """A new psycopg connection: its prepared statements and its default isolation.

    psycopg prepares a statement run 5 times on a connection as a named server-side
    prepared statement. Behind a pooler that shares server connections between clients
    (PgBouncer's ``pool_mode = transaction``) that statement would live on a server
    connection other clients get next: a client could run another client's statement,
    or fail. A pooler in between tells the client a backend process (its cancel key)
    that is not the one running its statements: one that gives a client several
    server connections cannot give it the key of one of them. So statements are
    prepared only when ``pg_backend_pid()`` is the backend the connection was told
    about (a direct connection); ``?prepare_threshold=N`` in the URL decides instead
    (:func:`postgres_chosen`). The same query reads the default isolation (see
    :func:`read_committed_wrapper`).
    """
    if _postgres_probe(dbapi_connection, record) != _driver(dbapi_connection).info.backend_pid:
        _driver(dbapi_connection).prepare_threshold = None


def postgres_chosen(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """A new psycopg connection whose ``prepare_threshold`` the URL sets: the default
    isolation only."""
    _postgres_probe(dbapi_connection, record)


#: What :func:`postgres_connect` asks a new PostgreSQL connection: its backend's pid and
#: its default isolation.
PG_PROBE_SQL = "SELECT pg_backend_pid(), current_setting('default_transaction_isolation')"


def _driver(dbapi_connection: Any) -> Any:
    """psycopg's own connection (under SQLAlchemy's asyncio adapter, when there is one)."""
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def _postgres_probe(dbapi_connection: Any, record: ConnectionPoolEntry) -> int:
    """Keep the connection's default isolation in ``record.info``; its backend's pid."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(PG_PROBE_SQL)
        pid, level = cursor.fetchone()
    finally:
        cursor.close()
    if not _driver(dbapi_connection).autocommit:
        dbapi_connection.rollback()
    record.info[ISOLATION_INFO] = wrapper_for(str(level))
    return int(pid)


def mark_idle(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info["joblocks_idle_since"] = time.monotonic()


def ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
    since = record.info.get("joblocks_idle_since")
    if since is None or time.monotonic() - since < IDLE_PING_AFTER_S:
        return
    dialect = checkout_dialect(proxy)
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as exc:
        # The pool invalidates this connection and checks out another one.
        raise sa_exc.DisconnectionError(str(exc)) from exc


#: Key in a pooled connection's ``info`` (kept for the life of the driver connection):
#: how joblocks's statements run on it (see :func:`read_committed_wrapper`).
ISOLATION_INFO = "joblocks_read_committed"


class ReadCommitted(NamedTuple):
    """The statements that run one of joblocks's statements in a read committed
    transaction of its own."""

    begin: str
    commit: str
    rollback: str


_PG_READ_COMMITTED = ReadCommitted("BEGIN ISOLATION LEVEL READ COMMITTED", "COMMIT", "ROLLBACK")
_PG_LEVELS_LIKE_READ_COMMITTED = ("read committed", "read uncommitted")


def read_committed_wrapper(dialect: Dialect, cursor: Any) -> ReadCommitted | None:
    """How joblocks's statements must run on one connection; asked once per connection.

    The statements are written for read committed: a conditional write that meets a
    row another transaction just changed waits for it and re-checks its condition on
    the new row. Under repeatable read or serializable PostgreSQL raises a
    serialization failure instead. None when the connection's default isolation is
    read committed already (the usual case: each statement runs alone in autocommit
    mode, one round trip). Otherwise (``default_transaction_isolation`` set for the
    server, the database or the role) each statement runs in a read committed
    transaction of its own: a ``SET`` for the session would not do through a
    transaction-mode pooler, where the next transaction may run on another server
    connection.
    """
    if not profile(dialect).checks_isolation:
        return None
    cursor.execute("SHOW default_transaction_isolation")
    row = cursor.fetchone()
    return wrapper_for(str(row[0]) if row else _PG_LEVELS_LIKE_READ_COMMITTED[0])


def wrapper_for(level: str) -> ReadCommitted | None:
    """The wrapper a PostgreSQL connection whose ``default_transaction_isolation`` is
    ``level`` needs (see :func:`read_committed_wrapper`); None for read committed."""
    return None if level.lower() in _PG_LEVELS_LIKE_READ_COMMITTED else _PG_READ_COMMITTED
