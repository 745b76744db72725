"""What a model reaches: the identity of its table, whether that table has the shape of
a lock table (or of the run ledger's), and a caller's SQLite file."""

from __future__ import annotations

import logging
import os
from typing import Any, NamedTuple

from sqlalchemy import Connection, Integer, String, Table, inspect, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.types import TypeEngine

from .._util.errors import LockTableMismatch
from .._util.secrets import mask_url
from .._util.sqla import BinaryType
from .connect import SQLITE_BUSY_TIMEOUT_MS
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
