"""SQL for every lock operation, built once per dialect, table and acquire path.

Statements are compiled to the driver's own SQL string and parameter style when a
model is made, so a call only binds parameters and sends one string.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Union

from sqlalchemy import Dialect, Table, text

from ._clock import statement_now_sql
from ._dialects import ACQUIRE_PATHS, AcquirePath, Profile, profile
from ._schema import fence_counter_name, fence_sequence

__all__ = ["ACQUIRE_PATHS", "AcquirePath", "Statements", "build", "paths_for"]

#: First key of the PostgreSQL advisory locks that order fencing tokens ("jl").
_ADVISORY_CLASS = 0x6A6C

#: PostgreSQL: a token is ``nextval + (timeline - 1) * 2**TIMELINE_SHIFT``. The timeline
#: grows by one at every promotion of a standby (``pg_ctl promote``, a point-in-time
#: recovery), so a token handed out after a failover is larger than every token handed
#: out before it, even where an asynchronous standby had not yet received the latest
#: values of the sequence. On timeline 1 (never promoted) tokens are the sequence's
#: values. The sequence has 2**44 (1.7e13) values per timeline.
TIMELINE_SHIFT = 44
#: The timeline the server writes WAL on: the first 8 hex digits of the current WAL
#: file's name (no I/O; ``pg_control_checkpoint()`` reads a file and lags behind a
#: promotion until the next checkpoint).
PG_TIMELINE_SQL = (
    "CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT)"
)

Params = Union[tuple[Any, ...], dict[str, Any]]

#: ``schedule=``: the row's last grant was before the slot now (``_slots``).
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
    profile: Profile  # what joblocks knows about the database family (``_dialects``)
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
    # ``schedule=`` (``_slots``): the acquire steps that also need the row's last grant
    # to be before the slot (``:slot_start``, epoch ms): one start per slot.
    acquire_in_slot: tuple[AcquireStep, ...] = ()


def _prepare(dialect: Dialect, sql: str) -> Prepared:
    compiled = text(sql).compile(dialect=dialect)
    order: Sequence[str] | None = compiled.positiontup
    return Prepared(compiled.string, tuple(order) if compiled.positional and order else None)


def paths_for(dialect: Dialect) -> tuple[AcquirePath, ...]:
    """The acquire paths a dialect offers."""
    return profile(dialect).acquire_paths


def build(dialect: Dialect, table: Table, path: AcquirePath | None = None) -> Statements:
    """Prepare every statement of a model for ``dialect`` and ``table``."""
    prof = profile(dialect)
    family = prof.family
    chosen: AcquirePath = path or prof.default_path
    if chosen not in paths_for(dialect):
        raise ValueError(
            f"acquire_path must be one of {paths_for(dialect)} on {dialect.name}, got {path!r}"
        )
    prep = dialect.identifier_preparer
    t = prep.format_table(table)
    now = statement_now_sql(dialect)
    cols = "id, holder, acquired_at, expires_at, fence"
    row = f"{cols}, {now} AS now_ms"

    if family == "postgresql":
        sequence = fence_sequence(table)
        seq_name = prep.format_sequence(sequence)
        # The token is drawn under a transaction-scoped advisory lock on the key, held
        # until the grant commits: a grant that waited behind another one (and found
        # its row released meanwhile) draws its token after that grant, never before,
        # so tokens follow the order of grants. The two-int advisory keyspace is apart
        # from the one-bigint one applications usually use.
        # The server's timeline, above the sequence's value (see TIMELINE_SHIFT): a
        # promoted standby is on a new, larger timeline, so its tokens are larger than
        # any its old primary handed out, whatever the sequence it inherited had seen.
        nxt = (
            f"(SELECT nextval('{seq_name}') + ({PG_TIMELINE_SQL} - 1) * {1 << TIMELINE_SHIFT} "
            f"FROM (SELECT pg_advisory_xact_lock("
            f"{_ADVISORY_CLASS}, hashtext(CAST(:key AS VARCHAR)))) AS fence_order)"
        )
    elif family == "sqlite":
        nxt = f'(SELECT value FROM "{fence_counter_name(table.name)}") + 1'
    else:
        nxt = f"NEXTVAL({prep.format_sequence(fence_sequence(table))})"

    def p(sql: str) -> Prepared:
        return _prepare(dialect, sql)

    values = f"VALUES (:key, :holder, {now}, {now} + :ttl, {{fence}})"
    ours_or_expired = f"(expires_at <= {now} OR holder = :holder)"
    # A lease refreshes only its own grant (same token) while it is live: a grant ends
    # when it expires (taking the row back afterwards is a new grant, new token).
    lease_live = f" AND fence = :fence AND expires_at > {now}"
    # Release under min_hold: keep the row until the later of acquired_at + min_hold
    # (the lease's min_hold) and :hold_until (the latest refresh(min_hold=) promise).
    greatest = "MAX" if family == "sqlite" else "GREATEST"
    hold = f"{greatest}(acquired_at + :min_hold, :hold_until)"

    acquire: tuple[AcquireStep, ...]
    if family == "mysql":
        # MySQL evaluates SET assignments left to right, each seeing the ones before:
        # fence first (reads the old holder and expiry), holder before expires_at, so
        # that one condition (expired, or ours) decides all four columns.
        cond = "(expires_at <= VALUES(acquired_at) OR holder = VALUES(holder))"
        # The token is kept only by a re-entrant acquire of a live grant: the same
        # holder, a drawn token (not the placeholder 0), and not expired. A row taken
        # back by its own holder after it expired is a new grant with a new token.
        same_grant = "holder = VALUES(holder) AND fence > 0 AND expires_at > VALUES(acquired_at)"
        # The token is drawn only in the guarded assignment, under the row lock: a
        # token drawn in VALUES would be drawn before the statement waits for (or is
        # preempted behind) another grant and its release, and could be smaller than
        # that grant's. So VALUES carries a placeholder (0), and the same row is given
        # twice: when the first one inserts the row, the second one meets it as a
        # duplicate and draws the token for it, still under the lock the insert took.
        # A row already there is granted (or refused) by the first one; the second
        # one then finds it ours, live, with its token and keeps it. LAST_INSERT_ID
        # reports the token, or 0 when refused.
        upsert = AcquireStep(
            p(
                f"INSERT INTO {t} ({cols}) "
                + values.format(fence="0")
                + ", "
                + values.format(fence="0")[len("VALUES ") :]
                + " ON DUPLICATE KEY UPDATE "
                f"fence = IF({cond}, LAST_INSERT_ID(IF({same_grant}, fence, {nxt})),"
                " fence + LAST_INSERT_ID(0)), "
                f"acquired_at = IF({cond}, VALUES(acquired_at), acquired_at), "
                f"holder = IF({cond}, VALUES(holder), holder), "
                f"expires_at = IF({cond}, VALUES(expires_at), expires_at)"
            ),
            "lastrowid",
        )
        # For the plain INSERT of the portable path and of insert(), which have no
        # duplicate branch: the token is drawn again right after, under the row lock
        # the insert took, so it is larger than that of any grant that ended before.
        redraw = p(
            f"UPDATE {t} SET fence = LAST_INSERT_ID({nxt}) "
            "WHERE id = :key AND holder = :holder AND fence = :fence"
        )
        update_sql = (
            f"UPDATE {t} SET fence = IF(holder = :holder AND expires_at > {now}, "
            f"LAST_INSERT_ID(fence), LAST_INSERT_ID({nxt})), holder = :holder, "
            f"acquired_at = {now}, "
            f"expires_at = {now} + :ttl WHERE id = :key AND {ours_or_expired}"
        )
        update = AcquireStep(p(update_sql), "lastrowid")
        slot_update = AcquireStep(p(update_sql + IN_SLOT), "lastrowid")
        plain_insert = AcquireStep(
            p(f"INSERT INTO {t} ({cols}) " + values.format(fence=f"LAST_INSERT_ID({nxt})")),
            "lastrowid",
            duplicate_means_taken=True,
            redraw=redraw,
        )
        acquire = (upsert,) if chosen == "upsert" else (update, plain_insert)
        acquire_in_slot = (slot_update, plain_insert)
        update_holder = p(
            f"UPDATE {t} SET fence = IF(holder = :holder, fence, {nxt}), holder = :holder "
            "WHERE id = :key"
        )
        refresh, refresh_lease = (
            AcquireStep(
                p(
                    f"UPDATE {t} SET expires_at = LAST_INSERT_ID({now} + :ttl) "
                    f"WHERE id = :key AND holder = :holder{fenced}"
                ),
                "lastrowid",
            )
            for fenced in ("", lease_live)
        )
    else:
        upsert = AcquireStep(
            p(
                f"INSERT INTO {t} AS cur ({cols}) "
                + values.format(fence=nxt)
                + " ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, "
                "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at, "
                "fence = CASE WHEN cur.holder = excluded.holder "
                "AND cur.expires_at > excluded.acquired_at THEN cur.fence "
                "ELSE excluded.fence END "
                "WHERE cur.expires_at <= excluded.acquired_at OR cur.holder = excluded.holder "
                "RETURNING fence, acquired_at, expires_at"
            ),
            "returning",
        )
        update_sql = (
            f"UPDATE {t} SET holder = :holder, acquired_at = {now}, "
            f"expires_at = {now} + :ttl, "
            f"fence = CASE WHEN holder = :holder AND expires_at > {now} THEN fence "
            f"ELSE {nxt} END "
            f"WHERE id = :key AND {ours_or_expired}{{in_slot}} "
            "RETURNING fence, acquired_at, expires_at"
        )
        update = AcquireStep(p(update_sql.replace("{in_slot}", "")), "returning")
        slot_update = AcquireStep(p(update_sql.replace("{in_slot}", IN_SLOT)), "returning")
        insert_ignore = AcquireStep(
            p(
                f"INSERT INTO {t} ({cols}) "
                + values.format(fence=nxt)
                + " ON CONFLICT (id) DO NOTHING RETURNING fence, acquired_at, expires_at"
            ),
            "returning",
        )
        plain_insert = AcquireStep(
            p(
                f"INSERT INTO {t} ({cols}) "
                + values.format(fence=nxt)
                + " RETURNING fence, acquired_at, expires_at"
            ),
            "returning",
            duplicate_means_taken=True,
        )
        acquire = {
            "upsert": (upsert,),
            "update_insert": (update, insert_ignore),
            "portable": (update, plain_insert),
        }[chosen]
        acquire_in_slot = (slot_update, plain_insert if chosen == "portable" else insert_ignore)
        update_holder = p(
            f"UPDATE {t} SET fence = CASE WHEN holder = :holder THEN fence ELSE {nxt} END, "
            "holder = :holder WHERE id = :key"
        )
        refresh, refresh_lease = (
            AcquireStep(
                p(
                    f"UPDATE {t} SET expires_at = {now} + :ttl "
                    f"WHERE id = :key AND holder = :holder{fenced} RETURNING expires_at"
                ),
                "returning",
            )
            for fenced in ("", lease_live)
        )

    live = f"expires_at > {now}"
    expired = f"expires_at <= {now}"
    return Statements(
        family=family,
        profile=prof,
        path=chosen,
        acquire=acquire,
        release=p(f"DELETE FROM {t} WHERE id = :key AND holder = :holder"),
        refresh=refresh,
        refresh_lease=refresh_lease,
        release_lease=p(f"DELETE FROM {t} WHERE id = :key AND holder = :holder AND fence = :fence"),
        hold_until=p(
            f"UPDATE {t} SET expires_at = {hold} WHERE id = :key "
            f"AND holder = :holder AND fence = :fence AND {hold} > {now}"
        ),
        is_held=p(
            f"SELECT 1 FROM {t} WHERE id = :key AND holder = :holder AND fence = :fence "
            f"AND expires_at > {now}"
        ),
        peek=p(f"SELECT {row} FROM {t} WHERE id = :key"),
        list_all=p(f"SELECT {row} FROM {t} ORDER BY id"),
        list_live=p(f"SELECT {row} FROM {t} WHERE {live} ORDER BY id"),
        list_expired=p(f"SELECT {row} FROM {t} WHERE {expired} ORDER BY id"),
        count_all=p(f"SELECT COUNT(*) FROM {t}"),
        count_live=p(f"SELECT COUNT(*) FROM {t} WHERE {live}"),
        count_expired=p(f"SELECT COUNT(*) FROM {t} WHERE {expired}"),
        insert=plain_insert,
        update_holder=update_holder,
        update_ttl=p(f"UPDATE {t} SET expires_at = {now} + :ttl WHERE id = :key"),
        delete=p(f"DELETE FROM {t} WHERE id = :key"),
        now=p(f"SELECT {now}"),
        acquire_in_slot=acquire_in_slot,
        **_paging(p, family, t, row, live, expired, now),
    )


def _paging(
    p: Any, family: str, t: str, row: str, live: str, expired: str, now: str
) -> dict[str, Prepared]:
    """The statements of ``iter_locks`` and ``prune``.

    Pages are keyset pages: each starts after the last key of the one before, so a page
    costs the same however deep into the table it is, and no page holds a lock or a
    cursor open between calls. A prune goes through the table the same way: it finds
    the key of the ``:skip + 1``-th prunable row after the last batch (a read), then
    deletes the prunable rows of that key range in one statement (its own short
    transaction); the last batch deletes the rest after the last key. The ``DELETE``
    tests the condition itself, against each row as it is when deleted, so a key
    re-acquired meanwhile is kept (PostgreSQL re-checks it on a row changed under the
    statement; MariaDB reads the rows it deletes with locks).
    """
    prunable = f"expires_at <= {now} - :age"
    page = f"SELECT {row} FROM {t} WHERE id > :after{{cond}} ORDER BY id LIMIT :n"
    return {
        "page_all": p(page.format(cond="")),
        "page_live": p(page.format(cond=f" AND {live}")),
        "page_expired": p(page.format(cond=f" AND {expired}")),
        "prune_bound": p(
            f"SELECT id FROM {t} WHERE id > :after AND {prunable} ORDER BY id LIMIT 1 OFFSET :skip"
        ),
        "prune_range": p(f"DELETE FROM {t} WHERE id > :after AND id <= :upto AND {prunable}"),
        "prune_rest": p(f"DELETE FROM {t} WHERE id > :after AND {prunable}"),
        "prune_count": p(f"SELECT COUNT(*) FROM {t} WHERE {prunable}"),
    }
