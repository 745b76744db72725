"""Keep-alive: one renewer per process (a thread; the asyncio face's, one task per event
loop, is in ``_async.keepalive``; what the two share is in ``_core.renewal``).

Each renewer serves every keep-alive lease of its process or loop, so a process holding
a thousand leases runs one renewal thread, not a thousand. It sleeps until the next
lease is due, renews it (owner- and token-checked, by the database's clock), marks a
lease lost when a renewal is refused or the lease runs out before one lands, and stops
renewing at ``max_hold``. It holds leases weakly: a lease that is released, garbage
collected, or left behind by ``fork()`` is no longer renewed, and the thread or task
ends when it has nothing left to renew.

A renewer does the renewals; it is not what tells a lease it ran out. Each keep-alive
lease has an alarm of the process's watchdog (``_db.deadline``) at its deadline less a
margin, re-armed by each renewal that lands: the loss is reported then even while a
renewal hangs on a connection that stopped forwarding, and that renewal, bounded by the
same deadline, is abandoned. The renewals of both renewers run on a connection each model
keeps while it has keep-alive leases (``JobLockModel._on_keeper`` of either face), which
the process's other calls never take; it goes back to the pool when the model's last
keep-alive lease ends (and, on asyncio, when the renewer's task ends with its loop).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from .._core.renewal import LeaseRefs, idle_keepers, referenced, sort_due
from .._core.state import LeaseState
from .._db.connections import never_wait_for_the_pool
from .._util import process as _process


class ThreadRenewer:
    """The sync face's renewer: one daemon thread for the whole process."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._leases = LeaseRefs()
        self._thread: threading.Thread | None = None
        # The models keeping a connection for their keep-alive leases' renewals.
        self._keeping: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, lease: LeaseState) -> None:
        with self._cond:
            self._leases.add(lease)
            self._keeping.add(lease._model)
            lease.keepalive = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="joblocks-keepalive", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def remove(self, lease: LeaseState) -> None:
        with self._cond:
            self._leases.discard(lease)
            self._cond.notify()

    @property
    def running(self) -> bool:
        """Whether the renewal thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def count(self) -> int:
        """How many leases are being kept alive."""
        with self._cond:
            return len(self._leases)

    def _run(self) -> None:
        never_wait_for_the_pool()
        while True:
            with self._cond:
                leases = referenced(self._leases.refs())
                renew, drop, expired, wake = sort_due(leases, time.monotonic())
                self._leases.discard_all(drop)
                idle = self._idle_keepers(leases, drop)
                # No strong reference may outlive this point while waiting: a lease
                # dropped by its owner must be collectable (and so stop being renewed).
                del leases, drop
                if not idle and not self._leases:
                    self._thread = None
                    return
                if not renew and not expired and not idle:
                    self._cond.wait(max(0.0, wake - time.monotonic()))
                    continue
            for model in idle:
                model._let_keeper_go()
            del idle
            # Outside the lock: these call back into user code (on_lost, listeners).
            for lease in expired:
                lease._expire()
            for lease in renew:
                if not lease._lost_file():
                    lease._renew_once()
            del renew, expired
            lease = None

    def _idle_keepers(self, leases: list[Any], drop: list[Any]) -> list[Any]:
        """The models that keep a connection but have no keep-alive lease left."""
        return idle_keepers(self._keeping, leases, drop)

    def _after_fork(self) -> None:
        # The thread does not exist in the child; the parent's leases are not ours.
        self._cond = threading.Condition()
        self._leases = LeaseRefs()
        self._thread = None
        self._keeping = weakref.WeakSet()


thread_renewer = ThreadRenewer()
_process.on_fork(thread_renewer._after_fork)
