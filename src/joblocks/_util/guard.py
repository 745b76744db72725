"""The in-process overlap guard of ``run_with_lock``.

The reference's ``acquire`` is re-entrant per holder, and every call in one process
shares the worker id, so two overlapping ``run_with_lock`` calls on one key inside a
process would both run. joblocks refuses the second one instead: this registry holds
the (lock table, key) pairs this process is running. It is shared by the sync and
asyncio faces and emptied in a forked child.

The table is named by its identity as the file system or the server reports it
(``ModelCore.identity``, read by ``joblocks._sql.tables.table_identity``: a SQLite file's
device and inode, PostgreSQL's system identifier, MariaDB's host, port and data
directory, and the table as the database resolves it), never by the spelling of a
URL: two models that reach one table through different URLs share one slot.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from . import identity as _identity

_running: set[Hashable] = set()
_lock = threading.Lock()


def enter(slot: Hashable) -> bool:
    """Claim ``slot``; False when this process is already running it."""
    with _lock:
        if slot in _running:
            return False
        _running.add(slot)
        return True


def leave(slot: Hashable) -> None:
    """Give ``slot`` back."""
    with _lock:
        _running.discard(slot)


def running(slot: Hashable) -> bool:
    """Whether this process is running ``slot`` now."""
    with _lock:
        return slot in _running


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # it may have been held by another thread at fork time
    _running.clear()


_identity.on_fork(_after_fork)
