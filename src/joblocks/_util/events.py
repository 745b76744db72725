"""Lock events for metrics: a small hook, plus debug logging under ``joblocks.events``.

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
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Literal

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
