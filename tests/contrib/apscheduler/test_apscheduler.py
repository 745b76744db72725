"""APScheduler 3.x: ``LockedExecutor`` and ``locked_job`` against real schedulers.

The main scenario runs two replicas — two processes, each with a real
``BackgroundScheduler`` — that schedule the same jobs and fire the same slots, one of
them a few hundred milliseconds late for the "skewed" jobs. Each run and each skip is
written to a shared file; every slot must have exactly one run and one skip.

This module is also the replica program: ``python -m tests.contrib.apscheduler.test_apscheduler``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler

import joblocks
import joblocks.aio
from joblocks.contrib.apscheduler import (
    DEFAULT_CLOCK_SKEW_MS,
    NO_NEXT_FIRE_HOLD_MS,
    LockedExecutor,
    derived_min_hold,
    locked_job,
)

from ...support.contrib import LOCK_DBS, PYTHON, ROOT, child_env, configured, lock_db_url

UTC = timezone.utc
OTHER = "another-replica"
#: This module as the replica program (``python -m``).
REPLICA = "tests.contrib.apscheduler.test_apscheduler"
PERIOD_S = 2
SLOTS = 4
SKEW_S = 0.4  # how late replica "b" fires the skewed jobs


@pytest.fixture(params=LOCK_DBS)
def lock_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return lock_db_url(request, str(request.param), tmp_path)


@pytest.fixture
def model(lock_db: str, table_name: str) -> Iterator[joblocks.JobLockModel]:
    made = joblocks.JobLockModel(lock_db, table_name=table_name)
    yield made
    made.dispose()


# -- the replica program ------------------------------------------------------------------


def _record(out: Path, what: str, job: str, replica: str, start_at: float) -> None:
    slot = math.floor((time.time() - start_at + 0.5) / PERIOD_S)
    line = json.dumps({"what": what, "job": job, "slot": slot, "replica": replica}) + "\n"
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _work(out: Path, job: str, replica: str, start_at: float) -> None:
    _record(out, "run", job, replica, start_at)
    time.sleep(0.05)  # a short job: done long before the other replica fires


def replica_main(argv: list[str]) -> None:
    """One replica: schedule three jobs, fire them until ``end_at``, then stop."""
    url, table, out_text, replica = argv
    out = Path(out_text)
    model = joblocks.JobLockModel(url, table_name=table)
    model.now_ms()  # connect (and create the table) before the first fire
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())  # the first slot, the same for both replicas
    end_at = start_at + PERIOD_S * (SLOTS - 1) + 1
    late = SKEW_S if replica == "b" else 0.0
    job_of_key = {
        "apscheduler:cron-exec": "cron-exec",
        "apscheduler:skewed-exec": "skewed-exec",
    }

    def on_event(event: joblocks.Event) -> None:
        if event.kind == "conflict":
            job = job_of_key.get(event.key, "skewed-wrapped")
            _record(out, "skip", job, replica, start_at)

    joblocks.add_listener(on_event)

    def cron_exec() -> None:
        _work(out, "cron-exec", replica, start_at)

    def skewed_exec() -> None:
        _work(out, "skewed-exec", replica, start_at)

    @locked_job(ttl=10_000, min_hold=PERIOD_S * 1000 / 2, model=model)
    def skewed_wrapped() -> None:
        _work(out, "skewed-wrapped", replica, start_at)

    start = datetime.fromtimestamp(start_at, UTC)
    end = datetime.fromtimestamp(end_at, UTC)
    scheduler = BackgroundScheduler(
        executors={"default": LockedExecutor(model=model), "plain": ThreadPoolExecutor()},
        timezone=UTC,
    )
    # Every replica fires the same cron slots (a few ms apart) ...
    scheduler.add_job(
        cron_exec, "cron", second=f"*/{PERIOD_S}", start_date=start, end_date=end, id="cron-exec"
    )
    # ... and replica "b" fires the skewed jobs SKEW_S late.
    skewed = {"seconds": PERIOD_S, "start_date": start + timedelta(seconds=late), "end_date": end}
    scheduler.add_job(skewed_exec, "interval", id="skewed-exec", **skewed)
    scheduler.add_job(skewed_wrapped, "interval", id="skewed-wrapped", executor="plain", **skewed)
    scheduler.start()
    print("started", flush=True)
    time.sleep(max(0.0, end_at + 1 - time.time()))
    scheduler.shutdown(wait=True)
    model.dispose()
    print("done", flush=True)


# -- the two-replica scenario ---------------------------------------------------------------


@pytest.mark.races
def test_two_replicas_run_each_slot_once(lock_db: str, table_name: str, tmp_path: Path) -> None:
    out = tmp_path / "runs.jsonl"
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "tests.contrib.apscheduler.test_apscheduler",
                lock_db,
                table_name,
                str(out),
                r,
            ],
            cwd=ROOT,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in ("a", "b")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=30)
        # The next even second at least 1.5 s away: time for both schedulers to start.
        start_at = float(math.ceil((time.time() + 1.5) / PERIOD_S) * PERIOD_S)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start_at}\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (stdout, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stderr
        assert stdout.split() == ["started", "done"], stderr

    records = [json.loads(line) for line in out.read_text().splitlines()]
    for job in ("cron-exec", "skewed-exec", "skewed-wrapped"):
        runs = Counter(r["slot"] for r in records if r["job"] == job and r["what"] == "run")
        skips = Counter(r["slot"] for r in records if r["job"] == job and r["what"] == "skip")
        expected = dict.fromkeys(range(SLOTS), 1)
        assert dict(runs) == expected, (job, records)  # exactly one run per slot
        assert dict(skips) == expected, (job, records)  # and the other replica skipped it
    # The late replica is the one refused on the skewed jobs.
    late = {r["replica"] for r in records if r["what"] == "skip" and r["job"] != "cron-exec"}
    assert late == {"b"}, records


# -- in-process behaviour ----------------------------------------------------------------


def _scheduler(**executor: Any) -> BackgroundScheduler:
    return BackgroundScheduler(
        executors={"default": LockedExecutor(**executor)},
        job_defaults={"misfire_grace_time": 30},
        timezone=UTC,
    )


def _run_once_now(
    scheduler: BackgroundScheduler, func: Any, job_id: str | None, timeout: float = 10.0
) -> list[JobExecutionEvent]:
    """Schedule ``func`` to fire once now; wait until the executor has finished it."""
    events: list[JobExecutionEvent] = []
    scheduler.add_listener(events.append, EVENT_JOB_EXECUTED)
    scheduler.add_job(func, "date", run_date=datetime.now(UTC), id=job_id)
    scheduler.start()
    try:
        # A skipped run dispatches no event: wait for the executor to have no instances.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            executor = scheduler._lookup_executor("default")
            if scheduler.get_jobs() == [] and not any(executor._instances.values()):
                break
            time.sleep(0.02)
    finally:
        scheduler.shutdown(wait=True)
    return events


def test_executor_runs_the_job_under_its_lock(model: joblocks.JobLockModel) -> None:
    seen: list[Any] = []

    def job() -> str:
        row = model.peek("apscheduler:nightly")
        seen.append(row and row.holder.startswith(joblocks.worker_id() + "/"))
        return "done"

    events = _run_once_now(_scheduler(model=model, min_hold=0), job, "nightly")
    assert seen == [True]
    assert [e.retval for e in events] == ["done"]
    assert model.peek("apscheduler:nightly") is None  # released (no hold asked)


def test_executor_skips_when_held_elsewhere(
    model: joblocks.JobLockModel, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    assert model.acquire("apscheduler:nightly", 60_000, OTHER)
    with caplog.at_level(logging.INFO, logger="joblocks"):
        events = _run_once_now(_scheduler(model=model), lambda: calls.append(1), "nightly")
    assert calls == []
    assert events == []  # no job event for a skipped fire
    assert any("skipped: held elsewhere" in r.getMessage() for r in caplog.records)
    assert model.peek("apscheduler:nightly").holder == OTHER


def test_executor_keeps_the_derived_hold(model: joblocks.JobLockModel) -> None:
    # A date job with misfire_grace_time=30: kept 30 s + the clock-skew allowance.
    _run_once_now(_scheduler(model=model), lambda: None, "once")
    row = model.peek("apscheduler:once")
    assert row is not None
    assert not row.expired
    held_ms = (row.expires_at - row.acquired_at).total_seconds() * 1000
    assert 30_000 < held_ms <= 30_000 + DEFAULT_CLOCK_SKEW_MS + 1_000


def test_executor_refuses_generated_ids(
    model: joblocks.JobLockModel, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    with caplog.at_level(logging.ERROR):
        _run_once_now(_scheduler(model=model), lambda: calls.append(1), None)
    assert calls == []
    assert any("generated id" in str(r.exc_info and r.exc_info[1]) for r in caplog.records)


def test_executor_custom_key(model: joblocks.JobLockModel) -> None:
    keys: list[str] = []

    def job() -> None:
        keys.extend(row.key for row in model.list())

    _run_once_now(_scheduler(model=model, key=lambda j: f"team-a:{j.id}"), job, "sync")
    assert keys == ["team-a:sync"]


def test_executor_uses_the_default_model(lock_db: str, table_name: str) -> None:
    ran: list[str] = []
    with configured(lock_db, table_name=table_name):
        _run_once_now(
            _scheduler(),
            lambda: ran.extend(r.key for r in joblocks.get_model().list()),
            "configured",
        )
    assert ran == ["apscheduler:configured"]


def test_executor_validates_its_options() -> None:
    with pytest.raises(ValueError, match="ttl must be positive"):
        LockedExecutor(ttl=0)
    with pytest.raises(ValueError, match=r"renew_every .* shorter than ttl"):
        LockedExecutor(ttl=1_000, renew_every=5_000)
    with pytest.raises(ValueError, match="min_hold must be >= 0"):
        LockedExecutor(min_hold=-5)
    with pytest.raises(TypeError, match="key must be callable"):
        LockedExecutor(key="fixed")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"model must be a joblocks\.JobLockModel"):
        LockedExecutor(model="sqlite://")  # type: ignore[arg-type]


def _job(trigger: str, grace: int | None, **trigger_args: Any) -> Any:
    scheduler = BackgroundScheduler(timezone=UTC)
    return scheduler.add_job(
        print, trigger, misfire_grace_time=grace, id="j", timezone=UTC, **trigger_args
    )


def test_derived_min_hold() -> None:
    t = datetime(2030, 1, 1, 3, 0, 0, tzinfo=UTC)
    # Halfway to the next fire, when that is sooner than grace + skew.
    assert derived_min_hold(_job("cron", 1, second="*/2"), t, now=t) == 1_000
    assert derived_min_hold(_job("interval", None, seconds=10), t, now=t) == 5_000
    # Grace + skew, when that is sooner (a daily job, the default 1 s grace).
    daily = _job("cron", 1, hour=3)
    assert derived_min_hold(daily, t, now=t) == 1_000 + DEFAULT_CLOCK_SKEW_MS
    assert derived_min_hold(daily, t, now=t, clock_skew=0) == 1_000
    # Measured from now: later means shorter, never negative.
    assert derived_min_hold(daily, t, now=t + timedelta(seconds=2)) == 4_000
    assert derived_min_hold(daily, t, now=t + timedelta(hours=1)) == 0
    # A date job: no next fire; grace + skew, or the fixed hold without a grace.
    once = {"run_date": t}
    assert derived_min_hold(_job("date", 20, **once), t, now=t) == 25_000
    assert derived_min_hold(_job("date", None, **once), t, now=t) == NO_NEXT_FIRE_HOLD_MS


def test_locked_job_wraps_sync_and_async_jobs(model: joblocks.JobLockModel) -> None:
    def report() -> str:
        return next(row.key for row in model.list())

    locked = locked_job(ttl=10_000, min_hold=None, model=model)(report)
    qualname = "test_locked_job_wraps_sync_and_async_jobs.<locals>.report"
    assert locked() == f"apscheduler:{__name__}.{qualname}"
    named = locked_job(key="cron:report", ttl=10_000, min_hold=5_000, model=model)(report)
    assert named() == "cron:report"
    assert model.peek("cron:report") is not None  # kept by min_hold


def test_locked_job_under_asyncio_scheduler(lock_db: str, table_name: str) -> None:
    async def scenario() -> list[str]:
        amodel = joblocks.aio.JobLockModel(lock_db, table_name=table_name)
        ran: list[str] = []
        finished = asyncio.Event()

        @locked_job(ttl=10_000, min_hold=1_000, model=amodel)
        async def refresh() -> None:
            ran.extend(row.key for row in await amodel.list())
            finished.set()

        scheduler = AsyncIOScheduler(timezone=UTC)
        scheduler.add_job(refresh, "date", run_date=datetime.now(UTC), id="refresh")
        scheduler.start()
        try:
            await asyncio.wait_for(finished.wait(), 10)
        finally:
            scheduler.shutdown(wait=False)
            await asyncio.sleep(0.1)
            await amodel.dispose()
        return ran

    ran = asyncio.run(scenario())
    assert len(ran) == 1
    assert ran[0].endswith(".refresh")


if __name__ == "__main__":
    replica_main(sys.argv[1:])
