"""Exceptions raised by joblocks.

The hierarchy::

    Exception
    └── LockError                    root: catch this to catch everything joblocks raises
        ├── LockBackendError         the database failed; chained to the driver's exception.
        │   │                        Never means "the lock is taken". Its subclasses say
        │   │                        what kind of failure it was (the rest: plain)
        │   ├── LockConnectionError  cannot connect or log in, or the connection broke
        │   ├── LockTimeoutError     a time-out ran out (connect, statement, lock wait)
        │   ├── LockTableError       the lock table is not usable
        │   │   ├── LockTableMissing   it (or its schema) does not exist
        │   │   └── LockTableMismatch  a table of its name exists, of another shape
        │   ├── LockDriverMissing    the database driver is not installed (an ImportError too)
        │   └── LockPermissionError  the database refused to let this role do it
        │       └── LockReadOnlyError  the database, server or role is read-only
        ├── LockExistsError          JobLockModel.insert() found a row with that key
        ├── LockNotAcquired          joblocks.lease() could not take the lock (held elsewhere)
        └── LeaseLost                Lease.ensure_held(): the lease is no longer ours

Bad input is reported with the standard ``TypeError``/``ValueError`` (naming the
argument), raised before any database work.

Driver exceptions are translated in exactly one place, :class:`translate`, which also
picks the kind (:func:`kind_of`) from the driver's error: its class (``ImportError``,
``TimeoutError``, psycopg's ``ConnectionTimeout``), its SQLSTATE (PostgreSQL), its error
number (MariaDB), or SQLite's result code; only for SQLite's missing table, which has
no code of its own, the message. The SQLSTATE or error number is kept as ``code``.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import exc as sa_exc

from . import drivers as _drivers
from .drivers import DRIVER_MODULES, FIRST_USE, driver_code
from .validate import mask_text

__all__ = [
    "LeaseLost",
    "LockBackendError",
    "LockConnectionError",
    "LockDriverMissing",
    "LockError",
    "LockExistsError",
    "LockNotAcquired",
    "LockPermissionError",
    "LockReadOnlyError",
    "LockTableError",
    "LockTableMismatch",
    "LockTableMissing",
    "LockTimeoutError",
]


def _rebuilt(
    cls: type[BaseException], args: tuple[object, ...], state: dict[str, object]
) -> BaseException:
    """An exception made again from its pickled parts, without calling its ``__init__``."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class LockError(Exception):
    """Root of every exception joblocks raises (besides TypeError/ValueError for bad input).

    Every joblocks exception pickles (to and from a worker process of
    ``concurrent.futures`` or ``multiprocessing``) with its message and attributes.
    """

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


class LockBackendError(LockError):
    """The database failed; the state of the lock is unknown to this call.

    ``operation`` names what was attempted (``"acquire"``, ``"connect"``, ...) and
    ``database`` the URL with its password masked. The driver's exception is the
    ``__cause__``; ``code`` is its SQLSTATE (PostgreSQL, a ``str``), error number
    (MariaDB, an ``int``) or SQLite result name (``"SQLITE_BUSY"``), or ``None``.
    A subclass says what kind of failure it was, where that is known.
    """

    def __init__(
        self, operation: str, database: str, detail: str, code: str | int | None = None
    ) -> None:
        self.operation = operation
        self.database = database = mask_text(database)
        self.detail = detail = mask_text(detail)  # a driver may echo its connection string
        self.code = code
        super().__init__(f"{operation} failed on {database}: {detail}")


class LockConnectionError(LockBackendError):
    """The database cannot be reached or refused the login (no server on that host and
    port, a missing database, wrong user or password, no connection slots left), or the
    connection broke during the operation."""


class LockTimeoutError(LockBackendError):
    """A time-out ran out: the connect time-out or ``timeout=`` (ms) against a server
    that does not answer, a server-side ``statement_timeout``/``lock_timeout`` or
    ``max_statement_time``/``innodb_lock_wait_timeout``, or SQLite's busy time-out
    while another writer holds the file."""


class LockTableError(LockBackendError):
    """The lock table cannot be used as it is (see the two subclasses)."""


class LockTableMissing(LockTableError):
    """The lock table, or the schema named for it, does not exist (e.g. with
    ``create_table=False`` before ``joblocks init``); on MariaDB/MySQL also the
    database of the URL, which is a schema there (error 1049)."""


class LockTableMismatch(LockTableError):
    """A table of the lock table's name exists but is not a joblocks lock table (or
    one of the run ledger's name is not a run ledger, ``kind="run ledger table"``).

    Raised on first use (table creation) and by ``joblocks init`` instead of using the
    table or creating anything beside it (no fencing sequence or counter). ``table``
    is its name, ``problems`` one line per mismatch (missing or extra columns, a
    column of another type, another primary key).
    """

    def __init__(
        self, database: str, table: str, problems: list[str], kind: str = "lock table"
    ) -> None:
        self.table = table
        self.problems = list(problems)
        other = (
            "another ledger table name (runs_table_name=, --runs-table)"
            if kind == "run ledger table"
            else "another table name"
        )
        detail = (
            f"table {table} is not a joblocks {kind}: {'; '.join(self.problems)} "
            f"(nothing was created; use {other}, or rename that table)"
        )
        super().__init__("create table", database, detail)


class LockDriverMissing(LockBackendError, ImportError):
    """The database's driver cannot be imported. ``module`` (also ``name``, as on any
    ``ImportError``) is the missing module's name (``"psycopg"``, ``"pymysql"``, ...), or
    ``None`` when the import error does not name it."""

    def __init__(
        self,
        operation: str,
        database: str,
        detail: str,
        code: str | int | None = None,
        module: str | None = None,
    ) -> None:
        super().__init__(operation, database, detail, code)
        self.module = self.name = module


class LockPermissionError(LockBackendError):
    """The database refused the statement to this role: a privilege on the table (or
    its sequence, or the schema) is missing."""


class LockReadOnlyError(LockPermissionError):
    """The database only allows reading here: a standby/replica, or
    ``default_transaction_read_only``/``read_only`` on for the server, database or
    role, or a SQLite file that cannot be written."""


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


class LockHoldersMismatch(LockError):
    """A counted lease (``max_holders=N``) met the key in use another way: held as a
    single lease, or as a counted lease with another ``max_holders``. Nothing was taken."""

    def __init__(self, lock_key: str, max_holders: int, found: str) -> None:
        self.lock_key = lock_key
        self.max_holders = max_holders
        self.found = found
        super().__init__(
            f"lock {lock_key!r} cannot be taken with max_holders={max_holders}: it is {found}"
        )


class LeaseLost(LockError):
    """The lease is no longer held by its holder (expired, released or taken over)."""

    def __init__(self, lock_key: str, reason: str) -> None:
        self.lock_key = lock_key
        self.reason = reason
        super().__init__(f"lease on {lock_key!r} lost: {reason}")


class NoReply(TimeoutError):
    """A database call abandoned when no reply came within the model's ``timeout``
    (private: it comes out as :class:`LockTimeoutError`)."""

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))

    def __init__(self, timeout_ms: float) -> None:
        super().__init__(
            f"no reply within {timeout_ms:.0f} ms: the call was abandoned and "
            "its statement cancelled, so its outcome is unknown: it may have committed "
            "(a retry by the same holder is idempotent; an unretried grant expires)"
        )


def _detail(exc: BaseException) -> str:
    if isinstance(exc, NoReply):
        return str(exc)
    orig = _drivers.driver_error(exc)
    if orig is not exc:
        text = str(orig).strip() or type(orig).__name__
        return f"{type(orig).__name__}: {text.splitlines()[0]}"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


# The kind of a driver failure (see _drivers.kind_of) -> its exception class.
_KINDS: dict[str, type[LockBackendError]] = {
    "connection": LockConnectionError,
    "timeout": LockTimeoutError,
    "table missing": LockTableMissing,
    "driver missing": LockDriverMissing,
    "permission": LockPermissionError,
    "read-only": LockReadOnlyError,
    "other": LockBackendError,
}


def kind_of(exc: BaseException) -> type[LockBackendError]:
    """The :class:`LockBackendError` subclass for a driver failure (``LockBackendError``
    itself when it is of no known kind)."""
    return _KINDS[_drivers.kind_of(exc)]


def backend_error(operation: str, database: str, exc: BaseException) -> LockBackendError:
    """The :class:`LockBackendError` (of the right kind) for the driver failure ``exc``."""
    kind = kind_of(exc)
    detail = _detail(exc)
    if kind is LockDriverMissing:
        module = getattr(exc, "name", None)
        return LockDriverMissing(operation, database, detail, None, module)
    if kind is LockConnectionError and operation in FIRST_USE:
        operation = "connect"
    return kind(operation, database, detail, driver_code(exc))


class translate:
    """Turn any database/driver failure inside the block into :class:`LockBackendError`
    (of its kind: see :func:`kind_of`).

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
        if exc is not None:
            raise_translated(self.operation, self.database, exc)
        return False


def raise_translated(operation: str, database: str, exc: BaseException) -> None:
    """Raise ``exc``'s :class:`LockBackendError` if it is a database/driver failure
    (what :class:`translate` does at the end of its block); return otherwise."""
    if isinstance(exc, LockError) or not isinstance(exc, Exception):
        return
    if isinstance(exc, (_drivers.StatementFailed, sa_exc.SQLAlchemyError, OSError, ImportError)):
        raise backend_error(operation, database, exc) from exc
    # Drivers raise their own exception classes outside SQLAlchemy's wrapping in a
    # few places (e.g. during connect through an async adapter). They are still
    # database failures, not "taken".
    if type(exc).__module__.split(".")[0] in DRIVER_MODULES:
        raise backend_error(operation, database, exc) from exc
