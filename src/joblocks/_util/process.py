"""This process: its worker id (one UUID per process, made anew in a forked child),
what runs in a forked child, the in-process overlap guard of ``run_with_lock``, the lock
events it emits, and how long it waits between tries.

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

Lock events, for metrics: a small hook, plus debug logging under ``joblocks.events``.

Register a callable with :func:`add_listener`; it receives an :class:`Event` for every

- ``acquired``  a lease was granted (``token``; ``waited_ms`` when ``wait=`` was used)
- ``conflict``  the lock was held by someone else (or by this process already)
- ``renewed``   keep-alive renewed a lease
- ``lost``      a lease was found lost (renewal refused, or ran out before one landed)
- ``overrun``   work outlived its lease without keep-alive
- ``released``  a lease was released (``held_ms``: how long it was held)
- ``error``     a database error (``error`` holds the exception)
- ``skipped``   ``schedule=``: the start was skipped, its slot already run (``token``:
  that run's)
- ``record_failed``  the run ledger (``record=True``) could not write a row; the job
  went on (``error`` holds the exception)

``released`` also says how the run under the lease ended: ``outcome`` is ``ok``,
``error`` (the work raised) or ``lost``.

Listeners run synchronously in the thread (or event loop) that caused the event; an
exception from a listener is logged and swallowed. Keep them cheap (count, observe).

How long to wait between tries: capped exponential backoff with full jitter, as a pure function.

Both faces sleep the delays this module computes; only how they sleep differs.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Callable, Literal

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


EventKind = Literal[
    "acquired",
    "conflict",
    "renewed",
    "lost",
    "overrun",
    "released",
    "error",
    "skipped",
    "record_failed",
]

log = logging.getLogger("joblocks.events")


@dataclass(frozen=True)
class Event:
    """One thing that happened to a lock."""

    kind: EventKind
    key: str
    holder: str
    token: int | None = None
    waited_ms: float | None = None
    held_ms: float | None = None
    error: BaseException | None = None
    outcome: str | None = None


Listener = Callable[[Event], None]

_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()


def add_listener(listener: Listener) -> None:
    """Call ``listener(event)`` for every lock event in this process."""
    if not callable(listener):
        raise TypeError(f"listener must be callable, not {type(listener).__name__}")
    global _listeners
    with _lock:
        _listeners = (*_listeners, listener)


def remove_listener(listener: Listener) -> None:
    """Stop calling ``listener`` (no-op when it was not added)."""
    global _listeners
    with _lock:
        _listeners = tuple(item for item in _listeners if item is not listener)


def emit(
    kind: EventKind,
    key: str,
    holder: str,
    *,
    token: int | None = None,
    waited_ms: float | None = None,
    held_ms: float | None = None,
    error: BaseException | None = None,
    outcome: str | None = None,
) -> None:
    """Deliver an event to every listener (cheap when there are none)."""
    listeners = _listeners
    if not listeners and not log.isEnabledFor(logging.DEBUG):
        return
    event = Event(kind, key, holder, token, waited_ms, held_ms, error, outcome)
    log.debug("joblocks event: %s", event)
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            log.exception("joblocks: an event listener failed on %s", kind)


#: First retry waits up to this long (ms).
BASE_MS = 25.0
#: No single wait is longer than this (ms).
CAP_MS = 1_000.0


def delay_ms(
    attempt: int,
    remaining_ms: float,
    jitter: float,
    *,
    base_ms: float = BASE_MS,
    cap_ms: float = CAP_MS,
) -> float:
    """How long to sleep before retry ``attempt`` (1-based), in ms.

    Full jitter: ``jitter`` (uniform in [0, 1)) times ``min(cap, base * 2**(attempt-1))``,
    never longer than what is left of the wait (``remaining_ms``), never negative.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    ceiling = min(cap_ms, base_ms * 2.0 ** min(attempt - 1, 32))
    return max(0.0, min(remaining_ms, jitter * ceiling))


def next_pause(attempt: int, started: float, wait_ms: int | None) -> float | None:
    """Seconds to sleep before the next try, or None when the wait is over (or none)."""
    if wait_ms is None:
        return None
    remaining = wait_ms - (time.monotonic() - started) * 1000
    if remaining <= 0:
        return None
    pause = delay_ms(attempt, remaining, random.random())  # noqa: S311 - jitter, not crypto
    return max(min(1.0, remaining), pause) / 1000
