"""DDL of the lock table per Django database vendor, compiled from joblocks's own table.

No Django import: the migration passes ``schema_editor.connection.vendor`` in.
"""

from __future__ import annotations

from sqlalchemy import MetaData, Sequence, Table
from sqlalchemy.schema import DropSequence, DropTable

from ..._sql.dialects import PROFILES, ddl_dialect, profile
from ..._sql.schema import (
    JOB_LOCKS_TABLE_NAME,
    build_table,
    ddl_statements,
    fence_counter_name,
    fence_sequence_name,
)

#: Django's ``connection.vendor`` values joblocks supports (``mysql`` is MariaDB's: the
#: DDL is compiled for MariaDB, MySQL has no SEQUENCE).
VENDORS = tuple(p.django_vendor for p in PROFILES)


def _objects(vendor: str, table_name: str, schema: str | None) -> tuple[Table, Sequence]:
    if profile(vendor).single_file:
        schema = None
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
    The statements are joblocks's own (:func:`joblocks._sql.schema.ddl_statements`).
    """
    table, _sequence = _objects(vendor, table_name, schema)
    return ddl_statements(vendor, table, if_not_exists=True)


def drop_statements(
    vendor: str, table_name: str = JOB_LOCKS_TABLE_NAME, schema: str | None = None
) -> list[str]:
    """The statements that drop the lock table and its fencing counter, where present."""
    dialect = ddl_dialect(vendor)
    table, sequence = _objects(vendor, table_name, schema)
    statements = [str(DropTable(table, if_exists=True).compile(dialect=dialect)).strip()]
    if profile(vendor).fence_kind == "counter":
        statements.append(f'DROP TABLE IF EXISTS "{fence_counter_name(table_name)}"')
    else:
        statements.append(str(DropSequence(sequence, if_exists=True).compile(dialect=dialect)))
    return statements
