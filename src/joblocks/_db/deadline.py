"""Deadlines kept on this process's own clock, by a thread that never waits on I/O.

A holder must learn that its lease ran out from its own monotonic clock, not from a
database call that may never return (a stalled pooler or load balancer keeps the socket
open and forwards nothing); and every database call must end within the model's
``timeout`` whether or not a reply comes. Both are alarms of one :class:`Watchdog`: a
daemon thread per process that sleeps until the earliest armed alarm is due and runs
its callback. A callback never blocks: it marks, signals, shuts a socket down, or
starts a short thread.

- :func:`loss_margin_s`: how long before the end of its ttl (measured from just before
  the grant or renewal was sent) a keep-alive lease is declared lost, to allow for the
  two clocks drifting apart and for the holder's reaction.
- :func:`abandon`: give up a call in flight: its statement is cancelled server-side
  where the driver allows (PostgreSQL's cancel request, MariaDB's ``KILL QUERY``,
  SQLite's ``interrupt()``), and the socket is shut down so the blocked call returns at
  once (a relay that stopped forwarding would never deliver the cancel's effect). The
  connection is then invalidated by its caller: never reused, never back in a pool.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import socket
import threading
import time
from typing import Any, Callable

from .._util import process as _process
from .._util.errors import NoReply

__all__ = ["NoReply", "abandon", "loss_margin_s", "watchdog"]

log = logging.getLogger("joblocks")

#: A keep-alive lease is declared lost this share of its ttl before the ttl runs out
#: (by this process's monotonic clock, from just before the grant or the last renewal
#: that landed was sent)...
LOSS_MARGIN_SHARE = 0.05
#: ... but at least this long before (seconds) ...
LOSS_MARGIN_MIN_S = 0.02
#: ... and at most this long (seconds); never more than half the ttl.
LOSS_MARGIN_MAX_S = 5.0
#: How long a server-side cancel may take, at most (seconds; it runs on a thread of its
#: own, the caller does not wait for it).
CANCEL_TIMEOUT_S = 5.0


def loss_margin_s(ttl_ms: float) -> float:
    """Seconds before the end of its ttl at which a keep-alive lease counts as lost:
    5 % of the ttl, at least 20 ms and at most 5 s, never more than half the ttl.

    The margin covers the two clocks (this process's monotonic clock and the
    database's) running at slightly different rates (NTP allows 500 ppm) and the time
    the holder needs to hear of the loss (``on_lost``, a signal to a command).
    """
    ttl_s = ttl_ms / 1000
    share = min(max(ttl_s * LOSS_MARGIN_SHARE, LOSS_MARGIN_MIN_S), LOSS_MARGIN_MAX_S)
    return min(ttl_s / 2, share)


#: An alarm's callback takes no argument (:meth:`Watchdog.arm`).
_NO_ARG: Any = object()


class Alarm:
    """One armed deadline of the :class:`Watchdog`: at ``at``, ``fire(arg)`` runs on the
    watchdog's thread (``fire()`` when no ``arg`` is given) unless :meth:`disarm` came
    first; :meth:`disarm` says if it fired."""

    __slots__ = ("arg", "at", "fire", "fired", "live")

    def __init__(self, at: float, fire: Callable[..., None], arg: Any = _NO_ARG) -> None:
        self.at = at
        self.fire = fire
        self.arg = arg
        self.live = True
        self.fired = False

    def disarm(self) -> bool:
        """Stop the alarm; True when it had fired already (its callback ran or runs)."""
        with watchdog._lock:
            self.live = False
            return self.fired

    def _run(self) -> None:
        if self.arg is _NO_ARG:
            self.fire()
        else:
            self.fire(self.arg)


class Watchdog:
    """One daemon thread running alarms at their monotonic times (see module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, Alarm]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._waking_at = float("inf")
        self._dead = 0

    def arm(self, at: float, fire: Callable[[], None]) -> Alarm:
        """Run ``fire()`` on the watchdog's thread at monotonic ``at`` unless disarmed."""
        return self.push(Alarm(at, fire))

    def push(self, alarm: Alarm) -> Alarm:
        """Arm ``alarm`` (made, not yet armed)."""
        at = alarm.at
        with self._lock:
            heapq.heappush(self._heap, (at, next(self._seq), alarm))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="joblocks-watchdog", daemon=True
                )
                self._thread.start()
            elif at < self._waking_at:
                self._cond.notify()
        return alarm

    def _run(self) -> None:
        # Callbacks run under the lock: a caller whose ``disarm`` says "fired" knows the
        # callback is over (e.g. done with the socket it shut down before it is closed).
        with self._cond:
            while True:
                now = time.monotonic()
                heap = self._heap
                while heap and (heap[0][0] <= now or not heap[0][2].live):
                    alarm = heapq.heappop(heap)[2]
                    if alarm.live:
                        alarm.live = False
                        alarm.fired = True
                        try:
                            alarm._run()
                        except Exception:
                            log.exception("joblocks: a deadline callback failed")
                if len(heap) > 256 and len(heap) > 4 * sum(1 for e in heap if e[2].live):
                    self._heap = heap = [e for e in heap if e[2].live]
                    heapq.heapify(heap)
                self._waking_at = heap[0][0] if heap else float("inf")
                self._cond.wait(None if not heap else max(0.0, heap[0][0] - now))
                self._waking_at = float("-inf")

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap = []
        self._thread = None
        self._waking_at = float("inf")


watchdog = Watchdog()
_process.on_fork(watchdog._after_fork)


def in_thread(fn: Callable[[], None], name: str) -> None:
    """Run ``fn`` on a short daemon thread of its own (a callback that may block)."""
    threading.Thread(target=fn, name=name, daemon=True).start()


# -- abandoning a call in flight -------------------------------------------------------


def abandon(dbapi_connection: Any) -> None:
    """Cancel the statement running on ``dbapi_connection`` server-side (on a thread of
    its own) and shut its socket down, so that the call blocked on it returns now.

    ``dbapi_connection`` is the driver's connection (psycopg, PyMySQL, sqlite3) or
    SQLAlchemy's asyncio adapter of one (psycopg, aiomysql, aiosqlite). Never blocks.
    """
    driver = getattr(dbapi_connection, "driver_connection", None) or dbapi_connection
    module = type(driver).__module__.split(".")[0]
    try:
        if module == "psycopg":
            _abandon_psycopg(driver)
        elif module in ("pymysql", "aiomysql"):
            _abandon_mysql(driver)
        elif module in ("sqlite3", "aiosqlite"):
            raw = getattr(driver, "_conn", driver)  # aiosqlite's sqlite3 connection
            raw.interrupt()
    except Exception as exc:  # already closed, or not a connection we know
        log.debug("joblocks: abandoning a call: %s", exc)


def _shutdown(fd: int) -> None:
    """Shut the socket of file descriptor ``fd`` down both ways (it stays open: its
    owner closes it). A call blocked reading it returns at once with an error."""
    sock = socket.socket(fileno=fd)
    try:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()


def _abandon_psycopg(driver: Any) -> None:
    pgconn = driver.pgconn
    cancel: Any = None
    with contextlib.suppress(Exception):
        from psycopg import capabilities

        # libpq >= 17's non-blocking cancel request (an older libpq's blocks the
        # process: that one is not sent).
        if capabilities.has_cancel_safe():
            cancel = pgconn.cancel_conn()  # no I/O: the backend's pid and cancel key

    def request() -> None:
        from psycopg import generators, waiting

        try:
            cancel.start()
            waiting.wait_conn(generators.cancel(cancel), interval=0.1, timeout=CANCEL_TIMEOUT_S)
        except Exception as exc:  # e.g. through a relay that forwards nothing
            log.debug("joblocks: cancelling an abandoned statement: %s", exc)
        finally:
            cancel.finish()

    if cancel is not None:
        in_thread(request, "joblocks-cancel")
    _shutdown(pgconn.socket)


def _abandon_mysql(driver: Any) -> None:
    ids = getattr(driver, "server_thread_id", None)  # PyMySQL, aiomysql: a 1-tuple
    thread_id = ids[0] if ids else None
    host, port = getattr(driver, "host", None), getattr(driver, "port", None)
    user = getattr(driver, "user", None)
    password = getattr(driver, "password", getattr(driver, "_password", None))

    def kill() -> None:
        import pymysql  # type: ignore[import-untyped, unused-ignore]

        if not thread_id or not host:
            return
        with contextlib.suppress(Exception):
            other = pymysql.connect(
                host=host,
                port=port,
                user=user,
                password=password or "",
                connect_timeout=CANCEL_TIMEOUT_S,
                read_timeout=CANCEL_TIMEOUT_S,
                write_timeout=CANCEL_TIMEOUT_S,
            )
            try:
                with other.cursor() as cursor:
                    cursor.execute(f"KILL QUERY {int(thread_id)}")
            finally:
                other.close()

    in_thread(kill, "joblocks-cancel")
    sock = getattr(driver, "_sock", None)  # PyMySQL
    if sock is None:  # aiomysql: its stream's transport
        writer = getattr(driver, "_writer", None)
        sock = None if writer is None else writer.get_extra_info("socket")
    if sock is not None:
        _shutdown(sock.fileno())


class Bound(Alarm):
    """The bound of one call: at ``at``, the call on ``dbapi_connection`` is abandoned
    (an alarm armed as it is made: one object and one lock round per call)."""

    __slots__ = ()

    def __init__(self, at: float, dbapi_connection: Any) -> None:
        Alarm.__init__(self, at, abandon, dbapi_connection)
        watchdog.push(self)

    #: The call returned (or raised): True when it was abandoned meanwhile.
    end = Alarm.disarm
