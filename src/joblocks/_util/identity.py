"""The worker id: one UUID per process, made anew in a forked child."""

from __future__ import annotations

import os
import uuid
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
