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

import re
from typing import Literal

from sqlalchemy import exc as sa_exc

from ._secrets import mask_text

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


class LockError(Exception):
    """Root of every exception joblocks raises (besides TypeError/ValueError for bad input)."""


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

    def __init__(self, timeout_ms: float) -> None:
        super().__init__(
            f"no reply within {timeout_ms:.0f} ms: the call was abandoned and "
            "its statement cancelled, so its outcome is unknown: it may have committed "
            "(a retry by the same holder is idempotent; an unretried grant expires)"
        )


def _detail(exc: BaseException) -> str:
    if isinstance(exc, NoReply):
        return str(exc)
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        text = str(exc.orig).strip() or type(exc.orig).__name__
        return f"{type(exc.orig).__name__}: {text.splitlines()[0]}"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


_DRIVER_MODULES = frozenset({"psycopg", "pymysql", "aiomysql", "sqlite3", "aiosqlite", "asyncio"})
_MYSQL_MODULES = frozenset({"pymysql", "aiomysql", "MySQLdb"})

_Kind = type[LockBackendError]

# PostgreSQL SQLSTATEs (exact code, then class) and MariaDB error numbers -> kind.
_PG_CODES: dict[str, _Kind] = {
    "25006": LockReadOnlyError,  # read_only_sql_transaction
    "57014": LockTimeoutError,  # query_canceled (statement_timeout)
    "55P03": LockTimeoutError,  # lock_not_available (lock_timeout)
    "42501": LockPermissionError,  # insufficient_privilege
    "42P01": LockTableMissing,  # undefined_table
    "3F000": LockTableMissing,  # invalid_schema_name
    "3D000": LockConnectionError,  # invalid_catalog_name (no such database)
    "53300": LockConnectionError,  # too_many_connections
    "57P01": LockConnectionError,  # admin_shutdown
    "57P02": LockConnectionError,  # crash_shutdown
    "57P03": LockConnectionError,  # cannot_connect_now
}
_PG_CLASSES: dict[str, _Kind] = {
    "08": LockConnectionError,  # connection exception
    "28": LockConnectionError,  # invalid authorization specification
}
_MYSQL_CODES: dict[int, _Kind] = {
    1290: LockReadOnlyError,  # ER_OPTION_PREVENTS_STATEMENT (--read-only)
    1792: LockReadOnlyError,  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    1969: LockTimeoutError,  # ER_STATEMENT_TIMEOUT (max_statement_time)
    3024: LockTimeoutError,  # ER_QUERY_TIMEOUT (MySQL max_execution_time)
    1205: LockTimeoutError,  # ER_LOCK_WAIT_TIMEOUT
    1142: LockPermissionError,  # ER_TABLEACCESS_DENIED_ERROR
    1143: LockPermissionError,  # ER_COLUMNACCESS_DENIED_ERROR
    1044: LockPermissionError,  # ER_DBACCESS_DENIED_ERROR
    1146: LockTableMissing,  # ER_NO_SUCH_TABLE
    1045: LockConnectionError,  # ER_ACCESS_DENIED_ERROR (user or password)
    1049: LockTableMissing,  # ER_BAD_DB_ERROR: the database (schema) does not exist
    1040: LockConnectionError,  # ER_CON_COUNT_ERROR
    2003: LockConnectionError,  # CR_CONN_HOST_ERROR
    2006: LockConnectionError,  # CR_SERVER_GONE_ERROR
    2013: LockConnectionError,  # CR_SERVER_LOST
    1047: LockConnectionError,  # ER_UNKNOWN_COM_ERROR: a Galera node without quorum
}
# SQLite result codes (primary code: the low byte of the extended one).
_SQLITE_CODES: dict[int, _Kind] = {
    5: LockTimeoutError,  # SQLITE_BUSY: the busy time-out ran out
    6: LockTimeoutError,  # SQLITE_LOCKED
    3: LockPermissionError,  # SQLITE_PERM
    8: LockReadOnlyError,  # SQLITE_READONLY
    14: LockConnectionError,  # SQLITE_CANTOPEN
}
# Before Python 3.11 sqlite3 exceptions carry no result code: their fixed messages.
_SQLITE_MESSAGES: dict[str, _Kind] = {
    "no such table": LockTableMissing,
    "database is locked": LockTimeoutError,
    "attempt to write a readonly database": LockReadOnlyError,
    "unable to open database file": LockConnectionError,
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
_FIRST_USE = frozenset({"create table", "open database"})


def _driver_error(exc: BaseException) -> BaseException:
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


def driver_code(exc: BaseException) -> str | int | None:
    """The SQLSTATE (PostgreSQL), error number (MariaDB) or SQLite result name of a
    driver failure (``exc`` or the driver exception SQLAlchemy wrapped), else None."""
    orig = _driver_error(exc)
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


def kind_of(exc: BaseException) -> _Kind:
    """The :class:`LockBackendError` subclass for a driver failure (``LockBackendError``
    itself when it is of no known kind)."""
    if isinstance(exc, ImportError):
        return LockDriverMissing
    orig = _driver_error(exc)
    chain = _chain(orig)
    if any(
        isinstance(link, TimeoutError) or type(link).__name__ == "ConnectionTimeout"
        for link in chain
    ):
        return LockTimeoutError
    code = driver_code(orig)
    if isinstance(code, str) and not code.startswith("SQLITE"):
        found = _PG_CODES.get(code) or _PG_CLASSES.get(code[:2])
        if found is not None:
            return found
    elif isinstance(code, int):
        if code == 1180 and "primary component" in str(orig).lower():
            return LockConnectionError  # a commit on a Galera node that lost quorum
        return _MYSQL_CODES.get(code, LockBackendError)
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
        return LockConnectionError
    if isinstance(orig, (ConnectionError, OSError)):
        return LockConnectionError
    return LockBackendError


def backend_error(operation: str, database: str, exc: BaseException) -> LockBackendError:
    """The :class:`LockBackendError` (of the right kind) for the driver failure ``exc``."""
    kind = kind_of(exc)
    detail = _detail(exc)
    if kind is LockDriverMissing:
        module = getattr(exc, "name", None)
        return LockDriverMissing(operation, database, detail, None, module)
    if kind is LockConnectionError and operation in _FIRST_USE:
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
    if isinstance(exc, (sa_exc.SQLAlchemyError, OSError, ImportError)):
        raise backend_error(operation, database, exc) from exc
    # Drivers raise their own exception classes outside SQLAlchemy's wrapping in a
    # few places (e.g. during connect through an async adapter). They are still
    # database failures, not "taken".
    if type(exc).__module__.split(".")[0] in _DRIVER_MODULES:
        raise backend_error(operation, database, exc) from exc
