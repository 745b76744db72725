"""The sync face's ``Lease``: a lease's state (``_core.state``) driven through the life cycle
(``_core.lifecycle``) by its model, kept alive by the process's renewal thread
(``_sync.keepalive``)."""

from __future__ import annotations

from typing import Any

from .._core import lifecycle as _lifecycle
from .._core.state import LeaseState
from .._util import validate as _validate
from .driver import Driver
from .keepalive import thread_renewer


class Lease(LeaseState):
    """One grant of a lock (sync face). Use as a context manager to release on exit."""

    _model: Driver

    def __init__(self, model: Driver, **state: Any) -> None:
        super().__init__(table=model.table, **state)
        self._model = model

    def refresh(
        self,
        ttl: _validate.Duration | None = None,
        *,
        min_hold: _validate.Duration | None = None,
    ) -> bool:
        """Extend the lease to now + ``ttl`` (ms or timedelta; default: its ttl), by the
        database's clock, keeping its token.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.

        Only a live grant is extended: False (and the lease is marked lost) when the
        row is gone, another holder's, another grant's, or expired — an expired grant
        is over, and taking the key again is a new grant (:meth:`JobLockModel.try_lease`).
        False without touching the database once the lease is released or lost.

        ``min_hold`` (ms or timedelta, >= 0; ShedLock's ``lockAtLeastFor`` on
        ``extend``): a :meth:`release` before the database's now at this refresh +
        ``min_hold`` keeps the row until then, so no one else takes the key before
        that time. It never shortens a hold promised before (``try_lease(min_hold=)``
        or an earlier refresh): a release keeps the row until the latest of them.
        Bad values raise ``TypeError``/``ValueError`` before the database is touched.
        """
        return self._model._drive(_lifecycle.lease_refresh(self, ttl, min_hold))

    def release(self) -> bool:
        """Let the lease go (the row is kept until the end of a min_hold still ahead:
        acquired_at + ``try_lease``'s min_hold, or a ``refresh(min_hold=)`` promise).

        True when the row was still this grant's; False when it was no longer ours (it
        expired and was taken, deleted, or taken back as a new grant) — nothing is
        deleted then. Raises :class:`~joblocks.LockBackendError` when the database
        fails; the lease then still counts as not released, and calling ``release()``
        again sends the same token-checked release.
        """
        return self._model._drive(_lifecycle.lease_release(self))

    def ensure_held(self) -> None:
        """Raise :class:`~joblocks.LeaseLost` unless the database still has this grant live."""
        self._model._drive(_lifecycle.ensure_held(self))

    def _renew_once(self) -> None:
        """One renewal by the keep-alive thread; never raises."""
        self._model._drive(_lifecycle.renew_once(self))

    def _keep_alive(self) -> None:
        with self._state_lock:
            self._arm_loss()
        self._model._keep_connection()
        thread_renewer.add(self)

    def _stop_keeping_alive(self) -> None:
        thread_renewer.remove(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if isinstance(exc_info[1], BaseException):
            self._work_failed(exc_info[1])
        if not self._released:
            self.release()
