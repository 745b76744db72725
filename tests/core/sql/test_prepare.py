"""``_sql.statements.prepare`` turns a template's ``:name`` parameters into the driver's
parameter style without SQLAlchemy's compiler: it must make exactly what
``text(sql).compile(dialect=...)`` makes, for every statement of every family, on every
driver joblocks supports (the golden SQL files then pin what reaches each database)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import MetaData, text
from sqlalchemy.dialects import mysql, postgresql, sqlite

from joblocks._sql.schema import build_table
from joblocks._sql.statements import prepare, sql_of

DIALECTS: dict[str, Any] = {
    "sqlite+pysqlite": sqlite.pysqlite.dialect(),
    "sqlite+aiosqlite": sqlite.aiosqlite.dialect(),
    "postgresql+psycopg": postgresql.psycopg.dialect(),
    "postgresql+psycopg_async": postgresql.psycopg.dialect_async(),
    "mysql+pymysql": mysql.pymysql.dialect(),
    "mysql+aiomysql": mysql.aiomysql.dialect(),
}


def _compiled(dialect: Any, sql: str) -> tuple[str, tuple[str, ...] | None]:
    compiled = text(sql).compile(dialect=dialect)
    order = compiled.positiontup
    return compiled.string, (tuple(order) if compiled.positional and order else None)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_every_statement_is_prepared_as_sqlalchemy_compiles_it(name: str) -> None:
    dialect = DIALECTS[name]
    table = build_table(MetaData(), "job_locks")
    statements = sql_of(dialect, table)
    assert len(statements) > 20
    for key, sql in statements.items():
        sql = sql.replace("{keys}", ":key, :p1, :p2").replace("{places}", ":p1, :p2")
        made = prepare(dialect, sql)
        assert (made.sql, made.order) == _compiled(dialect, sql), key


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_what_is_not_a_parameter_stays_as_it_is(name: str) -> None:
    """A cast (``::``), a time literal, an escaped colon and a percent sign."""
    dialect = DIALECTS[name]
    sql = (
        "SELECT CAST(:a AS TEXT)::text, '1970-01-01 00:00:00', '\\:x', '50%', :b, :a "
        "FROM t WHERE x LIKE 'a%'"
    )
    made = prepare(dialect, sql)
    assert (made.sql, made.order) == _compiled(dialect, sql)
    assert "00:00:00" in made.sql
