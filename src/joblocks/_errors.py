"""Exceptions raised by joblocks.

The hierarchy::

    Exception
    └── LockError                 root: catch this to catch everything joblocks raises
        ├── LockBackendError      the database failed (connection, timeout, missing table,
        │   │                     malformed URL, ...); chained to the driver's exception.
        │   │                     Never means "the lock is taken".
        │   └── LockTableMismatch a table of the lock table's name exists, of another shape
        ├── LockExistsError       JobLockModel.insert() found a row with that key
        ├── LockNotAcquired       joblocks.lease() could not take the lock (held elsewhere)
        └── LeaseLost             Lease.ensure_held(): the lease is no longer ours

Bad input is reported with the standard ``TypeError``/``ValueError`` (naming the
argument), raised before any database work.

Driver exceptions are translated in exactly one place, :func:`translate`.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import exc as sa_exc

__all__ = [
    "LeaseLost",
    "LockBackendError",
    "LockError",
    "LockExistsError",
    "LockNotAcquired",
    "LockTableMismatch",
]


class LockError(Exception):
    """Root of every exception joblocks raises (besides TypeError/ValueError for bad input)."""


class LockBackendError(LockError):
    """The database failed; the state of the lock is unknown to this call.

    ``operation`` names what was attempted (``"acquire"``, ``"connect"``, ...) and
    ``database`` the URL with its password masked. The driver's exception is the
    ``__cause__``.
    """

    def __init__(self, operation: str, database: str, detail: str) -> None:
        self.operation = operation
        self.database = database
        self.detail = detail
        super().__init__(f"{operation} failed on {database}: {detail}")


class LockTableMismatch(LockBackendError):
    """A table of the lock table's name exists but is not a joblocks lock table.

    Raised on first use (table creation) and by ``joblocks init`` instead of using the
    table or creating anything beside it (no fencing sequence or counter). ``table``
    is its name, ``problems`` one line per mismatch (missing or extra columns, a
    column of another type, another primary key).
    """

    def __init__(self, database: str, table: str, problems: list[str]) -> None:
        self.table = table
        self.problems = list(problems)
        detail = (
            f"table {table} is not a joblocks lock table: {'; '.join(self.problems)} "
            "(nothing was created; use another table name, or rename that table)"
        )
        super().__init__("create table", database, detail)


class LockExistsError(LockError, KeyError):
    """``JobLockModel.insert`` found a row with this key already."""

    def __init__(self, lock_key: str) -> None:
        self.lock_key = lock_key
        super().__init__(f"a lock row with key {lock_key!r} already exists")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class LockNotAcquired(LockError):
    """The lock is held by another holder (raised by ``joblocks.lease``)."""

    def __init__(self, lock_key: str) -> None:
        self.lock_key = lock_key
        super().__init__(f"lock {lock_key!r} is held by another holder")


class LeaseLost(LockError):
    """The lease is no longer held by its holder (expired, released or taken over)."""

    def __init__(self, lock_key: str, reason: str) -> None:
        self.lock_key = lock_key
        self.reason = reason
        super().__init__(f"lease on {lock_key!r} lost: {reason}")


def _detail(exc: BaseException) -> str:
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        text = str(exc.orig).strip() or type(exc.orig).__name__
        return f"{type(exc.orig).__name__}: {text.splitlines()[0]}"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


_DRIVER_MODULES = frozenset({"psycopg", "pymysql", "aiomysql", "sqlite3", "aiosqlite", "asyncio"})


class translate:
    """Turn any database/driver failure inside the block into :class:`LockBackendError`.

    A class rather than a generator-based context manager: it wraps every lock
    operation, and this is the cheaper of the two.
    """

    __slots__ = ("database", "operation")

    def __init__(self, operation: str, database: str) -> None:
        self.operation = operation
        self.database = database

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> Literal[False]:
        if exc is None or isinstance(exc, LockError) or not isinstance(exc, Exception):
            return False
        if isinstance(exc, (sa_exc.SQLAlchemyError, OSError, ImportError)):
            raise LockBackendError(self.operation, self.database, _detail(exc)) from exc
        # Drivers raise their own exception classes outside SQLAlchemy's wrapping in a
        # few places (e.g. during connect through an async adapter). They are still
        # database failures, not "taken".
        if type(exc).__module__.split(".")[0] in _DRIVER_MODULES:
            raise LockBackendError(self.operation, self.database, _detail(exc)) from exc
        return False
