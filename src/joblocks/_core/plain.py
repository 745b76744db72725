"""The plain model surface, written once for both faces (as ``_core.lifecycle`` is for
leases): each operation of a model that is not a lease's checks its arguments, then is
one call (``_steps.call``) of its ``_core.ops`` function, or a few (``prune``)."""

from __future__ import annotations

import time

from .._db.records import JobLock
from .._util import validate as _validate
from .._util.errors import LockBackendError, LockExistsError
from . import ops as _ops
from . import places as _places
from .base import ModelCore, log
from .steps import Sleep, Steps, call


def acquire_token(
    model: ModelCore, lock_key: str, ttl: _validate.Duration, holder: str
) -> Steps[int | None]:
    key = _validate.lock_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    who = _validate.holder(holder)
    steps = call(model, "acquire", _ops.acquire_token, key, who, ttl_ms)
    return _as_taken(model, key, steps) if model.errors_as_taken else steps


def _as_taken(model: ModelCore, key: str, steps: Steps[int | None]) -> Steps[int | None]:
    """``errors_as_taken=True``: an acquire that failed is reported as taken (None)."""
    try:
        return (yield from steps)
    except LockBackendError as exc:
        log.warning("joblocks: acquire of %r failed, reported as taken: %s", key, exc)
        return None


def release(model: ModelCore, lock_key: str, holder: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    who = _validate.holder(holder)
    return call(model, "release", _ops.release, key, who)


def refresh(model: ModelCore, lock_key: str, ttl: _validate.Duration, holder: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    who = _validate.holder(holder)
    return (yield from call(model, "refresh", _ops.refresh, key, who, ttl_ms)) is not None


def peek(model: ModelCore, lock_key: str) -> Steps[JobLock | None]:
    key = _validate.row_key(lock_key)
    return call(model, "peek", _ops.peek, key)


def holders(model: ModelCore, lock_key: str) -> Steps[list[JobLock]]:
    key = _validate.lock_key(lock_key)
    return call(model, "peek", _places.holders, model.table, key)


def list_locks(model: ModelCore, state: _ops.State) -> Steps[list[JobLock]]:
    _validate.state(state)
    return call(model, "list", _ops.list_locks, state)


def count(model: ModelCore, state: _ops.State) -> Steps[int]:
    _validate.state(state)
    return call(model, "count", _ops.count, state)


def page(model: ModelCore, state: _ops.State, after: str, size: int) -> Steps[list[JobLock]]:
    """One page of ``iter_locks`` (the faces loop over pages: a generator each)."""
    return call(model, "list", _ops.list_page, state, after, size)


def prune(
    model: ModelCore, expired_for: _validate.Duration, batch_size: int, dry_run: bool
) -> Steps[int]:
    age_ms, size = _validate.prune_options(expired_for, batch_size, dry_run)
    if dry_run:
        return (yield from call(model, "prune", _ops.count_prunable, age_ms))
    deleted = 0
    after: str | None = ""
    while True:
        started = time.monotonic()
        done, after = yield from call(model, "prune", _ops.prune_batch, age_ms, size, after)
        deleted += done
        if after is None:
            return deleted
        pause = _ops.prune_pause_s(model.statements.family, time.monotonic() - started)
        if pause:
            yield Sleep(pause)


def insert(model: ModelCore, lock_key: str, holder: str, ttl: _validate.Duration) -> Steps[JobLock]:
    key = _validate.lock_key(lock_key)
    who = _validate.holder(holder)
    ttl_ms = _validate.duration_ms(ttl, "ttl")
    row = yield from call(model, "insert", _ops.insert, key, who, ttl_ms)
    if row is None:
        raise LockExistsError(key)
    return row


def update(
    model: ModelCore, lock_key: str, holder: str | None, ttl: _validate.Duration | None
) -> Steps[bool]:
    key = _validate.lock_key(lock_key)
    who = None if holder is None else _validate.holder(holder)
    ttl_ms = None if ttl is None else _validate.duration_ms(ttl, "ttl")
    if who is None and ttl_ms is None:
        raise ValueError("update needs holder= or ttl= (or both)")
    return (yield from call(model, "update", _ops.update, key, who, ttl_ms))


def delete(model: ModelCore, lock_key: str) -> Steps[bool]:
    key = _validate.row_key(lock_key)
    return call(model, "delete", _ops.delete, key)


def now_ms(model: ModelCore) -> Steps[int]:
    return call(model, "read clock", _ops.now_ms)
