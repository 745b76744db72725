"""The lock operations: generators of statements (sans-I/O).

This is the one implementation. Each operation is a generator function ``fn(st,
*args)`` that yields ``(prepared, values)`` (a :class:`~joblocks._sql.statements.Prepared`
statement and the mapping of its parameters), is sent back the statement's
:class:`~joblocks._sql.statements.Result` (``rows``, ``rowcount``, ``lastrowid``), or has
the driver's error thrown in at the ``yield`` (SQLAlchemy's wrapped exceptions:
``IntegrityError``, ``OperationalError``, ...), and returns the operation's result
(:data:`~joblocks._sql.statements.Sent`). The statements of one generator go on one
connection, in order. Sending them is a face's driver's business (``_db.execute.run``);
nothing here touches a connection, commits (each statement is atomic on its own in
autocommit mode), sleeps or retries: waiting and retrying belong to the faces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Literal, NamedTuple, TypeVar

from .._db.connections import JobLock
from .._sql.dialects import profile
from .._sql.schema import decode_text
from .._sql.statements import AcquireStep, Prepared, Sent, Statements
from .._util.drivers import DuplicateKey

State = Literal["all", "held", "expired", "live"]
T = TypeVar("T")


class Grant(NamedTuple):
    """A successful acquire: the token, and the row's times when the statement returned them."""

    fence: int
    acquired_ms: int | None
    expires_ms: int | None


def _run_step(
    step: AcquireStep,
    key: str,
    holder: str,
    ttl_ms: int,
    extra: Mapping[str, Any] | None = None,
) -> Sent[tuple[int, ...] | None]:
    """Run one step; its returned row (``returning``) or ``(LAST_INSERT_ID,)``, or None.
    ``extra``: more parameters (``schedule=``'s ``slot_start``)."""
    values = {"key": key, "holder": holder, "ttl": ttl_ms}
    if extra:
        values.update(extra)
    try:
        result = yield step.stmt, values
    except DuplicateKey:
        if step.duplicate_means_taken:
            return None
        raise
    if step.outcome == "returning":
        return tuple(map(int, result.rows[0])) if result.rows else None
    if result.rowcount < 1:
        return None
    value = int(result.lastrowid or 0)
    if value <= 0:
        return None
    if step.redraw is not None:
        return ((yield from _redraw(step.redraw, key, holder, value)),)
    return (value,)


def _redraw(stmt: Prepared, key: str, holder: str, fence: int) -> Sent[int]:
    """Draw a new token for the grant just inserted (MySQL/MariaDB).

    The token an INSERT put in the row was drawn before the statement took any lock:
    another process could draw a larger one, be granted, and release in between. Drawn
    again now, under the row this process holds, it is larger than every token of a
    grant that ended before this one. Should the row have changed meanwhile (a ttl run
    out and taken over), the grant is already lost and keeps the token it had.
    """
    result = yield stmt, {"key": key, "holder": holder, "fence": fence}
    return int(result.lastrowid or 0) if result.rowcount > 0 else fence


def acquire(st: Statements, key: str, holder: str, ttl_ms: int) -> Sent[Grant | None]:
    """Take or re-take ``key`` for ``holder``; the grant, or None when held elsewhere.

    A re-entrant acquire of ``holder``'s live row keeps its token; any other grant (a
    fresh row, or an expired one, even ``holder``'s own) draws a new, larger token.
    """
    for step in st.acquire:
        row = yield from _run_step(step, key, holder, ttl_ms)
        if row is not None:
            if len(row) == 3:
                return Grant(row[0], row[1], row[2])
            return Grant(row[0], None, None)
    return None


def acquire_token(st: Statements, key: str, holder: str, ttl_ms: int) -> Sent[int | None]:
    """:func:`acquire`'s token alone (the plain ``acquire``/``acquire_token`` of the
    faces, which need nothing else of the grant), or None when held elsewhere."""
    for step in st.acquire:
        row = yield from _run_step(step, key, holder, ttl_ms)
        if row is not None:
            return row[0]
    return None


def release(st: Statements, key: str, holder: str) -> Sent[bool]:
    """Delete the row if ``holder`` holds it; True when a row was deleted."""
    return (yield st.release, {"key": key, "holder": holder}).rowcount > 0


def refresh(st: Statements, key: str, holder: str, ttl_ms: int) -> Sent[int | None]:
    """Move the expiry to now + ttl if the row is ``holder``'s (expired or not).

    The token is kept (the reference's refresh: by holder only). The new ``expires_at``
    (epoch ms), or None when the row is gone or someone else's.
    """
    row = yield from _run_step(st.refresh, key, holder, ttl_ms)
    return None if row is None else row[0]


def refresh_lease(
    st: Statements, key: str, holder: str, fence: int, ttl_ms: int
) -> Sent[int | None]:
    """Like :func:`refresh`, for one live grant only (same holder and token, unexpired).

    A grant ends when it expires: None then, as when the row is gone or another grant's.
    """
    values = {"key": key, "holder": holder, "fence": fence, "ttl": ttl_ms}
    result = yield st.refresh_lease.stmt, values
    if st.refresh_lease.outcome == "returning":
        return int(result.rows[0][0]) if result.rows else None
    return int(result.lastrowid or 0) if result.rowcount > 0 else None


def release_lease(
    st: Statements,
    key: str,
    holder: str,
    fence: int,
    min_hold_ms: int,
    hold_until_ms: int = 0,
) -> Sent[bool]:
    """Release one grant (same holder and token), keeping its row until the later of
    acquired_at + ``min_hold_ms`` and ``hold_until_ms`` (epoch ms) when that is ahead.

    True when the row was that grant's (kept for the rest of the hold, or deleted).
    """
    values = {
        "key": key,
        "holder": holder,
        "fence": fence,
        "min_hold": min_hold_ms,
        "hold_until": hold_until_ms,
    }
    held = min_hold_ms > 0 or hold_until_ms > 0
    if held and (yield st.hold_until, values).rowcount > 0:
        return True
    return (yield st.release_lease, values).rowcount > 0


def is_held(st: Statements, key: str, holder: str, fence: int) -> Sent[bool]:
    """Whether ``holder`` still holds ``key`` with token ``fence``, unexpired, by db time."""
    values = {"key": key, "holder": holder, "fence": fence}
    return bool((yield st.is_held, values).rows)


def peek(st: Statements, key: str) -> Sent[JobLock | None]:
    """The row of ``key`` in whatever state, or None."""
    rows = (yield st.peek, {"key": key}).rows
    return JobLock.from_row(rows[0]) if rows else None


def list_locks(st: Statements, state: State = "all") -> Sent[list[JobLock]]:
    """Every row (``"all"``), or only those held or expired by the database's clock."""
    stmt = {
        "all": st.list_all,
        "held": st.list_live,
        "live": st.list_live,
        "expired": st.list_expired,
    }[state]
    rows = (yield stmt, {}).rows
    return [JobLock.from_row(row) for row in rows]


def list_page(st: Statements, state: State, after: str, limit: int) -> Sent[list[JobLock]]:
    """Up to ``limit`` rows in ``state`` whose key sorts after ``after``, ordered by key.

    One page of the faces' ``iter_locks``: ``after=""`` starts at the first key (keys are
    never empty).
    """
    stmt = {
        "all": st.page_all,
        "held": st.page_live,
        "live": st.page_live,
        "expired": st.page_expired,
    }[state]
    rows = (yield stmt, {"after": after, "n": limit}).rows
    return [JobLock.from_row(row) for row in rows]


def next_after(page: list[JobLock], limit: int) -> str | None:
    """Where the page after ``page`` starts, or None when ``page`` was the last one."""
    return page[-1].key if len(page) >= limit else None


def prune_batch(
    st: Statements, expired_for_ms: int, limit: int, after: str
) -> Sent[tuple[int, str | None]]:
    """Delete the next ``limit`` rows after key ``after`` that expired at least
    ``expired_for_ms`` ago (db time): (rows deleted, the key to go on after, or None
    when this was the last batch). Start with ``after=""`` (keys are never empty).

    One read finds the batch's last key, one ``DELETE`` of that key range removes it:
    one short transaction, so on SQLite the write lock is held for one batch only.
    """
    values = {"age": expired_for_ms, "after": after, "skip": limit - 1}
    bound = (yield st.prune_bound, values).rows
    if not bound:
        return max(0, (yield st.prune_rest, values).rowcount), None
    # As text: keys are bound as text everywhere (aiomysql cannot bind bytes).
    values["upto"] = upto = decode_text(bound[0][0])
    return max(0, (yield st.prune_range, values).rowcount), upto


def count_prunable(st: Statements, expired_for_ms: int) -> Sent[int]:
    """How many rows a prune would delete in all (``prune(dry_run=True)``)."""
    return int((yield st.prune_count, {"age": expired_for_ms}).scalar())


#: Rows a prune deletes per statement unless told otherwise.
PRUNE_BATCH = 1_000
#: Rows an ``iter_locks`` page holds unless told otherwise.
PAGE_SIZE = 1_000


def prune_pause_s(family: str, batch_s: float) -> float:
    """Seconds a prune waits between two batches that took ``batch_s`` seconds.

    SQLite has one writer at a time: another process's ``release`` or ``acquire``
    waits for the write lock in its busy handler, which looks again only every few
    milliseconds (up to 100 ms apart). Back-to-back batches would leave it gaps too
    short to get in, so the prune yields for one and a half times as long as its batch
    took (at least 2 ms, at most 100 ms): it holds the lock at most 40 % of the time.
    Server databases lock rows, not the table: no pause.
    """
    if not profile(family).single_file:
        return 0.0
    return min(0.1, max(0.002, 1.5 * batch_s))


def count(st: Statements, state: State = "all") -> Sent[int]:
    """How many rows are in ``state``."""
    stmt = {
        "all": st.count_all,
        "held": st.count_live,
        "live": st.count_live,
        "expired": st.count_expired,
    }[state]
    return int((yield stmt, {}).scalar())


def insert(st: Statements, key: str, holder: str, ttl_ms: int) -> Sent[JobLock | None]:
    """Insert a fresh row (new token); None when a row with that key exists."""
    if (yield from _run_step(st.insert, key, holder, ttl_ms)) is None:
        return None
    return (yield from peek(st, key))


def update(st: Statements, key: str, holder: str | None, ttl_ms: int | None) -> Sent[bool]:
    """Set the holder (a new holder gets a new token) and/or expiry, whoever holds it."""
    found = False
    if holder is not None:
        found = (yield st.update_holder, {"key": key, "holder": holder}).rowcount > 0
    if ttl_ms is not None:
        found = (yield st.update_ttl, {"key": key, "ttl": ttl_ms}).rowcount > 0
    return found


def delete(st: Statements, key: str) -> Sent[bool]:
    """Delete the row of ``key`` whoever holds it."""
    return (yield st.delete, {"key": key}).rowcount > 0


def now_ms(st: Statements) -> Sent[int]:
    """The database server's current time in epoch milliseconds."""
    return int((yield st.now, {}).scalar())


#: The operations ``_db.execute.in_place`` sends on the event loop's thread: those of
#: one key (an index lookup each). Reading or pruning many rows (``list``,
#: ``count``, ``prune``) stays off the event loop's thread.
IN_PLACE: frozenset[Callable[..., Any]] = frozenset(
    {
        acquire,
        acquire_token,
        release,
        refresh,
        refresh_lease,
        release_lease,
        is_held,
        peek,
        insert,
        update,
        delete,
        now_ms,
    }
)


def fill_times(grant: Grant, row: Any) -> tuple[Grant, bool]:
    """A grant without times (MySQL) completed from a peeked row; False if not ours."""
    if row is None or row.fence != grant.fence:
        return grant, False
    acquired = round(row.acquired_at.timestamp() * 1000)
    expires = round(row.expires_at.timestamp() * 1000)
    return Grant(grant.fence, acquired, expires), True
