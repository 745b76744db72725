"""Celery: a task base class whose runs are kept to one at a time across workers.

::

    from joblocks.contrib.celery import SingleInstanceTask

    @app.task(base=SingleInstanceTask, lock_ttl=60_000)
    def nightly_report() -> None: ...

With celery beat on several replicas, each replica's beat sends the task at every
fire, so the workers receive it once per beat. The first copy to start runs; the
others are skipped (they return ``None``). A copy that starts after the first one
finished is refused too: the lock is kept for half the time to the task's next fire in
``beat_schedule`` (``lock_min_hold``).

``lock_schedule = BEAT`` runs the task at most once per slot of its ``crontab`` in
``beat_schedule`` instead (``schedule=`` of :func:`joblocks.run_with_lock`; the
expression and time zone read off the crontab: :func:`beat_crontab_schedule`),
however far apart the replicas' beats send it within the slot.

Needs ``celery>=5.3`` (``pip install "joblocks[celery]"``).
"""

from __future__ import annotations

import inspect
import math
from datetime import timedelta
from typing import Any, Callable, Union

from celery import Task  # type: ignore[import-untyped]

from .. import JobLockModel, Schedule
from . import _support
from ._support import KeyTemplate, LeaseOptions, get_model, log, run_leased, unique_holder

__all__ = [
    "BEAT",
    "SingleInstanceTask",
    "beat_crontab_schedule",
    "beat_min_hold",
    "crontab_schedule",
]

#: ``lock_min_hold = BEAT`` (the default): derive the hold from ``beat_schedule``.
BEAT = "beat"

MinHold = Union[_support.Duration, str, None]


def beat_min_hold(app: Any, task_name: str) -> int:
    """Half the time (ms) from now to the next fire of ``task_name`` in ``beat_schedule``.

    Every entry of ``app.conf.beat_schedule`` whose ``task`` is ``task_name`` counts
    (numbers, timedeltas, ``schedule``, ``crontab`` and ``solar``); the nearest next
    fire wins. 0 when the task is not in the schedule, or its schedule cannot say.
    """
    from celery.schedules import maybe_schedule  # type: ignore[import-untyped]

    nearest: timedelta | None = None
    for entry in (app.conf.beat_schedule or {}).values():
        if not isinstance(entry, dict) or entry.get("task") != task_name:
            continue
        try:
            sched = maybe_schedule(entry.get("schedule"), app=app)
            run_every = getattr(sched, "run_every", None)
            if isinstance(run_every, timedelta):
                remaining = run_every  # an interval: beat's last run is not known here
            else:
                remaining = sched.remaining_estimate(sched.now())
        except Exception as exc:
            log.debug("joblocks: no period for %r from beat_schedule: %s", task_name, exc)
            continue
        if isinstance(remaining, timedelta) and (nearest is None or remaining < nearest):
            nearest = remaining
    if nearest is None or nearest <= timedelta(0):
        return 0
    return math.ceil(nearest.total_seconds() * 1000 / 2)


def _cron_field(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int):
        return str(value)
    return ",".join(str(v) for v in sorted(value))


def crontab_schedule(cron: Any) -> Schedule:
    """The :class:`joblocks.Schedule` of a Celery ``crontab``: its fields as a cron
    expression, in the crontab's time zone (the app's ``timezone``).

    ``ValueError`` when both ``day_of_month`` and ``day_of_week`` are restricted
    (Celery wants both, cron either), or when it is not a ``crontab``.
    """
    from celery.schedules import crontab

    if not isinstance(cron, crontab):
        raise ValueError(f"{type(cron).__name__} is not a crontab")
    fields = [
        _cron_field(cron._orig_minute),
        _cron_field(cron._orig_hour),
        _cron_field(cron._orig_day_of_month),
        _cron_field(cron._orig_month_of_year),
        _cron_field(cron._orig_day_of_week),
    ]
    if fields[2] != "*" and fields[4] != "*":
        raise ValueError(
            "a crontab with both day_of_month and day_of_week runs on days matching both; "
            "cron runs on days matching either"
        )
    return Schedule.parse(" ".join(fields), cron.tz, name="the task's crontab")


def beat_crontab_schedule(app: Any, task_name: str) -> Schedule | None:
    """The schedule of ``task_name``'s ``crontab`` in ``app.conf.beat_schedule``.

    None when the task has no crontab entry; ``ValueError`` when it has several
    different ones or one without a cron equivalent (:func:`crontab_schedule`).
    """
    from celery.schedules import crontab, maybe_schedule

    found: set[Schedule] = set()
    for entry in (app.conf.beat_schedule or {}).values():
        if not isinstance(entry, dict) or entry.get("task") != task_name:
            continue
        sched = maybe_schedule(entry.get("schedule"), app=app)
        if isinstance(sched, crontab):
            found.add(crontab_schedule(sched))
    if len(found) > 1:
        raise ValueError(f"task {task_name!r} has {len(found)} different crontabs in beat_schedule")
    return next(iter(found), None)


class SingleInstanceTask(Task):  # type: ignore[misc]
    """A Celery task base class: a run starts only if the task's lock can be taken.

    Set the options as attributes of a subclass, or as ``@app.task`` options::

        @app.task(base=SingleInstanceTask, lock_key="report:{tenant}", lock_ttl=600_000)
        def report(tenant: str) -> int: ...

    - ``lock_key``: the key, a ``str.format`` template over the task's arguments by
      name; default ``celery:<task name>``.
    - ``lock_ttl`` (default 60 s) and ``lock_keepalive`` (default True: the lease is
      renewed while the task runs, so the ttl only bounds how long a crashed worker
      blocks the task), ``lock_renew_every``, ``lock_max_hold``, ``lock_wait``.
    - ``lock_min_hold``: how long the lock is kept after a short run, so that copies of
      the same fire that start later are refused. Default ``BEAT``: half the time to
      the task's next fire in ``beat_schedule`` (:func:`beat_min_hold`; none when the
      task is not there). A duration, or ``None`` for no hold.
    - ``lock_model``: a :class:`joblocks.JobLockModel`, the name of a configured
      instance, or None for the default model.
    - ``lock_schedule``: ``BEAT`` to start at most once per slot of the task's
      ``crontab`` in ``beat_schedule`` (:func:`beat_crontab_schedule`; the slot is the
      one of the database's now when the copy starts), a cron expression (with
      ``lock_timezone``) or a :class:`joblocks.Schedule`; default None (no schedule).
      With a schedule, ``lock_min_hold = BEAT`` keeps no derived hold. A task with no
      crontab entry (or none with a cron equivalent, logged) keeps the hold.

    A skipped run returns ``None`` (logged at info: "skipped: held elsewhere"). Each
    run takes the lease under a holder of its own, so the hold also refuses a copy
    that the same worker process receives afterwards. Calling the task directly or
    with ``apply()`` takes the lock too.
    """

    lock_key: str | None = None
    lock_ttl: _support.Duration = 60_000
    lock_keepalive: bool = True
    lock_renew_every: _support.Duration | None = None
    lock_max_hold: _support.Duration | None = None
    lock_min_hold: MinHold = BEAT
    lock_wait: _support.Duration | None = None
    lock_model: JobLockModel | str | None = None
    lock_schedule: str | Schedule | None = None
    lock_timezone: str | None = None

    _joblocks_key: KeyTemplate | None = None
    _joblocks_options: tuple[tuple[Any, ...], LeaseOptions]
    _joblocks_schedule: tuple[Schedule | None] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Checked when the task is defined (``@app.task`` makes the subclass).
        cls._joblocks_options = _options_of(_option_values(cls))
        model = cls.lock_model
        if model is not None and not isinstance(model, (str, JobLockModel)):
            raise TypeError(
                "lock_model must be a joblocks.JobLockModel, an instance name or None, "
                f"not {type(model).__name__}"
            )
        if cls.lock_key is not None:
            template = KeyTemplate(cls.lock_key, name="lock_key")
            run = cls.__dict__.get("run")
            if run is not None and not template.is_static:
                fn = run.__func__ if isinstance(run, staticmethod) else run
                KeyTemplate(cls.lock_key, _without_first(fn, isinstance(run, staticmethod)))

    def _lock_template(self) -> KeyTemplate:
        template = self._joblocks_key
        if template is None:
            text = self.lock_key if self.lock_key is not None else f"celery:{self.name}"
            template = KeyTemplate(text, self.run, name="lock_key")
            self._joblocks_key = template
        return template

    def _lock_model(self) -> JobLockModel:
        model = self.lock_model
        if isinstance(model, JobLockModel):
            return model
        return get_model(model)  # type: ignore[no-any-return]

    def _lock_options(self) -> LeaseOptions:
        """The lease options, checked once; again only if a ``lock_*`` attribute was
        changed after the task was defined (e.g. by ``task_annotations``)."""
        values = _option_values(self)
        if self._joblocks_options[0] != values:
            self._joblocks_options = _options_of(values)
        return self._joblocks_options[1]

    def _lock_schedule(self, options: LeaseOptions) -> Schedule | None:
        """The schedule of this task's runs: ``lock_schedule``'s, or under ``BEAT`` the
        task's crontab in ``beat_schedule`` (read once)."""
        if self.lock_schedule != BEAT:
            return options.schedule
        known = self._joblocks_schedule
        if known is None:
            found: Schedule | None = None
            try:
                found = beat_crontab_schedule(self.app, self.name)
            except ValueError as exc:
                log.warning("joblocks: task %s runs without a schedule: %s", self.name, exc)
            known = self._joblocks_schedule = (found,)
        return known[0]

    def _lock_min_hold_ms(self, schedule: Schedule | None) -> int | None:
        """This run's hold (ms) under ``BEAT``; None: the one the options carry (none
        with a schedule: the slot holds)."""
        if self.lock_min_hold == BEAT and schedule is None:
            return beat_min_hold(self.app, self.name)
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task body under the task's lock; ``None`` when it is held elsewhere."""
        key = self._lock_template().render(args, kwargs)
        call = super().__call__
        options = self._lock_options()
        schedule = self._lock_schedule(options)
        taken, result = run_leased(
            self._lock_model(),
            key,
            options,
            lambda: call(*args, **kwargs),
            holder=unique_holder(),
            min_hold_ms=self._lock_min_hold_ms(schedule),
            schedule=schedule,
        )
        if taken.lease is None:
            request_id = getattr(self.request, "id", None)
            log.info(
                "joblocks: task %s[%s] skipped: %s (lock %r)",
                self.name,
                request_id,
                "its slot was already run"
                if isinstance(taken, _support.Skipped)
                else "held elsewhere",
                key,
            )
        return result


def _option_values(task: Any) -> tuple[Any, ...]:
    return (
        task.lock_ttl,
        task.lock_keepalive,
        task.lock_renew_every,
        task.lock_min_hold,
        task.lock_wait,
        task.lock_max_hold,
        task.lock_schedule,
        task.lock_timezone,
    )


def _options_of(values: tuple[Any, ...]) -> tuple[tuple[Any, ...], LeaseOptions]:
    """The lease options of a task's ``lock_*`` values (see :func:`_option_values`);
    under ``BEAT`` each run gives its own hold."""
    ttl, keepalive, renew_every, min_hold, wait, max_hold, schedule, zone = values
    ttl_ms = _support.duration_ms(ttl, "lock_ttl")
    if isinstance(min_hold, str):
        if min_hold != BEAT:
            raise ValueError(f"lock_min_hold must be a duration, None or BEAT, not {min_hold!r}")
        min_hold = None
    options = LeaseOptions(
        ttl_ms=ttl_ms,
        holder=None,
        keepalive=keepalive,
        renew_every=renew_every,
        min_hold=min_hold,
        wait=wait,
        on_lost=None,
        max_hold=max_hold,
        # under BEAT, the schedule is the task's crontab, read at its first run
        schedule=None if schedule == BEAT else schedule,
        timezone=None if schedule == BEAT else zone,
    )
    return values, options


def _without_first(fn: Callable[..., Any], static: bool) -> Callable[..., Any]:
    """``fn`` as the task calls it: a bound task (``bind=True``) drops ``self``."""
    if static:
        return fn
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())[1:]

    def stub(*args: Any, **kwargs: Any) -> None:  # only its signature is used
        return None

    stub.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    stub.__qualname__ = getattr(fn, "__qualname__", "run")
    return stub
