"""The lock operations: plain functions over a SQLAlchemy ``Connection``.

This is the one implementation. The sync face calls these on a connection it checked
out; the asyncio face runs the very same functions through
``AsyncConnection.run_sync``. Nothing here commits (connections are in autocommit
mode and each operation is atomic on its own), sleeps or retries: waiting and retrying
belong to the faces.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Callable, Literal, NamedTuple, TypeVar

from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc

from ._connect import ISOLATION_INFO, ReadCommitted, read_committed_wrapper
from ._dialects import profile
from ._records import JobLock
from ._schema import decode_text
from ._sqla import dbapi_error, driver_connection, invalidate_pool, on_driver_thread
from ._statements import AcquireStep, Prepared, Statements

State = Literal["all", "held", "expired", "live"]
T = TypeVar("T")


#: Key, in the pool record's ``info`` of a connection :func:`in_place` runs an
#: operation on (and only meanwhile), of ``(driver connection, wait)``: the driver's
#: own connection the statements go to, and how one that met another writer waits.
#: Kept with the connection (checked out by that operation alone), not with the
#: thread: while one operation waits, others run on the same event loop's thread.
_IN_PLACE = "joblocks_in_place"


class Grant(NamedTuple):
    """A successful acquire: the token, and the row's times when the statement returned them."""

    fence: int
    acquired_ms: int | None
    expires_ms: int | None


class _Result:
    """What a statement gave back, read off the cursor before it is closed."""

    __slots__ = ("lastrowid", "rowcount", "rows")

    def __init__(self, rows: list[Any], rowcount: int, lastrowid: int | None) -> None:
        self.rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None


def execute(conn: Connection, stmt: Prepared, values: Mapping[str, Any]) -> _Result:
    """Send one prepared statement on the connection's driver connection.

    The thinnest path SQLAlchemy allows: no compilation, no result wrapping, no
    SQLAlchemy-level transaction (the connection is in autocommit mode; on a
    PostgreSQL connection whose default isolation is not read committed, the
    statement gets a read committed transaction of its own). Driver errors
    are wrapped exactly as SQLAlchemy would (``IntegrityError``, ``OperationalError``,
    ...), and a lost connection is invalidated so the pool replaces it.
    """
    fairy = conn.connection
    info = fairy.info
    in_place_ = info.get(_IN_PLACE)
    dbapi_connection = fairy.dbapi_connection if in_place_ is None else in_place_[0]
    assert dbapi_connection is not None  # noqa: S101 - checked out by the caller
    params = stmt.params(values)
    cursor = dbapi_connection.cursor()
    try:
        wrapper = info.get(ISOLATION_INFO, False)
        if wrapper is False:
            wrapper = info[ISOLATION_INFO] = read_committed_wrapper(conn.dialect, cursor)
        if wrapper is not None:
            return _in_read_committed(cursor, wrapper, stmt.sql, params)
        if in_place_ is not None:
            return _sent_in_place(cursor, in_place_[1], stmt.sql, params)
        cursor.execute(stmt.sql, params)
        rows = cursor.fetchall() if cursor.description else []
        return _Result(list(rows), cursor.rowcount, getattr(cursor, "lastrowid", None))
    except Exception as exc:
        dialect = conn.dialect
        if not isinstance(exc, dbapi_error(dialect)):
            raise
        lost = dialect.is_disconnect(exc, dbapi_connection, cursor)
        if lost:
            # As SQLAlchemy does: every connection of the pool made before now is
            # suspect (the server went away), so all are replaced on their next use.
            invalidate_pool(conn, exc)
            conn.invalidate(exc)
        raise sa_exc.DBAPIError.instance(
            stmt.sql,
            params,
            exc,
            dbapi_error(dialect),
            dialect=dialect,
            connection_invalidated=lost,
        ) from exc
    except BaseException:
        # Interrupted mid-statement (KeyboardInterrupt, cancellation): the connection's
        # protocol state is unknown, so it is never used again.
        conn.invalidate()
        raise
    finally:
        with contextlib.suppress(Exception):
            cursor.close()


def _sent(cursor: Any, sql: str, params: Any) -> _Result:
    cursor.execute(sql, params)
    rows = cursor.fetchall() if cursor.description else []
    return _Result(list(rows), cursor.rowcount, getattr(cursor, "lastrowid", None))


def _sent_in_place(
    cursor: Any, wait: Callable[[Callable[[Any], _Result]], _Result], sql: str, params: Any
) -> _Result:
    """One statement under :func:`in_place`: at once, or, when another writer has the
    database (SQLite's "database is locked" without waiting), again on the driver's
    thread, waiting for that writer as long as the connection's busy timeout allows."""
    try:
        return _sent(cursor, sql, params)
    except Exception as exc:
        if not _busy(exc):
            raise

    def again(driver_connection: Any) -> _Result:
        retry = driver_connection.cursor()
        try:
            return _sent(retry, sql, params)
        finally:
            retry.close()

    return wait(again)


def _busy(exc: BaseException) -> bool:
    """SQLite's SQLITE_BUSY (another connection holds the write lock), any variant."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # Python < 3.11
        return "database is locked" in str(exc)
    return bool(code & 0xFF == _SQLITE_BUSY)


_SQLITE_BUSY = 5
#: The busy timeout (ms) of an aiosqlite connection, kept in its pool record's info
#: (-1: the connection cannot be used from the event loop's thread).
_BUSY_INFO = "joblocks_busy_timeout_ms"


def in_place(conn: Connection, st: Statements, fn: Callable[..., T], args: Any) -> T:
    """``fn(conn, st, *args)`` (one of :data:`IN_PLACE`) on the asyncio face over
    aiosqlite, from a ``greenlet_spawn``: each statement is sent on the ``sqlite3``
    connection behind aiosqlite right here, on the event loop's thread, without
    waiting for another writer (busy timeout 0); one that meets another writer is sent
    again on aiosqlite's thread, which waits for it with the connection's busy timeout
    (the model's ``timeout``) while the loop runs on.

    aiosqlite hands every call (cursor, execute, fetch, close) to its thread and back;
    an uncontended SQLite statement takes microseconds, a hand-off far longer on a
    busy machine. A statement that fails with SQLITE_BUSY has changed nothing, so it
    is safe to send again.
    """
    fairy = conn.connection
    adapted = fairy.dbapi_connection
    raw = driver_connection(adapted)
    info = fairy.info
    busy_ms = info.get(_BUSY_INFO)
    if busy_ms is None:
        try:
            busy_ms = int(raw.execute("PRAGMA busy_timeout").fetchone()[0])
        except dbapi_error(conn.dialect):
            # E.g. ``check_same_thread=True`` in the engine's connect_args: only
            # aiosqlite's thread may use this connection; so be it, through aiosqlite.
            busy_ms = -1
        info[_BUSY_INFO] = busy_ms
    if busy_ms < 0:
        return fn(conn, st, *args)

    def waiting(run: Callable[[Any], T]) -> T:
        def on_thread(driver_connection: Any) -> T:
            driver_connection.execute(f"PRAGMA busy_timeout = {busy_ms}")
            try:
                return run(driver_connection)
            finally:
                driver_connection.execute("PRAGMA busy_timeout = 0")

        return on_driver_thread(adapted, on_thread)

    raw.execute("PRAGMA busy_timeout = 0")
    info[_IN_PLACE] = (raw, waiting)
    try:
        result = fn(conn, st, *args)
    except Exception:
        info.pop(_IN_PLACE, None)
        if not conn.invalidated:
            raw.execute(f"PRAGMA busy_timeout = {busy_ms}")
        raise
    except BaseException:
        # Cancelled while aiosqlite's thread may still be running a statement on it.
        info.pop(_IN_PLACE, None)
        if not conn.invalidated:
            conn.invalidate()
        raise
    del info[_IN_PLACE]
    raw.execute(f"PRAGMA busy_timeout = {busy_ms}")
    return result


def _in_read_committed(cursor: Any, wrapper: ReadCommitted, sql: str, params: Any) -> _Result:
    """Run one statement in a read committed transaction of its own (a connection whose
    default isolation is stricter, see ``_connect.read_committed_wrapper``)."""
    cursor.execute(wrapper.begin)
    try:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
        result = _Result(list(rows), cursor.rowcount, getattr(cursor, "lastrowid", None))
        cursor.execute(wrapper.commit)
    except Exception:
        with contextlib.suppress(Exception):
            cursor.execute(wrapper.rollback)
        raise
    return result


def _run_step(
    conn: Connection,
    step: AcquireStep,
    key: str,
    holder: str,
    ttl_ms: int,
    extra: Mapping[str, Any] | None = None,
) -> tuple[int, ...] | None:
    """Run one step; its returned row (``returning``) or ``(LAST_INSERT_ID,)``, or None.
    ``extra``: more parameters (``schedule=``'s ``slot_start``)."""
    values = {"key": key, "holder": holder, "ttl": ttl_ms}
    if extra:
        values.update(extra)
    try:
        result = execute(conn, step.stmt, values)
    except sa_exc.IntegrityError:
        if step.duplicate_means_taken:
            return None
        raise
    if step.outcome == "returning":
        return tuple(int(v) for v in result.rows[0]) if result.rows else None
    if result.rowcount < 1:
        return None
    value = int(result.lastrowid or 0)
    if value <= 0:
        return None
    if step.redraw is not None:
        return (_redraw(conn, step.redraw, key, holder, value),)
    return (value,)


def _redraw(conn: Connection, stmt: Prepared, key: str, holder: str, fence: int) -> int:
    """Draw a new token for the grant just inserted (MySQL/MariaDB).

    The token an INSERT put in the row was drawn before the statement took any lock:
    another process could draw a larger one, be granted, and release in between. Drawn
    again now, under the row this process holds, it is larger than every token of a
    grant that ended before this one. Should the row have changed meanwhile (a ttl run
    out and taken over), the grant is already lost and keeps the token it had.
    """
    result = execute(conn, stmt, {"key": key, "holder": holder, "fence": fence})
    return int(result.lastrowid or 0) if result.rowcount > 0 else fence


def acquire(conn: Connection, st: Statements, key: str, holder: str, ttl_ms: int) -> Grant | None:
    """Take or re-take ``key`` for ``holder``; the grant, or None when held elsewhere.

    A re-entrant acquire of ``holder``'s live row keeps its token; any other grant (a
    fresh row, or an expired one, even ``holder``'s own) draws a new, larger token.
    """
    for step in st.acquire:
        row = _run_step(conn, step, key, holder, ttl_ms)
        if row is not None:
            if len(row) == 3:
                return Grant(row[0], row[1], row[2])
            return Grant(row[0], None, None)
    return None


def release(conn: Connection, st: Statements, key: str, holder: str) -> bool:
    """Delete the row if ``holder`` holds it; True when a row was deleted."""
    return execute(conn, st.release, {"key": key, "holder": holder}).rowcount > 0


def refresh(conn: Connection, st: Statements, key: str, holder: str, ttl_ms: int) -> int | None:
    """Move the expiry to now + ttl if the row is ``holder``'s (expired or not).

    The token is kept (the reference's refresh: by holder only). The new ``expires_at``
    (epoch ms), or None when the row is gone or someone else's.
    """
    row = _run_step(conn, st.refresh, key, holder, ttl_ms)
    return None if row is None else row[0]


def refresh_lease(
    conn: Connection, st: Statements, key: str, holder: str, fence: int, ttl_ms: int
) -> int | None:
    """Like :func:`refresh`, for one live grant only (same holder and token, unexpired).

    A grant ends when it expires: None then, as when the row is gone or another grant's.
    """
    values = {"key": key, "holder": holder, "fence": fence, "ttl": ttl_ms}
    result = execute(conn, st.refresh_lease.stmt, values)
    if st.refresh_lease.outcome == "returning":
        return int(result.rows[0][0]) if result.rows else None
    return int(result.lastrowid or 0) if result.rowcount > 0 else None


def release_lease(
    conn: Connection,
    st: Statements,
    key: str,
    holder: str,
    fence: int,
    min_hold_ms: int,
    hold_until_ms: int = 0,
) -> bool:
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
    if held and execute(conn, st.hold_until, values).rowcount > 0:
        return True
    return execute(conn, st.release_lease, values).rowcount > 0


def is_held(conn: Connection, st: Statements, key: str, holder: str, fence: int) -> bool:
    """Whether ``holder`` still holds ``key`` with token ``fence``, unexpired, by db time."""
    values = {"key": key, "holder": holder, "fence": fence}
    return bool(execute(conn, st.is_held, values).rows)


def peek(conn: Connection, st: Statements, key: str) -> JobLock | None:
    """The row of ``key`` in whatever state, or None."""
    rows = execute(conn, st.peek, {"key": key}).rows
    return JobLock.from_row(rows[0]) if rows else None


def list_locks(conn: Connection, st: Statements, state: State = "all") -> list[JobLock]:
    """Every row (``"all"``), or only those held or expired by the database's clock."""
    stmt = {
        "all": st.list_all,
        "held": st.list_live,
        "live": st.list_live,
        "expired": st.list_expired,
    }[state]
    return [JobLock.from_row(row) for row in execute(conn, stmt, {}).rows]


def list_page(
    conn: Connection, st: Statements, state: State, after: str, limit: int
) -> list[JobLock]:
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
    rows = execute(conn, stmt, {"after": after, "n": limit}).rows
    return [JobLock.from_row(row) for row in rows]


def next_after(page: list[JobLock], limit: int) -> str | None:
    """Where the page after ``page`` starts, or None when ``page`` was the last one."""
    return page[-1].key if len(page) >= limit else None


def prune_batch(
    conn: Connection, st: Statements, expired_for_ms: int, limit: int, after: str
) -> tuple[int, str | None]:
    """Delete the next ``limit`` rows after key ``after`` that expired at least
    ``expired_for_ms`` ago (db time): (rows deleted, the key to go on after, or None
    when this was the last batch). Start with ``after=""`` (keys are never empty).

    One read finds the batch's last key, one ``DELETE`` of that key range removes it:
    one short transaction, so on SQLite the write lock is held for one batch only.
    """
    values = {"age": expired_for_ms, "after": after, "skip": limit - 1}
    bound = execute(conn, st.prune_bound, values).rows
    if not bound:
        return max(0, execute(conn, st.prune_rest, values).rowcount), None
    # As text: keys are bound as text everywhere (aiomysql cannot bind bytes).
    values["upto"] = upto = decode_text(bound[0][0])
    return max(0, execute(conn, st.prune_range, values).rowcount), upto


def count_prunable(conn: Connection, st: Statements, expired_for_ms: int) -> int:
    """How many rows a prune would delete in all (``prune(dry_run=True)``)."""
    return int(execute(conn, st.prune_count, {"age": expired_for_ms}).scalar())


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


def count(conn: Connection, st: Statements, state: State = "all") -> int:
    """How many rows are in ``state``."""
    stmt = {
        "all": st.count_all,
        "held": st.count_live,
        "live": st.count_live,
        "expired": st.count_expired,
    }[state]
    return int(execute(conn, stmt, {}).scalar())


def insert(conn: Connection, st: Statements, key: str, holder: str, ttl_ms: int) -> JobLock | None:
    """Insert a fresh row (new token); None when a row with that key exists."""
    if _run_step(conn, st.insert, key, holder, ttl_ms) is None:
        return None
    return peek(conn, st, key)


def update(
    conn: Connection,
    st: Statements,
    key: str,
    holder: str | None,
    ttl_ms: int | None,
) -> bool:
    """Set the holder (a new holder gets a new token) and/or expiry, whoever holds it."""
    found = False
    if holder is not None:
        found = execute(conn, st.update_holder, {"key": key, "holder": holder}).rowcount > 0
    if ttl_ms is not None:
        found = execute(conn, st.update_ttl, {"key": key, "ttl": ttl_ms}).rowcount > 0
    return found


def delete(conn: Connection, st: Statements, key: str) -> bool:
    """Delete the row of ``key`` whoever holds it."""
    return execute(conn, st.delete, {"key": key}).rowcount > 0


def now_ms(conn: Connection, st: Statements) -> int:
    """The database server's current time in epoch milliseconds."""
    return int(execute(conn, st.now, {}).scalar())


def is_transient(exc: BaseException, family: str) -> bool:
    """A deadlock or serialization failure: safe to retry, never "taken" (the codes
    are the family's :class:`~joblocks._dialects.Profile`'s)."""
    if not isinstance(exc, sa_exc.DBAPIError) or exc.connection_invalidated:
        return False
    return profile(family).is_transient_error(exc.orig)


#: The operations :func:`in_place` runs: those of one key (an index lookup each), whose
#: statements all go through :func:`execute`. Reading or pruning many rows (``list``,
#: ``count``, ``prune``) stays off the event loop's thread.
IN_PLACE: frozenset[Callable[..., Any]] = frozenset(
    {
        acquire,
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
