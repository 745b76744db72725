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

from sqlalchemy import exc as sa_exc

from . import _config, _engines, _events, _guard, _ops, _validate
from ._base import TRANSIENT_ATTEMPTS, Database, ModelCore, log, transient_pause
from ._config import resolve_model
from ._errors import (
    LeaseLost,
    LockBackendError,
    LockConnectionError,
    LockDriverMissing,
    LockError,
    LockExistsError,
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
from ._lease import LeaseBase, LeaseOptions, check_cancel_on_loss, fill_times, next_pause
from ._records import JobLock
from ._run import after_release, check_work
from ._schema import JOB_LOCKS_TABLE_NAME
from ._sqla import greenlet_spawn
from ._statements import AcquirePath

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
    "LockNotAcquired",
    "LockPermissionError",
    "LockReadOnlyError",
    "LockTableError",
    "LockTableMismatch",
    "LockTableMissing",
    "LockTimeoutError",
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

    def __init__(
        self,
        database: Database = None,
        *,
        table_name: str = JOB_LOCKS_TABLE_NAME,
        schema: str | None = None,
        create_table: bool = True,
        errors_as_taken: bool = False,
        acquire_path: AcquirePath | None = None,
        timeout: _validate.Duration | None = None,
    ) -> None:
        self._setup(
            database,
            asynchronous=True,
            table_name=table_name,
            schema=schema,
            create_table=create_table,
            errors_as_taken=errors_as_taken,
            acquire_path=acquire_path,
            timeout=timeout,
        )

    async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        with translate(operation, self.database):
            if not self.table_ready:
                with translate(self._first_use_name, self.database):
                    async with self.engine.connect() as conn:
                        await conn.run_sync(self._first_use, self._create)
                self.table_ready = True
            attempt = 1
            while True:
                try:
                    work = greenlet_spawn(self._in_greenlet, fn, *args)
                    result: T = await (
                        asyncio.wait_for(work, self._io_timeout) if self._io_timeout else work
                    )
                    return result
                except sa_exc.DBAPIError as exc:
                    if attempt >= TRANSIENT_ATTEMPTS or not _ops.is_transient(
                        exc, self.statements.family
                    ):
                        raise
                    log.debug("joblocks: %s retried after a transient error: %s", operation, exc)
                    await asyncio.sleep(transient_pause(attempt))
                    attempt += 1

    def _in_greenlet(self, fn: Callable[..., T], *args: Any) -> T:
        # Check-out, statements and check-in in one greenlet: ``async with
        # engine.connect()`` + ``run_sync`` takes three.
        with self.engine.sync_engine.connect() as conn:
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

    async def _identify(self) -> tuple[Any, ...]:
        """The table's identity (see ``identity``): read once, then kept."""
        if self._found is None:
            found = await self._call("identify table", _engines.table_identity, self.table)
            self._found = self._found or found
        return self._found.key

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
        key = _validate.lock_key(lock_key)
        ttl_ms = _validate.duration_ms(ttl, "ttl")
        who = _validate.holder(holder)
        try:
            grant = await self._call("acquire", _ops.acquire, key, who, ttl_ms)
        except LockBackendError as exc:
            if not self.errors_as_taken:
                raise
            log.warning("joblocks: acquire of %r failed, reported as taken: %s", key, exc)
            return None
        return None if grant is None else grant.fence

    async def release(self, lock_key: str, holder: str) -> bool:
        """Delete the row if ``holder`` holds it (a no-op otherwise); True when deleted."""
        key = _validate.lock_key(lock_key)
        who = _validate.holder(holder)
        return await self._call("release", _ops.release, key, who)

    async def refresh(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Set the expiry to now + ``ttl`` if the row is ``holder``'s, even if expired,
        keeping its token; see :meth:`joblocks.JobLockModel.refresh`.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        key = _validate.lock_key(lock_key)
        ttl_ms = _validate.duration_ms(ttl, "ttl")
        who = _validate.holder(holder)
        return await self._call("refresh", _ops.refresh, key, who, ttl_ms) is not None

    async def peek(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key`` whatever its state, or None."""
        key = _validate.lock_key(lock_key)
        return await self._call("peek", _ops.peek, key)

    async def try_lease(
        self,
        lock_key: str,
        ttl: _validate.Duration,
        *,
        holder: str | None = None,
        keepalive: bool = False,
        renew_every: _validate.Duration | None = None,
        min_hold: _validate.Duration | None = None,
        wait: _validate.Duration | None = None,
        on_lost: Callable[[Lease], None] | None = None,
        max_hold: _validate.Duration | None = None,
    ) -> Lease | None:
        """Take ``lock_key`` and return the grant as a :class:`Lease`, or None.

        See :meth:`joblocks.JobLockModel.try_lease`; keep-alive runs as one task per
        event loop. Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``,
        ``max_hold``) is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        key = _validate.lock_key(lock_key)
        ttl_ms = _validate.duration_ms(ttl, "ttl")
        opts = LeaseOptions(
            ttl_ms=ttl_ms,
            holder=holder,
            keepalive=keepalive,
            renew_every=renew_every,
            min_hold=min_hold,
            wait=wait,
            on_lost=on_lost,
            max_hold=max_hold,
        )
        return await self._lease(key, ttl_ms, opts, time.monotonic())

    async def _lease(
        self, key: str, ttl_ms: int, opts: LeaseOptions, started: float, *, times: bool = True
    ) -> Lease | None:
        attempt = 0
        while True:
            sent = time.monotonic()
            try:
                grant = await self._call("acquire", _ops.acquire, key, opts.holder, ttl_ms)
            except LockBackendError as exc:
                _events.emit("error", key, opts.holder, error=exc)
                raise
            if grant is not None:
                break
            attempt += 1
            pause = next_pause(attempt, started, opts.wait_ms)
            if pause is None:
                _events.emit("conflict", key, opts.holder)
                return None
            await asyncio.sleep(pause)
        mine = True
        if grant.acquired_ms is None and (times or opts.keepalive or opts.on_lost):
            grant, mine = fill_times(grant, await self._call("peek", _ops.peek, key))
        held = Lease(self, **opts.lease_state(key, grant, sent, ttl_ms))
        waited = (sent - started) * 1000 if opts.wait_ms is not None else None
        _events.emit("acquired", key, opts.holder, token=grant.fence, waited_ms=waited)
        if not mine:
            held._mark_lost("the row changed right after it was granted")
        elif opts.keepalive:
            task_renewer().add(held)
        return held

    async def get(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key``, or None (same as :meth:`peek`)."""
        return await self.peek(lock_key)

    async def list(self, state: _ops.State = "all") -> builtins.list[JobLock]:
        """All rows ordered by key; ``state="held"`` (alias ``"live"``) or ``"expired"``
        keeps the rows in that state by the database's clock (``"all"``: every row)."""
        _check_state(state)
        return await self._call("list", _ops.list_locks, state)

    async def count(self, state: _ops.State = "all") -> int:
        """How many rows there are (``state`` as in :meth:`list`)."""
        _check_state(state)
        return await self._call("count", _ops.count, state)

    def iter_locks(
        self, state: _ops.State = "all", *, batch_size: int = _ops.PAGE_SIZE
    ) -> AsyncIterator[JobLock]:
        """The rows of :meth:`list`, ``batch_size`` at a time: ``async for lock in
        model.iter_locks():``. See :meth:`joblocks.JobLockModel.iter_locks`.

        Not a coroutine: arguments are checked at the call, and each page is read
        when the loop reaches it.
        """
        _check_state(state)
        size = _validate.batch_size(batch_size)
        return self._pages(state, size)

    async def _pages(self, state: _ops.State, size: int) -> AsyncIterator[JobLock]:
        after: str | None = ""
        while after is not None:
            page = await self._call("list", _ops.list_page, state, after, size)
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
        age_ms, size = _validate.prune_options(expired_for, batch_size, dry_run)
        if dry_run:
            return await self._call("prune", _ops.count_prunable, age_ms)
        deleted = 0
        after: str | None = ""
        while True:
            started = time.monotonic()
            done, after = await self._call("prune", _ops.prune_batch, age_ms, size, after)
            deleted += done
            if after is None:
                return deleted
            pause = _ops.prune_pause_s(self.statements.family, time.monotonic() - started)
            if pause:
                await asyncio.sleep(pause)

    async def insert(self, lock_key: str, *, holder: str, ttl: _validate.Duration) -> JobLock:
        """Insert a new row with a new fencing token; ``LockExistsError`` if one exists.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        key = _validate.lock_key(lock_key)
        who = _validate.holder(holder)
        ttl_ms = _validate.duration_ms(ttl, "ttl")
        row = await self._call("insert", _ops.insert, key, who, ttl_ms)
        if row is None:
            raise LockExistsError(key)
        return row

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
        key = _validate.lock_key(lock_key)
        who = None if holder is None else _validate.holder(holder)
        ttl_ms = None if ttl is None else _validate.duration_ms(ttl, "ttl")
        if who is None and ttl_ms is None:
            raise ValueError("update needs holder= or ttl= (or both)")
        return await self._call("update", _ops.update, key, who, ttl_ms)

    async def delete(self, lock_key: str) -> bool:
        """Delete the row of ``lock_key`` whoever holds it; True when a row was deleted."""
        key = _validate.lock_key(lock_key)
        return await self._call("delete", _ops.delete, key)

    async def now_ms(self) -> int:
        """The database server's clock, in epoch milliseconds."""
        return await self._call("read clock", _ops.now_ms)


def _check_state(state: object) -> None:
    _validate.state(state)


async def run_with_lock(
    lock_key: str,
    ttl: _validate.Duration,
    work: Callable[[], Awaitable[Any]],
    *,
    model: JobLockModel | None = None,
    keepalive: bool = False,
    renew_every: _validate.Duration | None = None,
    min_hold: _validate.Duration | None = None,
    wait: _validate.Duration | None = None,
    on_lost: Callable[[Lease], None] | None = None,
    max_hold: _validate.Duration | None = None,
    cancel_on_loss: bool = False,
) -> bool:
    """Await ``work()`` only if ``lock_key`` can be taken for this worker; release after.

    See :func:`joblocks.run_with_lock`. Cancellation inside ``work`` still releases,
    then propagates. With ``keepalive=True`` and ``cancel_on_loss=True``, ``work`` is
    cancelled when the lease is found lost, and :class:`LeaseLost` is raised.

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    """
    key = _validate.lock_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    check_work(work, asynchronous=True)
    check_cancel_on_loss(cancel_on_loss, keepalive)
    opts = LeaseOptions(
        ttl_ms=ttl_ms,
        holder=None,
        keepalive=keepalive,
        renew_every=renew_every,
        min_hold=min_hold,
        wait=wait,
        on_lost=on_lost,
        max_hold=max_hold,
    )
    model = resolve_model(model, JobLockModel, get_model, "joblocks.aio.JobLockModel")
    started = time.monotonic()
    slot = (await model._identify(), key)
    attempt = 0
    while not _guard.enter(slot):
        attempt += 1
        pause = next_pause(attempt, started, opts.wait_ms)
        if pause is None:
            log.debug("joblocks: %r is already running in this process; skipped", key)
            _events.emit("conflict", key, opts.holder)
            return False
        await asyncio.sleep(pause)
    try:
        held = await model._lease(key, ttl_ms, opts, started, times=False)
        if held is None:
            log.debug("joblocks: %r is held by another worker; skipped", key)
            return False
        try:
            if cancel_on_loss:
                await held._run_cancellable(work)
            else:
                await work()
        finally:
            await _release_quietly(held)
        return True
    finally:
        _guard.leave(slot)


async def _release_quietly(held: Lease) -> None:
    # Shielded: a cancelled work still gets its release.
    try:
        released = await asyncio.shield(held.release())
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("joblocks: releasing %r failed; it expires on its own", held.key)
        return
    after_release(held, released)


class Lease(LeaseBase):
    """One grant of a lock (asyncio face). ``async with`` releases it on exit."""

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
        args = self._refresh_args(ttl, min_hold)
        if args is None:
            return False
        sent = time.monotonic()
        expires = await self._model._call(
            "refresh", _ops.refresh_lease, self.key, self.holder, self.token, args[0]
        )
        return self._refreshed(expires, sent, *args)

    async def release(self) -> bool:
        """Let the lease go; see :meth:`joblocks.Lease.release`."""
        if not self._begin_release():
            return False
        with contextlib.suppress(RuntimeError):
            task_renewer().remove(self)
        try:
            released = await self._model._call(
                "release",
                _ops.release_lease,
                self.key,
                self.holder,
                self.token,
                self._min_hold_ms,
                self._hold_until_ms,
            )
        except LockBackendError as exc:
            _events.emit("error", self.key, self.holder, token=self.token, error=exc)
            raise
        held_ms = self.held_for.total_seconds() * 1000
        _events.emit("released", self.key, self.holder, token=self.token, held_ms=held_ms)
        return bool(released)

    async def ensure_held(self) -> None:
        """Raise :class:`LeaseLost` unless the database still has this grant live."""
        if self.lost or self.released:
            raise self._lost_error()
        if not await self._model._call(
            "check lease", _ops.is_held, self.key, self.holder, self.token
        ):
            self._mark_lost("the row is gone, expired or another holder's")
            raise self._lost_error()

    async def _renew_once(self) -> None:
        """One renewal by the keep-alive task; never raises."""
        sent = time.monotonic()
        try:
            expires = await self._model._call(
                "renew", _ops.refresh_lease, self.key, self.holder, self.token, self.ttl_ms
            )
        except Exception as exc:
            _events.emit("error", self.key, self.holder, token=self.token, error=exc)
            log.warning("joblocks: renewing %r failed: %s", self.key, exc)
            self._check_ran_out()
            self._after_failed_renewal(time.monotonic())
            return
        if expires is None:
            self._mark_lost("renewal refused: the row is gone, expired or another grant's")
            return
        self._renewed(expires, sent, self.ttl_ms)
        _events.emit("renewed", self.key, self.holder, token=self.token)

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
        if not self.released:
            await self.release()


@contextlib.asynccontextmanager
async def lease(
    lock_key: str,
    ttl: _validate.Duration,
    *,
    model: JobLockModel | None = None,
    holder: str | None = None,
    keepalive: bool = False,
    renew_every: _validate.Duration | None = None,
    min_hold: _validate.Duration | None = None,
    wait: _validate.Duration | None = None,
    on_lost: Callable[[Lease], None] | None = None,
    max_hold: _validate.Duration | None = None,
    cancel_on_loss: bool = False,
) -> AsyncIterator[Lease]:
    """``async with joblocks.aio.lease(key, ttl) as held:`` — raises
    :class:`LockNotAcquired` when held elsewhere; released when the block exits.

    With ``keepalive=True`` and ``cancel_on_loss=True``, the task running the block is
    cancelled when the lease is found lost; :class:`LeaseLost` is raised from it.

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    """
    model = resolve_model(model, JobLockModel, get_model, "joblocks.aio.JobLockModel")
    check_cancel_on_loss(cancel_on_loss, keepalive)
    held = await model.try_lease(
        lock_key,
        ttl,
        holder=holder,
        keepalive=keepalive,
        renew_every=renew_every,
        min_hold=min_hold,
        wait=wait,
        on_lost=on_lost,
        max_hold=max_hold,
    )
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
    except asyncio.CancelledError:
        if held.lost and cancel_on_loss:
            raise held._lost_error() from None
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
