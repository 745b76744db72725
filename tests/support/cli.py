"""The ``joblocks`` command line run in the test's own process, through its entry function.

``run_cli(*argv, env=..., input=..., cwd=..., umask=...)`` calls ``joblocks.cli.main``
as ``python -m joblocks`` would, and returns what the process would have shown: its exit
code, stdout and stderr (``returncode``, ``stdout``, ``stderr``, as
``subprocess.run(..., capture_output=True, text=True)`` names them). It saves a Python
start-up and the driver imports per call (about a second each on a loaded machine).

Output is captured at the file-descriptor level: descriptors 0, 1 and 2 point at
temporary files while ``main`` runs, and ``sys.stdin``/``sys.stdout``/``sys.stderr``
write to them, so the command of ``joblocks run`` (a real child process that inherits
descriptors 1 and 2) lands in the same place as the command line's own lines, as with a
subprocess. ``argparse``'s ``SystemExit`` becomes the exit code, and an exception that
would have ended the process is printed with its traceback and gives 1. Warnings are
filtered as in a plain ``python`` process (pytest's filters make them errors).

What a run could leave behind in the test's process is set and put back: the
environment (``env`` replaces ``os.environ`` for the call, as ``subprocess``'s ``env=``
does), the working directory, the umask, the standard streams and descriptors. What the
command line must restore by itself is checked after every call, so that a change that
leaks it fails the test that made the call: the signal handlers (``run`` catches every
signal while it runs) and the handlers of the ``joblocks`` logger. Every command
disposes of the model it opened (a PostgreSQL connection left open would show as a
leak in the server's connection count, not here).

Calls are serialised within a process (pytest-xdist workers are separate processes,
and run their tests one at a time). A call that must run *concurrently* with the test,
must receive signals, or is about the real process (its exit status, its imports, the
installed script), stays a real ``python -m joblocks`` process: see ``joblocks_argv``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping
from typing import IO, Any, NamedTuple

__all__ = ["Result", "joblocks_argv", "run_cli"]

_serial = threading.Lock()


class Result(NamedTuple):
    """What a ``joblocks`` run shows: exit code, stdout and stderr (text)."""

    returncode: int
    stdout: str
    stderr: str


def joblocks_argv(*args: str) -> list[str]:
    """``python -m joblocks ARGS``, for the few tests that need the real process."""
    return [sys.executable, "-m", "joblocks", *args]


def run_cli(
    *argv: str,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    umask: int | None = None,
) -> Result:
    """``joblocks ARGV`` in this process; see the module's docstring.

    ``env``: the whole environment of the call (None: this process's own);
    ``input``: what the command line (and its command) reads on stdin (default: nothing);
    ``cwd``: the working directory of the call; ``umask``: the umask of the call.
    """
    from joblocks.cli import main

    with _serial:
        handlers = _signal_handlers()
        log = logging.getLogger("joblocks")
        log_state = (list(log.handlers), log.level, log.propagate)
        with contextlib.ExitStack() as stack:
            stack.enter_context(_environment(env))
            if cwd is not None:
                stack.enter_context(_chdir(cwd))
            if umask is not None:
                stack.enter_context(_umask(umask))
            stack.enter_context(_default_warnings())
            out, err = stack.enter_context(_descriptors(input or ""))
            code = _call(main, list(argv))
        leaked = _restore_signal_handlers(handlers)
        log_leaked = (list(log.handlers), log.level, log.propagate) != log_state
        log.handlers[:] = log_state[0]
        log.setLevel(log_state[1])
        log.propagate = log_state[2]
    assert not leaked, f"joblocks {list(argv)} left signal handlers changed: {leaked}"
    assert not log_leaked, f"joblocks {list(argv)} left the joblocks logger changed"
    return Result(code, out.text, err.text)


def _call(main: Any, argv: list[str]) -> int:
    """``sys.exit(main(argv))`` as the interpreter would end the process: its status."""
    try:
        status: Any = main(argv)
    except SystemExit as exc:
        status = exc.code
    except Exception:  # what the interpreter prints for an uncaught exception
        traceback.print_exc()
        status = 1
    if status is None:
        return 0
    if isinstance(status, int):
        return status % 256
    print(status, file=sys.stderr)  # sys.exit("text"): printed, status 1
    return 1


class _Captured:
    """What one descriptor received, once the call is over."""

    text = ""


def _text(file: IO[bytes]) -> str:
    file.seek(0)
    data = file.read().decode()
    # subprocess's text mode reads with universal newlines
    return data.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _descriptors(input_text: str) -> Iterator[tuple[_Captured, _Captured]]:
    """Descriptors 0, 1, 2 and ``sys.std*`` on temporary files, put back afterwards."""
    out, err = _Captured(), _Captured()
    with contextlib.ExitStack() as files:
        stdin, out_file, err_file = (files.enter_context(tempfile.TemporaryFile()) for _ in "012")
        stdin.write(input_text.encode())
        stdin.seek(0)
        streams = (sys.stdin, sys.stdout, sys.stderr)
        for stream in streams[1:]:
            with contextlib.suppress(Exception):
                stream.flush()
        saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
        opened: list[IO[str]] = []
        try:
            for fd, target in ((0, stdin), (1, out_file), (2, err_file)):
                os.dup2(target.fileno(), fd)
            # As the interpreter sets them up for files: stderr keeps undecodable text.
            opened = [
                open(0, encoding="utf-8", closefd=False),  # noqa: SIM115 - closed below
                open(1, "w", encoding="utf-8", closefd=False),  # noqa: SIM115
                open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False),  # noqa: SIM115
            ]
            sys.stdin, sys.stdout, sys.stderr = opened
            yield out, err
        finally:
            for stream in opened:
                with contextlib.suppress(Exception):
                    stream.close()  # flushes; the descriptor stays open (closefd=False)
            sys.stdin, sys.stdout, sys.stderr = streams
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            out.text, err.text = _text(out_file), _text(err_file)


@contextlib.contextmanager
def _default_warnings() -> Iterator[None]:
    """The warning filters of a plain ``python`` process (no ``-W``, no
    ``PYTHONWARNINGS``), not pytest's (which make warnings errors)."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        # Each filter goes in front: the last one added is the first one tried.
        warnings.filterwarnings("ignore", category=ResourceWarning)
        warnings.filterwarnings("ignore", category=ImportWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        yield


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _chdir(path: str | os.PathLike[str]) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _signal_handlers() -> dict[int, Any]:
    found: dict[int, Any] = {}
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            found[int(sig)] = signal.getsignal(sig)
    return found


def _restore_signal_handlers(before: dict[int, Any]) -> list[str]:
    """Put back every handler that differs from ``before``; their names."""
    changed: list[str] = []
    for sig, handler in before.items():
        now = signal.getsignal(sig)
        if now != handler:
            changed.append(signal.strsignal(sig) or str(sig))
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    return changed
