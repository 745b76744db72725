"""The SQLAlchemy internals joblocks relies on, each behind one small function.

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

from collections.abc import Awaitable
from typing import Any, Callable, TypeVar

from sqlalchemy import Dialect
from sqlalchemy.sql.sqltypes import _Binary
from sqlalchemy.util import await_only
from sqlalchemy.util import greenlet_spawn as _greenlet_spawn

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
