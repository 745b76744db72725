"""Keep-alive on the asyncio face: one renewer task per event loop (the sync face's is
one thread per process, in ``_sync.keepalive``; what the two share is in
``_core.renewal``).

The connection an asyncio model keeps for the renewals of its keep-alive leases
(:class:`Keeper`, a part of ``_async.driver.Driver``): taken when a keep-alive lease is
granted, on the event loop it was granted on, never taken by the model's other calls
(so a renewal never waits behind them), discarded when a call on it was abandoned or
cut off, given back when the model has no keep-alive lease left. On an engine joblocks
made on a server it is one of the model's own connections (``_async.pool``); otherwise
a connection of the ``AsyncEngine``, used through a greenlet.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import TYPE_CHECKING, Any

from .._core.base import ModelCore
from .._core.renewal import LeaseRefs, idle_keepers, referenced, sort_due
from .._core.steps import Attempt, Connected
from .._util.drivers import greenlet_spawn
from .pool import RawPool, forget
from .raw import Link, Raw, bounded_at

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from .pool import LoopSQLite


class TaskRenewer:
    """The asyncio face's renewer: one task per event loop."""

    def __init__(self) -> None:
        self._leases = LeaseRefs()
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
            leases = referenced(self._leases.refs())
            if not leases:
                self._task = None
                return
            renew, drop, expired, wake = sort_due(leases, time.monotonic())
            self._leases.discard_all(drop)
            idle = idle_keepers(self._keeping, leases, drop)
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


class Keeper(ModelCore):
    """The kept connection's part of the asyncio driver (set up by ``Driver._set_up``)."""

    _keeper: Any  # an ``AsyncConnection``, or a ``_async.raw.Raw`` of the model's own
    _keeper_lock: asyncio.Lock | None
    _keeper_loop: weakref.ref[asyncio.AbstractEventLoop] | None
    _keeper_task: asyncio.Task[None] | None
    _link: Link | None
    _loop_sqlite: LoopSQLite | None
    _cut_late: bool
    _late_s: float

    if TYPE_CHECKING:  # the driver's own, used here

        def _send(self, conn: Any, step: Attempt | Connected, one_key: bool) -> Any: ...

        async def _sent(self, link: Link, raw: Raw, step: Attempt) -> Any: ...

        def _here(self) -> RawPool: ...

        @property
        def _io_timeout(self) -> float | None: ...

    def _keeper_guard(self) -> asyncio.Lock:
        """The lock of the kept connection, for the running loop (a kept connection
        belongs to the loop it was taken on)."""
        loop = asyncio.get_running_loop()
        if self._keeper_loop is None or self._keeper_loop() is not loop:
            self._keeper_loop = weakref.ref(loop)
            self._keeper_lock = asyncio.Lock()
            kept, self._keeper = self._keeper, None
            if isinstance(kept, Raw):
                forget(kept)  # of a loop gone by: its pool is closed too
        assert self._keeper_lock is not None  # noqa: S101 - set with the loop
        return self._keeper_lock

    def _keep_connection(self) -> None:
        """A keep-alive lease was granted: take the connection its renewals run on
        now, while the one that granted it is idle in the pool (best effort: without
        it, the first renewal takes one)."""
        if self._loop_sqlite is not None or self._keeper_task is not None:
            return
        task = asyncio.get_running_loop().create_task(self._take_keeper_now())
        self._keeper_task = task

        def done(_task: asyncio.Task[None]) -> None:
            if self._keeper_task is task:
                self._keeper_task = None
            if not _task.cancelled():
                _task.exception()

        task.add_done_callback(done)

    async def _take_keeper_now(self) -> None:
        if self._link is not None:
            await self._take_raw_keeper_now()
            return
        async with self._keeper_guard():
            if self._keeper is not None and not self._keeper.invalidated:
                return
            with contextlib.suppress(Exception):
                self._keeper = await self._open_keeper(None)
            if self._keeper is not None and not task_renewer().keeps(self):
                # The lease ended meanwhile and its renewer let go of the model.
                conn, self._keeper = self._keeper, None
                await asyncio.shield(_close_kept(conn))

    async def _open_keeper(self, until: float | None) -> AsyncConnection:
        """A connection of the engine, waited for no longer than ``timeout`` nor past
        ``until`` (monotonic seconds)."""
        left = self.timeout_ms / 1000
        if until is not None:
            left = max(0.001, min(left, until - time.monotonic()))
        conn: AsyncConnection = self.engine.connect()
        try:
            await asyncio.wait_for(conn.start(), left)
        except BaseException:
            await asyncio.shield(_close_kept(conn))
            raise
        return conn

    async def _on_keeper(self, step: Attempt | Connected) -> Any:
        """``step`` (a keep-alive renewal) on the connection the model keeps for the
        renewals of its keep-alive leases: the process's other calls never take it. An
        abandoned connection is discarded; the next renewal takes a fresh one."""
        async with self._keeper_guard():
            conn = self._keeper
            if conn is None or conn.invalidated or conn.closed:
                self._keeper = None
                if conn is not None:
                    await asyncio.shield(_close_kept(conn))
                conn = self._keeper = await self._open_keeper(step.until)
            work = greenlet_spawn(self._send, conn.sync_connection, step, False)
            timeout = self._io_timeout
            try:
                return await (asyncio.wait_for(work, timeout) if timeout else work)
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError) or conn.invalidated or conn.closed:
                    # Cut off mid-call or abandoned: never used again.
                    if self._keeper is conn:
                        self._keeper = None
                    await asyncio.shield(_close_kept(conn, discard=True))
                raise

    async def _let_keeper_go(self) -> None:
        """The model has no keep-alive lease left (or is disposed, or its loop ends):
        its kept connection goes back to the pool."""
        loop = self._keeper_loop() if self._keeper_loop is not None else None
        if self._keeper is None or loop is not asyncio.get_running_loop():
            return
        async with self._keeper_guard():
            conn, self._keeper = self._keeper, None
            if isinstance(conn, Raw):
                self._here().put(conn)
            elif conn is not None:
                await asyncio.shield(_close_kept(conn))

    async def _on_raw_keeper(self, step: Attempt) -> Any:
        """``step`` (a keep-alive renewal, a keep-alive grant) on the connection the
        model keeps for its keep-alive leases, never taken by its other calls; one that
        was lost or cut off is closed, the next renewal takes another."""
        async with self._keeper_guard():
            pool = self._here()
            raw = self._keeper
            if raw is None or raw.lost:
                self._keeper = None
                if raw is not None:
                    pool.put(raw)
                raw = self._keeper = await self._raw_keeper(pool, step.until)
            try:
                if self._cut_late:
                    return await bounded_at(self._sent(pool.link, raw, step), self._late_s)
                return await self._sent(pool.link, raw, step)
            finally:
                if raw.lost:
                    if self._keeper is raw:
                        self._keeper = None
                    pool.put(raw)

    async def _raw_keeper(self, pool: RawPool, until: float | None) -> Raw:
        """A connection of ``pool``, waited for no longer than ``timeout`` nor past
        ``until`` (monotonic seconds)."""
        left = pool.link.timeout_s
        if until is not None:
            left = max(0.001, min(left, until - time.monotonic()))
        return await bounded_at(pool.take(), left)

    async def _take_raw_keeper_now(self) -> None:
        async with self._keeper_guard():
            kept = self._keeper
            if kept is not None and not kept.lost:
                return
            pool = self._here()
            if kept is not None:
                self._keeper = None
                pool.put(kept)
            with contextlib.suppress(Exception):
                self._keeper = await self._raw_keeper(pool, None)
            if self._keeper is not None and not task_renewer().keeps(self):
                # The lease ended meanwhile and its renewer let go of the model.
                raw, self._keeper = self._keeper, None
                pool.put(raw)


async def _close_kept(conn: AsyncConnection, *, discard: bool = False) -> None:
    """Give ``conn`` back to its pool (``discard``: invalidated first, never reused)."""
    if discard:
        with contextlib.suppress(Exception):
            await conn.invalidate()
    with contextlib.suppress(Exception):
        await conn.close()
