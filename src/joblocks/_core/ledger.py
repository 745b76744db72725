"""The run ledger (``record=True``): one row per run in the ``job_runs`` table.

A run starts when a lease recorded by the ledger is granted (``_lifecycle.take``) and
ends at its release: ``ok``, ``error`` (the work raised), or ``lost`` (the lease was
found lost while it ran). With ``record="all"`` a start that found the key taken is a
``skipped`` row too. Every time is the database's (epoch ms), as in the lock table.

The writes are steps of the life cycle, driven by either face. A write that fails is
logged and counted (the ``record_failed`` event), and never fails the job: the
ledger is a record, not part of the exclusion. Reads (``history``, ``status``) and
the retention (``prune_runs``) are in :mod:`._core.history`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Literal

from sqlalchemy import Connection, MetaData, Table, insert, update

from .._sql.dialects import db_now_ms, statement_now_ms
from .._sql.schema import (
    MAX_RUN_ERROR,
    build_runs_table,
    check_shape,
    ensure_table,
    runs_table_name,
)
from .._util.validate import mask_text
from .base import log
from .steps import Emit, Steps, call_connected

if TYPE_CHECKING:
    from .._sql.statements import Statements
    from .base import ModelCore
    from .options import LeaseOptions
    from .state import LeaseState

Outcome = Literal["ok", "error", "lost", "skipped"]

#: A ledger write waits for a lock (its table locked by another session, a migration
#: say) at most this share of the model's ``timeout``: the server gives the wait up
#: itself, before the call is abandoned at ``timeout`` (see :func:`_lock_waits_bounded`).
LOCK_WAIT_SHARE = 0.8


class Ledger:
    """A model's ledger table (beside its lock table) and whether it was created."""

    __slots__ = ("checked", "create", "lock_wait_ms", "locks", "ready", "table")

    def __init__(self, model: ModelCore) -> None:
        lock_table = model.table
        self.locks: Table = lock_table
        name = model.runs_table_name or runs_table_name(lock_table.name)
        self.table: Table = build_runs_table(MetaData(), name, lock_table.schema)
        self.create = model._create
        self.ready = not model._create
        self.checked = False  # whether an existing table of its name was found a ledger
        # The server-side bound of a write's waits for locks (ms), on engines joblocks
        # makes (an engine you pass in keeps its own settings): None, no bound.
        self.lock_wait_ms: int | None = (
            max(1, int(model.timeout_ms * LOCK_WAIT_SHARE)) if model.owns_engine else None
        )

    def ensure(
        self, conn: Connection, bounded: Callable[[], contextlib.AbstractContextManager[None]]
    ) -> None:
        """Before a write: refuse (as :class:`~joblocks.LockTableMismatch`) a table of its
        name of another shape, and create the table where missing.

        The existing table is looked at under ``bounded()`` (reading its columns waits
        for a lock on it, e.g. PostgreSQL's reflection behind ``LOCK TABLE``); a missing
        one is created outside it (creating retries, see ``_schema.ensure_table``).
        """
        if self.checked:
            return
        from sqlalchemy import inspect

        table = self.table
        with bounded():
            found = bool(inspect(conn).has_table(table.name, schema=table.schema))
            if found:
                check_shape(conn, table)
        if found:
            self.ready = self.checked = True
        elif not self.ready:
            ensure_table(conn, table)  # checks the shape first
            self.ready = self.checked = True

    def check(self, conn: Connection) -> None:
        """Before a read of the existing table: refuse it if it is not a ledger."""
        if not self.checked:
            check_shape(conn, self.table)
            self.checked = True


def ledger_of(model: ModelCore) -> Ledger:
    found: Ledger | None = model.__dict__.get("_ledger")
    if found is None:
        found = model.__dict__["_ledger"] = Ledger(model)
    return found


# -- what a row says about the process -------------------------------------------------

_HOST = socket.gethostname()[:255]


class CommandFailed(Exception):
    """The command of ``joblocks run --record`` exited with a non-zero status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"exit status {status}")
        self.status = status


def error_text(exc: BaseException) -> str:
    """A short text of ``exc`` for the ledger: its type and the first line of its
    message, passwords in URLs and ``password=`` pairs masked, at most 500 characters."""
    message = str(exc).strip().splitlines()
    text = type(exc).__name__ + (f": {message[0]}" if message else "")
    if isinstance(exc, CommandFailed):
        text = message[0]
    return mask_text(text)[:MAX_RUN_ERROR]


def lost_reason(lease: LeaseState) -> str | None:
    """Why the run's lease was lost, or None: found lost, or (no keep-alive, or its
    renewals failing) its ttl ran out before the release, by this process's clock."""
    if lease.lost:
        return lease.lost_reason or "the lease was lost"
    if time.monotonic() >= lease._lost_at:
        return "its ttl ran out before the release"
    return None


def outcome_of(lease: LeaseState) -> Outcome:
    if lost_reason(lease) is not None:
        return "lost"
    return "error" if lease._run_error is not None else "ok"


# -- the SQL (each a function of a connection, run by ``_steps.call_connected``) -----------


@contextlib.contextmanager
def _lock_waits_bounded(conn: Connection, st: Statements, ledger: Ledger) -> Iterator[None]:
    """The statements inside wait for a lock no longer than ``ledger.lock_wait_ms``.

    A ledger table locked by another session (a migration's ``LOCK TABLE``) would keep a
    write waiting until the model's ``timeout`` abandons the call: the job goes on, but
    the write's outcome is unknown (it may still land once the lock is let go, leaving
    a run that never ends). With the bound, the server gives the wait up first: the
    write fails as ``LockTimeoutError`` with nothing written, on a connection still
    usable. How the bound is set is the dialect's (``Profile.lock_wait_begin``).
    """
    ms = ledger.lock_wait_ms
    prof = st.profile
    if ms is None or not prof.lock_wait_begin:
        yield
        return
    try:
        for sql in prof.lock_wait_begin:
            conn.exec_driver_sql(sql.format(ms=ms, s=f"{ms / 1000:.3f}"))
        yield
    except BaseException:
        try:
            for sql in prof.lock_wait_undo:
                conn.exec_driver_sql(sql)
        except Exception:
            # Never back in the pool with the bound still set (or mid-transaction).
            with contextlib.suppress(Exception):
                conn.invalidate()
        raise
    for sql in prof.lock_wait_end:
        conn.exec_driver_sql(sql)


def _start(conn: Connection, st: Statements, ledger: Ledger, values: dict[str, Any]) -> int:
    ledger.ensure(conn, lambda: _lock_waits_bounded(conn, st, ledger))
    with _lock_waits_bounded(conn, st, ledger):
        result = conn.execute(insert(ledger.table).values(started_at=db_now_ms(), **values))
    primary: Any = result.inserted_primary_key
    return int(primary[0])


def _finish(
    conn: Connection, st: Statements, ledger: Ledger, run_id: int, outcome: str, error: str | None
) -> None:
    t = ledger.table
    now = statement_now_ms()
    with _lock_waits_bounded(conn, st, ledger):
        conn.execute(
            update(t)
            .where(t.c.id == run_id)
            .values(ended_at=now, duration_ms=now - t.c.started_at, outcome=outcome, error=error)
        )


def _skip(conn: Connection, st: Statements, ledger: Ledger, values: dict[str, Any]) -> None:
    ledger.ensure(conn, lambda: _lock_waits_bounded(conn, st, ledger))
    now = statement_now_ms()
    with _lock_waits_bounded(conn, st, ledger):
        conn.execute(
            insert(ledger.table).values(
                started_at=now, ended_at=now, duration_ms=0, outcome="skipped", **values
            )
        )


# -- steps of the life cycle -----------------------------------------------------------------


def _write(
    model: ModelCore, key: str, holder: str, fn: Callable[..., Any], *args: Any
) -> Steps[Any]:
    """One write of the ledger (``fn`` on its table): its result; never raises. A
    failure is logged (the job goes on) and reported as the ``record_failed`` event,
    and gives None."""
    try:
        return (yield from call_connected(model, "record run", fn, ledger_of(model), *args))
    except Exception as exc:
        log.warning("joblocks: the run ledger could not record %r (the job goes on): %s", key, exc)
        yield Emit("record_failed", key, holder, error=exc)
        return None


def _where(
    opts: LeaseOptions, lease: LeaseState | None, slot: tuple[int, int] | None = None
) -> dict[str, Any]:
    if lease is not None:
        slot = lease.slot
    schedule = opts.schedule
    return {
        "slot": None if slot is None else slot[0],
        "schedule": None if schedule is None else schedule.expression,
        "timezone": None if schedule is None else schedule.timezone,
        "holder": opts.holder if lease is None else lease.holder,
        "host": _HOST,
        "pid": os.getpid(),
        "token": None if lease is None else lease.token,
    }


class RunRow:
    """The ledger's part of a lease (``record=``): the row of its run, once written,
    until its end is written."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id: int | None = None


def record_start(model: ModelCore, lease: LeaseState, opts: LeaseOptions) -> Steps[None]:
    """Write the row of a run that starts under ``lease``; never raises."""
    values = {"key": lease.key, **_where(opts, lease)}
    run_id = yield from _write(model, lease.key, lease.holder, _start, values)
    if run_id is not None:
        run: RunRow = lease._run
        run.id = run_id


def record_end(lease: LeaseState) -> Steps[None]:
    """Write how the run under ``lease`` ended (once); never raises."""
    run: RunRow | None = lease._run
    if run is None or run.id is None:
        return
    run_id, run.id = run.id, None
    error = lease._run_error
    text = None if error is None else error_text(error)
    lost = lost_reason(lease)
    if lost is not None and (text is None or isinstance(error, CommandFailed)):
        # A command's exit status and why the lock was lost (its SIGTERM, often).
        text = (lost if text is None else f"{text}; {lost}")[:MAX_RUN_ERROR]
    outcome = outcome_of(lease)
    yield from _write(lease._model, lease.key, lease.holder, _finish, run_id, outcome, text)


def record_skip(
    model: ModelCore, key: str, opts: LeaseOptions, slot: tuple[int, int] | None = None
) -> Steps[None]:
    """Write a ``skipped`` row (``record="all"``; ``slot``: the schedule slot it was
    for); never raises."""
    values = {"key": key, **_where(opts, None, slot)}
    yield from _write(model, key, values["holder"], _skip, values)
