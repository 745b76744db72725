"""This process: its worker id (one UUID per process, made anew in a forked child),
what runs in a forked child, and the in-process overlap guard of ``run_with_lock``.

The reference's ``acquire`` is re-entrant per holder, and every call in one process
shares the worker id, so two overlapping ``run_with_lock`` calls on one key inside a
process would both run. joblocks refuses the second one instead: the guard holds
the (lock table, key) pairs this process is running. It is shared by the sync and
asyncio faces and emptied in a forked child.

The table is named by its identity as the file system or the server reports it
(``ModelCore.identity``, read by ``joblocks._sql.tables.table_identity``: a SQLite file's
device and inode, PostgreSQL's system identifier, MariaDB's host, port and data
directory, and the table as the database resolves it), never by the spelling of a
URL: two models that reach one table through different URLs share one slot.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Hashable
from typing import Callable

_worker_id = str(uuid.uuid4())
_after_fork: list[Callable[[], None]] = []


def worker_id() -> str:
    """The holder id of this process (a UUID string; a forked child gets a new one)."""
    return _worker_id


def on_fork(callback: Callable[[], None]) -> None:
    """Run ``callback`` in a forked child, after the worker id was renewed."""
    _after_fork.append(callback)


def _renew() -> None:
    global _worker_id
    _worker_id = str(uuid.uuid4())
    for callback in _after_fork:
        callback()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew)


# -- the in-process overlap guard ------------------------------------------------------

_running: set[Hashable] = set()
_guard_lock = threading.Lock()


def enter_guard(slot: Hashable) -> bool:
    """Claim ``slot``; False when this process is already running it."""
    with _guard_lock:
        if slot in _running:
            return False
        _running.add(slot)
        return True


def leave_guard(slot: Hashable) -> None:
    """Give ``slot`` back."""
    with _guard_lock:
        _running.discard(slot)


def guarded(slot: Hashable) -> bool:
    """Whether this process is running ``slot`` now."""
    with _guard_lock:
        return slot in _running


def _guard_after_fork() -> None:
    global _guard_lock
    _guard_lock = threading.Lock()  # it may have been held by another thread at fork time
    _running.clear()


on_fork(_guard_after_fork)
