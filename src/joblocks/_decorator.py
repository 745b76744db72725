"""``@joblocks.single_instance``: run a function only where its lock can be taken.

One decorator serves both faces: a coroutine function is run under
:func:`joblocks.aio.run_with_lock`, any other function under
:func:`joblocks.run_with_lock`. The lock key may be a ``str.format`` template filled
from the call's arguments (``"report:{tenant}"``).
"""

from __future__ import annotations

import functools
import inspect
import re
import string
import uuid
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

from typing_extensions import Unpack

from ._core.base import log, wrong_face
from ._core.options import LeaseOptions, RunOptions, check_cancel_on_loss
from ._core.state import Outcome, Skipped
from ._sync.model import JobLockModel, Lease
from ._sync.run import release_quietly, run_request
from ._util import validate as _validate
from ._util.process import worker_id

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import ParamSpec

    from . import aio
    from ._core.schedule import Schedule

    P = ParamSpec("P")

R = TypeVar("R")

_FIELD_BASE = re.compile(r"[^.\[]*")


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine (``async def``, or an async ``__call__``)."""
    if inspect.iscoroutinefunction(fn):
        return True
    return (
        callable(fn)
        and not inspect.isroutine(fn)
        and inspect.iscoroutinefunction(type(fn).__call__)
    )


def _template_fields(template: str, name: str) -> list[str]:
    """The argument names a key template refers to (``"{user.id}"`` → ``user``)."""
    fields: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{name} {template!r} is not a valid format string: {exc}") from exc
    for _literal, field, spec, _conversion in parsed:
        if field is None:
            continue
        base = _FIELD_BASE.match(field)
        head = base.group(0) if base else ""
        if not head or head.isdigit():
            raise ValueError(
                f"{name} {template!r} has a positional placeholder {{{field}}}: name the "
                "argument instead, e.g. 'report:{tenant}'"
            )
        if not head.isidentifier():
            raise ValueError(f"{name} {template!r}: {{{field}}} does not name an argument")
        fields.append(head)
        if spec:
            fields.extend(_template_fields(spec, name))
    return fields


class KeyTemplate:
    """A lock key, possibly a ``str.format`` template over a function's arguments.

    The template is checked when it is made: a valid key on its own, placeholders by
    name only, and (given ``fn``) every name a parameter of ``fn`` unless ``fn`` takes
    ``**kwargs``. :meth:`render` fills it from one call's arguments, defaults applied.
    """

    __slots__ = ("_signature", "_var_keyword", "fields", "name", "template")

    def __init__(
        self, template: object, fn: Callable[..., Any] | None = None, name: str = "lock_key"
    ) -> None:
        self.name = name
        self.template = _validate.lock_key(template, name)
        self.fields = tuple(dict.fromkeys(_template_fields(self.template, name)))
        self._signature: inspect.Signature | None = None
        self._var_keyword: str | None = None
        if fn is not None:
            self.bind_to(fn)

    @property
    def is_static(self) -> bool:
        """True when the key has no placeholders (the same key for every call)."""
        return not self.fields

    def bind_to(self, fn: Callable[..., Any]) -> None:
        """Check the placeholders against ``fn``'s parameters; render from its calls."""
        if self.is_static:
            return
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{self.name} {self.template!r} has placeholders, but the signature of "
                f"{_describe(fn)} cannot be read: {exc}"
            ) from exc
        params = signature.parameters
        var_keyword = next(
            (p.name for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None
        )
        if var_keyword is None:
            unknown = [field for field in self.fields if field not in params]
            if unknown:
                raise ValueError(
                    f"{self.name} {self.template!r} names {', '.join(map(repr, unknown))}, "
                    f"which {'is not a parameter' if len(unknown) == 1 else 'are not parameters'}"
                    f" of {_describe(fn)} (parameters: {', '.join(params) or 'none'})"
                )
        self._signature = signature
        self._var_keyword = var_keyword

    def render(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key for one call: the template filled from ``args``/``kwargs``."""
        if self.is_static:
            return self.template
        if self._signature is None:
            raise RuntimeError("KeyTemplate.render needs bind_to(fn) first")
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        if self._var_keyword is not None:
            for name, value in values.get(self._var_keyword, {}).items():
                values.setdefault(name, value)
        try:
            key = self.template.format_map(values)
        except KeyError as exc:
            raise ValueError(
                f"{self.name} {self.template!r}: this call has no argument {exc.args[0]!r}"
            ) from None
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{self.name} {self.template!r} cannot be filled from this call: {exc}"
            ) from exc
        return _validate.lock_key(key, self.name)


def _describe(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def check_decoratable(fn: object) -> None:
    """Reject what a lock around one call cannot cover: non-callables and generators."""
    if not callable(fn):
        raise TypeError(f"single_instance decorates a callable, not {type(fn).__name__}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"{_describe(fn)} is a generator function: the lock would be released before "
            "its body runs; decorate a function that does the work when called"
        )


class SingleInstance:
    """The decorator made by :func:`single_instance` (apply it to a function)."""

    __slots__ = ("_key", "_key_for", "_options", "cancel_on_loss", "model", "ttl_ms")

    _options: LeaseOptions

    def __init__(
        self,
        key: object,
        ttl: _validate.Duration,
        *,
        key_for: Callable[[Callable[..., Any]], str] | None = None,
        model: JobLockModel | aio.JobLockModel | None = None,
        cancel_on_loss: bool = False,
        **options: Unpack[RunOptions[Any]],
    ) -> None:
        self._key = None if key is None else KeyTemplate(key)
        self._key_for = key_for
        # Validates every option now (same rules as run_with_lock), not at the first call,
        # and keeps them: every call sends this very request (its key filled in).
        self._options = LeaseOptions.of(ttl, options, "single_instance")
        self.ttl_ms = self._options.ttl_ms
        self.cancel_on_loss = check_cancel_on_loss(cancel_on_loss, self._options.keepalive)
        self.model = model

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, R]]
    ) -> Callable[P, Coroutine[Any, Any, R | None]]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R | None]: ...

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        check_decoratable(fn)
        if self._key is not None:
            template = KeyTemplate(self._key.template, fn)
        elif self._key_for is not None:
            template = KeyTemplate(self._key_for(fn), fn)
        else:  # pragma: no cover - single_instance always gives one of them
            raise TypeError("single_instance needs a lock key")
        if is_async_callable(fn):
            return self._wrap_async(fn, template)
        if self.cancel_on_loss:
            raise ValueError(
                f"cancel_on_loss applies to async functions only; {_describe(fn)} is sync"
            )
        model = self.model
        if model is not None and not isinstance(model, JobLockModel):
            context = f"{_describe(fn)} is a sync function: "
            raise wrong_face(model, "joblocks.JobLockModel", context)
        return self._wrap_sync(fn, template, model)

    def _wrap_sync(
        self, fn: Callable[..., Any], template: KeyTemplate, model: JobLockModel | None
    ) -> Callable[..., Any]:
        options = self._options
        name = _describe(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = template.render(args, kwargs)
            box: list[Any] = []

            def work() -> None:
                box.append(fn(*args, **kwargs))

            taken = run_request(model, key, options, work)
            if taken.lease is not None:
                return box[0]
            log.info("joblocks: %s skipped: %s (lock %r)", name, _why_not(taken), key)
            return None

        return wrapper

    def _wrap_async(self, fn: Callable[..., Any], template: KeyTemplate) -> Callable[..., Any]:
        from . import aio
        from ._async import run as _aio_run

        model = self.model
        if model is not None and not isinstance(model, aio.JobLockModel):
            context = f"{_describe(fn)} is an async function: "
            raise wrong_face(model, "joblocks.aio.JobLockModel", context)
        options, cancel_on_loss = self._options, self.cancel_on_loss
        name = _describe(fn)

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = template.render(args, kwargs)
            box: list[Any] = []

            async def work() -> None:
                box.append(await fn(*args, **kwargs))

            taken = await _aio_run._run_request(model, key, options, work, cancel_on_loss)
            if taken.lease is not None:
                return box[0]
            log.info("joblocks: %s skipped: %s (lock %r)", name, _why_not(taken), key)
            return None

        return wrapper


def single_instance(
    lock_key: str,
    ttl: _validate.Duration,
    *,
    model: JobLockModel | aio.JobLockModel | None = None,
    cancel_on_loss: bool = False,
    **options: Unpack[RunOptions[Any]],
) -> SingleInstance:
    """Decorate a function so that each call runs only if ``lock_key`` can be taken.

    ::

        @joblocks.single_instance("report:{tenant}", 600_000, min_hold=60_000)
        def report(tenant: str) -> int: ...

        report("acme")   # the return value when it ran; None when skipped

    A call returns the function's return value when it ran, and ``None`` when the lock
    was held elsewhere (logged at info level on the ``joblocks`` logger: "skipped:
    held elsewhere"). Exceptions of the function propagate after the release.

    ``async def`` functions are run under :func:`joblocks.aio.run_with_lock` (the
    wrapper is a coroutine function too; ``model`` must then be a
    ``joblocks.aio.JobLockModel``), other functions under
    :func:`joblocks.run_with_lock` (``model`` a :class:`joblocks.JobLockModel`);
    ``model=None`` is the configured default, looked up at each call. The other
    options are those of ``run_with_lock``; ``cancel_on_loss`` is for async functions
    only. ``record`` (True, False or ``"all"``; None: the model's) writes each run to
    the run ledger (docs/ledger.md).

    ``lock_key`` may be a ``str.format`` template filled by name from the call's
    arguments, defaults applied (``"{tenant}"``, ``"{user.id}"``, ``"{self.name}"``;
    ``{{`` for a literal brace). The key, ttl and options are validated here, and the
    template's names against the function's parameters when it is decorated.

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.

    ``schedule`` (a cron expression or :class:`~joblocks.Schedule`; ``timezone``: its
    IANA zone, default UTC): at most one call runs per slot of the schedule across
    every worker; a call whose slot was already run returns None.
    """
    if lock_key is None:
        raise TypeError("lock_key must be a str, not NoneType")
    return SingleInstance(lock_key, ttl, model=model, cancel_on_loss=cancel_on_loss, **options)


# -- shared by the integrations (joblocks.contrib) -------------------------------------


def unique_holder() -> str:
    """A holder id for one run: this process's worker id and a random suffix.

    The integrations take each run's lease under a holder of its own, so a lease kept
    by ``min_hold`` shuts out every later run — in this process too (a plain acquire
    is re-entrant for the same holder).
    """
    return f"{worker_id()}/{uuid.uuid4().hex[:12]}"


def run_leased(
    model: JobLockModel,
    key: str,
    options: LeaseOptions,
    work: Callable[[], R],
    *,
    holder: str,
    min_hold_ms: int | None = None,
    schedule: Schedule | None = None,
) -> tuple[Outcome[Lease], R | None]:
    """Run ``work()`` under a lease of ``key`` for ``holder``: ``(taken, result)``, where
    ``taken`` is :class:`Acquired` when the work ran (``taken.lease``, released), else
    :class:`Taken` or :class:`Skipped` (``schedule=``: its slot already run), with no
    result.

    ``options`` were checked once, when the integration was set up; ``min_hold_ms``
    (when given) is this run's hold.
    The lease is released after the work (never raising; a warning when the work
    outlived a lease without keep-alive); an exception of ``work`` propagates.
    """
    if not isinstance(model, JobLockModel):
        raise wrong_face(model, "joblocks.JobLockModel")
    taken = model._take(key, options.for_run(holder, min_hold_ms=min_hold_ms, schedule=schedule))
    if taken.lease is None:
        return taken, None
    try:
        result = work()
    finally:
        release_quietly(taken.lease)
    return taken, result


def _why_not(taken: Outcome[Any]) -> str:
    """Why a run did not start, in a few words (the decorator's log line)."""
    return "its schedule slot was already run" if isinstance(taken, Skipped) else "held elsewhere"
