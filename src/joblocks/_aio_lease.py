"""The asyncio face's leases: :class:`joblocks.aio.Lease`, ``lease()`` and
``run_with_lock()`` (public in ``joblocks.aio``; the sync ones are in ``_lease`` and
``_run``). Both drive the same ``_lifecycle`` generators as the sync face."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Callable

from typing_extensions import Unpack

from . import _lifecycle, _validate
from ._aio_model import JobLockModel
from ._config import resolve_model
from ._errors import (
    LockNotAcquired,
)
from ._keepalive import task_renewer
from ._lease import LeaseBase
from ._options import (
    LEASE_OPTIONS,
    LeaseKwargs,
    LeaseOptions,
    RunOptions,
    check_cancel_on_loss,
)
from ._run import check_work


def get_model(name: str | None = None) -> JobLockModel:
    """The default asyncio model (``joblocks.aio.get_model``), looked up at each call."""
    from .aio import get_model as configured

    return configured(name)


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
            self._run_error = exc_info[1]
        if not self.released:
            await self.release()


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


JobLockModel._lease_type = Lease
