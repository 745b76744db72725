"""The sync face's model and lease: ``JobLockModel``, its public surface over the life
cycle (``_core.lifecycle``) driven by blocking calls (``_sync.driver``), and ``Lease``, a
lease's state (``_core.state``) driven the same way by its model and kept alive by the
process's renewal thread (``_sync.keepalive``)."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator
from typing import Any

from typing_extensions import Unpack

from .._core import lifecycle as _lifecycle
from .._core import ops as _ops
from .._core import plain as _plain
from .._core.options import LEASE_OPTIONS, LeaseKwargs, LeaseOptions
from .._core.plain import Run
from .._core.state import LeaseState, Outcome
from .._db.connections import JobLock
from .._util import validate as _validate
from .._util.errors import translate
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


class JobLockModel(Driver):
    """The lock table of one database: the four lease operations and the plain model.

    ``database`` is a URL (``"sqlite:///locks.db"``, ``"postgresql://app@db/app"``,
    ``"mysql://app@db/app"``), a SQLAlchemy ``Engine``, or None for ``JOBLOCKS_URL``
    (else the per-user SQLite file, see ``joblocks where``). The table is created on
    first use unless ``create_table=False``. Database failures raise
    :class:`~joblocks.LockBackendError`; ``errors_as_taken=True`` makes ``acquire``
    return False on them instead, as the reference does.

    ``timeout`` (milliseconds or a ``datetime.timedelta``; default 5,000 ms, the same
    on every database and face) bounds a connection attempt, each wait for a reply of
    the server and SQLite's wait for another writer; past it, ``LockBackendError``.
    It applies to engines joblocks makes from a URL (an ``Engine`` you pass keeps its
    own settings).

    Thread-safe. Each call runs on its own autocommit connection and never touches a
    transaction of the caller's. An engine joblocks made itself (from a URL) keeps its
    idle connections between calls; an engine you pass in gets every connection back
    in its pool after each call.
    """

    _lease_type = Lease

    _asynchronous = False

    def create_table(self) -> None:
        """Create the lock table and its fencing counter if they are missing.

        Raises :class:`~joblocks.LockTableMismatch` (creating nothing) when a table of
        that name exists with another shape.
        """
        with translate("create table", self.database):
            with self._connection() as conn:
                self._first_use(conn, True)
            self.table_ready = True

    def dispose(self) -> None:
        """Close this model's connections (and its engine, if joblocks made it).

        Also done when the model is garbage collected. The model stays usable: a later
        call opens connections again.
        """
        self._let_keeper_go()
        self._close_connections()

    # -- the reference's four operations -------------------------------------------

    def acquire(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Take ``lock_key`` for ``holder`` for ``ttl`` (ms or timedelta).

        True when the row was free, expired, or already ``holder``'s (re-entrant: the
        expiry moves forward); False when another holder's lease is live. A database
        failure raises ``LockBackendError`` (or returns False with
        ``errors_as_taken=True``).

        Tokens: a re-entrant acquire of ``holder``'s live row keeps its fencing token;
        every other grant — a new row, an expired row of another holder, or
        ``holder``'s own expired row — is a new grant with a new, larger token. "Live"
        and "expired" are judged by the database's clock in whole milliseconds: a row
        written with ``ttl`` at the database's ms N is live while its now < N + ttl.
        """
        # Not through acquire_token: one call less on the hot path.
        return self._drive(_plain.acquire_token(self, lock_key, ttl, holder)) is not None

    def acquire_token(self, lock_key: str, ttl: _validate.Duration, holder: str) -> int | None:
        """Like :meth:`acquire`, returning the grant's fencing token (None when taken).

        The same token as before for a re-entrant acquire of a live row; a larger one
        for any other grant (the holder's own expired row included).

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return self._drive(_plain.acquire_token(self, lock_key, ttl, holder))

    def release(self, lock_key: str, holder: str) -> bool:
        """Delete the row if ``holder`` holds it (a no-op otherwise); True when deleted."""
        return self._drive(_plain.release(self, lock_key, holder))

    def refresh(self, lock_key: str, ttl: _validate.Duration, holder: str) -> bool:
        """Set the expiry to now + ``ttl`` (ms or timedelta) if the row is ``holder``'s,
        even if expired (the reference's rule), keeping its token.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.

        False only when the row is gone or belongs to someone else. It goes by holder,
        not by grant: to extend one grant only, and to promise a minimum hold when
        extending, use :meth:`Lease.refresh` (``min_hold=``); this plain refresh has
        no minimum hold, as the plain :meth:`release` is the reference's delete.
        """
        return self._drive(_plain.refresh(self, lock_key, ttl, holder))

    def peek(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key`` whatever its state (held or expired), or None."""
        return self._drive(_plain.peek(self, lock_key))

    def holders(self, lock_key: str) -> builtins.list[JobLock]:
        """The holders of a key used with ``max_holders``: its place rows (held or
        expired) by place; empty when the key is not a counted lease's."""
        return self._drive(_plain.holders(self, lock_key))

    # -- leases -----------------------------------------------------------------------

    def try_lease(
        self,
        lock_key: str,
        ttl: _validate.Duration,
        **options: Unpack[LeaseKwargs[Lease]],
    ) -> Lease | None:
        """Take ``lock_key`` and return the grant as a :class:`~joblocks.Lease`, or None.

        ``holder`` defaults to this process's worker id. ``keepalive=True`` renews the
        lease every ``renew_every`` (default ttl/3) until it is released, lost, or
        ``max_hold`` has passed; ``on_lost(lease)`` is called when it is found lost.
        ``min_hold`` keeps a released lease's row until acquired_at + min_hold.
        ``wait`` retries with capped exponential backoff and jitter for that long.

        Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``) is
        milliseconds (int or float) or a ``datetime.timedelta``.

        ``schedule`` (a cron expression, or a :class:`~joblocks.Schedule`): at most one
        start per slot of the schedule across every worker, by the database's clock; a
        start whose slot was already run is skipped (None); ``timezone``: the IANA zone
        the expression is in (default UTC). See docs/howto/cron-once-per-tick.md.
        ``record`` (True, False or ``"all"``; None: the model's ``record=``) writes the
        run to the run ledger (``job_runs``, see docs/ledger.md); ``"all"`` records a
        start that found the key taken as ``skipped`` too.
        """
        return self._try_lease(lock_key, ttl, **options).lease

    def _try_lease(
        self,
        lock_key: str,
        ttl: _validate.Duration,
        **options: Unpack[LeaseKwargs[Lease]],
    ) -> Outcome[Lease]:
        """:meth:`try_lease`'s outcome: acquired (its lease), taken, or skipped (why)."""
        key = _validate.lock_key(lock_key)
        return self._take(key, LeaseOptions.of(ttl, options, "try_lease", LEASE_OPTIONS))

    def _take(self, key: str, opts: LeaseOptions) -> Outcome[Lease]:
        """:meth:`_try_lease` of a request already validated."""
        taken: Outcome[Lease] = self._drive(_lifecycle.take(self, key, opts, time.monotonic()))
        return taken

    # -- the plain model surface ------------------------------------------------

    def get(self, lock_key: str) -> JobLock | None:
        """The row of ``lock_key``, or None (same as :meth:`peek`)."""
        return self.peek(lock_key)

    def list(self, state: _ops.State = "all") -> builtins.list[JobLock]:
        """All rows ordered by key; ``state="held"`` (alias ``"live"``) or ``"expired"``
        keeps the rows in that state by the database's clock (``"all"``: every row)."""
        return self._drive(_plain.list_locks(self, state))

    def count(self, state: _ops.State = "all") -> int:
        """How many rows there are (``state`` as in :meth:`list`)."""
        return self._drive(_plain.count(self, state))

    def iter_locks(
        self, state: _ops.State = "all", *, batch_size: int = _ops.PAGE_SIZE
    ) -> Iterator[JobLock]:
        """The rows of :meth:`list`, ordered by key, read ``batch_size`` rows at a time.

        Memory stays flat however large the table: each page is one short query (keyset
        paging: ``id > last key ORDER BY id LIMIT batch_size``) on a connection held
        only for that query, so nothing stays locked or open between pages. Not a
        snapshot: a row present throughout is yielded exactly once, one added, changed
        or deleted meanwhile may or may not be seen as it was. ``state`` is judged by
        the database's clock when each page is read. Arguments are checked at the call.
        """
        _validate.state(state)
        size = _validate.batch_size(batch_size)
        return self._pages(state, size)

    def _pages(self, state: _ops.State, size: int) -> Iterator[JobLock]:
        after: str | None = ""
        while after is not None:
            page = self._drive(_plain.page(self, state, after, size))
            yield from page
            after = _ops.next_after(page, size)

    def prune(
        self,
        expired_for: _validate.Duration = 0,
        *,
        batch_size: int = _ops.PRUNE_BATCH,
        dry_run: bool = False,
    ) -> int:
        """Delete the rows expired for at least ``expired_for`` (ms or timedelta; 0: every
        expired row), by the database's clock; the number deleted.

        Live rows are never touched. Deletes ``batch_size`` rows per statement, each its
        own short transaction, so other processes' calls get through between batches
        (on SQLite, the prune pauses between batches to let them take the write lock).
        ``dry_run=True`` only counts the rows it would delete. Stopping it part-way
        (an error, an interrupt) leaves the batches already done deleted.
        """
        return self._drive(_plain.prune(self, expired_for, batch_size, dry_run))

    def insert(self, lock_key: str, *, holder: str, ttl: _validate.Duration) -> JobLock:
        """Insert a new row with a new fencing token; ``LockExistsError`` if one exists.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``.
        """
        return self._drive(_plain.insert(self, lock_key, holder, ttl))

    def update(
        self,
        lock_key: str,
        *,
        holder: str | None = None,
        ttl: _validate.Duration | None = None,
    ) -> bool:
        """Change the holder and/or set expiry to now + ``ttl``, whoever holds the row.

        ``ttl`` is milliseconds (int or float) or a ``datetime.timedelta``. A new holder
        gets a new fencing token. True when the row exists.
        """
        return self._drive(_plain.update(self, lock_key, holder, ttl))

    def delete(self, lock_key: str) -> bool:
        """Delete the row of ``lock_key`` whoever holds it; True when a row was deleted."""
        return self._drive(_plain.delete(self, lock_key))

    def now_ms(self) -> int:
        """The database server's clock, in epoch milliseconds."""
        return self._drive(_plain.now_ms(self))

    # -- the run ledger (record=True) ------------------------------------------------

    def runs(
        self,
        key: str | None = None,
        *,
        since: _validate.Duration | None = None,
        limit: int = 1000,
    ) -> builtins.list[Run]:
        """The run ledger's rows, newest first: of ``key`` (None: every key), started
        within ``since`` (ms or timedelta, by the database's clock), at most ``limit``.
        Empty when the ledger table does not exist (nothing was recorded yet)."""
        return self._drive(_plain.runs(self, key, since, limit))

    def prune_runs(
        self, older_than: _validate.Duration, *, batch_size: int = _plain.PRUNE_BATCH
    ) -> int:
        """Delete the ledger rows of runs started more than ``older_than`` (ms or
        timedelta) ago by the database's clock, ``batch_size`` rows per statement (each
        its own short transaction); the number deleted."""
        return self._drive(_plain.prune_runs(self, older_than, batch_size))
