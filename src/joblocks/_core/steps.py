"""The steps a face performs for the life cycle (``_core.lifecycle``), and the one call.

A life-cycle generator yields one of these and is sent its result back (or has
its error thrown in at the ``yield``): :class:`Attempt` (one try of an operation, a
generator of statements of ``_core.ops``, sent on a connection of the model),
:class:`Connected` (one try of a function that needs the connection itself),
:class:`Sleep`, :class:`Backoff` (the pause before the next try of a wait, or none when
the wait is over), :class:`Emit` (a lock event for the listeners: observers are I/O
too), :class:`FirstUse` (create the
table / open the database, once), :class:`Work` (the caller's work under a lease) and
:class:`Shielded` (steps a cancelled caller still gets done). :func:`call` (and
:func:`call_connected`) is every operation's first use, transient-error retry and error
translation, written once.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, TypeVar, Union

from .._db.execute import connected
from .._sql.statements import Sent
from .._util import process as _process
from .._util.drivers import StatementFailed, Transient
from .._util.errors import raise_translated
from . import ops as _ops
from .base import TRANSIENT_ATTEMPTS, log, transient_pause

if TYPE_CHECKING:
    from .base import ModelCore
    from .state import LeaseState

T = TypeVar("T")


class Attempt:
    """One try of the operation ``fn(statements, *args)`` (a generator of statements,
    ``_sql.statements.Sent``; no I/O of its own): the face sends its statements on one
    connection of the model (``_db.execute.run``).

    ``until``: a monotonic time the call must end by, besides the model's ``timeout``
    (a keep-alive renewal's lease deadline); ``keeper``: on the connection the model
    keeps for its keep-alive leases (a renewal, or the grant of a keep-alive lease), so
    that the process's other calls can never take it.
    """

    __slots__ = ("args", "fn", "keeper", "until")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        until: float | None = None,
        keeper: bool = False,
    ) -> None:
        self.fn = fn
        self.args = args
        self.until = until
        self.keeper = keeper


class Sleep:
    """Pause for ``seconds`` (``time.sleep`` or ``asyncio.sleep``)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Backoff:
    """Sleep before try ``attempt + 1`` of a wait of ``wait_ms`` (None: no wait) begun
    at ``started`` (monotonic seconds), at most ``most`` seconds (None: no cap): the
    face sends back True, or False without sleeping when the wait is over."""

    __slots__ = ("attempt", "most", "started", "wait_ms")

    def __init__(
        self, attempt: int, started: float, wait_ms: int | None, most: float | None = None
    ) -> None:
        self.attempt = attempt
        self.started = started
        self.wait_ms = wait_ms
        self.most = most

    def pause(self) -> float | None:
        """Seconds to sleep now (capped backoff with jitter), or None: the wait is over."""
        pause = _process.next_pause(self.attempt, self.started, self.wait_ms)
        if pause is None or self.most is None:
            return pause
        return min(pause, self.most)


class Emit:
    """Deliver one lock event (``_util.process``) to this process's listeners."""

    __slots__ = ("event",)

    def __init__(self, kind: _process.EventKind, key: str, holder: str, **fields: Any) -> None:
        self.event = (kind, key, holder, fields)

    def deliver(self) -> None:
        """Call the listeners (cheap when there are none); never raises."""
        kind, key, holder, fields = self.event
        _process.emit(kind, key, holder, **fields)


class FirstUse:
    """The model's once-only first step (create the table, open the database)."""

    __slots__ = ()


class Work:
    """Run the caller's ``work`` under ``lease`` (``cancel_on_loss``: asyncio only)."""

    __slots__ = ("cancel_on_loss", "lease", "work")

    def __init__(self, work: Callable[[], Any], lease: LeaseState, cancel_on_loss: bool) -> None:
        self.work = work
        self.lease = lease
        self.cancel_on_loss = cancel_on_loss


class Shielded:
    """Drive ``steps`` to the end even if the caller is cancelled meanwhile.

    ``undo``: when the caller was cancelled while ``steps`` ran, the face waits for
    them to end and, if they returned, drives ``undo(their result)`` (shielded too)
    before the cancellation goes on: an acquire whose grant no caller will receive
    releases it (see ``_lifecycle.take``).
    """

    __slots__ = ("steps", "undo")

    def __init__(self, steps: Steps[Any], undo: Callable[[Any], Steps[Any]] | None = None) -> None:
        self.steps = steps
        self.undo = undo


class Session:
    """A connection a lease keeps for its life (``liveness="session"``, see ``_core.liveness``).

    Without ``conn``: open a connection of the model's engine, run ``fn(conn,
    statements, *args)`` on it, and give back ``(conn, its result)``. With ``conn``
    (one such step gave): run ``fn`` on it (when not None) and give back its result,
    then close it if ``close``. On an error the connection is invalidated (never
    reused) and closed.
    """

    __slots__ = ("args", "close", "conn", "fn")

    def __init__(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        conn: Any = None,
        close: bool = False,
    ) -> None:
        self.fn = fn
        self.args = args
        self.conn = conn
        self.close = close


class Connected:
    """One try of ``fn(conn, statements, *args)``, a function over a SQLAlchemy
    ``Connection`` of the model (SQLAlchemy Core statements, reflection: the run
    ledger's writes and reads, the table's identity), not a generator of prepared
    statements. ``until``, ``keeper``: as :class:`Attempt`'s."""

    __slots__ = ("args", "fn", "keeper", "until")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        until: float | None = None,
        keeper: bool = False,
    ) -> None:
        self.fn = fn
        self.args = args
        self.until = until
        self.keeper = keeper


Step = Union[Attempt, Connected, Sleep, Backoff, Emit, FirstUse, Work, Shielded, Session]
Steps = Generator[Step, Any, T]

FIRST_USE = FirstUse()


# -- one call: first use, the transient-error retry, error translation ------------------


def call(
    model: ModelCore,
    operation: str,
    fn: Callable[..., Sent[T]],
    *args: Any,
    until: float | None = None,
    keeper: bool = False,
) -> Steps[T]:
    """The operation ``fn(statements, *args)`` on a connection, retried after deadlocks
    and serialization failures; a database failure comes out as ``LockBackendError``
    naming ``operation`` (``until``, ``keeper``: see :class:`Attempt`)."""
    return _tried(model, operation, Attempt(fn, args, until, keeper))


def call_connected(
    model: ModelCore,
    operation: str,
    fn: Callable[..., T],
    *args: Any,
    until: float | None = None,
    keeper: bool = False,
) -> Steps[T]:
    """:func:`call` for ``fn(conn, statements, *args)``, a function over a connection
    (:class:`Connected`; its driver errors normalized as an operation's are)."""
    return _tried(model, operation, Connected(connected(fn), args, until, keeper))


def _tried(model: ModelCore, operation: str, step: Attempt | Connected) -> Steps[Any]:
    # As a ``translate`` block would, but set up only on an error: this runs for
    # every call.
    try:
        if not model.table_ready:
            yield FIRST_USE
        attempt = 1
        while True:
            try:
                result = yield step
                return result
            except StatementFailed as exc:
                if attempt >= TRANSIENT_ATTEMPTS or not isinstance(exc, Transient):
                    raise
                log.debug("joblocks: %s retried after a transient error: %s", operation, exc)
                yield Sleep(transient_pause(attempt))
                attempt += 1
    except Exception as exc:
        raise_translated(operation, model.database, exc)
        raise


# -- one try of an acquire, and the grant that reaches no caller ---------------------------


class Try(NamedTuple):
    """What one try of an acquire found (each feature's ``take``): the grant (None:
    refused), the row it is for (a place's with ``max_holders``); with ``schedule=``
    the slot, and ``skip`` when that slot was already run (``_core.slots.Skip``)."""

    grant: _ops.Grant | None
    row: str
    slot: tuple[int, int] | None = None
    skip: Any = None


def acquire_once(model: ModelCore, key: str, holder: str, ttl_ms: int) -> Steps[Try]:
    """One try of a single lease's acquire, shielded: a caller cancelled while the grant
    is on its way still gets it released (asyncio), not left to nobody until its ttl."""
    grant = yield Shielded(
        call(model, "acquire", _ops.acquire, key, holder, ttl_ms),
        functools.partial(drop_grant, model, key, holder),
    )
    return Try(grant, key)


def drop_try(model: ModelCore, holder: str, got: Try) -> Steps[None]:
    """:func:`drop_grant` of a try's grant (the ``undo`` of a shielded try)."""
    return drop_grant(model, got.row, holder, got.grant)


def drop_grant(model: ModelCore, row: str, holder: str, grant: _ops.Grant | None) -> Steps[None]:
    """Release a grant no caller received (its row and token); never raises: on an
    error the row expires at the end of its ttl."""
    if grant is None:
        return
    try:
        yield from call(model, "release", _ops.release_lease, row, holder, grant.fence, 0, 0)
    except Exception as exc:
        log.warning("joblocks: releasing an unclaimed grant of %r failed: %s", row, exc)


def resumed(pending: Step, steps: Steps[T]) -> Steps[T]:
    """``steps`` again from the step ``pending`` it yielded last."""
    step = pending
    while True:
        try:
            result = yield step
        except BaseException as exc:
            try:
                step = steps.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                step = steps.send(result)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
