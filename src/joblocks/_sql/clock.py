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

from .dialects import profile


def statement_now_sql(dialect: Dialect) -> str:
    """SQL for the database's current time in epoch ms, stable within a statement
    (the expressions are in ``_sql.dialects``:
    :attr:`~joblocks._sql.dialects.Profile.statement_now`)."""
    return profile(dialect).statement_now


class db_now_ms(FunctionElement[int]):
    """SQL expression: the database server's current time in epoch milliseconds."""

    type = BigInteger()
    inherit_cache = True


@compiles(db_now_ms)
def _compile_db_now_ms(element: db_now_ms, compiler: SQLCompiler, **kw: object) -> str:
    return profile(compiler.dialect).wall_now


class statement_now_ms(FunctionElement[int]):
    """SQL expression: the database's now in epoch ms, one value for the whole statement
    (:attr:`~joblocks._sql.dialects.Profile.statement_now`)."""

    type = BigInteger()
    inherit_cache = True


@compiles(statement_now_ms)
def _compile_statement_now_ms(
    element: statement_now_ms, compiler: SQLCompiler, **kw: object
) -> str:
    return profile(compiler.dialect).statement_now


def deadline(sent_at: float, ttl_ms: int) -> float:
    """When a grant (or renewal) sent at monotonic ``sent_at`` surely still holds: the
    database wrote ``floor(its now) + ttl``, its now being at or after ``sent_at`` but up
    to 1 ms above the floored value, so 1 ms is taken off."""
    return sent_at + (ttl_ms - 1) / 1000
