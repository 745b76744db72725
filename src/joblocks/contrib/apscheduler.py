"""APScheduler 3.x: a scheduled job runs once per fire when every replica schedules it.

Two ways in:

- :class:`LockedExecutor`, a thread-pool executor: every job it runs takes the lock
  ``apscheduler:<job id>`` for the run, and keeps it after a short run until the other
  replicas' fires of the same slot are past (the hold is derived from the job's
  trigger and ``misfire_grace_time``)::

      scheduler = BackgroundScheduler(executors={"default": LockedExecutor()})
      scheduler.add_job(prune, "cron", minute="*/5", id="prune")

- :func:`locked_job`, a wrapper for one function, with an explicit ``min_hold``::

      scheduler.add_job(locked_job(ttl=60_000, min_hold=30_000)(prune), "cron", minute="*/5")

``LockedExecutor(schedule=True)`` runs a job with a ``CronTrigger`` once per slot of
the trigger (``schedule=`` of :func:`joblocks.run_with_lock`, the expression and time
zone read off the trigger: :func:`cron_schedule`) instead of holding the lock for a
derived time.

Needs ``apscheduler>=3.10,<4`` (``pip install "joblocks[apscheduler]"``).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from apscheduler.executors.base import run_job  # type: ignore[import-untyped]
from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped]

from .. import JobLockModel, Schedule
from . import _support
from ._support import LeaseOptions, SingleInstance, get_model, log, run_leased, unique_holder

if TYPE_CHECKING:
    from .. import aio

__all__ = [
    "DEFAULT_CLOCK_SKEW_MS",
    "DEFAULT_TTL_MS",
    "NO_NEXT_FIRE_HOLD_MS",
    "LockedExecutor",
    "cron_schedule",
    "derived_min_hold",
    "job_lock_key",
    "locked_job",
]

#: Default ttl of :class:`LockedExecutor` leases (renewed while the job runs, so this is
#: how long a crashed replica blocks the job, not a limit on its run time).
DEFAULT_TTL_MS = 60_000
#: How far apart the replicas' clocks may be, added to ``misfire_grace_time``.
DEFAULT_CLOCK_SKEW_MS = 5_000
#: The hold when the trigger fires no more (a ``date`` job, or past ``end_date``) and
#: the job has no ``misfire_grace_time`` either.
NO_NEXT_FIRE_HOLD_MS = 60_000

# The id APScheduler makes when add_job() gets none: uuid4().hex, different per replica.
_GENERATED_ID = re.compile(r"[0-9a-f]{32}\Z")


def job_lock_key(job: Any) -> str:
    """The default lock key of a job: ``apscheduler:<job id>``.

    Raises ``ValueError`` for an id APScheduler generated (32 hex digits): each replica
    generates its own, so they would never share a lock. Give the job ``id=``.
    """
    job_id = str(job.id)
    if _GENERATED_ID.match(job_id):
        raise ValueError(
            f"joblocks: job {job.name!r} has a generated id ({job_id}); every replica "
            "generates a different one, so the replicas would not share a lock. Give the "
            "job the same id= on every replica (or pass key= to LockedExecutor)"
        )
    return f"apscheduler:{job_id}"


def derived_min_hold(
    job: Any,
    run_time: datetime,
    *,
    now: datetime | None = None,
    clock_skew: _support.Duration = DEFAULT_CLOCK_SKEW_MS,
) -> int:
    """How long (ms from ``now``) to keep the lock of a run scheduled at ``run_time``.

    The lock is kept until the earlier of

    - halfway from ``run_time`` to the trigger's next fire time: a replica that fires
      this slot late, or the next slot early, by less than half a period, is refused;
    - ``run_time + misfire_grace_time + clock_skew``: APScheduler never starts a run
      later than ``misfire_grace_time`` after its scheduled time, so by then no replica
      can still start this slot (``clock_skew`` covers replicas whose clocks differ).

    When neither applies (no next fire time and ``misfire_grace_time=None``) the hold
    is :data:`NO_NEXT_FIRE_HOLD_MS`. Never negative. ``clock_skew`` is milliseconds
    (int or float) or a ``datetime.timedelta``.
    """
    skew_ms = _support.duration_ms(clock_skew, "clock_skew", allow_zero=True)
    if now is None:
        now = datetime.now(timezone.utc)
    limits: list[datetime] = []
    try:
        next_fire = job.trigger.get_next_fire_time(run_time, run_time)
    except Exception as exc:  # a custom trigger that cannot say: the grace bound only
        log.debug("joblocks: no next fire time for job %r: %s", job.id, exc)
        next_fire = None
    if next_fire is not None and next_fire > run_time:
        limits.append(run_time + (next_fire - run_time) / 2)
    grace = job.misfire_grace_time
    if grace is not None:
        limits.append(run_time + timedelta(seconds=grace, milliseconds=skew_ms))
    if not limits:
        return NO_NEXT_FIRE_HOLD_MS
    hold_ms = (min(limits) - now).total_seconds() * 1000
    return max(0, math.ceil(hold_ms))


_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _weekday(text: str) -> int:
    """An APScheduler weekday (0 = Monday, or a name) as its number."""
    name = text.strip().lower()
    if name in _WEEKDAYS:
        return _WEEKDAYS.index(name)
    if name.isdigit() and int(name) < 7:
        return int(name)
    raise ValueError(f"day_of_week {text!r} has no cron equivalent")


def _cron_weekdays(field: str) -> str:
    """APScheduler's day_of_week (0 = Monday) as cron's (0 = Sunday): the days listed."""
    days: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            low, high = span.split("-", 1)
            first, last = _weekday(low), _weekday(high)
        else:
            first = last = _weekday(span)
            if step_text:
                last = 6
        if step < 1 or first > last:
            raise ValueError(f"day_of_week {field!r} has no cron equivalent")
        days.update(range(first, last + 1, step))
    if len(days) == 7:
        return "*"
    return ",".join(str((day + 1) % 7) for day in sorted(days, key=lambda d: (d + 1) % 7))


def cron_schedule(trigger: Any) -> Schedule:
    """The :class:`joblocks.Schedule` of an APScheduler ``CronTrigger``: its fields as a
    cron expression, in the trigger's time zone.

    ``ValueError`` when the trigger has no cron equivalent: not a ``CronTrigger``, a
    ``year`` or ``week`` field, ``"xth y"``/``"last x"`` days, or both ``day`` and
    ``day_of_week`` restricted (APScheduler wants both, cron either).
    """
    from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]

    if not isinstance(trigger, CronTrigger):
        raise ValueError(f"{type(trigger).__name__} is not a CronTrigger")
    fields = {field.name: str(field) for field in trigger.fields}
    for name in ("year", "week"):
        if fields[name] != "*":
            raise ValueError(f"a CronTrigger with {name}={fields[name]!r} has no cron equivalent")
    day = fields["day"]
    if day == "last":
        day = "L"
    elif any(c.isalpha() for c in day):
        raise ValueError(f"day={day!r} has no cron equivalent")
    weekdays = _cron_weekdays(fields["day_of_week"])
    if day != "*" and weekdays != "*":
        raise ValueError(
            "a CronTrigger with both day and day_of_week runs on days matching both; "
            "cron runs on days matching either"
        )
    parts = [fields["minute"], fields["hour"], day, fields["month"], weekdays]
    if fields["second"] != "0":
        parts.insert(0, fields["second"])
    return Schedule.parse(" ".join(parts), trigger.timezone, name="the job's CronTrigger")


class LockedExecutor(ThreadPoolExecutor):  # type: ignore[misc]
    """A thread-pool executor that runs each job only where its lock can be taken.

    Use it as the executor of the jobs that every replica schedules but that must run
    once per fire::

        scheduler = BackgroundScheduler(executors={"default": LockedExecutor()})
        scheduler.add_job(report, "cron", hour=3, id="nightly-report")

    For each fire, the lock ``apscheduler:<job id>`` (``key=`` to change it) is taken
    for the run under a holder of its own; a replica that finds it held skips the fire
    (logged at info: "skipped: held elsewhere"; no job event is dispatched). The lease
    is renewed while the job runs (``keepalive``), so ``ttl`` only bounds how long a
    crashed replica blocks the job. After the run the lock is kept for
    ``min_hold`` — by default :func:`derived_min_hold` of the job's trigger — so that
    a replica firing the same slot a little later does not run it again.

    Jobs need the same ``id`` on every replica (a generated id is refused). Interval
    triggers fire the same slots only with the same ``start_date`` on every replica.

    ``schedule=True``: a job whose trigger is a ``CronTrigger`` runs at most once per
    slot of the trigger (:func:`cron_schedule`; the slot is the one of the database's
    now when the run starts), however far apart the replicas fire within it, and
    without a derived hold (``min_hold`` still applies when given). Other triggers,
    and cron triggers without a cron equivalent (logged once), keep the derived hold.

    Every duration (``ttl``, ``renew_every``, ``max_hold``, ``min_hold``,
    ``clock_skew``) is milliseconds (int or float) or a ``datetime.timedelta``.
    """

    def __init__(
        self,
        max_workers: int = 10,
        pool_kwargs: dict[str, Any] | None = None,
        *,
        ttl: _support.Duration = DEFAULT_TTL_MS,
        keepalive: bool = True,
        renew_every: _support.Duration | None = None,
        max_hold: _support.Duration | None = None,
        min_hold: _support.Duration | None = None,
        clock_skew: _support.Duration = DEFAULT_CLOCK_SKEW_MS,
        key: Callable[[Any], str] | None = None,
        model: JobLockModel | None = None,
        schedule: bool = False,
    ) -> None:
        self.ttl_ms = _support.duration_ms(ttl, "ttl")
        if not isinstance(schedule, bool):
            raise TypeError(f"schedule must be a bool, not {type(schedule).__name__}")
        self.by_schedule = schedule
        self._schedules: dict[int, tuple[Any, Schedule | None]] = {}
        # Checked once; each run takes it with a holder (and a hold) of its own.
        self._options = LeaseOptions(
            ttl_ms=self.ttl_ms,
            holder=None,
            keepalive=keepalive,
            renew_every=renew_every,
            min_hold=min_hold,
            wait=None,
            on_lost=None,
            max_hold=max_hold,
        )
        self.min_hold_ms = None if min_hold is None else self._options.min_hold_ms
        self.clock_skew_ms = _support.duration_ms(clock_skew, "clock_skew", allow_zero=True)
        if key is not None and not callable(key):
            raise TypeError(f"key must be callable (job -> str), not {type(key).__name__}")
        if model is not None and not isinstance(model, JobLockModel):
            raise _support.wrong_face(model, "joblocks.JobLockModel")
        self._key = key or job_lock_key
        self._model = model
        super().__init__(max_workers, pool_kwargs)

    def lock_key(self, job: Any) -> str:
        """The lock key of ``job`` (validated)."""
        return _support.lock_key(self._key(job), "key")

    def _schedule_of(self, job: Any) -> Schedule | None:
        """The job's trigger as a schedule (kept per trigger), or None without one."""
        trigger = job.trigger
        known = self._schedules.get(id(trigger))
        if known is not None and known[0] is trigger:
            return known[1]
        from apscheduler.triggers.cron import CronTrigger

        found: Schedule | None = None
        if isinstance(trigger, CronTrigger):
            try:
                found = cron_schedule(trigger)
            except ValueError as exc:
                log.warning("joblocks: job %r runs without schedule=: %s", job.id, exc)
        self._schedules[id(trigger)] = (trigger, found)
        return found

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        key = self.lock_key(job)  # a bad key fails the submission, logged by the scheduler

        def callback(future: Any) -> None:
            exc = future.exception()
            if exc is not None:
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, future.result())

        future = self._pool.submit(
            self._run_locked, key, job, job._jobstore_alias, run_times, self._logger.name
        )
        future.add_done_callback(callback)

    def _run_locked(
        self, key: str, job: Any, jobstore_alias: str, run_times: list[datetime], logger_name: str
    ) -> list[Any]:
        schedule = self._schedule_of(job) if self.by_schedule else None
        if self.min_hold_ms is not None:
            min_hold = self.min_hold_ms
        elif schedule is not None:
            min_hold = 0
        else:
            min_hold = derived_min_hold(job, run_times[-1], clock_skew=self.clock_skew_ms)
        model = self._model if self._model is not None else get_model()
        taken, events = run_leased(
            model,
            key,
            self._options,
            lambda: run_job(job, jobstore_alias, run_times, logger_name),
            holder=unique_holder(),
            min_hold_ms=min_hold,
            schedule=schedule,
        )
        if taken.lease is None:
            log.info(
                "joblocks: job %r (scheduled at %s) skipped: %s (lock %r)",
                job.id,
                run_times[-1],
                "its slot was already run"
                if isinstance(taken, _support.Skipped)
                else "held elsewhere",
                key,
            )
            return []
        return list(events or [])


def locked_job(
    *,
    ttl: _support.Duration,
    min_hold: _support.Duration | None,
    key: str | None = None,
    model: JobLockModel | aio.JobLockModel | None = None,
    keepalive: bool = False,
    renew_every: _support.Duration | None = None,
    wait: _support.Duration | None = None,
    on_lost: Callable[[Any], None] | None = None,
    max_hold: _support.Duration | None = None,
    cancel_on_loss: bool = False,
) -> SingleInstance:
    """A wrapper that makes a job function run only where its lock can be taken.

    ::

        locked = locked_job(ttl=60_000, min_hold=30_000)
        scheduler.add_job(locked(prune), "cron", minute="*/5", id="prune")

    It is :func:`joblocks.single_instance` with a default key,
    ``apscheduler:<module>.<qualname>`` of the function, and a ``min_hold`` you must
    choose (the wrapper does not see the trigger): longer than the spread between the
    replicas' fires of one slot, shorter than the period — half the period is a good
    choice; ``None`` to keep no hold. Works for ``async def`` jobs too
    (``AsyncIOScheduler``). :class:`LockedExecutor` derives the hold by itself.

    Every duration (``ttl``, ``renew_every``, ``min_hold``, ``wait``, ``max_hold``)
    is milliseconds (int or float) or a ``datetime.timedelta``.
    """

    def key_for(fn: Callable[..., Any]) -> str:
        module = getattr(fn, "__module__", None) or "?"
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        return f"apscheduler:{module}.{name}"

    return SingleInstance(
        key,
        ttl,
        key_for=key_for,
        model=model,
        keepalive=keepalive,
        renew_every=renew_every,
        min_hold=min_hold,
        wait=wait,
        on_lost=on_lost,
        max_hold=max_hold,
        cancel_on_loss=cancel_on_loss,
    )
