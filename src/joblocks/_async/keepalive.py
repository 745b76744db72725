"""Keep-alive on the asyncio face: one renewer task per event loop (the sync face's is
one thread per process, in ``_sync.keepalive``; what the two share is in
``_core.renewal``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import Any

from .._core.renewal import _alive, _due, _idle_keepers, _Registry


class TaskRenewer:
    """The asyncio face's renewer: one task per event loop."""

    def __init__(self) -> None:
        self._leases = _Registry()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The models keeping a connection for their keep-alive leases' renewals.
        self._keeping: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, lease: Any) -> None:
        self._leases.add(lease)
        self._keeping.add(lease._model)
        lease.keepalive = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="joblocks-keepalive"
            )
        self._wake.set()

    def remove(self, lease: Any) -> None:
        self._leases.discard(lease)
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the renewal task is alive."""
        return self._task is not None and not self._task.done()

    def count(self) -> int:
        """How many leases are being kept alive."""
        return len(self._leases)

    def keeps(self, model: Any) -> bool:
        """Whether ``model`` has keep-alive leases here (and so keeps a connection)."""
        return model in self._keeping

    async def _run(self) -> None:
        try:
            await self._serve()
        finally:
            # No leases left, or the loop ends (its tasks cancelled): every kept
            # connection goes back, none is left unclosed.
            models = list(self._keeping)
            self._keeping = weakref.WeakSet()
            for model in models:
                await model._let_keeper_go()

    async def _serve(self) -> None:
        while True:
            leases = _alive(self._leases.refs())
            if not leases:
                self._task = None
                return
            renew, drop, expired, wake = _due(leases, time.monotonic())
            self._leases.discard_all(drop)
            idle = _idle_keepers(self._keeping, leases, drop)
            del leases, drop
            for model in idle:
                await model._let_keeper_go()
            del idle
            for lease in expired:
                lease._expire()
            lease = None
            if not renew:
                self._wake.clear()
                timeout = max(0.0, wake - time.monotonic())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            await asyncio.gather(*(_renew_in_time(held) for held in renew if not held._lost_file()))
            del renew


async def _renew_in_time(lease: Any) -> None:
    """``lease._renew_once()``, given up when the lease counts as lost meanwhile.

    A renewal waiting for a connection (an exhausted pool waits up to 30 s) or for a
    reply that does not come would hold up the loop's other renewals and the news that
    this lease ran out. At the lease's loss time the renewer stops waiting for it (it
    does not wait for it to be cancelled either: the call is abandoned by its own bound
    and ends by itself), and the lease is reported lost.
    """
    left = lease._lost_at - time.monotonic()
    renewal = asyncio.ensure_future(lease._renew_once())
    done, _pending = await asyncio.wait({renewal}, timeout=max(0.001, left))
    if not done:
        renewal.add_done_callback(_quiet)
        lease._check_ran_out()
        lease._after_failed_renewal(time.monotonic())


def _quiet(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a renewal given up on (never logged as unretrieved)."""
    if not task.cancelled():
        task.exception()


_task_renewers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TaskRenewer] = (
    weakref.WeakKeyDictionary()
)


def task_renewer() -> TaskRenewer:
    """The renewer of the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    renewer = _task_renewers.get(loop)
    if renewer is None:
        renewer = _task_renewers[loop] = TaskRenewer()
    return renewer
