"""The asyncio face of joblocks: the same names as :mod:`joblocks`, as coroutines.

``JobLockModel`` here takes the same URLs as the sync face and picks the async driver
itself (``sqlite:///…`` → aiosqlite, ``postgresql://…`` → psycopg, ``mysql://…`` or
``mysql+pymysql://…`` → aiomysql), or an existing ``AsyncEngine``. Each operation is
the very function the sync face runs, executed through ``AsyncConnection.run_sync``.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Mapping
from typing import Any, Callable, TypeVar

from sqlalchemy import exc as sa_exc

from . import _config, _guard, _identity, _ops, _validate
from ._base import TRANSIENT_ATTEMPTS, Database, ModelCore, log, transient_pause
from ._errors import (
    LeaseLost,
    LockBackendError,
    LockError,
    LockExistsError,
    LockNotAcquired,
    translate,
)
from ._records import JobLock
from ._run import after_release, check_work
from ._schema import JOB_LOCKS_TABLE_NAME, ensure_table
from ._statements import AcquirePath

__all__ = [
    "JobLock",
    "JobLockModel",
    "LeaseLost",
    "LockBackendError",
    "LockError",
    "LockExistsError",
    "LockNotAcquired",
    "configure",
    "get_model",
    "run_with_lock",
]

T = TypeVar("T")


class JobLockModel(ModelCore):
    """The lock table of one database, for asyncio: every method is a coroutine.

    Same arguments and semantics as :class:`joblocks.JobLockModel`; ``database`` may
    be a URL or an ``AsyncEngine``.
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
    ) -> None:
        self._setup(
            database,
            asynchronous=True,
            table_name=table_name,
            schema=schema,
            create_table=create_table,
            errors_as_taken=errors_as_taken,
            acquire_path=acquire_path,
        )

    async def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        with translate(operation, self.database):
            if not self.table_ready:
                await self.create_table()
            attempt = 1
            while True:
                try:
                    async with self.engine.connect() as conn:
                        result: T = await conn.run_sync(fn, self.statements, *args)
                        return result
                except sa_exc.DBAPIError as exc:  # noqa: PERF203 - retry loop
                    if attempt >= TRANSIENT_ATTEMPTS or not _ops.is_transient(
                        exc, self.statements.family
                    ):
                        raise
                    log.debug("joblocks: %s retried after a transient error: %s", operation, exc)
                    await asyncio.sleep(transient_pause(attempt))
                    attempt += 1

    async def create_table(self) -> None:
        """Create the lock table and its fencing counter if they are missing."""
        with translate("create table", self.database):
            async with self.engine.connect() as conn:
                await conn.run_sync(ensure_table, self.table)
            self.table_ready = True

    async def dispose(self) -> None:
        """Close this model's connections (and its engine, if joblocks made it)."""
        if self.owns_engine:
            await self.engine.dispose()

    async def acquire(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Take ``lock_key`` for ``holder``; see :meth:`joblocks.JobLockModel.acquire`."""
        return await self.acquire_token(lock_key, ttl, holder) is not None

    async def acquire_token(
        self, lock_key: str, ttl: _validate.Duration, holder: str
    ) -> int | None:
        """Like :meth:`acquire`, returning the grant's fencing token (None when taken)."""
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
        """Set the expiry to now + ``ttl`` if the row is ``holder``'s, even if expired."""
        key = _validate.lock_key(lock_key)
        ttl_ms = _validate.duration_ms(ttl, "ttl")
        who = _validate.holder(holder)
        return await self._call("refresh", _ops.refresh, key, who, ttl_ms) is not None

    async def peek(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key`` whatever its state, or None."""
        key = _validate.lock_key(lock_key)
        return await self._call("peek", _ops.peek, key)

    async def get(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key``, or None (same as :meth:`peek`)."""
        return await self.peek(lock_key)

    async def list(self, state: _ops.State = "all") -> builtins.list[JobLock]:
        """All rows ordered by key; ``state="live"`` or ``"expired"`` filters by db time."""
        _check_state(state)
        return await self._call("list", _ops.list_locks, state)

    async def count(self, state: _ops.State = "all") -> int:
        """How many rows there are (``state`` as in :meth:`list`)."""
        _check_state(state)
        return await self._call("count", _ops.count, state)

    async def insert(self, lock_key: str, *, holder: str, ttl: _validate.Duration) -> JobLock:
        """Insert a new row with a new fencing token; ``LockExistsError`` if one exists."""
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
        """Change the holder and/or set expiry to now + ``ttl``, whoever holds the row."""
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
    if state not in ("all", "live", "expired"):
        raise ValueError(f"state must be 'all', 'live' or 'expired', got {state!r}")


async def run_with_lock(
    lock_key: str,
    ttl: _validate.Duration,
    work: Callable[[], Awaitable[Any]],
    *,
    model: JobLockModel | None = None,
) -> bool:
    """Await ``work()`` only if ``lock_key`` can be taken for this worker; release after.

    See :func:`joblocks.run_with_lock`. Cancellation inside ``work`` still releases,
    then propagates.
    """
    key = _validate.lock_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    check_work(work, asynchronous=True)
    if model is None:
        model = get_model()
    elif not isinstance(model, JobLockModel):
        raise TypeError(f"model must be a joblocks.aio.JobLockModel, not {type(model).__name__}")
    slot = (model.identity, key)
    if not _guard.enter(slot):
        log.debug("joblocks: %r is already running in this process; skipped", key)
        return False
    try:
        holder = _identity.worker_id()
        if not await model.acquire(key, ttl_ms, holder):
            log.debug("joblocks: %r is held by another worker; skipped", key)
            return False
        started = time.monotonic()
        try:
            await work()
        finally:
            await _release_quietly(model, key, holder, started, ttl_ms)
        return True
    finally:
        _guard.leave(slot)


async def _release_quietly(
    model: JobLockModel, key: str, holder: str, started: float, ttl_ms: int
) -> None:
    # Shielded: a cancelled work still gets its release.
    try:
        released = await asyncio.shield(model.release(key, holder))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("joblocks: releasing %r failed; it expires on its own", key)
        return
    after_release(key, released, started, ttl_ms)


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
