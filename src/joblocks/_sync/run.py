"""The sync face's entry points: ``run_with_lock()`` and ``lease()``, and ``configure()``
and ``get_model()``, the default and named lock databases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from typing_extensions import Unpack

from .._core import lifecycle as _lifecycle
from .._core.base import Database
from .._core.options import LEASE_OPTIONS, LeaseKwargs, LeaseOptions, RunOptions, check_work
from .._core.registry import Registry, check_options, resolve_model
from .._core.state import Outcome
from .._util import validate as _validate
from .._util.errors import LockNotAcquired
from .model import JobLockModel, Lease


def run_with_lock(
    lock_key: str,
    ttl: _validate.Duration,
    work: Callable[[], Any],
    *,
    model: JobLockModel | None = None,
    **options: Unpack[RunOptions[Lease]],
) -> bool:
    """Run ``work()`` only if ``lock_key`` can be taken for this worker; release after.

    Returns True when the lock was taken and ``work`` completed, False when another
    worker holds the lock (``work`` is not called) or this process is already running
    ``lock_key`` (the in-process guard). An exception from ``work`` propagates after
    the release; an error of the release itself is logged and swallowed.

    By default the lease is not renewed while ``work`` runs (pick a ``ttl`` longer than
    the work's worst case; a warning is logged when the work outlives it).
    ``keepalive=True`` renews it instead; ``min_hold``, ``wait``, ``on_lost``,
    ``renew_every`` and ``max_hold`` are as for :meth:`JobLockModel.try_lease` (``wait``
    also waits out an overlapping call in this process).
    ``record`` (True, False or ``"all"``; None: the model's ``record=``) writes the run
    to the run ledger: ``ok``, ``error`` (``work`` raised) or ``lost`` (docs/ledger.md).

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    ``schedule``/``timezone``: at most one start per cron slot across every worker
    (False when the slot was already run); see :meth:`JobLockModel.try_lease`.
    """
    key = _validate.lock_key(lock_key)
    opts = LeaseOptions.of(ttl, options, "run_with_lock")
    check_work(work, asynchronous=False)
    return run_request(model, key, opts, work).lease is not None


def run_request(
    model: JobLockModel | None, key: str, opts: LeaseOptions, work: Callable[[], Any]
) -> Outcome[Lease]:
    """:func:`run_with_lock` of a request already validated (the decorator's): acquired
    (the work ran), taken, or skipped (why)."""
    model = resolve_model(model, JobLockModel, get_model, "joblocks.JobLockModel")
    return model._drive(_lifecycle.run_with_lock(model, key, opts, work, False))


def release_quietly(lease: Lease) -> None:
    """Release after the work, never raising (the lease expires on its own anyway)."""
    lease._model._drive(_lifecycle.release_quietly(lease))


def lease(
    lock_key: str,
    ttl: _validate.Duration,
    *,
    model: JobLockModel | None = None,
    **options: Unpack[LeaseKwargs[Lease]],
) -> Lease:
    """Take ``lock_key`` as a context manager; raise :class:`~joblocks.LockNotAcquired`
    when it is held elsewhere::

        with joblocks.lease("reindex", 60_000, keepalive=True) as held:
            for batch in batches:
                held.ensure_held()
                process(batch)

    The lease is released when the block exits. Options as for
    :meth:`JobLockModel.try_lease`; ``model=None`` means :func:`joblocks.get_model`.
    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    ``schedule``/``timezone``: at most one start per cron slot (a skipped start raises
    :class:`~joblocks.LockNotAcquired`). ``record``: the run ledger (an exception out
    of the block is an ``error`` run).
    """
    model = resolve_model(model, JobLockModel, get_model, "joblocks.JobLockModel")
    key = _validate.lock_key(lock_key)
    held = model._take(key, LeaseOptions.of(ttl, options, "lease", LEASE_OPTIONS)).lease
    if held is None:
        raise LockNotAcquired(lock_key)
    return held


def _make_sync(database: Database, **options: Any) -> Any:
    return JobLockModel(database, **options)


sync_registry: Registry[Any] = Registry(_make_sync, lambda model: model.dispose(), face="sync")


def configure(
    default: Database = None,
    *,
    instances: Mapping[str, Database] | None = None,
    **options: Any,
) -> None:
    """Say where the locks live.

    ``default`` is a URL or an ``Engine`` (None: ``JOBLOCKS_URL``, else the per-user
    SQLite file); ``instances`` maps names to more databases, for
    ``get_model("name")``. ``options`` (``table_name``, ``schema``, ``create_table``,
    ``errors_as_taken``, ``acquire_path``, ``timeout`` in milliseconds or a
    ``timedelta``, ``record`` for the run ledger) apply to every model, as in
    :class:`joblocks.JobLockModel`. URLs and
    options are checked here: a string that is not a database URL, a database
    joblocks does not support or an unknown ``acquire_path`` raises now (a
    ``ValueError`` naming the argument; URL errors are also ``LockBackendError``). A
    later call replaces this one and disposes the engines joblocks made for it. The
    asyncio face uses the same URLs unless ``joblocks.aio.configure`` is called.
    """
    sync_registry.configure(default, instances, check_options(options))


def get_model(name: str | None = None) -> Any:
    """The model of the default database, or of the instance ``name``."""
    return sync_registry.get(name)
