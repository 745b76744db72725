"""APScheduler 3.x: ``cron_schedule`` (a CronTrigger as a Schedule) and
``LockedExecutor(schedule=True)`` (one run per slot of the job's trigger)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

import joblocks
from joblocks.contrib.apscheduler import cron_schedule

from ...support.contrib import LOCK_DBS, lock_db_url
from .test_apscheduler import _run_once_now, _scheduler

UTC = timezone.utc


@pytest.fixture(params=LOCK_DBS)
def model(request: pytest.FixtureRequest, tmp_path: Path, table_name: str) -> Iterator[Any]:
    made = joblocks.JobLockModel(
        lock_db_url(request, str(request.param), tmp_path), table_name=table_name
    )
    yield made
    made.dispose()


TRIGGERS = [
    ({"minute": "*/5"}, "*/5 * * * *"),
    ({"hour": 3, "minute": 30, "day_of_week": "mon-fri"}, "30 3 * * 1,2,3,4,5"),
    ({"hour": 2, "day_of_week": "sat-sun"}, "0 2 * * 0,6"),
    ({"hour": 2, "day_of_week": "*/2"}, "0 2 * * 0,1,3,5"),  # APScheduler: from Monday
    ({"day": "last", "hour": 23}, "0 23 L * *"),
    ({"month": "jan-mar", "day": 1}, "0 0 1 jan-mar *"),
    ({"second": "*/20"}, "*/20 * * * * *"),
]


@pytest.mark.parametrize(("fields", "expression"), TRIGGERS)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York"])
def test_cron_schedule_fires_with_the_trigger(
    fields: dict[str, Any], expression: str, zone: str
) -> None:
    """The slots' ends are the trigger's own next fire times (away from DST changes:
    see test_dst_repeat_is_one_slot)."""
    trigger = CronTrigger(timezone=zone, **fields)
    schedule = cron_schedule(trigger)
    assert (schedule.expression, schedule.timezone) == (expression, zone)
    now = datetime(2026, 7, 1, tzinfo=UTC)
    for _ in range(16):
        end = schedule.slot(round(now.timestamp() * 1000))[1]
        fire = trigger.get_next_fire_time(None, now + timedelta(milliseconds=1))
        assert end == round(fire.timestamp() * 1000), (now, fire)
        now = fire + timedelta(seconds=7)


def test_dst_repeat_is_one_slot() -> None:
    """APScheduler fires a 02:00 job twice when Berlin's clocks go back (02:00 CEST and
    02:00 CET); the schedule follows Debian cron: one slot, so the second fire is
    skipped — the job runs once that night."""
    trigger = CronTrigger(hour=2, timezone="Europe/Berlin")
    schedule = cron_schedule(trigger)
    first = trigger.get_next_fire_time(None, datetime(2026, 10, 24, 12, tzinfo=UTC))
    second = trigger.get_next_fire_time(None, first + timedelta(seconds=1))
    assert second.astimezone(UTC) - first.astimezone(UTC) == timedelta(hours=1)
    at = [round(t.timestamp() * 1000) for t in (first, second)]
    assert schedule.slot(at[0]) == schedule.slot(at[1])


def test_from_crontab_keeps_apschedulers_weekdays() -> None:
    # APScheduler 3 reads day-of-week 0 as Monday, even from a crontab line: the
    # schedule follows what the trigger fires, not the text
    trigger = CronTrigger.from_crontab("0 3 * * 0", timezone="UTC")
    assert cron_schedule(trigger).expression == "0 3 * * 1"


@pytest.mark.parametrize(
    ("trigger", "words"),
    [
        (CronTrigger(year=2027), "year"),
        (CronTrigger(week=5), "week"),
        (CronTrigger(day="1st mon"), "day="),
        (CronTrigger(day=1, day_of_week="mon"), "both day and day_of_week"),
        (IntervalTrigger(minutes=5), "not a CronTrigger"),
    ],
)
def test_no_cron_equivalent(trigger: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        cron_schedule(trigger)


def _cron_job(scheduler: Any, func: Any, job_id: str) -> None:
    # a yearly trigger: the test is well inside one slot
    scheduler.add_job(func, "cron", month=1, day=1, id=job_id)


def test_executor_runs_once_per_slot(
    model: joblocks.JobLockModel, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    for replica in ("a", "b"):
        scheduler = _scheduler(model=model, schedule=True)
        _cron_job(scheduler, lambda replica=replica: calls.append(replica), "yearly")
        scheduler.start(paused=True)
        try:
            job = scheduler.get_job("yearly")
            executor = scheduler._lookup_executor("default")
            # fire the cron job now, as the scheduler does at its fire time
            with caplog.at_level(logging.INFO, logger="joblocks"):
                executor._run_locked(
                    "apscheduler:yearly", job, "default", [datetime.now(UTC)], "test"
                )
        finally:
            scheduler.shutdown(wait=True)
    assert calls == ["a"]
    assert any("its slot was already run" in r.getMessage() for r in caplog.records)
    row = model.peek("apscheduler:yearly")
    assert row is not None
    slot = cron_schedule(CronTrigger(month=1, day=1, timezone=UTC)).slot(
        round(row.acquired_at.timestamp() * 1000)
    )
    assert round(row.expires_at.timestamp() * 1000) == slot[1]  # kept to the slot's end


def test_executor_without_schedule_keeps_the_derived_hold(model: joblocks.JobLockModel) -> None:
    _run_once_now(_scheduler(model=model, schedule=True), lambda: None, "once")  # a date job
    row = model.peek("apscheduler:once")
    assert row is not None
    held_ms = (row.expires_at - row.acquired_at).total_seconds() * 1000
    assert 30_000 < held_ms < 60_000  # misfire_grace_time 30 s + skew: as without schedule


def test_schedule_option_is_a_bool() -> None:
    from joblocks.contrib.apscheduler import LockedExecutor

    with pytest.raises(TypeError, match="schedule must be a bool"):
        LockedExecutor(schedule="*/5 * * * *")  # type: ignore[arg-type]


@pytest.mark.slow  # real 4 s slots: test_executor_runs_once_per_slot fires the executor by hand
def test_two_real_schedulers_fire_apart_and_run_once_per_slot(
    model: joblocks.JobLockModel,
) -> None:
    """Two running BackgroundSchedulers fire the same 4-second cron slots, each with
    up to 2.5 s of jitter (so they fire apart, in either order): one run per slot."""
    import threading
    import time

    from apscheduler.schedulers.background import BackgroundScheduler

    from joblocks.contrib.apscheduler import LockedExecutor

    runs: list[tuple[str, int]] = []
    lock = threading.Lock()

    def job(replica: str) -> None:
        with lock:
            runs.append((replica, round(time.time() * 1000)))

    schedulers = []
    for replica in ("a", "b"):
        scheduler = BackgroundScheduler(
            executors={"default": LockedExecutor(model=model, schedule=True)},
            job_defaults={"misfire_grace_time": 30},
            timezone=UTC,
        )
        trigger = CronTrigger(second="*/4", jitter=2.5, timezone=UTC)
        scheduler.add_job(job, trigger, args=(replica,), id="tick")
        schedulers.append(scheduler)
    schedule = cron_schedule(CronTrigger(second="*/4", timezone=UTC))
    # start just after a slot began: the schedulers' first fire is the next slot's
    # start; stop after three slots with fires
    end = schedule.slot(round(time.time() * 1000))[1]
    time.sleep(max(0.0, end / 1000 - time.time()) + 0.05)
    first = schedule.slot(round(time.time() * 1000))[1]
    for scheduler in schedulers:
        scheduler.start()
    try:
        time.sleep(max(0.0, (first + 3 * 4_000) / 1000 - time.time()) + 0.5)
    finally:
        for scheduler in schedulers:
            scheduler.shutdown(wait=True)
    slots = Counter(schedule.slot(at)[0] for _, at in runs)
    whole = [first + i * 4_000 for i in range(3)]
    assert [slots[s] for s in whole] == [1, 1, 1], runs
    assert max(slots.values()) == 1, runs
