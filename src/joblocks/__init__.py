"""joblocks: keep a scheduled job to one instance at a time, with a lease row in your database.

Quick use::

    import joblocks

    ran = joblocks.run_with_lock("nightly-prune", 30_000, prune)

The asyncio face is :mod:`joblocks.aio` (same names, coroutines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._core.options import LeaseKwargs, RunOptions
    from ._core.plain import Run
    from ._core.schedule import Schedule
    from ._db.connections import JobLock
    from ._decorator import single_instance
    from ._sql.schema import (
        JOB_LOCKS_TABLE_NAME,
        JOB_RUNS_TABLE_NAME,
        build_runs_table,
        build_table,
        job_locks,
        job_runs,
        metadata,
        runs_metadata,
    )
    from ._sql.statements import ACQUIRE_PATHS, AcquirePath
    from ._sync.model import JobLockModel, Lease
    from ._sync.run import configure as configure
    from ._sync.run import lease, run_with_lock
    from ._util.errors import (
        LeaseLost,
        LockBackendError,
        LockConnectionError,
        LockDriverMissing,
        LockError,
        LockExistsError,
        LockHoldersMismatch,
        LockNotAcquired,
        LockPermissionError,
        LockReadOnlyError,
        LockTableError,
        LockTableMismatch,
        LockTableMissing,
        LockTimeoutError,
    )
    from ._util.process import Event, EventKind, add_listener, remove_listener, worker_id
    from ._util.validate import MAX_HOLDER_BYTES, MAX_KEY_BYTES, Duration

    #: This process's holder id (a UUID string). Read as ``joblocks.WORKER_ID`` to see
    #: the current value: a forked child gets a new one.
    WORKER_ID: str

__all__ = [
    "ACQUIRE_PATHS",
    "JOB_LOCKS_TABLE_NAME",
    "JOB_RUNS_TABLE_NAME",
    "MAX_HOLDER_BYTES",
    "MAX_KEY_BYTES",
    "WORKER_ID",
    "AcquirePath",
    "Duration",
    "Event",
    "EventKind",
    "JobLock",
    "JobLockModel",
    "Lease",
    "LeaseKwargs",
    "LeaseLost",
    "LockBackendError",
    "LockConnectionError",
    "LockDriverMissing",
    "LockError",
    "LockExistsError",
    "LockHoldersMismatch",
    "LockNotAcquired",
    "LockPermissionError",
    "LockReadOnlyError",
    "LockTableError",
    "LockTableMismatch",
    "LockTableMissing",
    "LockTimeoutError",
    "Run",
    "RunOptions",
    "Schedule",
    "__version__",
    "add_listener",
    "build_runs_table",
    "build_table",
    "configure",
    "get_model",
    "job_locks",
    "job_runs",
    "lease",
    "metadata",
    "remove_listener",
    "run_with_lock",
    "runs_metadata",
    "single_instance",
    "worker_id",
]

#: Where each public name is defined: importing ``joblocks`` loads none of them (nor
#: SQLAlchemy); the first use of a name imports its module (PEP 562), so that
#: ``python -m joblocks --help`` and the CLI's argument parsing stay cheap.
_LAZY = {
    "configure": "._sync.run",
    "single_instance": "._decorator",
    **dict.fromkeys(
        (
            "LeaseLost",
            "LockBackendError",
            "LockConnectionError",
            "LockDriverMissing",
            "LockError",
            "LockExistsError",
            "LockHoldersMismatch",
            "LockNotAcquired",
            "LockPermissionError",
            "LockReadOnlyError",
            "LockTableError",
            "LockTableMismatch",
            "LockTableMissing",
            "LockTimeoutError",
        ),
        "._util.errors",
    ),
    **dict.fromkeys(("Event", "EventKind", "add_listener", "remove_listener"), "._util.process"),
    "worker_id": "._util.process",
    "Lease": "._sync.model",
    "Run": "._core.plain",
    "JobLockModel": "._sync.model",
    "LeaseKwargs": "._core.options",
    "RunOptions": "._core.options",
    "JobLock": "._db.connections",
    "lease": "._sync.run",
    "run_with_lock": "._sync.run",
    "Schedule": "._core.schedule",
    **dict.fromkeys(
        (
            "JOB_LOCKS_TABLE_NAME",
            "JOB_RUNS_TABLE_NAME",
            "build_runs_table",
            "build_table",
            "job_locks",
            "job_runs",
            "metadata",
            "runs_metadata",
        ),
        "._sql.schema",
    ),
    "ACQUIRE_PATHS": "._sql.statements",
    "AcquirePath": "._sql.statements",
    **dict.fromkeys(("MAX_HOLDER_BYTES", "MAX_KEY_BYTES", "Duration"), "._util.validate"),
}


def get_model(name: str | None = None) -> JobLockModel:
    """The model of the default database (see :func:`configure`), or of instance ``name``."""
    from ._sync import run as _run

    model: JobLockModel = _run.get_model(name)
    return model


def __getattr__(name: str) -> Any:
    if name == "WORKER_ID":
        from ._util.process import worker_id

        return worker_id()
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'joblocks' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: later reads are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
