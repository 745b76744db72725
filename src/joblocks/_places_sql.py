"""The SQL of a counted lease (``max_holders=N``, see ``_places``), per dialect: the
group row's claim, its read with the N place rows, its extension and its removal. The
statements of a place itself are the single lease's (``_statements``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Dialect, Table

from ._clock import statement_now_sql
from ._dialects import profile
from ._statements import Prepared, _prepare


@dataclass(frozen=True)
class PlaceStatements:
    """The statements of a counted lease (``max_holders=N``, see ``_places``), for one
    dialect, table and N: the group row's claim (an UPDATE, then an INSERT doing nothing
    when the row exists), the read of the group row and its N place rows, and the
    extension of the group row's expiry to cover a place's."""

    claim: Prepared
    claim_insert: Prepared
    read: Prepared
    extend: Prepared
    leave: Prepared


def places(dialect: Dialect, table: Table, n: int) -> PlaceStatements:
    """Prepare the statements of a counted lease of ``n`` places (``_places``)."""
    prof = profile(dialect)
    t = dialect.identifier_preparer.format_table(table)
    now = statement_now_sql(dialect)
    row = f"id, holder, acquired_at, expires_at, fence, {now} AS now_ms"
    cols = "id, holder, acquired_at, expires_at, fence"
    # Evaluated left to right on MySQL (each assignment sees the ones before): the
    # times first, from the row as it was; then the holder.
    claim = (
        f"UPDATE {t} SET acquired_at = CASE WHEN holder = :marker AND expires_at > {now} "
        f"THEN acquired_at ELSE {now} END, "
        f"expires_at = CASE WHEN holder = :marker AND expires_at > {now} + :ttl "
        f"THEN expires_at ELSE {now} + :ttl END, holder = :marker, fence = 0 "
        f"WHERE id = :key AND (holder = :marker OR expires_at <= {now})"
    )
    insert = f"INSERT INTO {t} ({cols}) VALUES (:key, :marker, {now}, {now} + :ttl, 0)"
    insert += (
        " ON DUPLICATE KEY UPDATE id = id"
        if prof.family == "mysql"
        else " ON CONFLICT (id) DO NOTHING"
    )
    ids = ", ".join([":key"] + [f":p{i}" for i in range(1, n + 1)])
    place_ids = ", ".join(f":p{i}" for i in range(1, n + 1))
    until = "CAST(:until AS BIGINT)" if prof.family == "postgresql" else ":until"
    return PlaceStatements(
        claim=_prepare(dialect, claim),
        claim_insert=_prepare(dialect, insert),
        read=_prepare(dialect, f"SELECT {row} FROM {t} WHERE id IN ({ids})"),
        extend=_prepare(
            dialect,
            f"UPDATE {t} SET expires_at = CASE WHEN expires_at < {until} THEN {until} "
            "ELSE expires_at END WHERE id = :key AND holder = :marker",
        ),
        # After the last live place was released: the group row goes too. The places
        # are read through a derived table (MySQL refuses a DELETE whose subquery
        # reads the table it deletes from directly).
        leave=_prepare(
            dialect,
            f"DELETE FROM {t} WHERE id = :key AND holder = :marker AND NOT EXISTS "
            f"(SELECT 1 FROM (SELECT id FROM {t} WHERE id IN ({place_ids}) "
            f"AND expires_at > {now}) AS live_places)",
        ),
    )
