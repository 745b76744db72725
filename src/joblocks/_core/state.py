"""The state of one lease, what both faces' ``Lease`` classes are built on.

A lease is one grant of a lock: key, holder and fencing token. It knows when it runs
out (by this process's monotonic clock, measured from just before the grant was
asked for, so it never thinks it holds longer than the database does), can be
refreshed and released, can check with the database that it still holds, and gives
a SQL condition that fences a write to the time it holds.

The rules a lease keeps (docs/leases.md):

- a grant lasts from the acquire until its expiry (moved by refreshes while it is
  live); an acquire after it expired, even by the same holder, is another grant with a
  larger token, and a lease's refresh, release and checks act on its own grant only;
- a lost lease stays lost: once ``lost`` is True, ``refresh()`` returns False and sends
  nothing, so the row is left as it is;
- ``remaining()`` never exceeds the database's view (times are whole milliseconds of
  the database's clock, floored; see ``_sql.dialects``).
"""

from __future__ import annotations

import abc
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Generic, TypeVar, Union

from sqlalchemy import Table, exists
from sqlalchemy.sql.elements import ColumnElement

from .._db.connections import from_ms
from .._db.deadline import Alarm, in_thread, loss_margin_s, watchdog
from .._sql.dialects import db_now_ms, deadline
from .._util import process as _process
from .._util import validate as _validate
from .._util.errors import LeaseLost
from . import ops as _ops
from .renewal import RENEW_SLACK, RenewalSchedule

log = logging.getLogger("joblocks")


class LeaseState(RenewalSchedule, abc.ABC):
    """State and logic shared by ``joblocks.Lease`` and ``joblocks.aio.Lease``."""

    key: str
    holder: str
    token: int
    acquired_at: datetime
    expires_at: datetime
    ttl_ms: int
    _model: Any  # the face's JobLockModel
    #: ``schedule=``: the slot this run started in, ``(start_ms, end_ms)`` epoch ms UTC
    #: by the database's clock (a release keeps the row until its end); else None.
    slot: tuple[int, int] | None
    #: The work's error (the run ledger records it; set by :meth:`_work_failed`).
    _run_error: BaseException | None = None

    # The features' parts, each given when the lease is made and then changed only by
    # its feature's own functions (on the part's own attributes):
    #: ``record=``: the run ledger's part (a ``_ledger.RunRow``), else None.
    _run: Any
    #: ``liveness="session"``: the lease's session lock (a ``_liveness.Live``), else None.
    _live: Any
    #: A counted lease (``max_holders``): (the key, N); its ``key`` is its place's row.
    _group: tuple[str, int] | None

    def __init__(
        self,
        *,
        table: Table,
        key: str,
        holder: str,
        grant: _ops.Grant,
        sent_at: float,
        ttl_ms: int,
        min_hold_ms: int,
        max_hold_ms: int | None,
        renew_every_ms: int | None,
        on_lost: Callable[[Any], None] | None,
        slot: tuple[int, int] | None = None,
        group: tuple[str, int] | None = None,
        live: Any = None,
        run: Any = None,
    ) -> None:
        self._table = table
        self.slot = slot
        self._group = group
        self._live = live
        self._run = run
        self.key = key
        self.holder = holder
        self.token = grant.fence
        self.ttl_ms = ttl_ms
        # Without times from the database (MySQL, when not asked for), this process's
        # wall clock stands in for the record; exclusion never depends on it.
        acquired = grant.acquired_ms
        if acquired is None:
            acquired = int(time.time() * 1000)
        expires = grant.expires_ms if grant.expires_ms is not None else acquired + ttl_ms
        self.acquired_at = from_ms(acquired)
        self.expires_at = from_ms(expires)
        self._started = sent_at
        self._deadline = deadline(sent_at, ttl_ms)
        # A keep-alive lease counts as lost from here on (its deadline less a margin for
        # the clocks drifting apart; ``_deadline.loss_margin_s``), renewed or not.
        self._lost_at = self._deadline - loss_margin_s(ttl_ms)
        self._loss_alarm: Alarm | None = None
        self._min_hold_ms = min_hold_ms
        # The latest end of a hold promised by refresh(min_hold=...), epoch ms by the
        # database's clock (0: none); a release keeps the row until then. A scheduled
        # run's row is kept until the end of its slot.
        self._hold_until_ms = 0 if slot is None else slot[1]
        self._max_hold_until = None if max_hold_ms is None else sent_at + max_hold_ms / 1000
        self._renew_every = (renew_every_ms if renew_every_ms is not None else ttl_ms / 3) / 1000
        self.next_renewal = sent_at + self._renew_every
        # A renewer that wakes for one lease also renews those due within this much:
        # a thousand leases due at scattered times then cost a few wake-ups (and scans
        # of the renewer's list) per second, not a thousand. Never after a failure.
        self._renew_slack = self._renew_every * RENEW_SLACK
        self._on_lost = on_lost
        self._state_lock = threading.Lock()
        self._lost_reason: str | None = None
        self._released = False
        self.keepalive = False
        self._renew_failures = 0  # renewals failed in a row (retry backoff)
        self._failing_since = 0.0  # when the first of them failed (monotonic)
        self._failure_logged = (0, 0.0)  # (failures, when) at the last log line

    # -- state ------------------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """True once the lease is known lost; final.

        Set when a renewal or refresh is refused (the row is gone, expired, or another
        grant's), when :meth:`ensure_held` finds it so, or when it runs out before a
        keep-alive renewal lands. A lost lease never becomes held again: ``refresh()``
        returns False without touching the database. A released lease is not "lost".
        """
        return self._lost_reason is not None

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost, or None."""
        return self._lost_reason

    @property
    def place(self) -> int | None:
        """The place (1 … N) a counted lease (``max_holders=N``) holds, else None; its
        :attr:`key` is then the place's row id, ``lock_key`` + ``"\u241f"`` + place."""
        return None if self._group is None else int(self.key.rpartition(_validate.PLACE_MARK)[2])

    @property
    def released(self) -> bool:
        """True once :meth:`release` was called and did not raise (a release that
        raised, the database unreachable, can be called again)."""
        return self._released

    @property
    def held_for(self) -> timedelta:
        """How long ago the lease was asked for (by this process's monotonic clock)."""
        return timedelta(seconds=time.monotonic() - self._started)

    def remaining(self) -> timedelta:
        """How long the lease still holds, at most (zero once lost, released or run out).

        Measured on this process's monotonic clock from just before the grant (or the
        last renewal) was sent, less 1 ms for the database's clock being floored to the
        millisecond when it wrote the expiry, so it is never longer than the database's
        view (``expires_at`` minus the database's now), as long as the two clocks run at
        the same rate.
        """
        if self._lost_reason is not None or self._released:
            return timedelta(0)
        return timedelta(seconds=max(0.0, self._deadline - time.monotonic()))

    def is_held_clause(self) -> ColumnElement[bool]:
        """A SQL condition true only while this lease holds, by the database's clock.

        Add it to the WHERE of your own UPDATE/DELETE/INSERT … SELECT in the same
        database: the write happens only if the row still has this holder and token
        and has not expired — a fenced write. An expired lease fences nothing, even
        before anyone takes it over::

            conn.execute(
                update(invoices)
                .where(invoices.c.state == "due", lease.is_held_clause())
                .values(state="sent")
            )
        """
        t = self._table
        return exists().where(
            t.c.id == self.key,
            t.c.holder == self.holder,
            t.c.fence == self.token,
            t.c.expires_at > db_now_ms(),
        )

    def __repr__(self) -> str:
        state = "lost" if self.lost else "released" if self._released else "held"
        return (
            f"<{type(self).__qualname__} key={self.key!r} token={self.token} {state} "
            f"remaining={self.remaining().total_seconds():.3f}s>"
        )

    # -- transitions (called by the faces and the renewers) -----------------------------

    def _refresh_args(
        self, ttl: _validate.Duration | None, min_hold: _validate.Duration | None
    ) -> tuple[int, int | None] | None:
        """Validated ``(ttl_ms, min_hold_ms)`` of a refresh; None when nothing may be sent
        (the lease is released or lost: a lost lease stays lost)."""
        ttl_ms = self.ttl_ms if ttl is None else _validate.duration_ms(ttl, "ttl")
        hold_ms = None
        if min_hold is not None:
            hold_ms = _validate.duration_ms(min_hold, "min_hold", allow_zero=True)
        if self._released or self._lost_reason is not None:
            return None
        return ttl_ms, hold_ms

    def _refreshed(
        self, expires_ms: int | None, sent_at: float, ttl_ms: int, min_hold_ms: int | None
    ) -> bool:
        """Follow a refresh's answer (the new expiry, or None when refused)."""
        if expires_ms is None:
            self._mark_lost("refresh refused: the row is gone, expired or another grant's")
            return False
        self._renewed(expires_ms, sent_at, ttl_ms)
        if min_hold_ms:
            # The database's now at the refresh is exactly expires - ttl (its own sum).
            with self._state_lock:
                until = expires_ms - ttl_ms + min_hold_ms
                self._hold_until_ms = max(self._hold_until_ms, until)
        return True

    def _renewed(self, expires_ms: int, sent_at: float, ttl_ms: int) -> None:
        with self._state_lock:
            self._deadline = deadline(sent_at, ttl_ms)
            self._lost_at = self._deadline - loss_margin_s(ttl_ms)
            self.expires_at = from_ms(expires_ms)
            self.next_renewal = sent_at + self._renew_every
            self._renew_slack = self._renew_every * RENEW_SLACK
            failures, self._renew_failures = self._renew_failures, 0
            if self._loss_alarm is not None:
                self._arm_loss()
        if failures:
            log.warning(
                "joblocks: renewing %r works again, after %d failed attempts in %.1f s",
                self.key,
                failures,
                time.monotonic() - self._failing_since,
            )

    # -- the loss deadline (keep-alive) -------------------------------------------------

    def _arm_loss(self) -> None:
        """Have the watchdog report this lease lost at ``_lost_at``, whatever the calls
        in flight do (a renewal blocked on a stalled connection included)."""
        old = self._loss_alarm
        if old is not None:
            old.disarm()
        if self._lost_reason is None and not self._released:
            self._loss_alarm = watchdog.arm(self._lost_at, _loss_due(weakref.ref(self)))

    def _disarm_loss(self) -> None:
        alarm = self._loss_alarm
        if alarm is not None:
            alarm.disarm()

    def _loss_due(self) -> None:
        """On the watchdog's thread (which must never wait): report the loss elsewhere."""
        in_thread(self._check_ran_out, "joblocks-lease-lost")

    def _mark_lost(self, reason: str) -> bool:
        """Record the loss once; True the first time."""
        with self._state_lock:
            if self._lost_reason is not None or self._released:
                return False
            self._lost_reason = reason
        self._disarm_loss()
        log.warning("joblocks: lease on %r (token %d) lost: %s", self.key, self.token, reason)
        _process.emit("lost", self.key, self.holder, token=self.token)
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                log.exception("joblocks: on_lost callback for %r failed", self.key)
        return True

    def _begin_release(self) -> bool:
        """Mark released; False when it already was."""
        with self._state_lock:
            if self._released:
                return False
            self._released = True
        self._disarm_loss()
        return True

    def _work_failed(self, error: BaseException) -> None:
        """The work under the lease raised ``error`` (the run ledger's ``error`` run)."""
        self._run_error = error

    def _release_failed(self) -> None:
        """A release raised: nothing is known to be let go, so it may be sent again."""
        with self._state_lock:
            self._released = False

    @abc.abstractmethod
    def _keep_alive(self) -> None:
        """Hand the lease to its face's keep-alive renewer (a thread or a task)."""

    @abc.abstractmethod
    def _stop_keeping_alive(self) -> None:
        """Take the lease off its face's renewer."""

    @abc.abstractmethod
    def _renew_once(self) -> Any:
        """One renewal by the face's keep-alive renewer (a coroutine on asyncio)."""

    def _lost_error(self) -> LeaseLost:
        return LeaseLost(self.key, self._lost_reason or "released")

    def _check_ran_out(self) -> None:
        if self._lost_reason is None and not self._released and time.monotonic() >= self._lost_at:
            self._expire()

    def _expire(self) -> None:
        capped = self._max_hold_until is not None and time.monotonic() >= self._max_hold_until
        self._mark_lost(
            "max_hold reached: renewals stopped and the lease ran out"
            if capped
            else "the lease ran out before a renewal landed"
        )


def _loss_due(ref: weakref.ref[LeaseState]) -> Callable[[], None]:
    """The loss alarm's callback: weak, so a lease its owner dropped is not kept."""

    def fire() -> None:
        lease = ref()
        if lease is not None:
            lease._loss_due()

    return fire


# -- what taking a key gives ----------------------------------------------------------

L = TypeVar("L", bound=LeaseState)


@dataclass(frozen=True)
class Acquired(Generic[L]):
    """The key was granted: its lease (for ``run_with_lock``: the work ran under it)."""

    lease: L


@dataclass(frozen=True)
class Taken:
    """The key stayed held elsewhere (after any ``wait``), or this process was already
    running it (``run_with_lock``'s in-process guard)."""

    lease: None = None


@dataclass(frozen=True)
class Skipped:
    """``schedule=``: the start was skipped, its slot (``(start_ms, end_ms)``, epoch ms
    UTC) already run; ``reason``: one line for logs and the command line."""

    reason: str
    slot: tuple[int, int]
    lease: None = None


#: What ``_lifecycle.take`` (and ``run_with_lock``) gives: ``.lease`` is the lease or None.
Outcome = Union[Acquired[L], Taken, Skipped]
TAKEN = Taken()
