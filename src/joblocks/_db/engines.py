"""Where the locks live: URLs, engines, the default SQLite file, fork safety.

The library never joins a caller's transaction: every operation runs on its own
connection in autocommit mode. Engines the library creates itself are tuned for short
single statements (no reset round trip on check-in, a ping only after a connection
sat idle, bounded connect and read timeouts, and on PostgreSQL named server-side
prepared statements only on a direct connection, never through a pooler such as
PgBouncer in transaction mode) and are made fresh in forked children.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
import weakref
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from sqlalchemy import (
    URL,
    Engine,
    create_engine,
    event,
    make_url,
)
from sqlalchemy import exc as sa_exc

from .._sql.dialects import PROFILES, SUPPORTED_BACKENDS, UNSUPPORTED, profile
from .._sql.tables import (
    IDLE_PING_AFTER_S,
    SQLITE_BUSY_TIMEOUT_MS,
    TIMEOUT_MS,
    mark_idle,
    ping_if_idle,
    postgres_chosen,
    postgres_connect,
    sqlite_pragmas,
)
from .._util import process as _process
from .._util.errors import LockBackendError, LockDriverMissing, translate
from .._util.validate import mask_url
from .connections import default_sqlite_path, prepare_default_file

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
    from typing_extensions import TypeGuard

#: Environment variable naming the database when ``configure()`` was not called.
ENV_URL = "JOBLOCKS_URL"

__all__ = ["IDLE_PING_AFTER_S", "SQLITE_BUSY_TIMEOUT_MS", "TIMEOUT_MS"]

#: URL drivername -> the driver joblocks uses (from the families' profiles).
_SYNC_DRIVERS = {name: driver for p in PROFILES for name, driver in p.sync_drivers}
_ASYNC_DRIVERS = {name: driver for p in PROFILES for name, driver in p.async_drivers}

_owned: weakref.WeakSet[Any] = weakref.WeakSet()
#: The ``connect_args`` each engine joblocks made was given (its URL carries the rest).
_connect_args: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
log = logging.getLogger("joblocks")


#: What a database URL looks like, for error messages.
URL_FORMS = (
    "dialect://user:password@host:port/database (e.g. postgresql://app@db:5432/app, "
    "mysql://app@db/app) or sqlite:///path/to/locks.db"
)
__all__ = ["SUPPORTED_BACKENDS"]  # URL backends joblocks supports (from ``_sql.dialects``)


class DatabaseURLError(LockBackendError, ValueError):
    """A database URL that cannot be used: both a ``LockBackendError`` (as every
    database failure) and a ``ValueError`` (bad input, found before any connection)."""

    def __init__(self, argument: str, shown: str, problem: str) -> None:
        super().__init__("parse database URL", shown, problem)
        self.args = (f"{argument}: {problem}: {shown} (expected {URL_FORMS})",)

    def __str__(self) -> str:
        return str(self.args[0])


def resolve(database: str | URL | None, name: str = "database") -> tuple[URL, str]:
    """The URL to use and where it came from: ``argument``, ``JOBLOCKS_URL`` or ``default``.

    ``name`` is the argument the URL was given as, for error messages.
    """
    if database is not None:
        return _parse(database, name), "argument"
    env = os.environ.get(ENV_URL)
    if env:
        return _parse(env, ENV_URL), ENV_URL
    path = default_sqlite_path()
    return URL.create("sqlite+pysqlite", database=str(path)), "default"


def _parse(database: str | URL, name: str = "database") -> URL:
    """``database`` as a URL; a :class:`DatabaseURLError` naming ``name`` when it is not one."""
    if isinstance(database, URL):
        url = database
    elif not isinstance(database, str):
        raise TypeError(
            f"{name} must be a URL string, a sqlalchemy URL, an Engine or None, "
            f"not {type(database).__name__}"
        )
    else:
        try:
            url = make_url(database.strip())
        except sa_exc.ArgumentError as exc:
            raise DatabaseURLError(name, repr(mask_url(database)), "not a database URL") from exc
        except ValueError as exc:  # the port is not a number
            raise DatabaseURLError(
                name, repr(mask_url(database)), "the port must be a number"
            ) from exc
    driver = url.drivername
    if driver == "postgres" or driver.startswith("postgres+"):
        url = url.set(drivername="postgresql" + driver[len("postgres") :])
    return url


def check_backend(url: URL, name: str = "database") -> None:
    """A :class:`DatabaseURLError` naming ``name`` unless the URL is of a database
    joblocks supports (SQLite, PostgreSQL, MariaDB/MySQL)."""
    backend = url.get_backend_name()
    if backend not in SUPPORTED_BACKENDS:
        raise DatabaseURLError(
            name,
            mask_url(url),
            f"{UNSUPPORTED}{backend!r}",
        )


def _with_driver(url: URL, asynchronous: bool) -> URL:
    table = _ASYNC_DRIVERS if asynchronous else _SYNC_DRIVERS
    name = url.drivername
    target = table.get(name)
    return url.set(drivername=target) if target else url


def _number(url: URL, param: str, value: str, unit: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number >= 0 or number == float("inf"):
        raise DatabaseURLError(
            "database URL",
            mask_url(url),
            f"the query parameter {param} must be a number of {unit} >= 0, got {value!r}",
        )
    return number


def typed_query(url: URL, asynchronous: bool) -> tuple[URL, dict[str, Any]]:
    """The URL without the query parameters its driver needs as numbers, and those
    parameters with their proper types (to pass as ``connect_args``).

    A URL's query is text; psycopg wants ``prepare_threshold`` as an int or None
    (``?prepare_threshold=0``; ``none``: never prepare), PyMySQL/aiomysql
    their time-outs as numbers of seconds, sqlite3 its ``timeout`` as seconds.
    Everything else stays in the URL for the driver (libpq reads ``connect_timeout``
    and the rest of its connection string itself).
    """
    family = _family(url)
    typed: dict[str, Any] = {}
    query = dict(url.query)
    for param, raw in list(query.items()):
        value = raw[-1] if isinstance(raw, tuple) else raw
        if family == "postgresql" and param == "prepare_threshold":
            if value.strip().lower() in ("", "none", "null"):
                typed[param] = None
            elif value.strip().isdigit():
                typed[param] = int(value)
            else:
                raise DatabaseURLError(
                    "database URL",
                    mask_url(url),
                    "the query parameter prepare_threshold must be a whole number >= 0, "
                    f"or empty for never, got {value!r}",
                )
        elif family == "postgresql" and param == "connect_timeout":
            if not value.strip().isdigit():
                raise DatabaseURLError(
                    "database URL",
                    mask_url(url),
                    f"the query parameter connect_timeout must be whole seconds, got {value!r}",
                )
            continue
        elif family == "mysql" and param in profile("mysql").timeout_args:
            seconds = _number(url, param, value, "seconds")
            if not asynchronous or param == "connect_timeout":
                # aiomysql has no read/write time-out: the model bounds each call.
                typed[param] = int(seconds) if seconds.is_integer() else seconds
        elif family == "sqlite" and param in profile("sqlite").timeout_args:
            typed[param] = _number(url, param, value, "seconds")
        else:
            continue
        del query[param]
    return url.set(query=query), typed


def _family(url: URL) -> str | None:
    """The database family of a URL; None for one joblocks does not support."""
    backend = url.get_backend_name()
    return profile(backend).family if backend in SUPPORTED_BACKENDS else None


def check_sqlite_url(url: URL) -> None:
    """Refuse in-memory SQLite: each connection would be a database of its own."""
    if _family(url) != "sqlite":
        return
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        raise ValueError(
            "database: an in-memory SQLite database cannot exclude anything (each "
            "connection is its own database); use a file, e.g. 'sqlite:///locks.db'"
        )
    if database.startswith("file:"):
        return
    path = Path(database).expanduser()
    if path.exists() and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file (a device, pipe or socket)"
        raise ValueError(
            f"database: the SQLite path {path} is {what}; SQLite needs a regular file "
            "there, or nothing (it creates the file)"
        )


def create(url: URL, *, asynchronous: bool, timeout_ms: int | None = None) -> Engine | AsyncEngine:
    """Make an engine tuned for lock operations (see the module docstring).

    ``timeout_ms`` (default :data:`TIMEOUT_MS`) bounds a connection attempt, each wait
    for a reply of the server and SQLite's wait for another writer.
    """
    url = _with_driver(url, asynchronous)
    check_sqlite_url(url)
    backend = url.get_backend_name()
    family = _family(url)
    if asynchronous:
        _require_async_driver(backend, mask_url(url))
    seconds = (TIMEOUT_MS if timeout_ms is None else timeout_ms) / 1000
    connect_args: dict[str, Any] = {}
    kwargs: dict[str, Any] = {"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None}
    if family == "sqlite":
        connect_args["timeout"] = seconds
        if url.database and not url.database.startswith("file:"):
            path = Path(url.database).expanduser()
            if path.absolute() == default_sqlite_path():
                prepare_default_file(path)
    elif family == "postgresql":
        # libpq counts whole seconds (and waits at least 2); tcp_user_timeout bounds
        # how long sent data may stay unacknowledged.
        connect_args["connect_timeout"] = max(1, math.ceil(seconds))
        connect_args["tcp_user_timeout"] = math.ceil(seconds * 1000)
    elif family == "mysql":
        connect_args["connect_timeout"] = seconds
        if asynchronous:
            # aiomysql bounds only the TCP connect: bound its handshake too.
            connect_args["async_creator_fn"] = _bounded_aiomysql_connect(seconds)
        else:
            # PyMySQL reads the handshake with the read time-out.
            connect_args["read_timeout"] = seconds
            connect_args["write_timeout"] = seconds
    for name in list(connect_args):
        if name in url.query:
            del connect_args[name]
    url, typed = typed_query(url, asynchronous)
    connect_args.update(typed)
    kwargs["connect_args"] = connect_args
    with translate("create engine", mask_url(url)):
        if asynchronous:
            from sqlalchemy.ext.asyncio import create_async_engine

            engine: Engine | AsyncEngine = create_async_engine(url, **kwargs)
        else:
            engine = create_engine(url, **kwargs)
    sync_engine = engine.sync_engine if is_async_engine(engine) else engine
    if family == "sqlite":
        event.listen(sync_engine, "connect", sqlite_pragmas)
    else:
        if family == "postgresql" and url.get_driver_name() == "psycopg":
            chosen = "prepare_threshold" in url.query
            event.listen(sync_engine, "connect", postgres_chosen if chosen else postgres_connect)
        event.listen(sync_engine.pool, "checkin", mark_idle)
        event.listen(sync_engine.pool, "checkout", ping_if_idle)
    _owned.add(sync_engine)
    _connect_args[sync_engine] = dict(connect_args)
    return engine


def driver_connect_args(engine: AsyncEngine) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` that open a connection of the asyncio driver (psycopg's
    ``AsyncConnection.connect``, aiomysql's ``connect``) as the pool of ``engine``, an
    engine joblocks made, opens one: the dialect's reading of the URL (every spelling
    and query parameter) and the engine's ``connect_args``; ``async_creator_fn``, when
    there is one, stays in ``kwargs`` (it replaces the driver's ``connect``)."""
    sync_engine = engine.sync_engine
    cargs, cparams = sync_engine.dialect.create_connect_args(sync_engine.url)
    cparams = dict(cparams)
    cparams.update(_connect_args.get(sync_engine, {}))
    return list(cargs), cparams


#: The extra that installs each asyncio dependency.
_ASYNC_EXTRAS = {
    "greenlet": "asyncio",
    "aiosqlite": "asyncio",
    "aiomysql": "mysql",
    "psycopg": "postgresql",
}


def missing_async_driver(exc: ImportError, module: str) -> ImportError:
    """An ``ImportError`` that names the joblocks extra installing ``module``."""
    extra = _ASYNC_EXTRAS.get(module, "asyncio")
    also = "" if extra == "asyncio" else ' (and "joblocks[asyncio]" for greenlet)'
    error = ImportError(
        f"joblocks.aio needs {module}, which is not installed: "
        f'pip install "joblocks[{extra}]"{also}'
    )
    error.name = module
    return error


def require_asyncio() -> None:
    """Raise an ``ImportError`` naming the extra to install unless greenlet, which every
    use of ``joblocks.aio`` needs (SQLAlchemy's asyncio support), can be imported."""
    try:
        importlib.import_module("greenlet")
    except ImportError as exc:
        raise missing_async_driver(exc, "greenlet") from exc


def _require_async_driver(backend: str, database: str) -> None:
    """Raise :class:`LockDriverMissing` (an ``ImportError`` too) naming the extra to
    install unless the asyncio driver of ``backend`` and greenlet can be imported."""
    module = profile(backend).async_module
    require_asyncio()
    try:
        importlib.import_module(module)
    except ImportError as exc:
        missing = missing_async_driver(exc, module)
        raise LockDriverMissing("create engine", database, str(missing), module=module) from exc


def _bounded_aiomysql_connect(seconds: float) -> Callable[..., Awaitable[Any]]:
    import asyncio

    try:
        connect = importlib.import_module("aiomysql").connect
    except ImportError as exc:
        raise missing_async_driver(exc, "aiomysql") from exc

    async def creator(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.wait_for(connect(*args, **kwargs), seconds)

    return creator


def _reset_after_fork() -> None:
    for engine in list(_owned):
        engine.dispose(close=False)


_process.on_fork(_reset_after_fork)


def describe(engine: Engine | AsyncEngine) -> str:
    """The engine's URL with the password masked."""
    return mask_url(engine.url)


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
