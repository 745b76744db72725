"""The lock life cycle, written once for both faces (sans-I/O).

Every operation of a lease is a generator here (the plain model's are in
``_core.plain``): it validates its arguments, then yields the step it needs next and is
sent that step's result back (an operation that is one call returns
``_steps.call``'s generator itself). A
face only says how to do a step (``_core.steps``) in its driver: ``Driver._drive`` in
``_sync.driver`` calls and sleeps with ``time.sleep``, the one in ``_async.driver`` awaits
and sleeps with ``asyncio.sleep``. An error of a step is thrown back into the
generator at its ``yield``, so ``try``/``except``/``finally`` here mean the same on
both faces. (The shape of h11 and httpcore: the protocol knows no I/O.)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from .._sql import tables as _tables
from .._util import process as _process
from .._util import validate as _validate
from .._util.errors import LockBackendError
from . import (
    ledger as _ledger,
)
from . import (
    liveness as _liveness,
)
from . import (
    ops as _ops,
)
from . import (
    places as _places,
)
from . import (
    slots as _slots,
)
from .base import log
from .state import TAKEN, Acquired, LeaseState, Outcome, Skipped
from .steps import (
    Backoff,
    Emit,
    Shielded,
    Sleep,
    Steps,
    Try,
    Work,
    acquire_once,
    call,
    call_connected,
    drop_grant,
)

if TYPE_CHECKING:
    from .base import ModelCore
    from .options import LeaseOptions


def identify(model: ModelCore) -> Steps[tuple[Any, ...]]:
    """The table's identity (see ``ModelCore.identity``): read once, then kept."""
    known = model._found
    if known is None:
        found = yield from call_connected(
            model, "identify table", _tables.table_identity, model.table
        )
        known = model._identified(found)
    return known.key


# -- leases ---------------------------------------------------------------------------


def take(
    model: ModelCore,
    key: str,
    opts: LeaseOptions,
    started: float,
    *,
    times: bool = True,
) -> Steps[Outcome[Any]]:
    """Acquire ``key`` as a lease of the model's face, waiting ``opts.wait_ms`` with
    backoff: :class:`Acquired` with the lease, :class:`Taken` when it stays taken, or
    :class:`Skipped` (``schedule=``) when its slot was already run. ``times=False``:
    MySQL's grant times are read only when the lease needs them (keep-alive,
    ``on_lost``).

    Each try goes down to the one feature of the request (``opts.path``: a single
    lease, a schedule's slot, a place of ``max_holders``, a session-liveness lease)."""
    holder = opts.holder
    record = model.record if opts.record is None else opts.record
    try_once = _FEATURES[opts.path]
    attempt = 0
    # schedule= and liveness="session" are not given together (LeaseOptions).
    live = None if opts.liveness == "ttl" else _liveness.Live(model, key)
    # A session-liveness waiter looks again often: a dead holder is taken over at once.
    poll = None if live is None else _liveness.POLL_S
    grant = None
    while grant is None:
        sent = time.monotonic()
        try:
            got = yield from try_once(model, key, opts, live)
        except BaseException as exc:
            if live is not None and not isinstance(exc, GeneratorExit):
                yield from _liveness.abandon(live)
            if isinstance(exc, LockBackendError):
                yield Emit("error", key, holder, error=exc)
            raise
        grant = got.grant
        if grant is not None:
            break
        skip = got.skip
        if skip is None:
            attempt += 1
            if (yield Backoff(attempt, started, opts.wait_ms, poll)):
                continue  # the wait goes on: try again
            if live is not None:
                yield from _liveness.abandon(live)
            yield Emit("conflict", key, holder)
        if record == "all":
            yield from _ledger.record_skip(model, key, opts, got.slot)
        return TAKEN if skip is None else Skipped(skip.reason(key), skip.slot)
    row = got.row
    lease = None
    try:
        mine = True
        if grant.acquired_ms is None and (times or opts.keepalive or opts.on_lost):
            # MySQL/MariaDB report only the token: read the row's times.
            grant, mine = _ops.fill_times(grant, (yield from call(model, "peek", _ops.peek, row)))
        lease = model._lease_type(
            model,
            **opts.lease_state(row, grant, sent, opts.ttl_ms),
            slot=got.slot,
            group=None if opts.max_holders is None else (key, opts.max_holders),
            live=live,
            run=_ledger.RunRow() if record else None,
        )
        waited = (sent - started) * 1000 if opts.wait_ms is not None else None
        yield Emit("acquired", row, holder, token=grant.fence, waited_ms=waited)
        if not mine:
            lease._mark_lost("the row changed right after it was granted")
        elif opts.keepalive:
            lease._keep_alive()
        if record:
            yield from _ledger.record_start(model, lease, opts)
    except BaseException as exc:
        # Granted, but the lease never reaches the caller (cancelled, interrupted, or
        # a failed read of the grant's times): let the grant go rather than leave it
        # to nobody until its ttl.
        if not isinstance(exc, GeneratorExit):
            if lease is not None and lease._begin_release():
                lease._stop_keeping_alive()
            yield Shielded(drop_grant(model, row, holder, grant))
            if live is not None:
                yield from _liveness.abandon(live)
        raise
    return Acquired(lease)


def _single(model: ModelCore, key: str, opts: LeaseOptions, live: None) -> Steps[Try]:
    """One try at a single lease (no schedule, one holder, ttl liveness)."""
    return acquire_once(model, key, opts.holder, opts.ttl_ms)


#: The one feature each path of a request (``LeaseOptions.path``) goes down to.
_FEATURES: dict[str, Callable[..., Steps[Try]]] = {
    "single": _single,
    "session": _liveness.take,
    "slots": _slots.take,
    "places": _places.take,
}


def lease_refresh(
    lease: LeaseState, ttl: _validate.Duration | None, min_hold: _validate.Duration | None
) -> Steps[bool]:
    """``Lease.refresh``: nothing is sent once the lease is released or lost."""
    args = lease._refresh_args(ttl, min_hold)
    if args is None:
        return False
    sent = time.monotonic()
    expires = yield from call(
        lease._model, "refresh", _ops.refresh_lease, lease.key, lease.holder, lease.token, args[0]
    )
    if lease._group is not None:
        yield from _places.cover_lease(lease, expires)
    return lease._refreshed(expires, sent, *args)


def lease_release(lease: LeaseState) -> Steps[bool]:
    """``Lease.release``: once; the row is kept until a ``min_hold`` still ahead."""
    if not lease._begin_release():
        return False
    lease._stop_keeping_alive()
    try:
        released = yield from call(
            lease._model,
            "release",
            _ops.release_lease,
            lease.key,
            lease.holder,
            lease.token,
            lease._min_hold_ms,
            lease._hold_until_ms,
        )
    except LockBackendError as exc:
        # Nothing is known to be let go: a later release() sends it again (the same
        # holder and token check), so an outage does not block the key for the ttl.
        lease._release_failed()
        yield Emit("error", lease.key, lease.holder, token=lease.token, error=exc)
        yield from _ledger.record_end(lease)
        raise
    finally:
        if lease._live is not None:
            yield from _liveness.release(lease, bool(lease._min_hold_ms or lease._hold_until_ms))
    if released and lease._group is not None:
        yield from _places.after_release(lease)
    held_ms = (time.monotonic() - lease._started) * 1000
    outcome = _ledger.outcome_of(lease)
    yield Emit(
        "released", lease.key, lease.holder, token=lease.token, held_ms=held_ms, outcome=outcome
    )
    yield from _ledger.record_end(lease)
    return bool(released)


def ensure_held(lease: LeaseState) -> Steps[None]:
    """``Lease.ensure_held``: ``LeaseLost`` unless the database still has the grant live."""
    if lease._lost_reason is not None or lease._released:
        raise lease._lost_error()
    held = yield from call(
        lease._model, "check lease", _ops.is_held, lease.key, lease.holder, lease.token
    )
    if not held:
        lease._mark_lost("the row is gone, expired or another holder's")
        raise lease._lost_error()


def renew_once(lease: LeaseState) -> Steps[None]:
    """One renewal by a keep-alive renewer; never raises.

    It runs on the connection the model keeps for its keep-alive leases, and is
    abandoned (its statement cancelled) when it has not ended by the time the lease
    counts as lost: the watchdog reports the loss then, whether or not it returned.
    """
    sent = time.monotonic()
    try:
        expires = yield from call(
            lease._model,
            "renew",
            _ops.refresh_lease,
            lease.key,
            lease.holder,
            lease.token,
            lease.ttl_ms,
            until=lease._lost_at,
            keeper=True,
        )
    except Exception as exc:
        yield Emit("error", lease.key, lease.holder, token=lease.token, error=exc)
        lease._renewal_failed(exc)
        lease._check_ran_out()
        lease._after_failed_renewal(time.monotonic())
        return
    if expires is None:
        lease._mark_lost("renewal refused: the row is gone, expired or another grant's")
        return
    lease._renewed(expires, sent, lease.ttl_ms)
    if lease._group is not None:
        yield from _places.cover_lease(lease, expires)
    yield Emit("renewed", lease.key, lease.holder, token=lease.token)


# -- run_with_lock -------------------------------------------------------------------


def run_with_lock(
    model: ModelCore,
    key: str,
    opts: LeaseOptions,
    work: Callable[[], Any],
    cancel_on_loss: bool,
) -> Steps[Outcome[Any]]:
    """The in-process guard, the lease, the work, the release (never raising), in order:
    :class:`Acquired` when the work ran (its lease, released), else why it did not."""
    started = time.monotonic()
    slot: tuple[Any, ...] = ((yield from identify(model)), key)
    if opts.max_holders is not None:
        slot += (opts.holder,)  # counted: one run per holder of this process
    attempt = 0
    while not _process.enter_guard(slot):
        attempt += 1
        if not (yield Backoff(attempt, started, opts.wait_ms)):
            log.debug("joblocks: %r is already running in this process; skipped", key)
            yield Emit("conflict", key, opts.holder)
            return TAKEN
    try:
        taken = yield from take(model, key, opts, started, times=False)
        lease = taken.lease
        if lease is None:
            log.debug("joblocks: %r is held by another worker; skipped", key)
            return taken
        try:
            yield Work(work, lease, cancel_on_loss)
        except BaseException as exc:
            lease._work_failed(exc)
            raise
        finally:
            yield from release_quietly(lease)
        return taken
    finally:
        _process.leave_guard(slot)


#: A release after the work that fails (the database unreachable) is tried this many
#: times in all, pausing :data:`RELEASE_PAUSES_S` between tries, and only while the
#: lease has time left: at most a few seconds more than the tries' own time-outs.
RELEASE_ATTEMPTS = 3
RELEASE_PAUSES_S = (0.5, 1.5)


def release_retrying(lease: LeaseState) -> Steps[bool]:
    """``Lease.release`` tried up to :data:`RELEASE_ATTEMPTS` times while the lease has
    time left; the last failure is raised. Each try is the same token-checked release,
    so a try whose commit was lost on the way back does no harm when sent again."""
    attempt = 1
    while True:
        try:
            return (yield from lease_release(lease))
        except LockBackendError as exc:
            left = lease.remaining().total_seconds()
            if attempt >= RELEASE_ATTEMPTS or left <= 0:
                raise
            pause = min(RELEASE_PAUSES_S[min(attempt, len(RELEASE_PAUSES_S)) - 1], left)
            log.warning(
                "joblocks: releasing %r failed (%s); trying again in %.1f s", lease.key, exc, pause
            )
        yield Sleep(pause)
        attempt += 1


def release_quietly(lease: LeaseState) -> Steps[None]:
    """Release after the work, never raising (the lease expires on its own anyway),
    retried briefly (:func:`release_retrying`); shielded: a cancelled work still gets
    its release."""
    try:
        released = yield Shielded(release_retrying(lease))
    except Exception:
        log.exception("joblocks: releasing %r failed; it expires on its own", lease.key)
        return
    yield from after_release(lease, released)


def after_release(lease: LeaseState, released: bool) -> Steps[None]:
    """Warn when the work outlived its lease, or the lease was gone at release."""
    if lease.lost:
        return  # already reported when it was found lost
    held_ms = lease.held_for.total_seconds() * 1000
    if not lease.keepalive and held_ms > lease.ttl_ms:
        log.warning(
            "joblocks: work under %r ran %.0f ms, longer than its ttl of %d ms: another "
            "worker may have run it at the same time (use keepalive=True or a longer ttl)",
            lease.key,
            held_ms,
            lease.ttl_ms,
        )
        yield Emit("overrun", lease.key, lease.holder, token=lease.token, held_ms=held_ms)
    elif not released:
        log.warning("joblocks: %r was no longer held by this worker at release", lease.key)
