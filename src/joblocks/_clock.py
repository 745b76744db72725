""" "Now" as epoch milliseconds, read from the database server's clock.

Every comparison and every written timestamp uses these expressions, so clients with
skewed clocks still agree on who holds what. Each is stable within one statement, and
each is the same arithmetic: the database clock's epoch time, floored to a whole
millisecond (a lease written with ttl T at ms N is live while now < N + T).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


def _postgresql_ms(timestamp: str) -> str:
    # Truncated to the millisecond first (exact: timestamps are whole microseconds), so
    # the product is a whole number whether EXTRACT gives numeric (14+) or double.
    return f"CAST(EXTRACT(EPOCH FROM date_trunc('milliseconds', {timestamp})) * 1000 AS BIGINT)"


# Every database: the floor of its clock in whole epoch milliseconds, computed exactly.
_STATEMENT_NOW = {
    # statement_timestamp(): the start of the current statement, stable inside it.
    "postgresql": _postgresql_ms("statement_timestamp()"),
    # 'now' is the same for every use within one sqlite3_step(), and is whole
    # milliseconds (julianday() = that integer / 86400000.0): the product below lands
    # within 0.001 ms of it, often just under, so it is rounded, not truncated.
    "sqlite": "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
    # UTC_TIMESTAMP(6) is constant for a statement; TIMESTAMPDIFF on DATETIME values is
    # plain arithmetic, independent of the session time zone; DIV floors (positive).
    "mysql": "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000"
    " AS SIGNED)",
}

# For fenced writes inside a user's transaction: the wall clock right now, not the
# transaction's start (PostgreSQL's now() is frozen for a whole transaction).
_WALL_NOW = dict(_STATEMENT_NOW, postgresql=_postgresql_ms("clock_timestamp()"))


def _family(dialect: Dialect) -> str:
    name = dialect.name
    if name in ("mysql", "mariadb"):
        return "mysql"
    if name not in _STATEMENT_NOW:
        raise ValueError(f"joblocks supports SQLite, PostgreSQL and MySQL/MariaDB, not {name!r}")
    return name


def statement_now_sql(dialect: Dialect) -> str:
    """SQL for the database's current time in epoch ms, stable within a statement."""
    return _STATEMENT_NOW[_family(dialect)]


class db_now_ms(FunctionElement[int]):
    """SQL expression: the database server's current time in epoch milliseconds."""

    type = BigInteger()
    inherit_cache = True


@compiles(db_now_ms)
def _compile_db_now_ms(element: db_now_ms, compiler: SQLCompiler, **kw: object) -> str:
    return _WALL_NOW[_family(compiler.dialect)]
