"""KeyboardInterrupt, SystemExit and cancellation in work: release runs, the error propagates."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import joblocks
import joblocks.aio

from ...support import aio as _aio


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_sync_work_interrupted_still_releases(
    db_url: str, table_name: str, exc: type[BaseException]
) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)

    def work() -> None:
        raise exc()

    with pytest.raises(exc):
        joblocks.run_with_lock("job", 30_000, work, model=model)
    assert model.peek("job") is None
    model.dispose()


def test_async_work_cancelled_still_releases(db_url: str, table_name: str) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        started = asyncio.Event()

        async def work() -> None:
            started.set()
            await asyncio.sleep(30)

        task = asyncio.create_task(joblocks.aio.run_with_lock("job", 30_000, work, model=model))
        await _aio.started(started, task)
        assert (await model.peek("job")) is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await model.peek("job")) is None
        # The in-process guard was released too: the key runs again.
        ran: list[Any] = []

        async def again() -> None:
            ran.append(1)

        assert await joblocks.aio.run_with_lock("job", 30_000, again, model=model)
        assert ran == [1]
        await model.dispose()

    asyncio.run(main())


def test_async_overlap_in_one_process_is_refused(db_url: str, table_name: str) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        inside = asyncio.Event()
        leave = asyncio.Event()

        async def long_work() -> None:
            inside.set()
            await leave.wait()

        async def other() -> None:
            raise AssertionError("must not run")

        first = asyncio.create_task(
            joblocks.aio.run_with_lock("job", 30_000, long_work, model=model)
        )
        await _aio.started(inside, first)
        assert await joblocks.aio.run_with_lock("job", 30_000, other, model=model) is False
        # The sync face shares the guard for the same database and table.
        sync_model = joblocks.JobLockModel(db_url, table_name=table_name)
        assert joblocks.run_with_lock("job", 30_000, lambda: None, model=sync_model) is False
        sync_model.dispose()
        leave.set()
        assert await first is True
        await model.dispose()

    asyncio.run(main())
