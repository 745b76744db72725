"""When a keep-alive lease is renewed: the schedule both faces' renewers follow.

A renewer asks a lease what to do now (:meth:`RenewalSchedule._renewal_due`) and when
to wake next; a renewal that fails is tried again with backoff until the lease runs
out, and logged now and then (not once per try). The helpers at the end are what the
sync face's renewer thread and the asyncio face's renewer tasks share. The lease's own state and its
transitions are :class:`joblocks._core.state.LeaseState`'s, which this is a part of.
"""

from __future__ import annotations

import logging
import os
import random
import time
import weakref
from typing import TYPE_CHECKING, Any

from .._util.process import delay_ms

log = logging.getLogger("joblocks")


#: How early, as a share of the renewal interval, a lease may be renewed together with
#: one that is due (keep-alive batching; see ``_renewal_due``).
RENEW_SLACK = 0.1
#: Failed renewals in a row: the first is logged, then one line every this many
#: failures or :data:`FAILURE_LOG_EVERY_S` seconds, whichever comes first, then one line
#: when a renewal works again.
FAILURE_LOG_EVERY = 10
FAILURE_LOG_EVERY_S = 10.0
#: A failed renewal is tried again after at least this long (seconds).
RETRY_MIN_S = 0.01


def renewal_retry_s(failures: int, remaining_s: float) -> float:
    """Seconds until a renewal that failed ``failures`` times in a row is tried again.

    A renewal fails without telling anything about the lease when it cannot reach the
    database: the server refuses a connection (``too many connections``, ``remaining
    connection slots are reserved``), the pool has none, the network is down. The lease
    still holds until its deadline, so the renewer keeps trying until then: capped
    exponential backoff with full jitter (:func:`joblocks._util.process.delay_ms`: up to 25
    ms, doubling to 1 s), never later than half the time left, so tries keep coming as
    the deadline nears. The lease is declared lost only when it runs out, or when a
    renewal reaches the database and finds the row gone or another holder's.
    """
    jitter = random.random()  # noqa: S311 - jitter, not crypto
    return max(RETRY_MIN_S, delay_ms(failures, remaining_s * 500.0, jitter) / 1000.0)


class RenewalSchedule:
    """The renewal schedule of a :class:`~joblocks._core.state.LeaseState` (its base)."""

    key: str
    next_renewal: float
    _model: Any
    _lost_at: float
    _released: bool
    _lost_reason: str | None
    _max_hold_until: float | None
    _renew_every: float
    _renew_slack: float
    _renew_failures: int
    _failing_since: float
    _failure_logged: tuple[int, float]

    if TYPE_CHECKING:

        def _mark_lost(self, reason: str) -> bool: ...

    def _renewal_due(self, now: float) -> str:
        """What the renewer should do now: ``renew``, ``wait``, ``expire`` or ``drop``."""
        if self._released or self._lost_reason is not None:
            return "drop"
        if now >= self._lost_at:
            return "expire"
        if self._max_hold_until is not None and now >= self._max_hold_until:
            return "wait"
        return "renew" if now >= self.next_renewal - self._renew_slack else "wait"

    def _next_wakeup(self) -> float:
        capped = self._max_hold_until is not None and self.next_renewal >= self._max_hold_until
        return self._lost_at if capped else min(self.next_renewal, self._lost_at)

    def _lost_file(self) -> bool:
        """On SQLite, before a keep-alive renewal: True (and the lease marked lost) when
        the database file is no longer at its path, deleted or replaced by another file.

        A connection opened before keeps writing to the deleted file, where no other
        process sees this lease any more: renewing it there would hold nothing.
        """
        found = self._model._found
        watched = None if found is None else found.file
        if watched is None:
            return False
        path, device, inode = watched
        try:
            now = os.stat(path)
        except FileNotFoundError:
            reason = f"the SQLite file {path} was deleted"
        except OSError:
            return False  # cannot tell (e.g. permissions): the renewal decides
        else:
            if (now.st_dev, now.st_ino) == (device, inode):
                return False
            reason = f"the SQLite file {path} was replaced by another file"
        self._mark_lost(f"{reason}; other processes no longer see this lease")
        return True

    def _after_failed_renewal(self, now: float) -> None:
        # Try again until the lease runs out (backoff: see renewal_retry_s).
        self._renew_failures += 1
        pause = renewal_retry_s(self._renew_failures, self._lost_at - now)
        self.next_renewal = now + min(self._renew_every, pause)
        self._renew_slack = 0.0

    def _renewal_failed(self, exc: BaseException) -> None:
        """Log a failed renewal: the first, then a count now and then (see
        :data:`FAILURE_LOG_EVERY`); a renewal that works again logs one line."""
        now = time.monotonic()
        failures = self._renew_failures + 1  # counted by _after_failed_renewal, next
        if failures == 1:
            self._failing_since = now
            self._failure_logged = (1, now)
            log.warning("joblocks: renewing %r failed: %s", self.key, exc)
            return
        logged, at = self._failure_logged
        if failures - logged >= FAILURE_LOG_EVERY or now - at >= FAILURE_LOG_EVERY_S:
            self._failure_logged = (failures, now)
            log.warning(
                "joblocks: renewing %r still failing (%d attempts in %.1f s): %s",
                self.key,
                failures,
                now - self._failing_since,
                exc,
            )


# -- what both renewers share (a thread per process, a task per event loop) -----------


def idle_keepers(keeping: Any, leases: list[Any], drop: list[Any]) -> list[Any]:
    """The models of ``keeping`` that have no keep-alive lease left (taken out of it)."""
    dropped = {id(lease) for lease in drop}
    busy = {id(lease._model) for lease in leases if id(lease) not in dropped}
    idle = [model for model in keeping if id(model) not in busy]
    for model in idle:
        keeping.discard(model)
    return idle


def referenced(refs: Any) -> list[Any]:
    """The leases still referenced by their owners."""
    return [lease for lease in (ref() for ref in refs) if lease is not None]


def sort_due(leases: list[Any], now: float) -> tuple[list[Any], list[Any], list[Any], float]:
    """Sort leases into (to renew, to drop, run out) and say when to wake next."""
    renew: list[Any] = []
    drop: list[Any] = []
    expired: list[Any] = []
    wake = now + 3600.0
    for lease in leases:
        action = lease._renewal_due(now)
        if action == "renew":
            renew.append(lease)
        elif action == "drop":
            drop.append(lease)
        elif action == "expire":
            expired.append(lease)
            drop.append(lease)
        else:
            wake = min(wake, lease._next_wakeup())
    return renew, drop, expired, wake


class LeaseRefs:
    """Weak references to the leases of one renewer, by the lease's ``id``.

    A reference dies when its lease is garbage collected; the death is only noted (a
    list append, which takes no lock: the collector may run in any thread, even one
    holding the renewer's lock) and the dead references are dropped on the next look.
    """

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._dead: list[weakref.ref[Any]] = []

    def add(self, lease: Any) -> None:
        self._refs[id(lease)] = weakref.ref(lease, self._dead.append)

    def discard(self, lease: Any) -> None:
        ref = self._refs.get(id(lease))
        if ref is not None and ref() is lease:
            del self._refs[id(lease)]

    def discard_all(self, leases: list[Any]) -> None:
        for lease in leases:
            self.discard(lease)

    def refs(self) -> list[weakref.ref[Any]]:
        if self._dead:
            self._dead.clear()
            self._refs = {key: ref for key, ref in self._refs.items() if ref() is not None}
        return list(self._refs.values())

    def __len__(self) -> int:
        return len(self.refs())
