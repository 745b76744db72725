"""Starlette / FastAPI: a background loop that runs in one replica at a time.

::

    from fastapi import FastAPI
    from joblocks.contrib.starlette import singleton_loop

    async def refresh_rates() -> None: ...

    app = FastAPI(lifespan=singleton_loop("rates", 60_000, refresh_rates))

Every replica starts the loop with the app. The one that takes the lock leads: it
runs ``func`` now and then every ``interval``, renewing its lease meanwhile; the
others try again every ``retry_every``. On shutdown the loop is cancelled and the
lock released, so another replica takes over at its next try. A leader whose lease
is lost (the database unreachable for a ttl, the row deleted) stops running ``func``
and becomes a follower.

Only asyncio and :mod:`joblocks.aio` are used: the lifespan works with any framework
that takes a ``lifespan(app)`` async context manager (Starlette, FastAPI, Litestar…).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable

from .. import LockError
from . import _support
from ._support import LeaseOptions, check_cancel_on_loss, is_async_callable, log, unique_holder

if TYPE_CHECKING:
    from .. import aio

__all__ = ["DEFAULT_TTL_MS", "SingletonLoop", "singleton_loop"]

#: Default ttl of the leader's lease: how long a crashed leader blocks a takeover
#: (the lease is renewed every ttl/3 while the replica leads).
DEFAULT_TTL_MS = 30_000


class SingletonLoop:
    """A loop run by one replica at a time; see :func:`singleton_loop`.

    Use it as the app's lifespan (``lifespan=loop``), or inside your own lifespan as
    ``async with loop:``. :attr:`leading` says whether this replica leads now.

    Every duration (``interval``, ``ttl``, ``retry_every``, ``renew_every``) is
    milliseconds (int or float) or a ``datetime.timedelta``.
    """

    def __init__(
        self,
        key: str,
        interval: _support.Duration,
        func: Callable[[], Awaitable[Any]],
        *,
        ttl: _support.Duration = DEFAULT_TTL_MS,
        retry_every: _support.Duration | None = None,
        renew_every: _support.Duration | None = None,
        cancel_on_loss: bool = True,
        model: aio.JobLockModel | None = None,
    ) -> None:
        self.key = _support.lock_key(key, "key")
        self.interval_ms = _support.duration_ms(interval, "interval")
        if not callable(func):
            raise TypeError(f"func must be callable, not {type(func).__name__}")
        if inspect.isasyncgenfunction(func) or not is_async_callable(func):
            raise TypeError(
                "func must be an async function (async def) taking no arguments; run "
                "blocking work in it with asyncio.to_thread"
            )
        self.func = func
        self.ttl_ms = _support.duration_ms(ttl, "ttl")
        # Checked once; each time this replica tries to lead it takes it with its
        # holder and a loss flag of that turn.
        self._options = LeaseOptions(
            ttl_ms=self.ttl_ms,
            holder=None,
            keepalive=True,
            renew_every=renew_every,
            min_hold=None,
            wait=None,
            on_lost=None,
            max_hold=None,
        )
        self.renew_every = renew_every
        self.retry_every_ms = (
            min(self.interval_ms, self.ttl_ms)
            if retry_every is None
            else _support.duration_ms(retry_every, "retry_every")
        )
        self.cancel_on_loss = check_cancel_on_loss(cancel_on_loss, keepalive=True)
        if model is not None:
            from .. import aio

            if not isinstance(model, aio.JobLockModel):
                raise _support.wrong_face(model, "joblocks.aio.JobLockModel")
        self.model = model
        self._task: asyncio.Task[None] | None = None
        self._leading = False
        self.holder: str | None = None

    @property
    def leading(self) -> bool:
        """True while this replica holds the lock and runs the loop."""
        return self._leading

    @property
    def running(self) -> bool:
        """True between start and stop."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the loop in a task of the running event loop (returns at once)."""
        if self.running:
            raise RuntimeError(f"the singleton loop {self.key!r} is already running")
        self.holder = unique_holder()
        self._task = asyncio.ensure_future(self._run(self.holder))

    async def stop(self) -> None:
        """Cancel the loop (and ``func`` if it is running), release the lock; wait for it."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: S110 - logged by _run when it happened
            pass

    async def __aenter__(self) -> SingletonLoop:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __call__(self, app: object) -> contextlib.AbstractAsyncContextManager[None]:
        """The lifespan of ``app``: ``Starlette(lifespan=loop)``, ``FastAPI(lifespan=loop)``."""
        return self._lifespan()

    @contextlib.asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with self:
            yield

    # -- the loop --------------------------------------------------------------------

    async def _run(self, holder: str) -> None:
        try:
            await self._loop(holder)
        except Exception:
            log.exception("joblocks: singleton loop %r stopped on an error", self.key)
            raise

    async def _loop(self, holder: str) -> None:
        from .. import aio

        model = self.model if self.model is not None else aio.get_model()
        retry = self.retry_every_ms / 1000
        while True:
            lost, on_lost = _loss_flag()
            try:
                held = await _shielded(
                    _support.try_lease_async(
                        model, self.key, self._options.for_run(holder, on_lost=on_lost)
                    )
                )
            except LockError as exc:
                log.warning("joblocks: singleton loop %r could not try its lock: %s", self.key, exc)
                held = None
            if held is None:
                await asyncio.sleep(retry)
                continue
            log.info("joblocks: singleton loop %r: this replica leads (%s)", self.key, holder)
            self._leading = True
            try:
                await self._lead(held, lost)
            finally:
                self._leading = False
                await asyncio.shield(_release(held))
            log.info("joblocks: singleton loop %r: this replica stopped leading", self.key)
            await asyncio.sleep(retry)

    async def _lead(self, held: aio.Lease, lost: asyncio.Event) -> None:
        interval = self.interval_ms / 1000
        while not held.lost:
            await self._run_func(held, lost)
            if held.lost:
                return
            try:
                await asyncio.wait_for(lost.wait(), timeout=interval)
            except asyncio.TimeoutError:
                continue
            return

    async def _run_func(self, held: aio.Lease, lost: asyncio.Event) -> None:
        task: asyncio.Future[Any] = asyncio.ensure_future(self.func())
        try:
            if self.cancel_on_loss:
                waiter = asyncio.ensure_future(lost.wait())
                try:
                    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                if not task.done():
                    log.warning(
                        "joblocks: singleton loop %r: lease lost (%s); cancelling func",
                        self.key,
                        held.lost_reason,
                    )
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    return
            else:
                await asyncio.wait({task})
            task.result()
        except asyncio.CancelledError:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            raise
        except Exception:
            log.exception("joblocks: singleton loop %r: func raised", self.key)


def _loss_flag() -> tuple[asyncio.Event, Callable[[object], None]]:
    """An event, and an ``on_lost`` callback that sets it (from any thread)."""
    lost = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_lost(_lease: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(lost.set)

    return lost, on_lost


async def _shielded(attempt: Awaitable[aio.Lease | None]) -> aio.Lease | None:
    """Await a lock attempt; if cancelled meanwhile, let go of what it took, then raise."""
    future = asyncio.ensure_future(attempt)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            held = await future
            if held is not None:
                await held.release()
        raise


async def _release(held: aio.Lease) -> None:
    try:
        await held.release()
    except Exception as exc:
        log.warning("joblocks: releasing %r failed (it expires on its own): %s", held.key, exc)


def singleton_loop(
    key: str,
    interval: _support.Duration,
    func: Callable[[], Awaitable[Any]],
    *,
    ttl: _support.Duration = DEFAULT_TTL_MS,
    retry_every: _support.Duration | None = None,
    renew_every: _support.Duration | None = None,
    cancel_on_loss: bool = True,
    model: aio.JobLockModel | None = None,
) -> SingletonLoop:
    """A lifespan that runs ``await func()`` every ``interval`` in one replica at a time.

    ::

        app = Starlette(lifespan=singleton_loop("rates", 60_000, refresh_rates))

        # or inside your own lifespan, next to other resources:
        rates = singleton_loop("rates", 60_000, refresh_rates)

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with rates:
                yield

    Every duration is milliseconds (int or float) or a ``datetime.timedelta``.

    - ``interval``: the pause between the end of one run and the start of the next.
    - ``ttl`` (default 30 s): the leader's lease, renewed every ``renew_every``
      (default ttl/3); how long a crashed leader blocks a takeover.
    - ``retry_every``: how often a follower tries the lock (default: ``interval``, at
      most ``ttl``).
    - ``cancel_on_loss`` (default True): cancel a running ``func`` when the lease is
      found lost.
    - ``model``: a :class:`joblocks.aio.JobLockModel`; default
      :func:`joblocks.aio.get_model` when the loop starts.

    An exception of ``func`` is logged and the loop goes on; a database error while
    trying the lock is logged and retried. Each start takes the lock under a holder of
    its own (this process's worker id and a random suffix), so two apps in one process
    exclude each other too.
    """
    return SingletonLoop(
        key,
        interval,
        func,
        ttl=ttl,
        retry_every=retry_every,
        renew_every=renew_every,
        cancel_on_loss=cancel_on_loss,
        model=model,
    )
