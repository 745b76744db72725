"""Every lock operation's statements, prepared once per dialect, table and acquire path.

The SQL itself is written whole, one template per statement, in one module per
database family: ``_sql.sqlite``, ``_sql.postgresql`` and ``_sql.mariadb`` (the
table's names are the only substitutions). ``tests/core/sql/golden/`` pins what is
sent to each database. Statements are compiled to the driver's own SQL string and
parameter style when a model is made, so a call only binds parameters and sends one
string.

Acquire paths (``acquire_path=``):

``"upsert"``
    one atomic statement. PostgreSQL and SQLite: ``INSERT … ON CONFLICT (id) DO UPDATE
    … WHERE <expired or ours> RETURNING fence``. MySQL/MariaDB: ``INSERT … ON DUPLICATE
    KEY UPDATE`` whose assignments are guarded by the same condition, reporting the
    token through ``LAST_INSERT_ID(expr)`` (0 when refused).
``"update_insert"``
    the reference's order without its error: a conditional ``UPDATE``, then ``INSERT …
    ON CONFLICT DO NOTHING`` (PostgreSQL and SQLite).
``"portable"``
    the reference's two statements exactly: a conditional ``UPDATE``, then a plain
    ``INSERT`` whose duplicate-key error means "held by someone else".
"""

from __future__ import annotations

import operator
import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, TypeVar, Union

from sqlalchemy import Dialect, Table

from . import mariadb as _sql_mariadb
from . import postgresql as _sql_postgresql
from . import sqlite as _sql_sqlite
from .dialects import ACQUIRE_PATHS, AcquirePath, Family, Profile, profile
from .postgresql import PG_TIMELINE_SQL, TIMELINE_SHIFT
from .schema import fence_counter_name, fence_sequence

__all__ = [
    "ACQUIRE_PATHS",
    "PG_TIMELINE_SQL",
    "TIMELINE_SHIFT",
    "AcquirePath",
    "Result",
    "Sent",
    "Statements",
    "build",
    "paths_for",
    "sql_of",
]

#: Each family's statements, whole (see the modules).
TEMPLATES: dict[Family, dict[str, str]] = {
    "sqlite": _sql_sqlite.STATEMENTS,
    "postgresql": _sql_postgresql.STATEMENTS,
    "mysql": _sql_mariadb.STATEMENTS,
}

Params = Union[tuple[Any, ...], dict[str, Any]]

#: ``schedule=``: the condition the ``update_in_slot`` statements add to ``update``:
#: the row's last grant was before the slot now (``_core.slots``).
IN_SLOT = " AND acquired_at < :slot_start"


@dataclass(frozen=True)
class Prepared:
    """One statement in the driver's SQL and parameter style."""

    sql: str
    order: tuple[str, ...] | None  # positional drivers: parameter names in order
    # ``order`` as one C-level call (``operator.itemgetter``), made once: this runs for
    # every statement sent.
    _pick: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.order is not None:
            object.__setattr__(self, "_pick", _picker(self.order))

    def params(self, values: Mapping[str, Any]) -> Params:
        pick = self._pick
        if pick is None:
            return dict(values)
        return pick(values)


class Result:
    """What a statement gave back, read off the cursor before it is closed (``rows``:
    as the driver's ``fetchall`` gave them, a list or a tuple; never changed): what a
    driver sends back into an operation's generator (:data:`Sent`)."""

    __slots__ = ("lastrowid", "rowcount", "rows")

    def __init__(self, rows: Sequence[Any], rowcount: int, lastrowid: int | None) -> None:
        self.rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None


T = TypeVar("T")

#: An operation (``_core.ops``): a generator that yields ``(prepared, values)``, one
#: statement and the mapping of its parameters, is sent back the statement's
#: :class:`Result` (or has the driver's error thrown in at the ``yield``), and returns
#: the operation's result. A driver sends every statement of one generator on one
#: connection, in order (``_db.execute.run``).
Sent = Generator[tuple[Prepared, Mapping[str, Any]], Result, T]


def _picker(order: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The positional parameters of ``order`` from a mapping, as a tuple."""
    if len(order) > 1:
        return operator.itemgetter(*order)
    if order:
        name = order[0]
        return lambda values: (values[name],)
    return lambda values: ()


@dataclass(frozen=True)
class AcquireStep:
    """One statement of an acquire path and how to read its outcome."""

    stmt: Prepared
    #: "returning": a row with the token, or none; "lastrowid": token in LAST_INSERT_ID
    #: (0 or no matched row when refused).
    outcome: Literal["returning", "lastrowid"]
    #: A duplicate-key error from this step means "held by someone else".
    duplicate_means_taken: bool = False
    #: MySQL/MariaDB only: the grant's token was drawn in the ``VALUES`` of a plain
    #: INSERT, before the row was locked; this statement draws it again under the row
    #: lock (same holder and token; the new one reported through ``LAST_INSERT_ID``).
    redraw: Prepared | None = None


@dataclass(frozen=True)
class Statements:
    """Everything one model sends, prepared for one dialect and table."""

    family: str  # "postgresql" | "sqlite" | "mysql"
    profile: Profile  # what joblocks knows about the database family (``_sql.dialects``)
    path: AcquirePath
    acquire: tuple[AcquireStep, ...]
    release: Prepared
    refresh: AcquireStep  # outcome: the new expires_at (epoch ms), or nothing
    refresh_lease: AcquireStep  # refresh of a live grant: also checks token and expiry
    release_lease: Prepared  # release, also checking the lease's token
    hold_until: Prepared  # release under min_hold: keep the row until the hold has passed
    is_held: Prepared
    peek: Prepared
    list_all: Prepared
    list_live: Prepared
    list_expired: Prepared
    count_all: Prepared
    count_live: Prepared
    count_expired: Prepared
    insert: AcquireStep
    update_holder: Prepared
    update_ttl: Prepared
    delete: Prepared
    now: Prepared
    # Keyset pages of the rows (``id > :after ORDER BY id LIMIT :n``), by state.
    page_all: Prepared
    page_live: Prepared
    page_expired: Prepared
    # ``prune``: the key ending a batch of rows expired for at least :age ms, the
    # batch's DELETE, the last batch's DELETE, and the dry run's count.
    prune_bound: Prepared
    prune_range: Prepared
    prune_rest: Prepared
    prune_count: Prepared
    # ``schedule=`` (``_core.slots``): the acquire steps that also need the row's last grant
    # to be before the slot (``:slot_start``, epoch ms): one start per slot.
    acquire_in_slot: tuple[AcquireStep, ...] = ()
    # The dialect the statements were compiled for: what an operation compiles more
    # of, later, compiles for it too (``_core.places``), with no connection at hand.
    dialect: Any = field(default=None, compare=False, repr=False)


#: A ``:name`` parameter of a template (as SQLAlchemy's ``text()`` reads one: not
#: ``::``, not inside a word such as ``00:00:00``, not escaped as ``\:``).
_BIND = re.compile(r"(?<![:\w\\]):(\w+)(?!:)")


def prepare(dialect: Dialect, sql: str) -> Prepared:
    """``sql`` (``:name`` parameters) in the driver's parameter style
    (``dialect.paramstyle``): what SQLAlchemy's ``text(sql).compile(dialect=...)``
    makes of it (``tests/core/sql/test_prepare.py`` compares the two on every
    statement), without SQLAlchemy's compiler."""
    style = dialect.paramstyle
    names: list[str] = []

    def bind(found: re.Match[str]) -> str:
        name = found.group(1)
        names.append(name)
        if style == "pyformat":
            return f"%({name})s"
        if style == "format":
            return "%s"
        if style == "qmark":
            return "?"
        if style == "numeric":
            return f":{len(names)}"
        if style == "numeric_dollar":
            return f"${len(names)}"
        return f":{name}"  # named

    if style in ("format", "pyformat"):
        sql = sql.replace("%", "%%")
    sent = _BIND.sub(bind, sql).replace("\\:", ":")
    positional = style not in ("pyformat", "named")
    return Prepared(sent, tuple(names) if positional and names else None)


def paths_for(dialect: Dialect) -> tuple[AcquirePath, ...]:
    """The acquire paths a dialect offers."""
    return profile(dialect).acquire_paths


def sql_of(dialect: Dialect, table: Table) -> dict[str, str]:
    """Every statement of ``dialect``'s family for ``table``, by name, as text with
    ``:name`` parameters: the family's templates with the table's names filled in
    (``{table}``; ``{seq}``, the fencing sequence, or ``{counter}``, SQLite's counter
    table). The statements of a counted lease keep ``{keys}``/``{places}``
    (below)."""
    prof = profile(dialect)
    prep = dialect.identifier_preparer
    names = {"{table}": prep.format_table(table)}
    if prof.fence_kind == "sequence":
        names["{seq}"] = prep.format_sequence(fence_sequence(table))
    else:
        names["{counter}"] = fence_counter_name(table.name)
    found: dict[str, str] = {}
    for name, template in TEMPLATES[prof.family].items():
        for placeholder, value in names.items():
            template = template.replace(placeholder, value)
        found[name] = template
    return found


def build(dialect: Dialect, table: Table, path: AcquirePath | None = None) -> Statements:
    """Prepare every statement of a model for ``dialect`` and ``table``."""
    prof = profile(dialect)
    chosen: AcquirePath = path or prof.default_path
    if chosen not in paths_for(dialect):
        raise ValueError(
            f"acquire_path must be one of {paths_for(dialect)} on {dialect.name}, got {path!r}"
        )
    sql = sql_of(dialect, table)

    def p(name: str) -> Prepared:
        return prepare(dialect, sql[name])

    # MariaDB has no RETURNING: a grant's token (a refresh's expiry) comes back through
    # LAST_INSERT_ID(expr); its plain INSERT draws the token again under the row lock.
    outcome: Literal["returning", "lastrowid"]
    if prof.family == "mysql":
        outcome = "lastrowid"
        insert = AcquireStep(p("insert"), outcome, duplicate_means_taken=True, redraw=p("redraw"))
        second = insert
    else:
        outcome = "returning"
        insert = AcquireStep(p("insert"), outcome, duplicate_means_taken=True)
        second = insert if chosen == "portable" else AcquireStep(p("insert_ignore"), outcome)
    if chosen == "upsert":
        acquire: tuple[AcquireStep, ...] = (AcquireStep(p("upsert"), outcome),)
    else:
        acquire = (AcquireStep(p("update"), outcome), second)
    return Statements(
        family=prof.family,
        profile=prof,
        path=chosen,
        acquire=acquire,
        acquire_in_slot=(AcquireStep(p("update_in_slot"), outcome), second),
        insert=insert,
        refresh=AcquireStep(p("refresh"), outcome),
        refresh_lease=AcquireStep(p("refresh_lease"), outcome),
        release=p("release"),
        release_lease=p("release_lease"),
        hold_until=p("hold_until"),
        is_held=p("is_held"),
        peek=p("peek"),
        list_all=p("list_all"),
        list_live=p("list_live"),
        list_expired=p("list_expired"),
        count_all=p("count_all"),
        count_live=p("count_live"),
        count_expired=p("count_expired"),
        update_holder=p("update_holder"),
        update_ttl=p("update_ttl"),
        delete=p("delete"),
        now=p("now"),
        page_all=p("page_all"),
        page_live=p("page_live"),
        page_expired=p("page_expired"),
        prune_bound=p("prune_bound"),
        prune_range=p("prune_range"),
        prune_rest=p("prune_rest"),
        prune_count=p("prune_count"),
        dialect=dialect,
    )


# -- counted leases ---------------------------------------------------------------------
# The statements of a counted lease (``max_holders=N``, see ``_core.places``), prepared per
# dialect, table and N: the group row's claim, its read with the N place rows, its
# extension and its removal. Their SQL is written whole with the family's other
# statements (``_sql.sqlite``, ``_sql.postgresql``, ``_sql.mariadb``: ``place_*``); the
# statements of a place itself are the single lease's (above).


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
        return prepare(dialect, text)

    return PlaceStatements(
        claim=p("claim"),
        claim_insert=p("claim_insert"),
        read=p("read"),
        extend=p("extend"),
        leave=p("leave"),
    )
