"""Where the locks live: URLs, engines, the default SQLite file, fork safety.

The library never joins a caller's transaction: every operation runs on its own
connection in autocommit mode. Engines the library creates itself are tuned for short
single statements (no reset round trip on check-in, a ping only after a connection
sat idle, bounded connect and read timeouts, and on PostgreSQL named server-side
prepared statements only on a direct connection, never through a pooler such as
PgBouncer in transaction mode) and are made fresh in forked children.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import ConnectionPoolEntry

from . import _identity
from ._errors import translate

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
    from typing_extensions import TypeGuard

#: Environment variable naming the database when ``configure()`` was not called.
ENV_URL = "JOBLOCKS_URL"
#: How long SQLite waits for another writer before giving up (ms).
SQLITE_BUSY_TIMEOUT_MS = 5_000
#: Connect timeout for server databases (seconds).
CONNECT_TIMEOUT_S = 5
#: Read/write timeout for server databases where the driver has one (seconds).
IO_TIMEOUT_S = 15
#: A pooled connection idle for longer than this is pinged before use (seconds).
IDLE_PING_AFTER_S = 1.0

_SYNC_DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "sqlite+aiosqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg_async": "postgresql+psycopg",
    "postgresql+asyncpg": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mysql+aiomysql": "mysql+pymysql",
    "mysql+asyncmy": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
    "mariadb+aiomysql": "mariadb+pymysql",
    "mariadb+asyncmy": "mariadb+pymysql",
}
_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg2": "postgresql+psycopg",
    "postgresql+psycopg_async": "postgresql+psycopg",
    "mysql": "mysql+aiomysql",
    "mysql+pymysql": "mysql+aiomysql",
    "mariadb": "mariadb+aiomysql",
    "mariadb+pymysql": "mariadb+aiomysql",
}

_owned: weakref.WeakSet[Any] = weakref.WeakSet()


def default_sqlite_path() -> Path:
    """The per-user SQLite file used when nothing is configured.

    ``$XDG_STATE_HOME/joblocks/locks.db`` (``~/.local/state/joblocks/locks.db`` when
    unset) on Linux and macOS; ``%LOCALAPPDATA%\\joblocks\\locks.db`` on Windows.
    """
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "joblocks" / "locks.db"


def mask(url: str | URL) -> str:
    """The URL as text with its password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"


def resolve(database: str | URL | None) -> tuple[URL, str]:
    """The URL to use and where it came from: ``argument``, ``JOBLOCKS_URL`` or ``default``."""
    if database is not None:
        return _parse(database), "argument"
    env = os.environ.get(ENV_URL)
    if env:
        return _parse(env), ENV_URL
    path = default_sqlite_path()
    return URL.create("sqlite+pysqlite", database=str(path)), "default"


def _parse(database: str | URL) -> URL:
    if isinstance(database, URL):
        return database
    if not isinstance(database, str):
        raise TypeError(
            "database must be a URL string, a sqlalchemy URL, an Engine or None, "
            f"not {type(database).__name__}"
        )
    with translate("parse database URL", "<database URL>"):
        return make_url(database)


def _with_driver(url: URL, asynchronous: bool) -> URL:
    table = _ASYNC_DRIVERS if asynchronous else _SYNC_DRIVERS
    name = url.drivername
    target = table.get(name)
    return url.set(drivername=target) if target else url


def check_sqlite_url(url: URL) -> None:
    """Refuse in-memory SQLite: each connection would be a database of its own."""
    if url.get_backend_name() != "sqlite":
        return
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        raise ValueError(
            "database: an in-memory SQLite database cannot exclude anything (each "
            "connection is its own database); use a file, e.g. 'sqlite:///locks.db'"
        )


def create(url: URL, *, asynchronous: bool) -> Engine | AsyncEngine:
    """Make an engine tuned for lock operations (see the module docstring)."""
    url = _with_driver(url, asynchronous)
    check_sqlite_url(url)
    backend = url.get_backend_name()
    connect_args: dict[str, Any] = {}
    kwargs: dict[str, Any] = {"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None}
    if backend == "sqlite":
        connect_args["timeout"] = SQLITE_BUSY_TIMEOUT_MS / 1000
        if url.database and not url.database.startswith("file:"):
            path = Path(url.database).expanduser()
            if path == default_sqlite_path():
                path.parent.mkdir(parents=True, exist_ok=True)
    elif backend == "postgresql":
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        connect_args["tcp_user_timeout"] = IO_TIMEOUT_S * 1000
    elif backend in ("mysql", "mariadb"):
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        if not asynchronous:
            connect_args["read_timeout"] = IO_TIMEOUT_S
            connect_args["write_timeout"] = IO_TIMEOUT_S
    for name in list(connect_args):
        if name in url.query:
            del connect_args[name]
    kwargs["connect_args"] = connect_args
    with translate("create engine", mask(url)):
        if asynchronous:
            from sqlalchemy.ext.asyncio import create_async_engine

            engine: Engine | AsyncEngine = create_async_engine(url, **kwargs)
        else:
            engine = create_engine(url, **kwargs)
    sync_engine = engine.sync_engine if is_async_engine(engine) else engine
    if backend == "sqlite":
        event.listen(sync_engine, "connect", _sqlite_pragmas)
    else:
        if backend == "postgresql" and url.get_driver_name() == "psycopg":
            chosen = "prepare_threshold" in url.query
            event.listen(sync_engine, "connect", _postgres_chosen if chosen else _postgres_connect)
        event.listen(sync_engine.pool, "checkin", _mark_idle)
        event.listen(sync_engine.pool, "checkout", _ping_if_idle)
    _owned.add(sync_engine)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
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


def _postgres_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
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
    (:func:`_postgres_chosen`). The same query reads the default isolation (see
    :func:`read_committed_wrapper`).
    """
    if _postgres_probe(dbapi_connection, record) != _driver(dbapi_connection).info.backend_pid:
        _driver(dbapi_connection).prepare_threshold = None


def _postgres_chosen(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """A new psycopg connection whose ``prepare_threshold`` the URL sets: the default
    isolation only."""
    _postgres_probe(dbapi_connection, record)


def _driver(dbapi_connection: Any) -> Any:
    """psycopg's own connection (under SQLAlchemy's asyncio adapter, when there is one)."""
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def _postgres_probe(dbapi_connection: Any, record: ConnectionPoolEntry) -> int:
    """Keep the connection's default isolation in ``record.info``; its backend's pid."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT pg_backend_pid(), current_setting('default_transaction_isolation')")
        pid, level = cursor.fetchone()
    finally:
        cursor.close()
    if not _driver(dbapi_connection).autocommit:
        dbapi_connection.rollback()
    record.info[ISOLATION_INFO] = _wrapper_for(str(level))
    return int(pid)


def _mark_idle(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info["joblocks_idle_since"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
    since = record.info.get("joblocks_idle_since")
    if since is None or time.monotonic() - since < IDLE_PING_AFTER_S:
        return
    dialect = proxy._pool._dialect
    try:
        dialect.do_ping(dbapi_connection)
    except Exception as exc:
        # The pool invalidates this connection and checks out another one.
        raise sa_exc.DisconnectionError(str(exc)) from exc


def _reset_after_fork() -> None:
    for engine in list(_owned):
        engine.dispose(close=False)


_identity.on_fork(_reset_after_fork)


def describe(engine: Engine | AsyncEngine) -> str:
    """The engine's URL with the password masked."""
    return engine.url.render_as_string(hide_password=True)


def ensure_usable(engine: Engine | AsyncEngine) -> None:
    """Refuse engines whose database joblocks cannot use safely."""
    check_sqlite_url(engine.url)


def owned(engine: Engine | AsyncEngine | None) -> bool:
    """Whether joblocks made this engine (and so may dispose of it)."""
    if engine is None:
        return False
    sync_engine = engine.sync_engine if is_async_engine(engine) else engine
    return sync_engine in _owned


def is_async_engine(obj: object) -> TypeGuard[AsyncEngine]:
    """Whether ``obj`` is an ``AsyncEngine``, without importing SQLAlchemy's asyncio
    support (which needs greenlet) when nothing asynchronous was ever made."""
    module = sys.modules.get("sqlalchemy.ext.asyncio")
    return module is not None and isinstance(obj, module.AsyncEngine)


# ------------------------------------------------ the isolation joblocks's statements need

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


def read_committed_wrapper(dialect_name: str, cursor: Any) -> ReadCommitted | None:
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
    if dialect_name != "postgresql":
        return None
    cursor.execute("SHOW default_transaction_isolation")
    row = cursor.fetchone()
    return _wrapper_for(str(row[0]) if row else _PG_LEVELS_LIKE_READ_COMMITTED[0])


def _wrapper_for(level: str) -> ReadCommitted | None:
    return None if level.lower() in _PG_LEVELS_LIKE_READ_COMMITTED else _PG_READ_COMMITTED
