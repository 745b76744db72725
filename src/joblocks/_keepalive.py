"""Keep-alive: one renewer per process (a thread) or per event loop (a task).

Each renewer serves every keep-alive lease of its process or loop, so a process holding
a thousand leases runs one renewal thread, not a thousand. It sleeps until the next
lease is due, renews it (owner- and token-checked, by the database's clock), marks a
lease lost when a renewal is refused or the lease runs out before one lands, and stops
renewing at ``max_hold``. It holds leases weakly: a lease that is released, garbage
collected, or left behind by ``fork()`` is no longer renewed, and the thread or task
ends when it has nothing left to renew.

A renewer does the renewals; it is not what tells a lease it ran out. Each keep-alive
lease has an alarm of the process's watchdog (``_deadline``) at its deadline less a
margin, re-armed by each renewal that lands: the loss is reported then even while a
renewal hangs on a connection that stopped forwarding, and that renewal, bounded by the
same deadline, is abandoned. The renewals of both renewers run on a connection each model
keeps while it has keep-alive leases (``JobLockModel._on_keeper`` of either face), which
the process's other calls never take; it goes back to the pool when the model's last
keep-alive lease ends (and, on asyncio, when the renewer's task ends with its loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from . import _identity
from ._backoff import delay_ms

if TYPE_CHECKING:
    from ._lease import Lease, LeaseBase


#: A failed renewal is tried again after at least this long (seconds).
RETRY_MIN_S = 0.01


def renewal_retry_s(failures: int, remaining_s: float) -> float:
    """Seconds until a renewal that failed ``failures`` times in a row is tried again.

    A renewal fails without telling anything about the lease when it cannot reach the
    database: the server refuses a connection (``too many connections``, ``remaining
    connection slots are reserved``), the pool has none, the network is down. The lease
    still holds until its deadline, so the renewer keeps trying until then: capped
    exponential backoff with full jitter (:func:`joblocks._backoff.delay_ms`: up to 25
    ms, doubling to 1 s), never later than half the time left, so tries keep coming as
    the deadline nears. The lease is declared lost only when it runs out, or when a
    renewal reaches the database and finds the row gone or another holder's.
    """
    jitter = random.random()  # noqa: S311 - jitter, not crypto
    return max(RETRY_MIN_S, delay_ms(failures, remaining_s * 500.0, jitter) / 1000.0)


def _idle_keepers(keeping: Any, leases: list[Any], drop: list[Any]) -> list[Any]:
    """The models of ``keeping`` that have no keep-alive lease left (taken out of it)."""
    dropped = {id(lease) for lease in drop}
    busy = {id(lease._model) for lease in leases if id(lease) not in dropped}
    idle = [model for model in keeping if id(model) not in busy]
    for model in idle:
        keeping.discard(model)
    return idle


def _alive(refs: Any) -> list[Any]:
    """The leases still referenced by their owners."""
    return [lease for lease in (ref() for ref in refs) if lease is not None]


def _due(leases: list[Any], now: float) -> tuple[list[Any], list[Any], list[Any], float]:
    """Sort leases into (to renew, to drop, run out) and say when to wake next."""
    renew: list[LeaseBase] = []
    drop: list[LeaseBase] = []
    expired: list[LeaseBase] = []
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


class _Registry:
    """Weak references to the leases of one renewer.

    A reference dies when its lease is garbage collected; the death is only noted (a
    list append, which takes no lock: the collector may run in any thread, even one
    holding the renewer's lock) and the reference is dropped on the next look.
    """

    def __init__(self) -> None:
        self._refs: set[weakref.ref[Any]] = set()
        self._dead: list[weakref.ref[Any]] = []

    def add(self, lease: Any) -> None:
        ref = weakref.ref(lease, self._dead.append)
        lease._renewer_ref = ref
        self._refs.add(ref)

    def discard(self, lease: Any) -> None:
        ref = getattr(lease, "_renewer_ref", None)
        if ref is not None:
            self._refs.discard(ref)

    def discard_all(self, leases: list[Any]) -> None:
        for lease in leases:
            self.discard(lease)

    def refs(self) -> list[weakref.ref[Any]]:
        while self._dead:
            self._refs.discard(self._dead.pop())
        return list(self._refs)

    def __len__(self) -> int:
        return len(self.refs())


class ThreadRenewer:
    """The sync face's renewer: one daemon thread for the whole process."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._leases = _Registry()
        self._thread: threading.Thread | None = None
        # The models keeping a connection for their keep-alive leases' renewals.
        self._keeping: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, lease: Lease) -> None:
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

    def remove(self, lease: LeaseBase) -> None:
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
        from ._connections import never_wait_for_the_pool

        never_wait_for_the_pool()
        while True:
            with self._cond:
                leases = _alive(self._leases.refs())
                renew, drop, expired, wake = _due(leases, time.monotonic())
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
        return _idle_keepers(self._keeping, leases, drop)

    def _after_fork(self) -> None:
        # The thread does not exist in the child; the parent's leases are not ours.
        self._cond = threading.Condition()
        self._leases = _Registry()
        self._thread = None
        self._keeping = weakref.WeakSet()


thread_renewer = ThreadRenewer()
_identity.on_fork(thread_renewer._after_fork)


class TaskRenewer:
    """The asyncio face's renewer: one task per event loop."""

    def __init__(self) -> None:
        self._leases = _Registry()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The models keeping a connection for their keep-alive leases' renewals.
        self._keeping: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, lease: Any) -> None:
        self._leases.add(lease)
        self._keeping.add(lease._model)
        lease.keepalive = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="joblocks-keepalive"
            )
        self._wake.set()

    def remove(self, lease: Any) -> None:
        self._leases.discard(lease)
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the renewal task is alive."""
        return self._task is not None and not self._task.done()

    def count(self) -> int:
        """How many leases are being kept alive."""
        return len(self._leases)

    def keeps(self, model: Any) -> bool:
        """Whether ``model`` has keep-alive leases here (and so keeps a connection)."""
        return model in self._keeping

    async def _run(self) -> None:
        try:
            await self._serve()
        finally:
            # No leases left, or the loop ends (its tasks cancelled): every kept
            # connection goes back, none is left unclosed.
            models = list(self._keeping)
            self._keeping = weakref.WeakSet()
            for model in models:
                await model._let_keeper_go()

    async def _serve(self) -> None:
        while True:
            leases = _alive(self._leases.refs())
            if not leases:
                self._task = None
                return
            renew, drop, expired, wake = _due(leases, time.monotonic())
            self._leases.discard_all(drop)
            idle = _idle_keepers(self._keeping, leases, drop)
            del leases, drop
            for model in idle:
                await model._let_keeper_go()
            del idle
            for lease in expired:
                lease._expire()
            lease = None
            if not renew:
                self._wake.clear()
                timeout = max(0.0, wake - time.monotonic())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            await asyncio.gather(*(_renew_in_time(held) for held in renew if not held._lost_file()))
            del renew


async def _renew_in_time(lease: Any) -> None:
    """``lease._renew_once()``, given up when the lease counts as lost meanwhile.

    A renewal waiting for a connection (an exhausted pool waits up to 30 s) or for a
    reply that does not come would hold up the loop's other renewals and the news that
    this lease ran out. At the lease's loss time the renewer stops waiting for it (it
    does not wait for it to be cancelled either: the call is abandoned by its own bound
    and ends by itself), and the lease is reported lost.
    """
    left = lease._lost_at - time.monotonic()
    renewal = asyncio.ensure_future(lease._renew_once())
    done, _pending = await asyncio.wait({renewal}, timeout=max(0.001, left))
    if not done:
        renewal.add_done_callback(_quiet)
        lease._check_ran_out()
        lease._after_failed_renewal(time.monotonic())


def _quiet(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a renewal given up on (never logged as unretrieved)."""
    if not task.cancelled():
        task.exception()


_task_renewers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TaskRenewer] = (
    weakref.WeakKeyDictionary()
)


def task_renewer() -> TaskRenewer:
    """The renewer of the running event loop (made on first use)."""
    loop = asyncio.get_running_loop()
    renewer = _task_renewers.get(loop)
    if renewer is None:
        renewer = _task_renewers[loop] = TaskRenewer()
    return renewer
