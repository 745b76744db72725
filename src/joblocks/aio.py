"""The asyncio face of joblocks: the same names as :mod:`joblocks`, as coroutines.

``JobLockModel`` here takes the same URLs as the sync face and picks the async driver
itself (``sqlite:///…`` → aiosqlite, ``postgresql://…`` → psycopg, ``mysql://…`` or
``mysql+pymysql://…`` → aiomysql), or an existing ``AsyncEngine``. Each operation is
the very function the sync face runs (``_lifecycle`` and ``_ops``), driven by
``_aio_model.JobLockModel._drive``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from . import _config, _engines
from ._aio_lease import Lease, lease, run_with_lock
from ._aio_model import JobLockModel
from ._base import Database
from ._errors import (
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
from ._ledger import Run
from ._records import JobLock

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
    "LockHoldersMismatch",
    "LockNotAcquired",
    "LockPermissionError",
    "LockReadOnlyError",
    "LockTableError",
    "LockTableMismatch",
    "LockTableMissing",
    "LockTimeoutError",
    "Run",
    "configure",
    "get_model",
    "lease",
    "run_with_lock",
]


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
