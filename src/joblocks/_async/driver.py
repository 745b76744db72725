"""The asyncio face's driver (``aio.JobLockModel``, ``_async.model``, is one): ``_drive``
awaits each step of a life-cycle generator (``_core.lifecycle``, ``_core.steps``). An
``Attempt``'s statements are awaited on the model's own driver connections on a server
engine joblocks made (``_async.raw``, ``_async.pool``: no greenlet), on ``sqlite3`` on the
loop's thread for a SQLite file (``_async.pool``), otherwise (a caller's
``AsyncEngine``, a ``Connected`` or ``Session`` step, the first use) in one SQLAlchemy
greenlet; keep-alive renewals on the kept connection of ``_async.keepalive``."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import Any, Callable, TypeVar

from .._core import ops as _ops
from .._core import steps as _steps
from .._core.steps import Attempt, Backoff, Connected, Emit, FirstUse, Session, Sleep, Steps, Work
from .._db.deadline import Bound
from .._db.execute import in_place, run
from .._sql.statements import Sent
from .._util.drivers import greenlet_spawn, hands_off_per_statement
from .._util.errors import NoReply, translate
from .keepalive import Keeper
from .pool import RERUN_SAFE, WAIT, LoopSQLite, RawPool, forget
from .pool import usable as loop_usable
from .raw import Link, Raw, bounded_at
from .raw import usable as raw_usable

T = TypeVar("T")

#: Seconds after ``timeout`` that asyncio cuts an abandoned aiomysql call still running.
_ABANDON_GRACE_S = 1.0


async def _finished(task: asyncio.Future[Any]) -> None:
    """Wait until ``task`` is done, whatever cancellations arrive meanwhile."""
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((task,))
    if not task.cancelled():
        task.exception()  # retrieved: the caller decides what it means


class Driver(Keeper):
    """How the asyncio face does a step: the part of ``aio.JobLockModel`` below its
    methods."""

    #: The lock of the first use on a loop (see ``_open``).
    _first_use_lock: tuple[weakref.ref[asyncio.AbstractEventLoop], asyncio.Lock] | None = None

    async def _call(self, operation: str, fn: Callable[..., Sent[T]], *args: Any) -> T:
        return await self._drive(_steps.call(self, operation, fn, *args))

    async def _drive(self, steps: Steps[T]) -> T:
        """Run the life-cycle generator ``steps`` to its end, awaiting each step it
        yields (see ``_core.lifecycle``)."""
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            result = error = None
            try:
                if isinstance(step, (Attempt, Connected)):
                    fn = step.fn
                    loop_sqlite = self._loop_sqlite
                    if loop_sqlite is not None:
                        # A SQLite file: the one-key operations on the loop's thread, off
                        # it only to wait for a writer; the others on a worker thread.
                        st = self.statements
                        args = step.args
                        if step.__class__ is Connected:
                            result = await loop_sqlite.run_waiting(fn, st, args, connected=True)
                            continue
                        result = loop_sqlite.run(fn, st, args) if fn in RERUN_SAFE else WAIT
                        if result is WAIT:
                            result = await loop_sqlite.run_waiting(fn, st, args)
                        continue
                    if self._link is not None and step.__class__ is Attempt:
                        # A server, an engine joblocks made: no greenlet.
                        if step.keeper:
                            result = await self._on_raw_keeper(step)
                        else:
                            result = await self._on_raw(step)
                        continue
                    if step.keeper:
                        result = await self._on_keeper(step)
                        continue
                    work = greenlet_spawn(self._in_greenlet, step)
                    timeout = self._io_timeout
                    result = await (asyncio.wait_for(work, timeout) if timeout else work)
                elif isinstance(step, Emit):
                    step.deliver()
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Backoff):
                    pause = step.pause()
                    if pause is not None:
                        await asyncio.sleep(pause)
                    result = pause is not None
                elif isinstance(step, FirstUse):
                    await self._open()
                elif isinstance(step, Work):
                    if step.cancel_on_loss:
                        await step.lease._run_cancellable(step.work)  # type: ignore[attr-defined]
                    else:
                        await step.work()
                elif isinstance(step, Session):
                    result = await self._session(step)
                elif step.undo is None:
                    # A cancelled caller still gets these steps done (e.g. a release).
                    result = await asyncio.shield(self._drive(step.steps))
                else:
                    result = await self._settled(step)
            except BaseException as exc:  # thrown back in at the yield
                error = exc

    async def _settled(self, step: _steps.Shielded) -> Any:
        """A shielded step with an ``undo``: if the caller is cancelled meanwhile, wait
        for the steps to end (each bounded by the model's time-out), undo what they
        returned, and only then let the cancellation go on."""
        steps = step.steps
        loop_sqlite = self._loop_sqlite
        result: Any = None
        error: BaseException | None = None
        # Steps done in place on the loop's thread (a SQLite file, no other writer in
        # the way) cannot be cancelled halfway: no task needed for them.
        while True:
            try:
                pending = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            result = error = None
            if (
                loop_sqlite is None
                or pending.__class__ is not Attempt
                or pending.fn not in RERUN_SAFE
            ):
                break
            try:
                result = loop_sqlite.run(pending.fn, self.statements, pending.args)
            except BaseException as exc:
                error = exc
                continue
            if result is not WAIT:
                continue
            result = None
            break
        inner = asyncio.ensure_future(self._drive(_steps.resumed(pending, steps)))
        try:
            return await asyncio.shield(inner)
        except asyncio.CancelledError:
            await _finished(inner)
            if not inner.cancelled() and inner.exception() is None and step.undo is not None:
                await _finished(asyncio.ensure_future(self._drive(step.undo(inner.result()))))
            raise

    async def _session(self, step: Session) -> Any:
        """A connection kept for a lease's life (see ``_steps.Session``)."""
        timeout = self._io_timeout
        conn = step.conn
        if conn is None:
            opening = self.engine.connect()
            conn = await (asyncio.wait_for(opening, timeout) if timeout else opening)
        try:
            result = None
            if step.fn is not None:
                work = conn.run_sync(step.fn, self.statements, *step.args)
                result = await (asyncio.wait_for(work, timeout) if timeout else work)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            await asyncio.shield(conn.close())
            raise
        if step.conn is None:
            return conn, result
        if step.close:
            await conn.close()
        return result

    async def _open(self) -> None:
        # One first use at a time on a loop: the calls that start together wait for the
        # first one, instead of each opening a connection of the engine of its own.
        loop = asyncio.get_running_loop()
        guard = self._first_use_lock
        if guard is None or guard[0]() is not loop:
            guard = self._first_use_lock = (weakref.ref(loop), asyncio.Lock())
        async with guard[1]:
            if self.table_ready:
                return
            with translate(self._first_use_name, self.database):
                await self._run_first_use(self._create)
            self.table_ready = True

    async def _run_first_use(self, create: bool) -> None:
        loop_sqlite = self._loop_sqlite
        if loop_sqlite is not None:
            await loop_sqlite.run_waiting(
                self._first_use_on, self.statements, (create,), connected=True
            )
            return
        async with self.engine.connect() as conn:
            await conn.run_sync(self._first_use, create)
        if self._link is not None:
            # The engine's pool serves the rare calls over a ``Connection`` only (the
            # run ledger, history, a session lease): it keeps no idle connection of
            # this loop's after the first use (the model's own pool keeps one).
            await self.engine.dispose()

    def _first_use_on(self, conn: Any, statements: Any, create: bool) -> None:
        self._first_use(conn, create)

    def _set_up(self) -> None:
        # Each call ends within ``timeout`` (seconds) on a server joblocks connects to
        # (SQLite's waits are bounded by its busy timeout); None: unbounded.
        single_file = self.statements.profile.single_file
        self._bound_s = None if single_file or not self.owns_engine else self.timeout_ms / 1000
        self._one_hand_off = hands_off_per_statement(self.engine.sync_engine.dialect)
        self._loop_sqlite: LoopSQLite | None = None
        # The connection kept for the renewals of this model's keep-alive leases, on
        # the loop of ``_keeper_loop`` (see ``_on_keeper``).
        # (A ``_raw.Raw`` on the asyncio driver's own connections.)
        self._keeper: Any = None
        self._keeper_lock: asyncio.Lock | None = None
        self._first_use_lock: tuple[weakref.ref[asyncio.AbstractEventLoop], asyncio.Lock] | None = (
            None
        )
        self._keeper_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._keeper_task: asyncio.Task[None] | None = None
        # An engine joblocks made on a server: the operations' statements are awaited
        # on the asyncio driver's own connections (``_async.raw``), no greenlet.
        self._link: Link | None = None
        self._raw_pool: RawPool | None = None
        # aiomysql: asyncio cuts a call the watchdog abandoned this long after it began
        # (seconds), should it not end by itself.
        self._cut_late = self.statements.profile.bounds_async_calls
        self._late_s = self.timeout_ms / 1000 + _ABANDON_GRACE_S
        if self.owns_engine and not single_file and raw_usable(self.engine):
            self._link = Link(self.engine, self.timeout_ms)
        url = self._url
        if url is not None and self.statements.profile.single_file and loop_usable(url):
            self._loop_sqlite = LoopSQLite(url, self.timeout_ms)
            weakref.finalize(self, self._loop_sqlite.close)

    def _in_greenlet(self, step: Attempt | Connected) -> Any:
        # Check-out, statements and check-in in one greenlet: ``async with
        # engine.connect()`` + ``run_sync`` takes three. (An engine joblocks made on a
        # server never comes here for an operation: see ``_on_raw``.)
        one_key = step.fn in _ops.IN_PLACE
        conn = self.engine.sync_engine.connect()
        try:
            return self._send(conn, step, one_key)
        finally:
            conn.close()

    def _send(self, conn: Any, step: Attempt | Connected, one_key: bool) -> Any:
        """``step`` on ``conn`` (in a greenlet: an operation's statements sent, or a
        function of the connection called), abandoned (``NoReply``) when it does not end
        in time: within ``timeout``, and by ``step.until``."""
        fn = step.fn
        args = step.args
        bound_s = self._bound_s
        until = step.until
        if bound_s is None and until is None:
            if one_key and self._one_hand_off:
                # aiosqlite: no hand-off to its thread unless another writer is in
                # the way.
                return in_place(conn, self.statements, fn, args)
            if step.__class__ is Attempt:
                return run(conn, fn(self.statements, *args))
            return fn(conn, self.statements, *args)
        started = time.monotonic()
        at = started + bound_s if bound_s is not None else until
        if until is not None and until < at:  # type: ignore[operator]
            at = until
        assert at is not None  # noqa: S101 - one of the two is set
        bound = Bound(at, conn.connection.dbapi_connection)
        try:
            if one_key and self._one_hand_off:
                result = in_place(conn, self.statements, fn, args)
            elif step.__class__ is Attempt:
                result = run(conn, fn(self.statements, *args))
            else:
                result = fn(conn, self.statements, *args)
        except BaseException as exc:
            if bound.end():
                with contextlib.suppress(Exception):
                    conn.invalidate()
                raise NoReply((at - started) * 1000) from exc
            raise
        if bound.end():
            with contextlib.suppress(Exception):
                conn.invalidate()
            raise NoReply((at - started) * 1000)
        return result

    # -- the asyncio driver's own connections (an engine joblocks made, a server) ------

    def _here(self) -> RawPool:
        """The model's connections on the running event loop (a pool of another loop,
        one gone by, is closed)."""
        loop = asyncio.get_running_loop()
        pool = self._raw_pool
        if pool is not None and pool.loop is loop and not pool.closed:
            return pool
        if pool is not None:
            pool.close()
            kept = self._keeper
            if isinstance(kept, Raw):  # of that pool
                self._keeper = None
                forget(kept)
        assert self._link is not None  # noqa: S101 - the raw path only
        pool = self._raw_pool = RawPool(self._link, loop)
        return pool

    async def _on_raw(self, step: Attempt) -> Any:
        """``step`` on a connection of the model's pool on this loop."""
        pool = self._here()
        raw = pool.idle_now()
        if raw is None:
            raw = await pool.take()
        try:
            if self._cut_late:
                return await bounded_at(self._sent(pool.link, raw, step), self._late_s)
            return await self._sent(pool.link, raw, step)
        finally:
            pool.put(raw)

    async def _sent(self, link: Link, raw: Raw, step: Attempt) -> Any:
        """The statements of the operation ``step`` sent on ``raw`` one after the other
        (each result sent back in, each error thrown in at the ``yield``, wrapped as
        ``_raw.send`` wraps it), abandoned (``NoReply``) when they do not end within
        ``timeout``, nor by ``step.until``: the watchdog cancels the statement
        server-side and shuts the socket down (``_db.deadline``); on aiomysql asyncio
        also cuts the call a little later (``_late_s``), should it not end by itself.
        The connection of a call abandoned, cut off or cancelled mid-statement is never
        used again."""
        started = time.monotonic()
        at = started + link.timeout_s
        until = step.until
        if until is not None and until < at:
            at = until
        bound = Bound(at, raw.driver)
        sent = step.fn(self.statements, *step.args)
        put = sent.send
        execute = raw.execute
        cursor = raw.cursor
        try:
            stmt, values = put(None)
            while True:
                pick = stmt._pick  # stmt.params(values), inlined: this runs per statement
                params = dict(values) if pick is None else pick(values)
                try:
                    result = await execute(cursor, stmt.sql, params)
                except BaseException as exc:
                    failure = link.failure(raw, stmt.sql, params, exc)
                    if failure is None:
                        stmt, values = sent.throw(exc)
                    else:
                        failure.__cause__ = exc  # raise failure from exc
                        failure.__suppress_context__ = True
                        stmt, values = sent.throw(failure)
                else:
                    stmt, values = put(result)
        except StopIteration as done:
            result = done.value
        except BaseException as exc:
            if bound.end():
                raw.lost = True
                raise NoReply((at - started) * 1000) from exc
            raise
        if bound.end():
            raw.lost = True
            raise NoReply((at - started) * 1000)
        return result

    @property
    def _io_timeout(self) -> float | None:
        # Each call on a server is abandoned at ``timeout`` by the watchdog
        # (``_db.deadline``); aiomysql, which has no read/write timeout of its own, is also
        # cut by asyncio a little later, should the abandoned call not end by itself.
        if self.statements.profile.bounds_async_calls:
            return self.timeout_ms / 1000 + _ABANDON_GRACE_S
        return None

    async def _close_connections(self) -> None:
        """Close the model's connections (and its engine, if joblocks made it)."""
        await self._let_keeper_go()
        pool, self._raw_pool = self._raw_pool, None
        if pool is not None:
            pool.close()
        if self._loop_sqlite is not None:
            self._loop_sqlite.close()
        if self.owns_engine:
            await self.engine.dispose()
