"""``run_with_lock`` for the sync face."""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable

from . import _guard, _identity, _validate
from ._base import log
from ._config import get_model
from ._model import JobLockModel


def check_work(work: object, *, asynchronous: bool) -> None:
    """``work`` must be callable, and a coroutine function exactly on the asyncio face."""
    if not callable(work):
        raise TypeError(f"work must be callable, not {type(work).__name__}")
    is_async = inspect.iscoroutinefunction(work) or (
        not inspect.isroutine(work) and inspect.iscoroutinefunction(type(work).__call__)
    )
    if is_async and not asynchronous:
        raise TypeError(
            "work is a coroutine function: use joblocks.aio.run_with_lock for async work"
        )
    if asynchronous and not is_async:
        raise TypeError(
            "work must be an async function (async def) on joblocks.aio; "
            "use joblocks.run_with_lock for sync work"
        )


def after_release(key: str, released: bool, started: float, ttl_ms: int) -> None:
    """Warn when the work outlived its lease, or the lease was gone at release."""
    held_ms = (time.monotonic() - started) * 1000
    if held_ms > ttl_ms:
        log.warning(
            "joblocks: work under %r ran %.0f ms, longer than its ttl of %d ms: another "
            "worker may have run it at the same time (use a longer ttl)",
            key,
            held_ms,
            ttl_ms,
        )
    elif not released:
        log.warning("joblocks: %r was no longer held by this worker at release", key)


def release_quietly(
    model: JobLockModel, key: str, holder: str, started: float, ttl_ms: int
) -> None:
    """Release after the work, never raising (the lease expires on its own anyway)."""
    try:
        released = model.release(key, holder)
    except Exception:
        log.exception("joblocks: releasing %r failed; it expires on its own", key)
        return
    after_release(key, released, started, ttl_ms)


def run_with_lock(
    lock_key: str,
    ttl: _validate.Duration,
    work: Callable[[], Any],
    *,
    model: JobLockModel | None = None,
) -> bool:
    """Run ``work()`` only if ``lock_key`` can be taken for this worker; release after.

    Returns True when the lock was taken and ``work`` completed, False when another
    worker holds the lock (``work`` is not called) or this process is already running
    ``lock_key`` (the in-process guard). An exception from ``work`` propagates after
    the release; an error of the release itself is logged and swallowed. The lease is
    not renewed while ``work`` runs: pick a ``ttl`` longer than the work's worst case.
    """
    key = _validate.lock_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    check_work(work, asynchronous=False)
    if model is None:
        model = get_model()
    elif not isinstance(model, JobLockModel):
        raise TypeError(f"model must be a joblocks.JobLockModel, not {type(model).__name__}")
    slot = (model.identity, key)
    if not _guard.enter(slot):
        log.debug("joblocks: %r is already running in this process; skipped", key)
        return False
    try:
        holder = _identity.worker_id()
        if not model.acquire(key, ttl_ms, holder):
            log.debug("joblocks: %r is held by another worker; skipped", key)
            return False
        started = time.monotonic()
        try:
            work()
        finally:
            release_quietly(model, key, holder, started, ttl_ms)
        return True
    finally:
        _guard.leave(slot)
