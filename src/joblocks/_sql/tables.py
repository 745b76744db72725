"""What a model reaches: the identity of its table, whether that table has the shape of
a lock table (or of the run ledger's), a caller's SQLite file, and what joblocks does on
the connections of an engine it made.

What joblocks does on every new connection of an engine it made, and on check-out.

- SQLite: WAL and ``synchronous = NORMAL`` (:func:`sqlite_pragmas`).
- PostgreSQL: one query per new connection (:func:`postgres_connect`) reads the backend's
  pid (to tell a direct connection from a pooler's, see below) and the default
  isolation (:func:`read_committed_wrapper`).
- Every database: a connection idle for longer than ``IDLE_PING_AFTER_S`` is pinged when
  it is checked out again (:func:`ping_if_idle`).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, NamedTuple

from sqlalchemy import Connection, Dialect, Integer, String, Table, inspect, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeEngine

from .._util.drivers import BinaryType, checkout_dialect
from .._util.errors import LockTableMismatch
from .._util.validate import mask_url
from .dialects import profile

log = logging.getLogger("joblocks")


#: The cluster's system identifier, where this role may read it.
_PG_SYSTEM = (
    "CASE WHEN has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') "
    "THEN (SELECT system_identifier::text FROM pg_catalog.pg_control_system()) END"
)
_PG_IDENTITY = (
    "SELECT {system}, current_setting('port'), current_database(), n.nspname, c.relname "
    "FROM (SELECT to_regclass(:name) AS oid) AS r "
    "LEFT JOIN pg_catalog.pg_class AS c ON c.oid = r.oid "
    "LEFT JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace"
)


class TableIdentity(NamedTuple):
    """Which table a model reaches, as the file system or the server reports it.

    ``key`` is equal for two models exactly when they reach the same table, however
    their URLs are spelled (see :func:`table_identity`); ``file`` is the SQLite file
    as (path, st_dev, st_ino), None on server databases.
    """

    key: tuple[Any, ...]
    file: tuple[str, int, int] | None


def table_identity(conn: Connection, statements: Any, table: Table) -> TableIdentity:
    """The identity of ``table`` as reached through ``conn`` (read once per model).

    - SQLite: the device and inode of the main database file, found from the path the
      connection opened (``PRAGMA database_list``, symlinks resolved), and the table
      name folded to lower case (SQLite ignores its case).
    - PostgreSQL: the cluster's ``system_identifier`` (``pg_control_system()``; where
      that function is not granted, the server's port stands in), the current
      database, and the schema and name the table resolves to on the search path.
    - MariaDB: ``@@hostname``, ``@@port`` and ``@@datadir`` of the server, and the
      schema and name ``information_schema`` reports for the table.

    A missing table raises ``NoSuchTableError`` on PostgreSQL and MariaDB (nothing is
    kept then: the next call reads the identity again).
    """
    name = profile(conn.dialect).family
    if name == "sqlite":
        rows = conn.exec_driver_sql("PRAGMA database_list").all()
        path = next((str(row[2]) for row in rows if row[1] == "main"), "")
        if not path:
            raise ValueError(
                "database: this SQLite connection has no file (an in-memory or temporary "
                "database), so it cannot exclude anything; use a file, e.g. 'sqlite:///locks.db'"
            )
        found = os.stat(path)
        key = ("sqlite", found.st_dev, found.st_ino, table.name.lower())
        return TableIdentity(key, (path, found.st_dev, found.st_ino))
    if name == "postgresql":
        quoted = {"name": conn.dialect.identifier_preparer.format_table(table)}
        try:
            row = conn.execute(text(_PG_IDENTITY.format(system=_PG_SYSTEM)), quoted).one()
        except sa_exc.DBAPIError:  # pg_control_system() granted but refused (a fork)
            row = conn.execute(text(_PG_IDENTITY.format(system="NULL")), quoted).one()
        if row[4] is None:
            raise sa_exc.NoSuchTableError(f"relation {table.fullname} does not exist")
        cluster = f"system {row[0]}" if row[0] is not None else f"port {row[1]}"
        return TableIdentity(("postgresql", cluster, row[2], row[3], row[4]), None)
    row = conn.execute(
        text(
            "SELECT @@hostname, @@port, @@datadir, COALESCE(:schema, DATABASE()), "
            "(SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
            "COALESCE(:schema, DATABASE()) AND TABLE_NAME = :name LIMIT 1)"
        ),
        {"schema": table.schema, "name": table.name},
    ).one()
    if row[4] is None:
        raise sa_exc.NoSuchTableError(f"table {table.fullname} doesn't exist")
    return TableIdentity(("mysql", row[0], row[1], row[2], row[3], row[4]), None)


def tune_user_sqlite(conn: Connection) -> None:
    """Give the SQLite file of a caller's engine the journal mode joblocks relies on.

    In SQLite's default rollback journal (``delete``) a reader's open transaction
    blocks every write, lock writes included, for the busy timeout; in WAL it blocks
    none. joblocks switches a file still in ``delete`` mode to WAL (a property of the
    file: it stays, for every connection), and logs a warning when the file keeps
    another mode (set deliberately, or busy at that moment) or the connection has no
    busy timeout. Once per model, on its first call.
    """
    mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar()).lower()
    where = mask_url(conn.engine.url)
    why = f"it is in journal mode {mode!r}"
    if mode == "delete":
        try:
            mode = str(conn.exec_driver_sql("PRAGMA journal_mode = WAL").scalar()).lower()
        except sa_exc.DBAPIError as exc:
            why = f"switching it to WAL failed ({exc.orig})"
    if mode != "wal":
        log.warning(
            "joblocks: %s is not in WAL mode (%s): an open read transaction of another "
            "connection blocks every lock write for the busy timeout, then the write "
            "fails (set PRAGMA journal_mode=WAL on the file)",
            where,
            why,
        )
    if not conn.exec_driver_sql("PRAGMA busy_timeout").scalar():
        log.warning(
            "joblocks: %s has no busy timeout: a lock write that meets another writer "
            "fails at once with LockBackendError (joblocks' own engines wait %d ms)",
            where,
            SQLITE_BUSY_TIMEOUT_MS,
        )


#: The lock table's columns: name -> the SQLAlchemy type class its reflection must be.
_COLUMN_KINDS: dict[str, tuple[type[TypeEngine[Any]], ...]] = {
    "id": (String, BinaryType),
    "holder": (String, BinaryType),
    "acquired_at": (Integer,),
    "expires_at": (Integer,),
    "fence": (Integer,),
}


def shape_problems(conn: Connection, table: Table) -> list[str] | None:
    """What makes the existing table of ``table``'s name not a joblocks lock table.

    None when there is no such table; an empty list when it has the lock table's shape:
    exactly the columns ``id``, ``holder`` (text), ``acquired_at``, ``expires_at``,
    ``fence`` (integers) and the primary key ``(id)``. Column names are compared as the
    database compares them: exactly on PostgreSQL, ignoring case on SQLite and MariaDB
    (``"acquiredAt"`` is never ``acquired_at``).
    """
    found = inspect(conn)
    if not found.has_table(table.name, schema=table.schema):
        return None
    # Column names are case-insensitive on SQLite and MariaDB, exact on PostgreSQL.
    fold = str if profile(conn.dialect).exact_column_names else str.lower
    columns = {
        fold(column["name"]): column for column in found.get_columns(table.name, table.schema)
    }
    problems: list[str] = []
    missing = [name for name in _COLUMN_KINDS if name not in columns]
    extra = sorted(column["name"] for key, column in columns.items() if key not in _COLUMN_KINDS)
    if missing:
        problems.append("missing columns " + ", ".join(missing))
    if extra:
        problems.append("extra columns " + ", ".join(extra))
    for name, kinds in _COLUMN_KINDS.items():
        column = columns.get(name)
        if column is not None and not isinstance(column["type"], kinds):
            wanted = "text" if kinds[0] is String else "an integer"
            problems.append(f"column {name} is {_type_name(column['type'], conn)}, not {wanted}")
    try:
        primary = found.get_pk_constraint(table.name, table.schema)["constrained_columns"] or []
    except NoSuchTableError:  # SQLite's reflection looks the name up with its case
        primary = [column["name"] for column in columns.values() if column.get("primary_key")]
    if "id" in columns and [fold(name) for name in primary] != ["id"]:
        shown = ", ".join(primary) if primary else "none"
        problems.append(f"primary key is ({shown}), not (id)")
    return problems


def _type_name(kind: TypeEngine[Any], conn: Connection) -> str:
    try:
        return str(kind.compile(dialect=conn.dialect))
    except Exception:
        return type(kind).__name__


def runs_shape_problems(conn: Connection, table: Table) -> list[str] | None:
    """What makes the existing table of the ledger table's name not a run ledger: None
    when there is no such table; else the columns it lacks or has beyond the ledger's
    (names compared as :func:`shape_problems` does)."""
    found = inspect(conn)
    if not found.has_table(table.name, schema=table.schema):
        return None
    fold = str if profile(conn.dialect).exact_column_names else str.lower
    columns = {fold(c["name"]): c["name"] for c in found.get_columns(table.name, table.schema)}
    wanted = [column.name for column in table.columns]
    problems: list[str] = []
    missing = [name for name in wanted if fold(name) not in columns]
    extra = sorted(name for key, name in columns.items() if key not in {fold(w) for w in wanted})
    if missing:
        problems.append("missing columns " + ", ".join(missing))
    if extra:
        problems.append("extra columns " + ", ".join(extra))
    return problems


def check_shape(conn: Connection, table: Table) -> None:
    """Raise :class:`~joblocks.LockTableMismatch` when the table is not a lock table
    (or, for the run ledger's table, not a run ledger)."""
    runs = table.info.get("joblocks") == "runs"
    problems = (runs_shape_problems if runs else shape_problems)(conn, table)
    if problems:
        where = mask_url(conn.engine.url)
        kind = "run ledger table" if runs else "lock table"
        raise LockTableMismatch(where, table.fullname, problems, kind)


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
