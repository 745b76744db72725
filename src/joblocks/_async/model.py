"""The asyncio face's model and lease (public in ``joblocks.aio``):
:class:`joblocks.aio.JobLockModel` and :class:`joblocks.aio.Lease`, a lease's state
(``_core.state``) kept alive by its event loop's renewer task (``_async.keepalive``); the
mirror of ``_sync.model``.

Every method drives a life-cycle generator of ``_core.lifecycle`` with ``_drive``
(``_async.driver``), which awaits each step: the statements of an ``_core.ops``
operation on the model's own driver connections (``_async.raw``), on ``sqlite3`` on the
loop's thread (``_async.pool``) or in one SQLAlchemy greenlet (a caller's
``AsyncEngine``), ``asyncio.sleep``, the caller's work (see docs/design.md).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Callable

from typing_extensions import Unpack

from .._core import lifecycle as _lifecycle
from .._core import ops as _ops
from .._core import plain as _plain
from .._core.options import LEASE_OPTIONS, LeaseKwargs, LeaseOptions
from .._core.plain import Run
from .._core.state import LeaseState, Outcome
from .._db.connections import JobLock
from .._util import validate as _validate
from .._util.errors import translate
from .driver import Driver
from .keepalive import task_renewer


class Lease(LeaseState):
    """One grant of a lock (asyncio face). ``async with`` releases it on exit."""

    _model: Driver

    def __init__(self, model: Driver, **state: Any) -> None:
        super().__init__(table=model.table, **state)
        self._model = model
        self._loss_waiters: builtins.list[asyncio.Future[None]] = []

    async def refresh(
        self,
        ttl: _validate.Duration | None = None,
        *,
        min_hold: _validate.Duration | None = None,
    ) -> bool:
        """Extend the live lease to now + ``ttl`` (milliseconds or a ``datetime.timedelta``;
        default: its ttl), keeping its token;
        ``min_hold`` (ms or timedelta) keeps a release from freeing the key before this
        refresh + min_hold. False, sending nothing, once released or lost. See
        :meth:`joblocks.Lease.refresh`.
        """
        return await self._model._drive(_lifecycle.lease_refresh(self, ttl, min_hold))

    async def release(self) -> bool:
        """Let the lease go; see :meth:`joblocks.Lease.release`."""
        return await self._model._drive(_lifecycle.lease_release(self))

    async def ensure_held(self) -> None:
        """Raise :class:`LeaseLost` unless the database still has this grant live."""
        await self._model._drive(_lifecycle.ensure_held(self))

    async def _renew_once(self) -> None:
        """One renewal by the keep-alive task; never raises."""
        await self._model._drive(_lifecycle.renew_once(self))

    def _keep_alive(self) -> None:
        self._loop = asyncio.get_running_loop()
        with self._state_lock:
            self._arm_loss()
        task_renewer().add(self)
        self._model._keep_connection()

    def _loss_due(self) -> None:
        # On the watchdog's thread: the loss is reported on the lease's event loop
        # (``cancel_on_loss`` futures belong to it).
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(self._check_ran_out)

    def _stop_keeping_alive(self) -> None:
        with contextlib.suppress(RuntimeError):
            task_renewer().remove(self)

    def _mark_lost(self, reason: str) -> bool:
        first = super()._mark_lost(reason)
        if first:
            for waiter in self._loss_waiters:
                if not waiter.done():
                    waiter.set_result(None)
        return first

    async def _run_cancellable(self, work: Callable[[], Awaitable[Any]]) -> None:
        """Await ``work()``, cancelling it when this lease is found lost."""
        loop = asyncio.get_running_loop()
        lost = loop.create_future()
        self._loss_waiters.append(lost)
        task = asyncio.ensure_future(work())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._loss_waiters.remove(lost)
        if task.done():
            task.result()
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise self._lost_error()

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if isinstance(exc_info[1], BaseException):
            self._work_failed(exc_info[1])
        if not self.released:
            await self.release()


class JobLockModel(Driver):
    """The lock table of one database, for asyncio: every method is a coroutine.

    Same arguments and semantics as :class:`joblocks.JobLockModel`; ``database`` may
    be a URL or an ``AsyncEngine``. ``timeout`` (milliseconds or a
    ``datetime.timedelta``; default 5,000 ms) bounds a connection attempt, each wait
    for a reply and SQLite's wait for another writer, as on the sync face.
    """

    _lease_type = Lease

    _asynchronous = True

    async def create_table(self) -> None:
        """Create the lock table and its fencing counter if they are missing.

        Raises :class:`LockTableMismatch` (creating nothing) when a table of that name
        exists with another shape.
        """
        with translate("create table", self.database):
            await self._run_first_use(True)
            self.table_ready = True

    async def dispose(self) -> None:
        """Close this model's connections (and its engine, if joblocks made it)."""
        await self._close_connections()

    async def acquire(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Take ``lock_key`` for ``holder`` for ``ttl`` (milliseconds or a
        ``datetime.timedelta``); see :meth:`joblocks.JobLockModel.acquire`."""
        return await self.acquire_token(lock_key, ttl, holder) is not None

    async def acquire_token(
        self, lock_key: str, ttl: _validate.Duration, holder: str
    ) -> int | None:
        """Like :meth:`acquire`, returning the grant's fencing token (None when taken).

        The same token for a re-entrant acquire of a live row; a larger one for any
        other grant (the holder's own expired row included).

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_plain.acquire_token(self, lock_key, ttl, holder))

    async def release(self, lock_key: str, holder: str) -> bool:
        """Delete the row if ``holder`` holds it (a no-op otherwise); True when deleted."""
        return await self._drive(_plain.release(self, lock_key, holder))

    async def refresh(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Set the expiry to now + ``ttl`` if the row is ``holder``'s, even if expired,
        keeping its token; see :meth:`joblocks.JobLockModel.refresh`.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_plain.refresh(self, lock_key, ttl, holder))

    async def peek(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key`` whatever its state, or None."""
        return await self._drive(_plain.peek(self, lock_key))

    async def holders(self, lock_key: str) -> builtins.list[JobLock]:
        """The place rows of a key used with ``max_holders`` (see
        :meth:`joblocks.JobLockModel.holders`)."""
        return await self._drive(_plain.holders(self, lock_key))

    async def try_lease(
        self,
        lock_key: str,
        ttl: _validate.Duration,
        **options: Unpack[LeaseKwargs[Lease]],
    ) -> Lease | None:
        """Take ``lock_key`` and return the grant as a :class:`Lease`, or None.

        See :meth:`joblocks.JobLockModel.try_lease`; keep-alive runs as one task per
        event loop. Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``,
        ``max_hold``) is milliseconds (int or float) or a ``datetime.timedelta``.
        ``schedule``/``timezone``: at most one start per cron slot, as there.
        ``record``: the run ledger (see :meth:`joblocks.JobLockModel.try_lease`).
        """
        return (await self._try_lease(lock_key, ttl, **options)).lease

    async def _try_lease(
        self,
        lock_key: str,
        ttl: _validate.Duration,
        **options: Unpack[LeaseKwargs[Lease]],
    ) -> Outcome[Lease]:
        """:meth:`try_lease`'s outcome: acquired (its lease), taken, or skipped (why)."""
        key = _validate.lock_key(lock_key)
        return await self._take(key, LeaseOptions.of(ttl, options, "try_lease", LEASE_OPTIONS))

    async def _take(self, key: str, opts: LeaseOptions) -> Outcome[Lease]:
        """:meth:`_try_lease` of a request already validated."""
        steps = _lifecycle.take(self, key, opts, time.monotonic())
        taken: Outcome[Lease] = await self._drive(steps)
        return taken

    async def get(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key``, or None (same as :meth:`peek`)."""
        return await self.peek(lock_key)

    async def list(self, state: _ops.State = "all") -> builtins.list[JobLock]:
        """All rows ordered by key; ``state="held"`` (alias ``"live"``) or ``"expired"``
        keeps the rows in that state by the database's clock (``"all"``: every row)."""
        return await self._drive(_plain.list_locks(self, state))

    async def count(self, state: _ops.State = "all") -> int:
        """How many rows there are (``state`` as in :meth:`list`)."""
        return await self._drive(_plain.count(self, state))

    def iter_locks(
        self, state: _ops.State = "all", *, batch_size: int = _ops.PAGE_SIZE
    ) -> AsyncIterator[JobLock]:
        """The rows of :meth:`list`, ``batch_size`` at a time: ``async for lock in
        model.iter_locks():``. See :meth:`joblocks.JobLockModel.iter_locks`.

        Not a coroutine: arguments are checked at the call, and each page is read
        when the loop reaches it.
        """
        _validate.state(state)
        size = _validate.batch_size(batch_size)
        return self._pages(state, size)

    async def _pages(self, state: _ops.State, size: int) -> AsyncIterator[JobLock]:
        after: str | None = ""
        while after is not None:
            page = await self._drive(_plain.page(self, state, after, size))
            for lock in page:
                yield lock
            after = _ops.next_after(page, size)

    async def prune(
        self,
        expired_for: _validate.Duration = 0,
        *,
        batch_size: int = _ops.PRUNE_BATCH,
        dry_run: bool = False,
    ) -> int:
        """Delete the rows expired for at least ``expired_for`` (ms or timedelta), in
        batches; the number deleted. See :meth:`joblocks.JobLockModel.prune`."""
        return await self._drive(_plain.prune(self, expired_for, batch_size, dry_run))

    async def insert(self, lock_key: str, *, holder: str, ttl: _validate.Duration) -> JobLock:
        """Insert a new row with a new fencing token; ``LockExistsError`` if one exists.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_plain.insert(self, lock_key, holder, ttl))

    async def update(
        self,
        lock_key: str,
        *,
        holder: str | None = None,
        ttl: _validate.Duration | None = None,
    ) -> bool:
        """Change the holder and/or set expiry to now + ``ttl``, whoever holds the row.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_plain.update(self, lock_key, holder, ttl))

    async def delete(self, lock_key: str) -> bool:
        """Delete the row of ``lock_key`` whoever holds it; True when a row was deleted."""
        return await self._drive(_plain.delete(self, lock_key))

    async def now_ms(self) -> int:
        """The database server's clock, in epoch milliseconds."""
        return await self._drive(_plain.now_ms(self))

    async def runs(
        self,
        key: str | None = None,
        *,
        since: _validate.Duration | None = None,
        limit: int = 1000,
    ) -> builtins.list[Run]:
        """The run ledger's rows, newest first; see :meth:`joblocks.JobLockModel.runs`
        (``since``: ms or timedelta)."""
        return await self._drive(_plain.runs(self, key, since, limit))

    async def prune_runs(
        self, older_than: _validate.Duration, *, batch_size: int = _plain.PRUNE_BATCH
    ) -> int:
        """Delete ledger rows of runs started more than ``older_than`` (ms or timedelta)
        ago, in batches; see :meth:`joblocks.JobLockModel.prune_runs`."""
        return await self._drive(_plain.prune_runs(self, older_than, batch_size))
