"""Celery: ``lock_schedule`` — one start per slot of the task's crontab in beat_schedule."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab

import joblocks
from joblocks import Schedule
from joblocks.contrib.celery import (
    BEAT,
    SingleInstanceTask,
    beat_crontab_schedule,
    crontab_schedule,
)

from ...support.contrib import LOCK_DBS, lock_db_url

UTC = timezone.utc


@pytest.fixture(params=LOCK_DBS)
def model(request: pytest.FixtureRequest, tmp_path: Path, table_name: str) -> Iterator[Any]:
    made = joblocks.JobLockModel(
        lock_db_url(request, str(request.param), tmp_path), table_name=table_name
    )
    yield made
    made.dispose()


def app(zone: str = "UTC") -> Celery:
    made = Celery(f"joblocks_{uuid.uuid4().hex[:6]}", set_as_current=False)
    made.conf.timezone = zone
    return made


@pytest.mark.parametrize(
    ("fields", "expression"),
    [
        ({"minute": "*/5"}, "*/5 * * * *"),
        ({"minute": 30, "hour": 3, "day_of_week": "mon-fri"}, "30 3 * * mon-fri"),
        ({"minute": 0, "hour": [1, 13]}, "0 1,13 * * *"),
        ({"minute": 0, "hour": 0, "day_of_month": "1", "month_of_year": "*/3"}, "0 0 1 */3 *"),
    ],
)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_crontab_schedule_fires_with_celery(
    fields: dict[str, Any], expression: str, zone: str
) -> None:
    """The slots' ends are the crontab's own next fire times (Celery's is_due)."""
    cron = crontab(app=app(zone), **fields)
    schedule = crontab_schedule(cron)
    assert (schedule.expression, schedule.timezone) == (expression, zone)
    now = datetime(2026, 7, 1, 0, 0, 7, tzinfo=UTC)
    for _ in range(12):
        end = schedule.slot(round(now.timestamp() * 1000))[1]
        # Celery: the next fire after `now` for a run last at `now`
        remaining = cron.remaining_delta(now.astimezone(cron.tz), tz=cron.tz)
        fire = cron.maybe_make_aware(remaining[0] + remaining[1])
        assert end == round(fire.timestamp() * 1000), (now, fire)
        now = fire + timedelta(seconds=7)


def test_beat_crontab_schedule() -> None:
    local = app("Europe/Berlin")
    local.conf.beat_schedule = {
        "a": {"task": "t.cron", "schedule": crontab(minute="*/5")},
        "b": {"task": "t.every", "schedule": 30.0},
        "c": {"task": "t.two", "schedule": crontab(minute="*/5")},
        "d": {"task": "t.two", "schedule": crontab(minute="*/7")},
    }
    assert beat_crontab_schedule(local, "t.cron") == Schedule.parse("*/5 * * * *", "Europe/Berlin")
    assert beat_crontab_schedule(local, "t.every") is None
    assert beat_crontab_schedule(local, "t.absent") is None
    with pytest.raises(ValueError, match="2 different crontabs"):
        beat_crontab_schedule(local, "t.two")
    with pytest.raises(ValueError, match="both day_of_month and day_of_week"):
        crontab_schedule(crontab(day_of_month=1, day_of_week="mon", app=local))


def test_task_runs_once_per_slot(
    model: joblocks.JobLockModel, caplog: pytest.LogCaptureFixture
) -> None:
    local = app()
    name = f"t.yearly.{uuid.uuid4().hex[:6]}"
    # yearly: the test is well inside one slot
    local.conf.beat_schedule = {
        "y": {"task": name, "schedule": crontab(0, 0, day_of_month=1, month_of_year=1)}
    }
    runs: list[int] = []

    @local.task(base=SingleInstanceTask, name=name, lock_model=model, lock_schedule=BEAT)
    def job(n: int) -> int:
        runs.append(n)
        return n

    assert job(1) == 1
    with caplog.at_level(logging.INFO, logger="joblocks"):
        assert job(2) is None  # another copy of the same slot, after the first ended
    assert runs == [1]
    assert any("its slot was already run" in r.getMessage() for r in caplog.records)
    row = model.peek(f"celery:{name}")
    assert row is not None
    slot = Schedule.parse("0 0 1 1 *").slot(round(row.acquired_at.timestamp() * 1000))
    assert round(row.expires_at.timestamp() * 1000) == slot[1]


def test_task_with_an_expression(model: joblocks.JobLockModel) -> None:
    local = app()

    @local.task(
        base=SingleInstanceTask,
        name=f"t.expr.{uuid.uuid4().hex[:6]}",
        lock_model=model,
        lock_schedule="0 0 1 1 *",
        lock_timezone="Europe/Berlin",
    )
    def job() -> str:
        return "ran"

    assert job() == "ran"
    assert job() is None


def test_bad_schedule_when_the_task_is_made() -> None:
    local = app()

    def body() -> None: ...

    def make(**options: Any) -> Any:
        task = local.task(base=SingleInstanceTask, name=f"t.{uuid.uuid4().hex}", **options)
        return task(body).run  # evaluates the lazy task (and its class)

    with pytest.raises(ValueError, match="not a valid cron expression"):
        make(lock_schedule="61 * * * *")
    with pytest.raises(ValueError, match="timezone needs schedule="):
        make(lock_timezone="UTC")
