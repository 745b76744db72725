"""Advice for a database failure, chosen by its kind (the subclass of
:class:`~joblocks.LockBackendError` that :mod:`joblocks._util.errors` picked): one line after
a command's error (:func:`backend_hint`), and the ``fix`` of a failed ``doctor`` check
(:func:`failure_hint`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._util.errors import LockBackendError

CONNECT_HINT = "check that the server runs and accepts connections from here, and the URL"
GRANT_HINT = "grant SELECT, INSERT, UPDATE, DELETE on the table (and USAGE on its sequence)"
READ_ONLY_HINT = (
    "the server is read-only (a standby/replica, or default_transaction_read_only or "
    "read_only is on for the server, database or role): point --url at the primary"
)
TIMEOUT_HINT = (
    "a statement ran into a timeout (statement_timeout or lock_timeout on PostgreSQL, "
    "max_statement_time or innodb_lock_wait_timeout on MariaDB, set for the server, "
    "database or role), or waited for a lock another session holds on the table: "
    "raise the timeout for joblocks's role (e.g. ALTER ROLE ... SET statement_timeout "
    "= '5s') and look for long transactions"
)
PREPARED_HINT = (
    "named prepared statements ran through a transaction-mode pooler: remove "
    "prepare_threshold from the URL (joblocks then never prepares), or on an engine of "
    'your own pass connect_args={"prepare_threshold": None}'
)
POOLER_FIX = (
    "engines joblocks makes from a URL use no named prepared statements through it; "
    "on an engine of your own pass "
    'create_engine(url, connect_args={"prepare_threshold": None}); session-level '
    "features (SET, session advisory locks, LISTEN, temporary tables, WITH HOLD "
    "cursors) cannot work through it. See docs/howto/poolers.md"
)

AUTH_HINT = (
    "the server refused the user or password (or the role does not exist): check them in the URL"
)
NO_DATABASE_HINT = "the database does not exist: create it, or fix the database name in the URL"
NOT_SQLITE_HINT = (
    "the file is not a SQLite database (another program's file, encrypted or damaged): "
    "point --url at the lock file, or move that file away"
)
SQLITE_HINT = "check the SQLite file of the URL: its directory exists and it can be written"

# The kind of failure (joblocks._util.errors decides it, from the SQLSTATE or error number)
# chooses the hint; a few connection failures have one of their own.
_CODE_HINTS: dict[str | int, str] = {
    "26000": PREPARED_HINT,  # invalid_sql_statement_name
    "42P05": PREPARED_HINT,  # duplicate_prepared_statement
    "3D000": NO_DATABASE_HINT,
    1049: NO_DATABASE_HINT,  # ER_BAD_DB_ERROR
    "53300": "the server has no connection slots left (max_connections): close idle "
    "connections, or use a pooler",
    1040: "the server has no connection slots left (max_connections)",
    "57P03": "the server is starting up, shutting down or in recovery: try again shortly",
    1045: AUTH_HINT,  # ER_ACCESS_DENIED_ERROR
    "SQLITE_NOTADB": NOT_SQLITE_HINT,
}


def code_hint(exc: LockBackendError) -> str | None:
    """The advice its SQLSTATE, error number or SQLite result name gives, if any."""
    code = exc.code
    if code is not None and code in _CODE_HINTS:
        return _CODE_HINTS[code]
    if isinstance(code, str) and code.startswith("28"):  # invalid authorization
        return AUTH_HINT
    return None


def backend_hint(exc: LockBackendError) -> str:
    """Advice to add to a database error, by its kind, or an empty string."""
    from .._util.errors import LockConnectionError, LockDriverMissing, LockTableMissing

    by_code = code_hint(exc)
    if by_code is not None:
        return f" ({by_code})"
    if isinstance(exc, LockTableMissing):
        return (
            " (is the lock table created? run `joblocks init` with the same --url/--table/--schema)"
        )
    if isinstance(exc, LockConnectionError) and exc.database.startswith("sqlite"):
        return " (does the SQLite file's directory exist, and is it writable?)"
    if isinstance(exc, LockConnectionError):
        return f" ({CONNECT_HINT})"
    if isinstance(exc, LockDriverMissing):
        module = (exc.module or "").lower()
        if module.startswith("psycopg"):
            return " (install the driver: pip install 'joblocks[postgresql]')"
        if module.startswith(("pymysql", "mysqldb")):
            return " (install the driver: pip install 'joblocks[mysql]')"
    return ""


def failure_hint(exc: BaseException, default: str = CONNECT_HINT) -> str:
    """The advice for a failure, chosen by its kind (see :mod:`joblocks._util.errors`)."""
    from .._util.errors import (
        LockBackendError,
        LockConnectionError,
        LockPermissionError,
        LockReadOnlyError,
        LockTimeoutError,
    )

    if not isinstance(exc, LockBackendError):
        return default
    code = exc.code
    by_code = code_hint(exc)
    if by_code is not None:
        return by_code
    server = not exc.database.startswith("sqlite")
    if server and isinstance(exc, LockReadOnlyError):
        return READ_ONLY_HINT
    if server and isinstance(exc, LockPermissionError):
        return GRANT_HINT
    if server and isinstance(exc, LockTimeoutError):
        # A server's statement or lock time-out has a code; a network one has none.
        return TIMEOUT_HINT if code is not None else CONNECT_HINT
    if server and isinstance(exc, LockConnectionError):
        return CONNECT_HINT
    if not server and default == CONNECT_HINT:
        default = SQLITE_HINT  # there is no server to check
    return backend_hint(exc).strip(" ()") or default
