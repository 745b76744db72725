"""The command that ``joblocks run`` starts: its holder id, its environment, the signals
joblocks catches and passes on to it, its parent-death signal, and how it is shown."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Callable

from ._common import EXIT_LOST, operator
from ._format import printable

if TYPE_CHECKING:
    from .._sync.model import Lease


class Interrupted(BaseException):
    """A signal arrived before the command started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def holder_id() -> str:
    """The holder written into the row: ``user@host:pid:<worker uuid>``.

    Readable in ``joblocks list``, and unique per run thanks to the worker id.
    """
    from .._util.process import worker_id

    prefix = f"{operator()}:{os.getpid()}:".encode()[:200].decode("utf-8", "ignore")
    return prefix + worker_id()


#: Signals left alone: uncatchable, not ending a process by default, ignored by Python
#: (SIGPIPE), or reporting a fault of joblocks itself (the parent-death signal then
#: stops the command).
_NOT_CAUGHT = (
    "SIGKILL",
    "SIGSTOP",
    "SIGCHLD",
    "SIGCONT",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGWINCH",
    "SIGPIPE",
    "SIGSEGV",
    "SIGBUS",
    "SIGFPE",
    "SIGILL",
    "SIGSYS",
    "SIGTRAP",
    "SIGABRT",
)
#: Sent by a terminal to its whole foreground process group, the command included.
_FROM_TERMINAL = ("SIGINT", "SIGQUIT", "SIGHUP")
#: ``--max-hold``: SIGKILL this long after the SIGTERM at most (less for a short ttl).
KILL_GRACE_S = 10.0


def forwarded_signals() -> list[int]:
    """The signals joblocks catches (and passes on to the command)."""
    skip = {int(getattr(signal, name)) for name in _NOT_CAUGHT if hasattr(signal, name)}
    found: list[int] = []
    for sig in sorted(int(s) for s in signal.valid_signals()):
        if sig in skip:
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue
        except (OSError, ValueError):
            continue
        found.append(sig)
    return found


def from_terminal(signum: int) -> bool:
    return any(getattr(signal, name, None) == signum for name in _FROM_TERMINAL)


_PR_SET_PDEATHSIG = 1


def parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send SIGKILL to the command when joblocks
    dies (Linux; None elsewhere).

    The setting follows the *thread* that forked: joblocks starts the command from its
    main thread, which lives as long as joblocks. If joblocks died between the fork and
    the setting, the command is not started.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    number = int(signal.SIGKILL)

    def arm() -> None:  # in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, number, 0, 0, 0)
        if os.getppid() != parent:  # joblocks died before it was armed
            os._exit(EXIT_LOST)

    return arm


def command_env(lease: Lease, url: str) -> dict[str, str]:
    """The command's environment: joblocks's, plus the lock it runs under.

    ``JOBLOCKS_URL`` carries the password of the URL, if it has one: the command runs
    as the same user, who gave that URL, and needs it to fence its writes. joblocks
    never prints it.
    """
    env = dict(os.environ)
    env["JOBLOCKS_KEY"] = lease._group[0] if lease._group is not None else lease.key
    env["JOBLOCKS_TOKEN"] = str(lease.token)
    env["JOBLOCKS_HOLDER"] = lease.holder
    env["JOBLOCKS_URL"] = url
    return env


def terminal_foreground() -> bool:
    """Whether joblocks is in the foreground process group of its terminal."""
    if not hasattr(os, "tcgetpgrp"):
        return False
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def command_text(command: list[str]) -> str:
    import shlex

    text = printable(shlex.join(command))
    return text if len(text) <= 200 else text[:197] + "..."
