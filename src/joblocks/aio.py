"""The asyncio face of joblocks: the same names as :mod:`joblocks`, as coroutines.

``JobLockModel`` here takes the same URLs as the sync face and picks the async driver
itself (``sqlite:///…`` → aiosqlite, ``postgresql://…`` → psycopg, ``mysql://…`` or
``mysql+pymysql://…`` → aiomysql), or an existing ``AsyncEngine``. Each operation is
the very function the sync face runs (``_core.lifecycle`` and ``_core.ops``), driven by
``_aio_driver.Driver._drive``.
"""

from __future__ import annotations

from ._async.model import JobLockModel, Lease
from ._async.run import _registry as _registry
from ._async.run import configure, get_model, lease, run_with_lock
from ._core.plain import Run
from ._db import engines as _engines
from ._db.connections import JobLock
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
