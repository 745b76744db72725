"""DDL of the lock table per Django database vendor, compiled from joblocks's own table.

No Django import: the migration passes ``schema_editor.connection.vendor`` in.
"""

from __future__ import annotations

from sqlalchemy import URL, Dialect, MetaData, Sequence, Table
from sqlalchemy.schema import (
    CreateSequence,
    CreateTable,
    DropSequence,
    DropTable,
    SetTableComment,
)

from ..._schema import (
    JOB_LOCKS_TABLE_NAME,
    build_table,
    fence_counter_name,
    fence_sequence_name,
    sqlite_counter_ddl,
)

#: Django's ``connection.vendor`` -> the SQLAlchemy dialect the DDL is compiled for
#: (``mysql`` must be MariaDB: MySQL has no SEQUENCE). No driver is imported.
_DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mariadb+pymysql",
}
#: Django's ``connection.vendor`` values joblocks supports.
VENDORS = tuple(_DRIVERS)


def _dialect(vendor: str) -> Dialect:
    drivername = _DRIVERS.get(vendor)
    if drivername is None:
        raise ValueError(
            f"database vendor {vendor!r} is not supported by joblocks (use {', '.join(VENDORS)})"
        )
    return URL.create(drivername).get_dialect()()


def _objects(table_name: str, schema: str | None) -> tuple[Table, Sequence]:
    table = build_table(MetaData(), table_name, schema)
    return table, Sequence(fence_sequence_name(table_name), schema=schema)


def create_statements(
    vendor: str, table_name: str = JOB_LOCKS_TABLE_NAME, schema: str | None = None
) -> list[str]:
    """The statements that create the lock table and its fencing counter, where missing.

    ``vendor`` is Django's ``connection.vendor``: ``sqlite`` (the table, plus the
    counter table and its triggers), ``postgresql`` or ``mysql`` for MariaDB (the
    ``<table>_fence_seq`` SEQUENCE, then the table). Every statement is idempotent
    (``IF NOT EXISTS``), so the migration may run where joblocks already made the table.
    """
    dialect = _dialect(vendor)
    if vendor == "sqlite":
        schema = None
    table, sequence = _objects(table_name, schema)
    statements: list[str] = []
    if vendor != "sqlite":
        statements.append(
            str(CreateSequence(sequence, if_not_exists=True).compile(dialect=dialect))
        )
    statements.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)).strip())
    if table.comment and dialect.supports_comments and not dialect.inline_comments:
        statements.append(str(SetTableComment(table).compile(dialect=dialect)))
    if vendor == "sqlite":
        statements.extend(sqlite_counter_ddl(table_name, fence_counter_name(table_name)))
    return statements


def drop_statements(
    vendor: str, table_name: str = JOB_LOCKS_TABLE_NAME, schema: str | None = None
) -> list[str]:
    """The statements that drop the lock table and its fencing counter, where present."""
    dialect = _dialect(vendor)
    if vendor == "sqlite":
        schema = None
    table, sequence = _objects(table_name, schema)
    statements = [str(DropTable(table, if_exists=True).compile(dialect=dialect)).strip()]
    if vendor == "sqlite":
        statements.append(f'DROP TABLE IF EXISTS "{fence_counter_name(table_name)}"')
    else:
        statements.append(str(DropSequence(sequence, if_exists=True).compile(dialect=dialect)))
    return statements
