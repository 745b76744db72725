"""The plain model surface, written once for both faces (as ``_core.lifecycle`` is for
leases): each operation of a model that is not a lease's checks its arguments, then is
one call (``_steps.call``) of its ``_core.ops`` function, or a few (``prune``).

The run ledger's reads and retention: ``history``, ``status`` and ``prune_runs``.

The rows are those :mod:`._core.ledger` writes (one per run in ``job_runs``). Reads mark
a run with no end and no live lease abandoned; the retention deletes old rows in
batches. These are plain operations of the model, driven by either face.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, func, or_, select
from sqlalchemy import delete as sa_delete

from .._db.connections import JobLock, from_ms
from .._sql.dialects import db_now_ms
from .._sql.schema import decode_text
from .._util import validate as _validate
from .._util.errors import LockBackendError, LockExistsError
from . import ops as _ops
from . import places as _places
from .base import ModelCore, log
from .ledger import Ledger, Outcome, ledger_of
from .steps import Sleep, Steps, call, call_connected

if TYPE_CHECKING:
    from .._sql.statements import Statements
    from .base import ModelCore


def acquire_token(
    model: ModelCore, lock_key: str, ttl: _validate.Duration, holder: str
) -> Steps[int | None]:
    key = _validate.lock_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    who = _validate.holder(holder)
    steps = call(model, "acquire", _ops.acquire_token, key, who, ttl_ms)
    return _as_taken(model, key, steps) if model.errors_as_taken else steps


def _as_taken(model: ModelCore, key: str, steps: Steps[int | None]) -> Steps[int | None]:
    """``errors_as_taken=True``: an acquire that failed is reported as taken (None)."""
    try:
        return (yield from steps)
    except LockBackendError as exc:
        log.warning("joblocks: acquire of %r failed, reported as taken: %s", key, exc)
        return None


def release(model: ModelCore, lock_key: str, holder: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    who = _validate.holder(holder)
    return call(model, "release", _ops.release, key, who)


def refresh(model: ModelCore, lock_key: str, ttl: _validate.Duration, holder: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    who = _validate.holder(holder)
    return (yield from call(model, "refresh", _ops.refresh, key, who, ttl_ms)) is not None


def peek(model: ModelCore, lock_key: str) -> Steps[JobLock | None]:
    key = _validate.row_key(lock_key)
    return call(model, "peek", _ops.peek, key)


def holders(model: ModelCore, lock_key: str) -> Steps[list[JobLock]]:
    key = _validate.lock_key(lock_key)
    return call(model, "peek", _places.holders, model.table, key)


def list_locks(model: ModelCore, state: _ops.State) -> Steps[list[JobLock]]:
    _validate.state(state)
    return call(model, "list", _ops.list_locks, state)


def count(model: ModelCore, state: _ops.State) -> Steps[int]:
    _validate.state(state)
    return call(model, "count", _ops.count, state)


def page(model: ModelCore, state: _ops.State, after: str, size: int) -> Steps[list[JobLock]]:
    """One page of ``iter_locks`` (the faces loop over pages: a generator each)."""
    return call(model, "list", _ops.list_page, state, after, size)


def prune(
    model: ModelCore, expired_for: _validate.Duration, batch_size: int, dry_run: bool
) -> Steps[int]:
    age_ms, size = _validate.prune_options(expired_for, batch_size, dry_run)
    if dry_run:
        return (yield from call(model, "prune", _ops.count_prunable, age_ms))
    deleted = 0
    after: str | None = ""
    while True:
        started = time.monotonic()
        done, after = yield from call(model, "prune", _ops.prune_batch, age_ms, size, after)
        deleted += done
        if after is None:
            return deleted
        pause = _ops.prune_pause_s(model.statements.family, time.monotonic() - started)
        if pause:
            yield Sleep(pause)


def insert(model: ModelCore, lock_key: str, holder: str, ttl: _validate.Duration) -> Steps[JobLock]:
    key = _validate.lock_key(lock_key)
    who = _validate.holder(holder)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    row = yield from call(model, "insert", _ops.insert, key, who, ttl_ms)
    if row is None:
        raise LockExistsError(key)
    return row


def update(
    model: ModelCore, lock_key: str, holder: str | None, ttl: _validate.Duration | None
) -> Steps[bool]:
    key = _validate.lock_key(lock_key)
    who = None if holder is None else _validate.holder(holder)
    ttl_ms = None if ttl is None else _validate.duration_ms(ttl, "ttl")
    if who is None and ttl_ms is None:
        raise ValueError("update needs holder= or ttl= (or both)")
    return (yield from call(model, "update", _ops.update, key, who, ttl_ms))


def delete(model: ModelCore, lock_key: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    return call(model, "delete", _ops.delete, key)


def now_ms(model: ModelCore) -> Steps[int]:
    return call(model, "read clock", _ops.now_ms)


#: Rows deleted per statement by :func:`prune_runs`.
PRUNE_BATCH = 1000


@dataclass(frozen=True)
class Run:
    """One row of the run ledger (``job_runs``); datetimes are timezone-aware UTC.

    ``outcome`` is None while the run is in progress, or when its process died before
    it ended; ``abandoned`` tells the two apart: True for a run with no end whose lease
    was no longer live when the row was read (its lock row gone, expired, or another
    grant's), so the run will never end. ``slot`` is the start of its schedule slot
    (runs taken with ``schedule=``), ``duration`` None until it ended.
    """

    id: int
    key: str
    holder: str
    host: str
    pid: int
    token: int | None
    started_at: datetime
    ended_at: datetime | None
    duration: timedelta | None
    outcome: Outcome | None
    error: str | None
    slot: datetime | None
    schedule: str | None
    timezone: str | None
    abandoned: bool = False

    @property
    def state(self) -> str:
        """``outcome``, else ``"abandoned"`` or ``"running"`` (a run with no end)."""
        if self.outcome is not None:
            return self.outcome
        return "abandoned" if self.abandoned else "running"

    @classmethod
    def from_row(cls, row: Any) -> Run:
        m = row._mapping
        return cls(
            id=int(m["id"]),
            key=decode_text(m["key"]),
            holder=decode_text(m["holder"]),
            host=m["host"],
            pid=int(m["pid"]),
            token=None if m["token"] is None else int(m["token"]),
            started_at=from_ms(m["started_at"]),
            ended_at=None if m["ended_at"] is None else from_ms(m["ended_at"]),
            duration=None if m["duration_ms"] is None else timedelta(milliseconds=m["duration_ms"]),
            outcome=m["outcome"],
            error=m["error"],
            slot=None if m["slot"] is None else from_ms(m["slot"]),
            schedule=m["schedule"],
            timezone=m["timezone"],
        )


# -- the SQL (each a function of a connection, run by ``_steps.call_connected``) -----------


def _exists(conn: Connection, ledger: Ledger, table: Table | None = None) -> bool:
    from sqlalchemy import inspect

    table = ledger.table if table is None else table
    found = bool(inspect(conn).has_table(table.name, schema=table.schema))
    if found and table is ledger.table:
        ledger.check(conn)  # a table of the ledger's name must be a ledger
    return found


def _live_grants(conn: Connection, ledger: Ledger, found: list[Run], now: int) -> list[Run]:
    """``found`` with every run that has no end and no live lease marked abandoned.

    A run's lease is live while the lock table has a row of its grant (its token and
    holder; a counted lock's place row too) that has not expired at ``now``.
    """
    tokens = sorted({run.token for run in found if run.outcome is None and run.token is not None})
    if not any(run.outcome is None for run in found):
        return found
    live: set[tuple[int, str]] = set()
    locks = ledger.locks
    if tokens and _exists(conn, ledger, locks):
        for at in range(0, len(tokens), 500):
            rows = conn.execute(
                select(locks.c.fence, locks.c.holder).where(
                    locks.c.fence.in_(tokens[at : at + 500]), locks.c.expires_at > now
                )
            )
            live.update((int(fence), decode_text(holder)) for fence, holder in rows)
    return [
        replace(run, abandoned=True)
        if run.outcome is None and (run.token, run.holder) not in live
        else run
        for run in found
    ]


def _select(
    conn: Connection,
    st: Statements,
    ledger: Ledger,
    key: str | None,
    since_ms: int | None,
    limit: int,
) -> tuple[list[Run], int]:
    """Runs newest first (``key`` only, started within ``since_ms``), and the db's now."""
    now = int(conn.execute(select(db_now_ms())).scalar_one())
    if not _exists(conn, ledger):
        return [], now
    t = ledger.table
    query = select(t)
    if key is not None:
        query = query.where(t.c.key == key)
    if since_ms is not None:
        query = query.where(t.c.started_at >= now - since_ms)
    rows = conn.execute(query.order_by(t.c.started_at.desc(), t.c.id.desc()).limit(limit))
    return _live_grants(conn, ledger, [Run.from_row(row) for row in rows], now), now


def _latest(conn: Connection, st: Statements, ledger: Ledger) -> tuple[list[Run], int]:
    """Per key its last run that was not a skip (else its last skip), and the db's now."""
    now = int(conn.execute(select(db_now_ms())).scalar_one())
    if not _exists(conn, ledger):
        return [], now
    t = ledger.table
    ran = or_(t.c.outcome.is_(None), t.c.outcome != "skipped")
    last_run = select(func.max(t.c.id)).where(ran).group_by(t.c.key)
    rows = {
        Run.from_row(row).key: Run.from_row(row)
        for row in conn.execute(select(t).where(t.c.id.in_(last_run)))
    }
    last_any = select(func.max(t.c.id)).group_by(t.c.key)
    for row in conn.execute(select(t).where(t.c.id.in_(last_any))):
        run = Run.from_row(row)
        rows.setdefault(run.key, run)
    return _live_grants(conn, ledger, [rows[k] for k in sorted(rows)], now), now


def _prune_batch(
    conn: Connection, st: Statements, ledger: Ledger, older_than_ms: int, size: int
) -> int:
    """Delete up to ``size`` rows started more than ``older_than_ms`` ago (db time)."""
    if not _exists(conn, ledger):
        return 0
    t = ledger.table
    cutoff = int(conn.execute(select(db_now_ms())).scalar_one()) - older_than_ms
    ids = [
        row[0]
        for row in conn.execute(
            select(t.c.id).where(t.c.started_at < cutoff).order_by(t.c.id).limit(size)
        )
    ]
    if not ids:
        return 0
    conn.execute(sa_delete(t).where(t.c.id.in_(ids)))
    return len(ids)


# -- reads and retention (the model's methods) --------------------------------------------


def runs(
    model: ModelCore, key: str | None, since: _validate.Duration | None, limit: int
) -> Steps[list[Run]]:
    lock_key = None if key is None else _validate.lock_key(key, "key")
    since_ms = None if since is None else _validate.duration_ms(since, "since")
    size = _validate.batch_size(limit, "limit")
    found, _now = yield from call_connected(
        model, "read runs", _select, ledger_of(model), lock_key, since_ms, size
    )
    return list(found)


def select_runs(
    model: ModelCore, key: str | None, since_ms: int | None, limit: int
) -> Steps[tuple[list[Run], int]]:
    """Runs and the database's now (epoch ms), for ``joblocks history``."""
    return (
        yield from call_connected(
            model, "read runs", _select, ledger_of(model), key, since_ms, limit
        )
    )


def latest_runs(model: ModelCore) -> Steps[tuple[list[Run], int]]:
    """The last run of every key and the database's now (epoch ms), for ``status``."""
    return (yield from call_connected(model, "read runs", _latest, ledger_of(model)))


def prune_runs(model: ModelCore, older_than: _validate.Duration, batch_size: int) -> Steps[int]:
    age_ms = _validate.duration_ms(older_than, "older_than", allow_zero=True)
    size = _validate.batch_size(batch_size)
    deleted = 0
    while True:
        started = time.monotonic()
        done = yield from call_connected(
            model, "prune runs", _prune_batch, ledger_of(model), age_ms, size
        )
        deleted += done
        if done < size:
            return deleted
        if profile_single_file(model):
            yield Sleep(min(0.05, time.monotonic() - started))


def profile_single_file(model: ModelCore) -> bool:
    return bool(model.statements.profile.single_file)
