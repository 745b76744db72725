"""``run_with_lock()`` and ``lease()`` for the asyncio face (public in ``joblocks.aio``);
the mirror of ``_sync.run``. They drive the same ``_core.lifecycle`` generators as the
sync face.

``configure()`` and ``get_model()`` for the asyncio face: the default and named lock
databases (public in ``joblocks.aio``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Callable

from typing_extensions import Unpack

from .._core import lifecycle as _lifecycle
from .._core.base import Database
from .._core.options import (
    LEASE_OPTIONS,
    LeaseKwargs,
    LeaseOptions,
    RunOptions,
    check_cancel_on_loss,
    check_work,
)
from .._core.registry import Registry, check_options, resolve_model
from .._core.state import Outcome
from .._util import validate as _validate
from .._util.errors import LockNotAcquired
from .model import JobLockModel, Lease


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
    # The face's own argument first (``keepalive`` itself is checked with the request).
    check_cancel_on_loss(cancel_on_loss, bool(options.get("keepalive", False)))
    opts = LeaseOptions.of(ttl, options, "run_with_lock")
    check_work(work, asynchronous=True)
    return (await _run_request(model, key, opts, work, cancel_on_loss)).lease is not None


async def _run_request(
    model: JobLockModel | None,
    key: str,
    opts: LeaseOptions,
    work: Callable[[], Awaitable[Any]],
    cancel_on_loss: bool,
) -> Outcome[Lease]:
    """:func:`run_with_lock` of a request already validated (the decorator's): acquired
    (the work ran), taken, or skipped (why)."""
    model = resolve_model(model, JobLockModel, get_model, "joblocks.aio.JobLockModel")
    steps = _lifecycle.run_with_lock(model, key, opts, work, cancel_on_loss)
    return await model._drive(steps)


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
    check_cancel_on_loss(cancel_on_loss, bool(options.get("keepalive", False)))
    opts = LeaseOptions.of(ttl, options, "lease", LEASE_OPTIONS)
    held = (await model._take(key, opts)).lease
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
        held._work_failed(exc)
        if held.lost and cancel_on_loss:
            raise held._lost_error() from None
        raise
    except BaseException as exc:
        held._work_failed(exc)
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


_registry: Registry[JobLockModel] = Registry(
    _make_async, _dispose_later, face="asyncio", fallback="sync"
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
    _registry.configure(default, instances, check_options(options))


def get_model(name: str | None = None) -> JobLockModel:
    """The asyncio model of the default database, or of instance ``name``."""
    return _registry.get(name)
