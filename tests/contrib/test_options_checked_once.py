"""The integrations check their lease options once, when they are set up, and keep them:
a run takes its lease from those options with a holder (and a hold) of its own, and
builds no new ``LeaseOptions``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
import joblocks.aio
from joblocks._core.options import LeaseOptions

RUNS = 3
WAIT_S = 20.0


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many ``LeaseOptions`` were built (and so checked) since the fixture began."""
    count = [0]
    original = LeaseOptions.__init__

    def counting(self: LeaseOptions, **kwargs: Any) -> None:
        count[0] += 1
        original(self, **kwargs)

    monkeypatch.setattr(LeaseOptions, "__init__", counting)
    return count


@pytest.fixture
def model(tmp_path: Path) -> Iterator[joblocks.JobLockModel]:
    made = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'once.db'}")
    yield made
    made.dispose()


def test_single_instance(built: list[int], model: joblocks.JobLockModel) -> None:
    calls: list[int] = []

    @joblocks.single_instance("once:decorated", 60_000, model=model)
    def job(n: int) -> None:
        calls.append(n)

    assert built[0] == 1
    for n in range(RUNS):
        job(n)
    assert calls == list(range(RUNS))
    assert built[0] == 1


def test_celery_task(built: list[int], model: joblocks.JobLockModel) -> None:
    from celery import Celery

    from joblocks.contrib.celery import SingleInstanceTask

    app = Celery("joblocks_once")

    @app.task(base=SingleInstanceTask, name="once.job", lock_model=model, lock_min_hold=None)
    def job(n: int) -> int:
        return n * 2

    assert job(5) == 10  # the task class is made (and checked) on first use
    made = built[0]
    assert made >= 1
    assert [job(n) for n in range(RUNS)] == [0, 2, 4]
    assert built[0] == made
    # Changed after the task was made (as task_annotations does): checked again, once.
    job.lock_ttl = 30_000
    assert [job(n) for n in range(RUNS)] == [0, 2, 4]
    assert built[0] == made + 1
    job.lock_ttl = 0
    with pytest.raises(ValueError, match="lock_ttl"):
        job(1)


def test_apscheduler_executor(built: list[int], model: joblocks.JobLockModel) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    from joblocks.contrib.apscheduler import LockedExecutor

    executor = LockedExecutor(model=model, min_hold=0)
    made = built[0]
    ran: list[int] = []
    done = threading.Event()

    def job(n: int) -> None:
        ran.append(n)
        if len(ran) == RUNS:
            done.set()

    scheduler = BackgroundScheduler(executors={"default": executor})
    for n in range(RUNS):
        scheduler.add_job(job, args=(n,), id=f"once-{n}")
    scheduler.start()
    try:
        assert done.wait(WAIT_S), f"only {len(ran)} of {RUNS} runs within {WAIT_S} s"
    finally:
        scheduler.shutdown(wait=True)
    assert sorted(ran) == list(range(RUNS))
    assert built[0] == made


def test_singleton_loop(built: list[int], tmp_path: Path) -> None:
    from joblocks.contrib.starlette import SingletonLoop

    async def main() -> int:
        model = joblocks.aio.JobLockModel(f"sqlite:///{tmp_path / 'loop.db'}")
        ticks = asyncio.Event()
        count = [0]

        async def tick() -> None:
            count[0] += 1
            if count[0] >= RUNS:
                ticks.set()

        try:
            loop = SingletonLoop("once:loop", 20, tick, ttl=5_000, retry_every=20, model=model)
            made = built[0]
            async with loop:
                await asyncio.wait_for(ticks.wait(), WAIT_S)
            return built[0] - made
        finally:
            await model.dispose()

    assert asyncio.run(main()) == 0
