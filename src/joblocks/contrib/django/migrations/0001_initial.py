"""Create the lock table and its fencing counter in ``JOBLOCKS_DATABASE``.

The DDL is compiled from joblocks's own table for the database being migrated
(``schema_editor.connection.vendor``): the ``<table>_fence_seq`` SEQUENCE and the table
on PostgreSQL and MariaDB; the table, its counter table and two triggers on SQLite.
Every statement is idempotent. Other databases (aliases) are left alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations  # type: ignore[import-untyped, unused-ignore]

from joblocks import JOB_LOCKS_TABLE_NAME
from joblocks._sql.dialects import profile
from joblocks.contrib.django._ddl import create_statements, drop_statements


def _statements(schema_editor: Any, build: Any) -> list[str]:
    from joblocks.contrib.django import database_alias, model_options

    connection = schema_editor.connection
    if connection.alias != database_alias():
        return []
    vendor = connection.vendor
    floor = profile(vendor).version_floor
    if floor and vendor == "mysql" and not getattr(connection, "mysql_is_mariadb", False):
        raise RuntimeError(
            f"joblocks needs {floor} or newer on this database family: "
            "MySQL has no SEQUENCE for the fencing counter"
        )
    options = model_options()
    statements: list[str] = build(
        vendor, options.get("table_name", JOB_LOCKS_TABLE_NAME), options.get("schema")
    )
    return statements


def create_lock_table(apps: Any, schema_editor: Any) -> None:
    """Create the lock table (and its fencing counter) where it is missing."""
    for statement in _statements(schema_editor, create_statements):
        schema_editor.execute(statement, params=None)


def drop_lock_table(apps: Any, schema_editor: Any) -> None:
    """Drop the lock table and its fencing counter."""
    for statement in _statements(schema_editor, drop_statements):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):  # type: ignore[misc, unused-ignore]
    """The lock table of joblocks."""

    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(create_lock_table, drop_lock_table, elidable=False)
    ]
