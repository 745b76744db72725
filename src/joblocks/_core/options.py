"""The request of a lease, checked once: the options every entry point takes.

:class:`LeaseOptions` is what ``try_lease``, ``lease``, ``run_with_lock`` and
``single_instance`` (both faces) and the integrations turn their arguments into, once,
before anything else; it travels intact to the SQL (``_core.lifecycle``). The keyword
arguments themselves are typed once, as :class:`RunOptions` and :class:`LeaseKwargs`
(``**options: Unpack[...]`` in each entry point's signature), so an option is added in
one place.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, Callable, Generic, Literal, TypeVar, Union

from typing_extensions import TypedDict

from .._util import validate as _validate
from .._util.process import worker_id
from .schedule import Schedule

if TYPE_CHECKING:
    from . import ops as _ops

L = TypeVar("L")

#: ``record=``: write runs to the ledger (True), also skipped starts (``"all"``), or not.
Record = Union[bool, Literal["all"]]
#: ``liveness=``: a holder is taken over after its ttl, or as soon as its session ends.
Liveness = Literal["ttl", "session"]
LIVENESS: tuple[str, ...] = ("ttl", "session")
#: The feature an acquire goes down to (:attr:`LeaseOptions.path`).
Path = Literal["single", "session", "slots", "places"]
#: ``max_holders=`` is at most this.
MAX_HOLDERS = 1000


def check_record(value: object, name: str = "record") -> Record:
    """``record`` must be True, False or ``"all"`` (None: the model's setting)."""
    if isinstance(value, bool) or value == "all":
        return value
    raise (ValueError if isinstance(value, str) else TypeError)(
        f'{name} must be True, False or "all", not {value!r}'
    )


def check_liveness(value: object) -> Liveness:
    """Validate ``liveness``: ``"ttl"`` (the default) or ``"session"``."""
    if not isinstance(value, str):
        raise TypeError(f"liveness must be a str, not {type(value).__name__}")
    if value not in LIVENESS:
        raise ValueError(f"liveness must be 'ttl' or 'session', got {value!r}")
    return value  # type: ignore[return-value]


def check_max_holders(value: object) -> int:
    """Check ``max_holders``: an int, 1 … 1000."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_holders must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_HOLDERS:
        raise ValueError(f"max_holders must be between 1 and {MAX_HOLDERS}, got {value!r}")
    return value


class RunOptions(TypedDict, Generic[L], total=False):
    """The lease options of ``run_with_lock`` and ``single_instance`` (keyword
    arguments; ``L`` is the face's lease class, passed to ``on_lost``).

    - ``keepalive`` (bool, default False): renew the lease while it is held, every
      ``renew_every`` (default ttl/3), until it is released, lost, or ``max_hold`` has
      passed;
    - ``renew_every``, ``max_hold``: milliseconds (int or float) or a ``timedelta``;
      they need ``keepalive=True``;
    - ``min_hold``: keep a released lease's row until acquired_at + ``min_hold``
      (milliseconds or a ``timedelta``; 0 or None: no hold);
    - ``wait``: retry a refused acquire with capped exponential backoff and jitter for
      that long (milliseconds or a ``timedelta``; None: try once);
    - ``on_lost(lease)``: called when keep-alive finds the lease lost;
    - ``schedule`` (a cron expression such as ``"*/5 * * * *"``, or a
      :class:`~joblocks.Schedule`): at most one start per slot of the schedule (the
      period between two fire times, by the database's clock) across every worker; a
      start whose slot was already run is skipped. ``timezone``: the IANA zone the
      expression is in (a str or tzinfo; default UTC). See
      docs/howto/cron-once-per-tick.md;
    - ``record`` (True, False or ``"all"``; None, the default: the model's
      ``record=``): write the run to the run ledger (``job_runs``: ``ok``, ``error`` or
      ``lost``); ``"all"`` also records a start that found the key taken (or its slot
      already run) as ``skipped``. See docs/ledger.md;
    - ``liveness`` (``"ttl"``, the default, or ``"session"``): with ``"session"`` the
      holder also holds a session lock tied to the key while its process lives, so a
      holder whose process died is taken over at once, not after its ttl (see
      docs/concepts.md, "Liveness"); not together with ``schedule``;
    - ``max_holders`` (an int, 1 … 1000; None, the default: one holder): a counted
      lease, up to N holders of the key at once, each a full lease of its own place
      (see docs/concepts.md, "Several holders"); with ``liveness="session"`` each
      place has its own session lock; not together with ``schedule``.
    """

    keepalive: bool
    renew_every: _validate.Duration | None
    min_hold: _validate.Duration | None
    wait: _validate.Duration | None
    on_lost: Callable[[L], None] | None
    max_hold: _validate.Duration | None
    schedule: str | Schedule | None
    timezone: str | tzinfo | None
    record: bool | Literal["all"] | None
    liveness: str
    max_holders: int | None


class LeaseKwargs(RunOptions[L], total=False):
    """The options of ``try_lease`` and ``lease``: :class:`RunOptions` and ``holder``
    (default: this process's worker id)."""

    holder: str | None


RUN_OPTIONS = frozenset(RunOptions.__optional_keys__)
LEASE_OPTIONS = frozenset(LeaseKwargs.__optional_keys__)


class LeaseOptions:
    """The validated request of ``try_lease``/``lease``/``run_with_lock`` but its key
    (shared by both faces): the ttl, holder and lease options, checked once and then
    carried intact to the SQL. The decorator and the integrations build theirs once,
    when they are set up; a key template is filled per call."""

    __slots__ = (
        "_holder",
        "keepalive",
        "liveness",
        "max_hold_ms",
        "max_holders",
        "min_hold_ms",
        "on_lost",
        "record",
        "renew_every_ms",
        "schedule",
        "ttl_ms",
        "wait_ms",
    )

    def __init__(
        self,
        *,
        ttl_ms: int,
        holder: str | None,
        keepalive: bool,
        renew_every: _validate.Duration | None,
        min_hold: _validate.Duration | None,
        wait: _validate.Duration | None,
        on_lost: Callable[[Any], None] | None,
        max_hold: _validate.Duration | None,
        schedule: str | Schedule | None = None,
        timezone: str | tzinfo | None = None,
        record: bool | str | None = None,
        liveness: str = "ttl",
        max_holders: int | None = None,
    ) -> None:
        self.ttl_ms = ttl_ms
        self._holder = None if holder is None else _validate.holder(holder)
        if not isinstance(keepalive, bool):
            raise TypeError(f"keepalive must be a bool, not {type(keepalive).__name__}")
        self.keepalive = keepalive
        self.renew_every_ms = (
            None if renew_every is None else _validate.duration_ms(renew_every, "renew_every")
        )
        self.max_hold_ms = None if max_hold is None else _validate.duration_ms(max_hold, "max_hold")
        if not keepalive and (renew_every is not None or max_hold is not None):
            raise ValueError("renew_every and max_hold need keepalive=True")
        if self.renew_every_ms is not None and self.renew_every_ms >= ttl_ms:
            raise ValueError(
                f"renew_every ({self.renew_every_ms} ms) must be shorter than ttl ({ttl_ms} ms)"
            )
        self.min_hold_ms = (
            0 if min_hold is None else _validate.duration_ms(min_hold, "min_hold", allow_zero=True)
        )
        self.wait_ms = (
            None if wait is None else _validate.duration_ms(wait, "wait", allow_zero=True)
        )
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
        self.on_lost = on_lost
        self.schedule = schedule_option(schedule, timezone)
        self.record = None if record is None else check_record(record)
        self.liveness = check_liveness(liveness)
        if self.liveness != "ttl" and self.schedule is not None:
            raise ValueError(
                "liveness='session' cannot be combined with schedule= (a slot's run is not "
                "taken over from a dead holder: the slot stays run)"
            )
        self.max_holders = None if max_holders is None else check_max_holders(max_holders)
        if self.max_holders is not None and self.schedule is not None:
            raise ValueError("max_holders cannot be combined with schedule= (yet)")

    @classmethod
    def of(
        cls,
        ttl: _validate.Duration,
        options: Mapping[str, Any],
        where: str,
        allowed: frozenset[str] = RUN_OPTIONS,
    ) -> LeaseOptions:
        """The request of ``ttl`` and the keyword ``options`` given to ``where`` (a
        function's name, for the message of an unknown option)."""
        for name in options:
            if name not in allowed:
                raise _validate.unknown_keyword(f"{where}()", name, allowed)
        return cls(
            ttl_ms=_validate.duration_ms(ttl, "ttl"),
            holder=options.get("holder"),
            keepalive=options.get("keepalive", False),
            renew_every=options.get("renew_every"),
            min_hold=options.get("min_hold"),
            wait=options.get("wait"),
            on_lost=options.get("on_lost"),
            max_hold=options.get("max_hold"),
            schedule=options.get("schedule"),
            timezone=options.get("timezone"),
            record=options.get("record"),
            liveness=options.get("liveness", "ttl"),
            max_holders=options.get("max_holders"),
        )

    def for_run(
        self,
        holder: str,
        *,
        min_hold_ms: int | None = None,
        on_lost: Callable[[Any], None] | None = None,
        schedule: Schedule | None = None,
    ) -> LeaseOptions:
        """These options for one run of an integration: its own ``holder`` (checked),
        and where given, this run's ``min_hold`` (ms, already checked) and
        ``on_lost``; nothing else is checked again."""
        run = object.__new__(LeaseOptions)
        for name in LeaseOptions.__slots__:
            setattr(run, name, getattr(self, name))
        run._holder = _validate.holder(holder)
        if min_hold_ms is not None:
            run.min_hold_ms = min_hold_ms
        if on_lost is not None:
            run.on_lost = on_lost
        if schedule is not None:  # the job's own (an integration reads it off the job)
            run.schedule = schedule
        return run

    @property
    def holder(self) -> str:
        """The holder given, else this process's worker id (read at each use: options
        kept by a decorator follow a fork's new worker id)."""
        if self._holder is not None:
            return self._holder
        return worker_id()

    @property
    def path(self) -> Path:
        """The one feature an acquire of these options goes down to (``_core.lifecycle``
        hands each try to it): ``"places"`` (``max_holders``, with or without session
        liveness), ``"slots"`` (``schedule=``), ``"session"`` (``liveness="session"``)
        or ``"single"``."""
        if self.max_holders is not None:
            return "places"
        if self.schedule is not None:
            return "slots"
        return "single" if self.liveness == "ttl" else "session"

    def lease_state(
        self, key: str, grant: _ops.Grant, sent_at: float, ttl_ms: int
    ) -> dict[str, Any]:
        return {
            "key": key,
            "holder": self.holder,
            "grant": grant,
            "sent_at": sent_at,
            "ttl_ms": ttl_ms,
            "min_hold_ms": self.min_hold_ms,
            "max_hold_ms": self.max_hold_ms,
            "renew_every_ms": self.renew_every_ms,
            "on_lost": self.on_lost,
        }


def schedule_option(schedule: object, timezone: object) -> Schedule | None:
    """Validate ``schedule=`` (a cron expression or a :class:`~joblocks.Schedule`) and
    ``timezone=`` (an IANA name or tzinfo, for an expression given as a str)."""
    if schedule is None:
        if timezone is not None:
            raise ValueError("timezone needs schedule= (the cron expression it is for)")
        return None
    if isinstance(schedule, Schedule):
        if timezone is not None and Schedule.parse(schedule.expression, timezone) != schedule:  # type: ignore[arg-type]
            raise ValueError(
                f"timezone={timezone!r} differs from the timezone of {schedule!r}; give one of them"
            )
        return schedule
    return Schedule.parse(schedule, timezone, name="schedule")  # type: ignore[arg-type]


def check_cancel_on_loss(cancel_on_loss: object, keepalive: bool) -> bool:
    """Validate asyncio's ``cancel_on_loss``: a bool, and only with keep-alive."""
    if not isinstance(cancel_on_loss, bool):
        raise TypeError(f"cancel_on_loss must be a bool, not {type(cancel_on_loss).__name__}")
    if cancel_on_loss and not keepalive:
        raise ValueError("cancel_on_loss needs keepalive=True (loss is found by renewals)")
    return cancel_on_loss


def check_work(work: object, *, asynchronous: bool) -> None:
    """``work`` must be callable, and a coroutine function exactly on the asyncio face."""
    if not callable(work):
        raise TypeError(f"work must be callable, not {type(work).__name__}")
    is_async = inspect.iscoroutinefunction(work) or (
        not inspect.isroutine(work) and inspect.iscoroutinefunction(type(work).__call__)
    )
    if is_async and not asynchronous:
        raise TypeError(
            "work is a coroutine function: use joblocks.aio.run_with_lock for async work"
        )
    if asynchronous and not is_async:
        raise TypeError(
            "work must be an async function (async def) on joblocks.aio; "
            "use joblocks.run_with_lock for sync work"
        )
