"""``joblocks run``: run a command only while holding a lock.

Signals: every signal whose default action would end joblocks, and that can be caught
(SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
SIGXCPU, SIGXFSZ, SIGIO, SIGPWR, SIGSTKFLT and the real-time signals), is caught.
While the command runs it is passed on to it, and the lock is released once the
command has exited: the lock never ends before the command. SIGINT, SIGQUIT and SIGHUP
are not passed on when joblocks runs in the foreground of a terminal: the terminal
sent them to the command already (it is in joblocks's process group). A signal that
arrives before the command started (while waiting for the lock) ends joblocks with
128+N without starting it. Signals that were ignored when joblocks started stay
ignored, for joblocks and the command (``nohup`` keeps working). Not caught: SIGKILL
and SIGSTOP (they cannot be), SIGPIPE (Python ignores it), and the signals that report
a fault of joblocks itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP, SIGABRT).

The command gets a parent-death signal (Linux): when joblocks dies without letting it
go (SIGKILL, a crash), the kernel sends the command SIGKILL, so it never runs on
unlocked while nothing renews its lease.

Losing the lock while the command runs (a renewal refused, the database unreachable
until the lease ran out, or the ttl elapsed without keep-alive) prints a warning; by
default the command then gets SIGTERM, since the exclusion it ran under is gone, and
joblocks exits with 75. ``--on-lost continue`` only warns.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Union

from . import _run_args
from ._child import (
    KILL_GRACE_S,
    Interrupted,
    command_env,
    command_text,
    forwarded_signals,
    from_terminal,
    holder_id,
    parent_death_signal,
    terminal_foreground,
)
from ._common import (
    EXIT_CANNOT_EXECUTE,
    EXIT_LOST,
    EXIT_NOT_FOUND,
    open_model,
    resolve_url,
)
from ._format import err, format_duration, human_time, printable

if TYPE_CHECKING:
    from .._sync.model import JobLockModel, Lease

_Handler = Union[Callable[[int, Union[FrameType, None]], Any], int, None]


class _Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.key: str = args.key
        self.shown = printable(repr(self.key))
        self.command: list[str] = args.argv
        # "raise" while taking the lock, "forward" while the command runs, "record" else.
        self.mode = "raise"
        self.received: int | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.lost_reason: str | None = None
        # The command's own exit status (128 + N for signal N), None until it ended.
        self.command_status: int | None = None

    # -- signals ------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.mode == "raise":
            self.mode = "record"
            raise Interrupted(signum)
        if self.mode == "forward" and self.child is not None:
            self._forward(signum)
        elif self.received is None:
            self.received = signum

    def _forward(self, signum: int) -> None:
        child = self.child
        if child is None or child.returncode is not None:
            return
        if from_terminal(signum) and terminal_foreground():
            return  # the terminal signalled the whole foreground group, the command too
        with contextlib.suppress(OSError):  # already gone
            child.send_signal(signum)

    def _install(self, previous: dict[int, _Handler]) -> None:
        """Catch the signals, noting each one's previous handler in ``previous`` as it
        goes: a signal caught meanwhile raises ``Interrupted`` out of here."""
        for sig in forwarded_signals():
            with contextlib.suppress(OSError, ValueError):  # reserved by the C library
                previous[sig] = signal.signal(sig, self._on_signal)

    @staticmethod
    def _restore(previous: dict[int, _Handler]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    # -- the run ------------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        previous: dict[int, _Handler] = {}
        model: JobLockModel | None = None
        lease: Lease | None = None
        try:
            try:
                self._install(previous)
                if args.jitter:
                    import random

                    # Not for secrets: spreading starts over time.
                    time.sleep(random.uniform(0, args.jitter / 1000))  # noqa: S311
                model = open_model(args, create_table=True, timeout_ms=args.timeout)
                taken = model._try_lease(
                    self.key,
                    args.ttl,
                    holder=holder_id(),
                    keepalive=args.keepalive,
                    wait=args.wait,
                    min_hold=args.min_hold,
                    # Renewals stop at --max-hold; the lease then still lasts at least
                    # 2/3 of a ttl, more than the grace before SIGKILL (ttl/3 at most).
                    max_hold=args.max_hold if args.keepalive else None,
                    on_lost=self._on_lost if args.keepalive else None,
                    schedule=args.schedule,
                    record=args.record,
                    liveness=args.liveness,
                    max_holders=args.max_holders,
                )
                lease = taken.lease
            except Interrupted as exc:
                if lease is not None:  # the signal came right after the grant
                    self._release(lease)
                err(f"interrupted by signal {exc.signum} before the command started")
                return 128 + exc.signum
            self.mode = "record"
            if lease is None:
                from .._core.state import Skipped

                if isinstance(taken, Skipped):
                    if not args.quiet:
                        err(f"{taken.reason}; not running {command_text(self.command)}")
                    skip_code: int = args.skip_exit_code
                    return skip_code
                self._conflict(model)
                code: int = args.conflict_exit_code
                return code
            try:
                status = self._supervise(lease)
                # The ledger (--record) keeps the command's own status, not joblocks'
                # 75 for a lost lock (the run is "lost" then, whatever the status).
                own = self.command_status
                if own is None and self.lost_reason is None:
                    own = status  # not started: not found (127), cannot run (126), a signal
                if own:
                    from .._core.ledger import CommandFailed

                    lease._work_failed(CommandFailed(own))
                return status
            finally:
                self.mode = "record"
                self._release(lease)
        finally:
            self._restore(previous)
            if model is not None:
                model.dispose()

    def _supervise(self, lease: Lease) -> int:
        # The URL as it was given (--url, JOBLOCKS_URL or the default file).
        url = resolve_url(self.args)[0].render_as_string(hide_password=False)
        with self.lock:
            if self.lost_reason is not None:
                return EXIT_LOST
            if self.received is not None:
                err(f"interrupted by signal {self.received} before the command started")
                return 128 + self.received
            try:
                self.child = subprocess.Popen(  # noqa: S603 - the user's command
                    self.command,
                    env=command_env(lease, url),
                    preexec_fn=parent_death_signal(),
                )
            except FileNotFoundError:
                err(f"{printable(self.command[0])}: command not found")
                return EXIT_NOT_FOUND
            except OSError as exc:
                err(f"cannot run {printable(self.command[0])}: {exc.strerror or exc}")
                return EXIT_CANNOT_EXECUTE
            self.mode = "forward"
        if self.received is not None:  # arrived while the command was being started
            self._forward(self.received)
        timers: list[threading.Timer] = []
        if not self.args.keepalive:
            left = lease.remaining().total_seconds()
            reason = f"its ttl of {format_duration(self.args.ttl)} ran out (keep-alive is off)"
            timers.append(threading.Timer(left, self._lost, (reason,)))
        if self.args.max_hold is not None:
            timers.append(threading.Timer(self.args.max_hold / 1000, self._overran, (timers,)))
        for timer in timers:
            timer.daemon = True
            timer.start()
        try:
            returncode = self.child.wait()
        finally:
            self.mode = "record"
            with self.lock:
                for timer in timers:
                    timer.cancel()
        self.command_status = 128 - returncode if returncode < 0 else returncode
        if self.lost_reason is not None and self.args.on_lost == "terminate":
            return EXIT_LOST
        return self.command_status

    # -- --max-hold -----------------------------------------------------------------------

    def _overran(self, timers: list[threading.Timer]) -> None:
        """``--max-hold`` reached: SIGTERM now, SIGKILL after the grace period."""
        grace = min(KILL_GRACE_S, self.args.ttl / 3000)
        with self.lock:
            child = self.child
            if child is None or child.returncode is not None:
                return
            err(
                f"the command (pid {child.pid}) ran longer than --max-hold "
                f"{format_duration(self.args.max_hold)}: it gets SIGTERM, and SIGKILL "
                f"{format_duration(grace * 1000)} later if it still runs"
            )
            with contextlib.suppress(OSError):
                child.send_signal(signal.SIGTERM)
            kill = threading.Timer(grace, self._kill)
            kill.daemon = True
            timers.append(kill)
            kill.start()

    def _kill(self) -> None:
        with self.lock:
            child = self.child
            if child is None or child.returncode is not None:
                return
            err(f"the command (pid {child.pid}) outlived its grace period: SIGKILL")
            with contextlib.suppress(OSError):
                child.kill()

    # -- losing the lock ----------------------------------------------------------------

    def _on_lost(self, lease: Lease) -> None:
        self._lost(lease.lost_reason or "the lease was lost")

    def _lost(self, reason: str) -> None:
        with self.lock:
            if self.lost_reason is not None:
                return
            self.lost_reason = reason
            child = self.child
            if child is None:
                err(f"lost the lock {self.shown} before the command started ({reason})")
                return
            if child.returncode is not None:
                return
            if self.args.on_lost == "continue":
                err(
                    f"lost the lock {self.shown} while the command runs ({reason}); it keeps "
                    "running (--on-lost continue), but another run may start meanwhile"
                )
                return
            err(
                f"lost the lock {self.shown} while the command runs ({reason}); the exclusion "
                f"is gone, so the command (pid {child.pid}) gets SIGTERM and joblocks exits "
                f"with {EXIT_LOST}"
            )
            with contextlib.suppress(OSError):
                child.send_signal(signal.SIGTERM)

    # -- conflict and release -------------------------------------------------------------

    def _conflict(self, model: JobLockModel) -> None:
        args = self.args
        if args.quiet:
            return
        where = "held elsewhere"
        try:
            row = model.peek(self.key)
        except Exception:
            row = None
        if args.max_holders is not None:
            with contextlib.suppress(Exception):
                live = [r.holder for r in model.holders(self.key) if not r.expired]
                names = ", ".join(printable(h) for h in live)
                where = f"held by {len(live)} of {args.max_holders} holders ({names})"
        elif row is not None and not row.expired:
            left = format_duration(row.remaining.total_seconds() * 1000)
            where = (
                f"held by {printable(row.holder)} until {human_time(row.expires_at)} ({left} left)"
            )
        waited = f" after waiting {format_duration(args.wait)}" if args.wait else ""
        err(f"lock {self.shown} is {where}{waited}; not running {command_text(self.command)}")

    def _release(self, lease: Lease) -> None:
        from .._core.lifecycle import RELEASE_ATTEMPTS, release_retrying
        from .._util.errors import LockError

        try:
            # A failed release is sent again a few times, a few seconds at most.
            released = lease._model._drive(release_retrying(lease))
        except LockError as exc:
            err(
                f"could not release the lock {self.shown} ({RELEASE_ATTEMPTS} tries): {exc} "
                f"(it expires by itself within {format_duration(self.args.ttl)})"
            )
            return
        if not released and self.lost_reason is None:
            err(f"the lock {self.shown} was no longer held when the command ended")


def run(args: argparse.Namespace) -> int:
    """``joblocks run``: the command's exit code, or the conflict/lost/error code."""
    return _Run(args).run()


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``run`` to the subcommands ``sub`` (its arguments: ``_run_args``)."""
    _run_args.register(sub, common, run=run)


#: ``joblocks run``'s words split at ``--`` (see ``_run_args.split_command``).
split_command = _run_args.split_command
