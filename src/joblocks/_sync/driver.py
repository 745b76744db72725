"""The sync face's driver: a model's connections, and ``_drive``, which does each step of
a life-cycle generator (``_core.lifecycle``, ``_core.steps``) by blocking calls: ``time.sleep``,
a connection of its cache, a connection kept for keep-alive renewals, one kept for a
lease's session lock. ``JobLockModel`` (``_sync.model``) is a driver."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, Callable, TypeVar

from sqlalchemy import Connection, Engine

from .._core import steps as _steps
from .._core.base import ModelCore
from .._core.steps import Attempt, Backoff, Connected, Emit, FirstUse, Session, Sleep, Steps, Work
from .._db.connections import ConnectionCache
from .._db.deadline import Bound
from .._db.execute import run
from .._sql.statements import Sent
from .._util.drivers import reply_timed_out
from .._util.errors import NoReply, translate

T = TypeVar("T")


class Driver(ModelCore):
    """How the sync face does a step: the part of ``JobLockModel`` below its methods."""

    def _set_up(self) -> None:
        self._cache = (
            ConnectionCache(self.engine, ping=self.statements.profile.ping)
            if self.owns_engine
            else None
        )
        self._table_lock = threading.Lock()
        # Each call ends within ``timeout`` (seconds) on a server joblocks connects to
        # (SQLite's waits are bounded by its busy timeout); None: unbounded.
        single_file = self.statements.profile.single_file
        self._bound_s = None if single_file or not self.owns_engine else self.timeout_ms / 1000
        # The connection kept for the renewals of this model's keep-alive leases.
        self._keeper: Connection | None = None
        self._keeper_lock = threading.Lock()
        # Closed connections when the model is dropped without dispose() (no
        # ResourceWarning from unclosed SQLite connections, no idle server sessions).
        weakref.finalize(self, _close, self._cache, self.engine if self.owns_engine else None)

    # -- connections ---------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self._cache is not None:
            with self._cache.connection() as cached:
                yield cached
            return
        with self.engine.connect() as fresh:
            yield fresh

    def _call(self, operation: str, fn: Callable[..., Sent[T]], *args: Any) -> T:
        return self._drive(_steps.call(self, operation, fn, *args))

    def _drive(self, steps: Steps[T]) -> T:
        """Run the life-cycle generator ``steps`` to its end, doing each step it yields
        by blocking calls (see ``_core.lifecycle``)."""
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            result = error = None
            try:
                cls = step.__class__
                if cls is Attempt or cls is Connected:
                    result = self._attempt(step)  # type: ignore[arg-type]
                elif isinstance(step, Emit):
                    step.deliver()
                elif isinstance(step, Sleep):
                    time.sleep(step.seconds)
                elif isinstance(step, Backoff):
                    pause = step.pause()
                    if pause is not None:
                        time.sleep(pause)
                    result = pause is not None
                elif isinstance(step, FirstUse):
                    self._create_table()
                elif isinstance(step, Work):
                    step.work()
                elif isinstance(step, Session):
                    result = self._session(step)
                else:
                    result = self._drive(step.steps)  # type: ignore[union-attr]
            except BaseException as exc:  # thrown back in at the yield
                error = exc

    def _attempt(self, step: Attempt | Connected) -> Any:
        """One try of ``step`` on a connection of the model."""
        if step.keeper:
            return self._on_keeper(step)
        cache = self._cache
        if cache is None:
            with self.engine.connect() as fresh:
                return self._send(fresh, step)
        # The cache's context manager, inlined: this runs on every call.
        conn = cache.take()
        try:
            result = self._send(conn, step)
        except BaseException:
            cache.put_after_error(conn)
            raise
        cache.put(conn)
        return result

    def _send(self, conn: Connection, step: Attempt | Connected) -> Any:
        """``step`` on ``conn`` (an operation's statements sent, or a function of the
        connection called), abandoned (``NoReply``) when it does not end in time:
        within ``timeout``, and by ``step.until``."""
        bound_s = self._bound_s
        until = step.until
        if bound_s is None and until is None:
            if step.__class__ is Attempt:
                return run(conn, step.fn(self.statements, *step.args))
            return step.fn(conn, self.statements, *step.args)
        started = time.monotonic()
        at = started + bound_s if bound_s is not None else until
        if until is not None and until < at:  # type: ignore[operator]
            at = until
        assert at is not None  # noqa: S101 - one of the two is set
        bound = Bound(at, conn.connection.dbapi_connection)
        try:
            if step.__class__ is Attempt:
                result = run(conn, step.fn(self.statements, *step.args))
            else:
                result = step.fn(conn, self.statements, *step.args)
        except BaseException as exc:
            # Abandoned by the deadline; or the driver's own read time-out (PyMySQL's
            # is the model's ``timeout``, or a URL's own) came first: either way the
            # statement may have reached the server and its reply never came.
            if bound.end():
                _invalidate(conn)
                raise NoReply((at - started) * 1000) from exc
            if reply_timed_out(exc):
                _invalidate(conn)
                raise NoReply((time.monotonic() - started) * 1000) from exc
            raise
        if bound.end():
            _invalidate(conn)
            raise NoReply((at - started) * 1000)
        return result

    # -- the keep-alive connection -------------------------------------------------

    def _keep_connection(self) -> None:
        """Make sure the model keeps a connection for its keep-alive renewals (taken
        when a keep-alive lease is granted: on a model of joblocks's own engine, the
        connection that granted it, idle in the cache). Best effort: without one, the
        next renewal opens it."""
        with self._keeper_lock:
            if self._keeper is not None and not self._keeper.invalidated:
                return
            try:
                self._keeper = self._cache.take() if self._cache else self.engine.connect()
            except Exception:
                self._keeper = None

    def _on_keeper(self, step: Attempt | Connected) -> Any:
        with self._keeper_lock:
            conn = self._keeper
            if conn is None or conn.invalidated or conn.closed:
                self._keeper = None
                conn = self._cache.take() if self._cache else self.engine.connect()
                self._keeper = conn
            try:
                return self._send(conn, step)
            except BaseException:
                if conn.invalidated or conn.closed:
                    self._keeper = None
                    _discard(conn)
                raise

    def _let_keeper_go(self) -> None:
        """The model has no keep-alive lease left: its kept connection goes back."""
        with self._keeper_lock:
            conn, self._keeper = self._keeper, None
        if conn is None:
            return
        if self._cache is not None and not (conn.invalidated or conn.closed):
            self._cache.put(conn)
        else:
            _discard(conn)

    def _session(self, step: Session) -> Any:
        """A connection kept for a lease's life (see ``_steps.Session``)."""
        conn = self.engine.connect() if step.conn is None else step.conn
        try:
            result = None if step.fn is None else step.fn(conn, self.statements, *step.args)
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        if step.conn is None:
            return conn, result
        if step.close:
            conn.close()
        return result

    def _create_table(self) -> None:
        with self._table_lock:
            if self.table_ready:
                return
            with translate(self._first_use_name, self.database), self._connection() as conn:
                self._first_use(conn, self._create)
            self.table_ready = True

    def _close_connections(self) -> None:
        """Close the model's connections (and its engine, if joblocks made it)."""
        _close(self._cache, self.engine if self.owns_engine else None)


def _invalidate(conn: Connection) -> None:
    """Never use ``conn`` again (its owner closes it; its pool replaces it)."""
    with contextlib.suppress(Exception):
        conn.invalidate()


def _discard(conn: Connection) -> None:
    """Never use ``conn`` again: invalidated (its pool replaces it) and closed."""
    with contextlib.suppress(Exception):
        conn.invalidate()
    with contextlib.suppress(Exception):
        conn.close()


def _close(cache: ConnectionCache | None, engine: Engine | None) -> None:
    if cache is not None:
        cache.close()
    if engine is not None:
        engine.dispose()
