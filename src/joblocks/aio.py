"""The asyncio face of joblocks: the same names as :mod:`joblocks`, as coroutines.

``JobLockModel`` here takes the same URLs as the sync face and picks the async driver
itself (``sqlite:///…`` → aiosqlite, ``postgresql://…`` → psycopg, ``mysql://…`` or
``mysql+pymysql://…`` → aiomysql), or an existing ``AsyncEngine``. Each operation is
the very function the sync face runs, executed through ``AsyncConnection.run_sync``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Callable, TypeVar

from typing_extensions import Unpack

from . import _config, _engines, _ledger, _lifecycle, _ops, _steps, _validate
from ._base import Database, ModelCore
from ._config import resolve_model
from ._errors import (
    LeaseLost,
    LockBackendError,
    LockConnectionError,
    LockDriverMissing,
    LockError,
    LockExistsError,
    LockHoldersMismatch,
    LockNotAcquired,
    LockPermissionError,
    LockReadOnlyError,
    LockTableError,
    LockTableMismatch,
    LockTableMissing,
    LockTimeoutError,
    translate,
)
from ._keepalive import task_renewer
from ._lease import LeaseBase
from ._ledger import Run
from ._options import (
    LEASE_OPTIONS,
    LeaseKwargs,
    LeaseOptions,
    RunOptions,
    check_cancel_on_loss,
)
from ._records import JobLock
from ._run import check_work
from ._sqla import greenlet_spawn, hands_off_per_statement
from ._steps import Attempt, FirstUse, Session, Sleep, Steps, Work

_engines.require_asyncio()  # an ImportError naming the extra to install, not a late failure

__all__ = [
    "JobLock",
    "JobLockModel",
    "Lease",
    "LeaseLost",
    "LockBackendError",
    "LockConnectionError",
    "LockDriverMissing",
    "LockError",
    "LockExistsError",
    "LockHoldersMismatch",
    "LockNotAcquired",
    "LockPermissionError",
    "LockReadOnlyError",
    "LockTableError",
    "LockTableMismatch",
    "LockTableMissing",
    "LockTimeoutError",
    "Run",
    "configure",
    "get_model",
    "lease",
    "run_with_lock",
]

T = TypeVar("T")


class JobLockModel(ModelCore):
    """The lock table of one database, for asyncio: every method is a coroutine.

    Same arguments and semantics as :class:`joblocks.JobLockModel`; ``database`` may
    be a URL or an ``AsyncEngine``. ``timeout`` (milliseconds or a
    ``datetime.timedelta``; default 5,000 ms) bounds a connection attempt, each wait
    for a reply and SQLite's wait for another writer, as on the sync face.
    """

    _asynchronous = True

    async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        return await self._drive(_steps.call(self, operation, fn, *args))

    async def _drive(self, steps: Steps[T]) -> T:
        """Run the life-cycle generator ``steps`` to its end, awaiting each step it
        yields (see ``_lifecycle``)."""
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            result = error = None
            try:
                if isinstance(step, Attempt):
                    work = greenlet_spawn(self._in_greenlet, step.fn, *step.args)
                    timeout = self._io_timeout
                    result = await (asyncio.wait_for(work, timeout) if timeout else work)
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, FirstUse):
                    await self._open()
                elif isinstance(step, Work):
                    if step.cancel_on_loss:
                        await step.lease._run_cancellable(step.work)  # type: ignore[attr-defined]
                    else:
                        await step.work()
                elif isinstance(step, Session):
                    result = await self._session(step)
                else:
                    # A cancelled caller still gets these steps done (e.g. a release).
                    result = await asyncio.shield(self._drive(step.steps))
            except BaseException as exc:  # thrown back in at the yield
                error = exc

    async def _session(self, step: Session) -> Any:
        """A connection kept for a lease's life (see ``_steps.Session``)."""
        timeout = self._io_timeout
        conn = step.conn
        if conn is None:
            opening = self.engine.connect()
            conn = await (asyncio.wait_for(opening, timeout) if timeout else opening)
        try:
            result = None
            if step.fn is not None:
                work = conn.run_sync(step.fn, self.statements, *step.args)
                result = await (asyncio.wait_for(work, timeout) if timeout else work)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            await asyncio.shield(conn.close())
            raise
        if step.conn is None:
            return conn, result
        if step.close:
            await conn.close()
        return result

    async def _open(self) -> None:
        with translate(self._first_use_name, self.database):
            async with self.engine.connect() as conn:
                await conn.run_sync(self._first_use, self._create)
        self.table_ready = True

    def _set_up(self) -> None:
        self._one_hand_off = hands_off_per_statement(self.engine.sync_engine.dialect)

    def _in_greenlet(self, fn: Callable[..., T], *args: Any) -> T:
        # Check-out, statements and check-in in one greenlet: ``async with
        # engine.connect()`` + ``run_sync`` takes three.
        with self.engine.sync_engine.connect() as conn:
            if self._one_hand_off and fn in _ops.IN_PLACE:
                # aiosqlite: no hand-off to its thread unless another writer is in the way.
                return _ops.in_place(conn, self.statements, fn, args)
            return fn(conn, self.statements, *args)

    @property
    def _io_timeout(self) -> float | None:
        # aiomysql has no read/write timeout of its own: bound each call instead, so a
        # cut connection ends in LockBackendError rather than a hang (the cancelled
        # statement's connection is invalidated). PostgreSQL has tcp_user_timeout and
        # SQLite its busy timeout.
        if self.statements.profile.bounds_async_calls:
            return self.timeout_ms / 1000
        return None

    async def create_table(self) -> None:
        """Create the lock table and its fencing counter if they are missing.

        Raises :class:`LockTableMismatch` (creating nothing) when a table of that name
        exists with another shape.
        """
        with translate("create table", self.database):
            async with self.engine.connect() as conn:
                await conn.run_sync(self._first_use, True)
            self.table_ready = True

    async def dispose(self) -> None:
        """Close this model's connections (and its engine, if joblocks made it)."""
        if self.owns_engine:
            await self.engine.dispose()

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
        return await self._drive(_lifecycle.acquire_token(self, lock_key, ttl, holder))

    async def release(self, lock_key: str, holder: str) -> bool:
        """Delete the row if ``holder`` holds it (a no-op otherwise); True when deleted."""
        return await self._drive(_lifecycle.release(self, lock_key, holder))

    async def refresh(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Set the expiry to now + ``ttl`` if the row is ``holder``'s, even if expired,
        keeping its token; see :meth:`joblocks.JobLockModel.refresh`.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_lifecycle.refresh(self, lock_key, ttl, holder))

    async def peek(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key`` whatever its state, or None."""
        return await self._drive(_lifecycle.peek(self, lock_key))

    async def holders(self, lock_key: str) -> builtins.list[JobLock]:
        """The place rows of a key used with ``max_holders`` (see
        :meth:`joblocks.JobLockModel.holders`)."""
        return await self._drive(_lifecycle.holders(self, lock_key))

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
        key = _validate.lock_key(lock_key)
        return await self._take(key, LeaseOptions.of(ttl, options, "try_lease", LEASE_OPTIONS))

    async def _take(self, key: str, opts: LeaseOptions) -> Lease | None:
        """:meth:`try_lease` of a request already validated."""
        held: Lease | None = await self._drive(_lifecycle.take(self, key, opts, time.monotonic()))
        return held

    async def get(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key``, or None (same as :meth:`peek`)."""
        return await self.peek(lock_key)

    async def list(self, state: _ops.State = "all") -> builtins.list[JobLock]:
        """All rows ordered by key; ``state="held"`` (alias ``"live"``) or ``"expired"``
        keeps the rows in that state by the database's clock (``"all"``: every row)."""
        return await self._drive(_lifecycle.list_locks(self, state))

    async def count(self, state: _ops.State = "all") -> int:
        """How many rows there are (``state`` as in :meth:`list`)."""
        return await self._drive(_lifecycle.count(self, state))

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
            page = await self._drive(_lifecycle.page(self, state, after, size))
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
        return await self._drive(_lifecycle.prune(self, expired_for, batch_size, dry_run))

    async def insert(self, lock_key: str, *, holder: str, ttl: _validate.Duration) -> JobLock:
        """Insert a new row with a new fencing token; ``LockExistsError`` if one exists.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return await self._drive(_lifecycle.insert(self, lock_key, holder, ttl))

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
        return await self._drive(_lifecycle.update(self, lock_key, holder, ttl))

    async def delete(self, lock_key: str) -> bool:
        """Delete the row of ``lock_key`` whoever holds it; True when a row was deleted."""
        return await self._drive(_lifecycle.delete(self, lock_key))

    async def now_ms(self) -> int:
        """The database server's clock, in epoch milliseconds."""
        return await self._drive(_lifecycle.now_ms(self))

    async def runs(
        self,
        key: str | None = None,
        *,
        since: _validate.Duration | None = None,
        limit: int = 1000,
    ) -> builtins.list[Run]:
        """The run ledger's rows, newest first; see :meth:`joblocks.JobLockModel.runs`
        (``since``: ms or timedelta)."""
        return await self._drive(_ledger.runs(self, key, since, limit))

    async def prune_runs(
        self, older_than: _validate.Duration, *, batch_size: int = _ledger.PRUNE_BATCH
    ) -> int:
        """Delete ledger rows of runs started more than ``older_than`` (ms or timedelta)
        ago, in batches; see :meth:`joblocks.JobLockModel.prune_runs`."""
        return await self._drive(_ledger.prune_runs(self, older_than, batch_size))


async def run_with_lock(
    lock_key: str,
    ttl: _validate.Duration,
    work: Callable[[], Awaitable[Any]],
    *,
    model: JobLockModel | None = None,
    cancel_on_loss: bool = False,
    **options: Unpack[RunOptions[Lease]],
) -> bool:
    """Await ``work()`` only if ``lock_key`` can be taken for this worker; release after.

    See :func:`joblocks.run_with_lock`. Cancellation inside ``work`` still releases,
    then propagates. With ``keepalive=True`` and ``cancel_on_loss=True``, ``work`` is
    cancelled when the lease is found lost, and :class:`LeaseLost` is raised.
    ``schedule``/``timezone``: at most one start per cron slot (False when skipped).
    ``record`` (True, False or ``"all"``; None: the model's) writes the run to the run
    ledger, as for :func:`joblocks.run_with_lock`.

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    """
    key = _validate.lock_key(lock_key)
    opts = LeaseOptions.of(ttl, options, "run_with_lock")
    check_work(work, asynchronous=True)
    check_cancel_on_loss(cancel_on_loss, opts.keepalive)
    return await _run_request(model, key, opts, work, cancel_on_loss)


async def _run_request(
    model: JobLockModel | None,
    key: str,
    opts: LeaseOptions,
    work: Callable[[], Awaitable[Any]],
    cancel_on_loss: bool,
) -> bool:
    """:func:`run_with_lock` of a request already validated (the decorator's)."""
    model = resolve_model(model, JobLockModel, get_model, "joblocks.aio.JobLockModel")
    steps = _lifecycle.run_with_lock(model, key, opts, work, cancel_on_loss)
    return await model._drive(steps)


class Lease(LeaseBase):
    """One grant of a lock (asyncio face). ``async with`` releases it on exit."""

    _model: JobLockModel

    def __init__(self, model: JobLockModel, **state: Any) -> None:
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
        task_renewer().add(self)

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
            self._run_error = exc_info[1]
        if not self.released:
            await self.release()


JobLockModel._lease_type = Lease


@contextlib.asynccontextmanager
async def lease(
    lock_key: str,
    ttl: _validate.Duration,
    *,
    model: JobLockModel | None = None,
    cancel_on_loss: bool = False,
    **options: Unpack[LeaseKwargs[Lease]],
) -> AsyncIterator[Lease]:
    """``async with joblocks.aio.lease(key, ttl) as held:`` — raises
    :class:`LockNotAcquired` when held elsewhere; released when the block exits.

    With ``keepalive=True`` and ``cancel_on_loss=True``, the task running the block is
    cancelled when the lease is found lost; :class:`LeaseLost` is raised from it.
    ``schedule``/``timezone``: at most one start per cron slot (a skipped start raises
    :class:`LockNotAcquired`).
    ``record``: the run ledger (an exception out of the block is an ``error`` run).

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    """
    model = resolve_model(model, JobLockModel, get_model, "joblocks.aio.JobLockModel")
    key = _validate.lock_key(lock_key)
    opts = LeaseOptions.of(ttl, options, "lease", LEASE_OPTIONS)
    check_cancel_on_loss(cancel_on_loss, opts.keepalive)
    held = await model._take(key, opts)
    if held is None:
        raise LockNotAcquired(lock_key)
    watcher: asyncio.Task[None] | None = None
    if cancel_on_loss:
        body = asyncio.current_task()
        lost = asyncio.get_running_loop().create_future()
        held._loss_waiters.append(lost)

        async def cancel_body() -> None:
            await lost
            if body is not None:
                body.cancel()

        watcher = asyncio.ensure_future(cancel_body())
    try:
        yield held
    except asyncio.CancelledError as exc:
        held._run_error = exc
        if held.lost and cancel_on_loss:
            raise held._lost_error() from None
        raise
    except BaseException as exc:
        held._run_error = exc
        raise
    finally:
        if watcher is not None:
            watcher.cancel()
        await asyncio.shield(held.__aexit__(None, None, None))


def _make_async(database: Database, **options: Any) -> JobLockModel:
    return JobLockModel(database, **options)


_disposing: set[asyncio.Task[None]] = set()


def _dispose_later(model: JobLockModel) -> None:
    if not model.owns_engine:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        # No loop: its connections belong to a loop that is gone; drop the pool.
        model.engine.sync_engine.dispose(close=False)
        return
    task = loop.create_task(model.dispose())
    _disposing.add(task)
    task.add_done_callback(_disposing.discard)


_registry: _config.Registry[JobLockModel] = _config.Registry(
    _make_async, _dispose_later, fallback=_config.sync_registry
)


def configure(
    default: Database = None,
    *,
    instances: Mapping[str, Database] | None = None,
    **options: Any,
) -> None:
    """Say where the locks live for asyncio; see :func:`joblocks.configure`.

    Until this is called, the asyncio face uses the URLs given to
    ``joblocks.configure`` (engines are not shared between faces), else
    ``JOBLOCKS_URL``, else the per-user SQLite file. Replacing a configuration
    disposes the engines joblocks made for the old one in the background.
    """
    _registry.configure(default, instances, _config.check_options(options))


def get_model(name: str | None = None) -> JobLockModel:
    """The asyncio model of the default database, or of instance ``name``."""
    return _registry.get(name)
