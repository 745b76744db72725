"""The statements of a counted lease (``max_holders=N``, see ``_core.places``), prepared per
dialect, table and N: the group row's claim, its read with the N place rows, its
extension and its removal. Their SQL is written whole with the family's other
statements (``_sql.sqlite``, ``_sql.postgresql``, ``_sql.mariadb``: ``place_*``); the
statements of a place itself are the single lease's (``_sql.statements``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Dialect, Table

from .statements import Prepared, _prepare, sql_of


@dataclass(frozen=True)
class PlaceStatements:
    """The statements of a counted lease (``max_holders=N``, see ``_core.places``), for one
    dialect, table and N: the group row's claim (an UPDATE, then an INSERT doing nothing
    when the row exists), the read of the group row and its N place rows, and the
    extension of the group row's expiry to cover a place's."""

    claim: Prepared
    claim_insert: Prepared
    read: Prepared
    extend: Prepared
    leave: Prepared


def places(dialect: Dialect, table: Table, n: int) -> PlaceStatements:
    """Prepare the statements of a counted lease of ``n`` places (``_core.places``): the
    family's ``place_*`` statements, ``{places}`` being ``:p1, …, :pN`` and ``{keys}``
    the group row's ``:key`` and those."""
    sql = sql_of(dialect, table)
    place_ids = ", ".join(f":p{i}" for i in range(1, n + 1))
    ids = f":key, {place_ids}"

    def p(name: str) -> Prepared:
        text = sql[f"place_{name}"].replace("{keys}", ids).replace("{places}", place_ids)
        return _prepare(dialect, text)

    return PlaceStatements(
        claim=p("claim"),
        claim_insert=p("claim_insert"),
        read=p("read"),
        extend=p("extend"),
        leave=p("leave"),
    )
