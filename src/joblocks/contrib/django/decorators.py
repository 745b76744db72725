"""``single_instance_command``: one running instance of a management command at a time."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar, cast

from ... import run_with_lock
from .. import _support

Handle = TypeVar("Handle", bound=Callable[..., Any])


def command_name(command: object) -> str:
    """The name ``manage.py`` knows a command by: the last part of its module's name."""
    module = type(command).__module__
    name = module.rsplit(".", 1)[-1]
    return name if name and name != "__main__" else type(command).__name__


def single_instance_command(
    ttl: _support.Duration,
    *,
    key: str | None = None,
    using: str | None = None,
    keepalive: bool = False,
    renew_every: _support.Duration | None = None,
    min_hold: _support.Duration | None = None,
    wait: _support.Duration | None = None,
    max_hold: _support.Duration | None = None,
) -> Callable[[Handle], Handle]:
    """Decorate ``BaseCommand.handle`` so that only one instance runs at a time.

    The command runs under :func:`joblocks.run_with_lock` with lock ``key`` (default:
    the command's name, e.g. ``"clearsessions"``) for ``ttl`` (ms or timedelta) in the
    database ``using`` (default: ``settings.JOBLOCKS_DATABASE``). When another instance
    holds the lock, one line goes to the command's stderr and ``handle`` returns None
    without running (exit status 0). ``keepalive``, ``renew_every``, ``min_hold``,
    ``wait`` and ``max_hold`` are passed on to ``run_with_lock``; like ``ttl``, they
    are milliseconds (int or float) or a ``datetime.timedelta``.
    """
    _support.duration_ms(ttl, "ttl")
    if key is not None:
        _support.lock_key(key, "key")

    def decorate(handle: Handle) -> Handle:
        if not callable(handle):
            raise TypeError(f"single_instance_command decorates a method, not {handle!r}")

        @functools.wraps(handle)
        def wrapper(self: Any, *args: Any, **options: Any) -> Any:
            from . import get_model

            lock_key = key if key is not None else command_name(self)
            result: list[Any] = []
            ran = run_with_lock(
                lock_key,
                ttl,
                lambda: result.append(handle(self, *args, **options)),
                model=get_model(using),
                keepalive=keepalive,
                renew_every=renew_every,
                min_hold=min_hold,
                wait=wait,
                max_hold=max_hold,
            )
            if not ran:
                _skipped(self, command_name(self), lock_key)
                return None
            return result[0]

        return cast("Handle", wrapper)

    return decorate


def _skipped(command: Any, name: str, lock_key: str) -> None:
    message = f"{name}: skipped, another instance holds the lock {lock_key!r}"
    stderr = getattr(command, "stderr", None)
    if stderr is not None and callable(getattr(stderr, "write", None)):
        stderr.write(message)  # Django's OutputWrapper adds the newline
    else:
        print(message, file=sys.stderr)
