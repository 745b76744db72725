"""The asyncio face's ``Lease`` (:class:`joblocks.aio.Lease`): a lease's state
(``_core.state``) driven through the life cycle (``_core.lifecycle``) by its model, kept alive
by its event loop's renewer task (``_async.keepalive``); the mirror of ``_sync.lease``."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable
from typing import Any, Callable

from .._core import lifecycle as _lifecycle
from .._core.state import LeaseState
from .._util import validate as _validate
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
