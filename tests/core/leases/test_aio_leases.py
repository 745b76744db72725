"""What only the asyncio face has (cancellation on loss), and renewer lifetimes."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from typing import Any

import pytest

import joblocks
import joblocks.aio
from joblocks._async import keepalive as _aio_keepalive
from joblocks._sync import keepalive as _keepalive

from ...support import aio as _aio


def test_cancel_on_loss_cancels_the_work(db_url: str, table_name: str) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        started = asyncio.Event()
        cancelled: list[bool] = []

        async def work() -> None:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        run = asyncio.create_task(
            joblocks.aio.run_with_lock(
                "job",
                2_000,
                work,
                model=model,
                keepalive=True,
                renew_every=50,
                cancel_on_loss=True,
            )
        )
        await _aio.started(started, run)
        await model.delete("job")  # the lease is broken under the work
        began = time.monotonic()
        with pytest.raises(joblocks.LeaseLost, match="job"):
            await run
        assert time.monotonic() - began < 1.0
        assert cancelled == [True]
        await model.dispose()

    asyncio.run(main())


def test_async_lease_context_manager_and_cancel_on_loss(db_url: str, table_name: str) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        async with joblocks.aio.lease("job", 5_000, model=model) as held:
            assert (await model.peek("job")).fence == held.token
            with pytest.raises(joblocks.LockNotAcquired):
                async with joblocks.aio.lease("job", 5_000, model=model, holder="other"):
                    pass
        assert await model.peek("job") is None

        async def stolen_under_the_block() -> None:
            async with joblocks.aio.lease(
                "job", 2_000, model=model, keepalive=True, renew_every=50, cancel_on_loss=True
            ):
                await model.update("job", holder="thief")
                await asyncio.sleep(30)

        with pytest.raises(joblocks.LeaseLost):
            await stolen_under_the_block()
        assert (await model.peek("job")).holder == "thief"

        async def cancel_without_keepalive() -> None:
            async with joblocks.aio.lease("job2", 1_000, model=model, cancel_on_loss=True):
                pass

        with pytest.raises(ValueError, match="keepalive=True"):
            await cancel_without_keepalive()
        await model.dispose()

    asyncio.run(main())


def test_one_task_renews_many_leases_and_ends_with_them(db_url: str, table_name: str) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        leases = [await model.try_lease(f"k{i}", 1_000, keepalive=True) for i in range(50)]
        renewer = _aio_keepalive.task_renewer()
        assert renewer.count() == 50
        assert renewer.running
        tasks = [t for t in asyncio.all_tasks() if t.get_name() == "joblocks-keepalive"]
        assert len(tasks) == 1
        await asyncio.sleep(1.3)  # past the ttl: all still held
        assert not any(lease.lost for lease in leases)
        assert await model.count("live") == 50
        for lease in leases:
            await lease.release()
        await asyncio.sleep(0.05)
        assert not renewer.running
        await model.dispose()

    asyncio.run(main())


def test_one_thread_renews_many_leases_and_ends_with_them(db_url: str, table_name: str) -> None:
    import threading

    model = joblocks.JobLockModel(db_url, table_name=table_name)
    gc.collect()  # leases other tests dropped are no longer renewed

    def threads() -> int:  # besides the idle-connection timer of the model's cache
        return sum(t.name != "joblocks-idle-trim" for t in threading.enumerate())

    before = threads() - (1 if _keepalive.thread_renewer.running else 0)
    already = _keepalive.thread_renewer.count()
    # A ttl of 1.5 s renewed every 0.5 s: room for a loaded machine's late renewals.
    leases = [model.try_lease(f"k{i}", 1500, keepalive=True) for i in range(50)]
    assert _keepalive.thread_renewer.count() == already + 50
    assert threads() == before + 1  # one thread for all of them
    time.sleep(1.8)  # past the ttl
    assert not any(lease.lost for lease in leases)
    assert model.count("live") == 50
    for lease in leases:
        lease.release()
    assert _keepalive.thread_renewer.count() == already
    if already == 0:
        deadline = time.monotonic() + 2
        while _keepalive.thread_renewer.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _keepalive.thread_renewer.running
    model.dispose()


def test_a_garbage_collected_lease_is_no_longer_renewed(db_url: str, table_name: str) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    gc.collect()
    lease: Any = model.try_lease("job", 200, keepalive=True, renew_every=50)
    assert any(ref() is lease for ref in _keepalive.thread_renewer._leases.refs())
    collected = weakref.ref(lease)
    del lease
    # A renewal in flight holds the lease for its statement: it is collected once that
    # statement returns (bounded wait, not a timing assertion). The renewer's own count
    # is not compared: leases other tests of this process dropped leave it meanwhile.
    deadline = time.monotonic() + 10
    while True:
        gc.collect()
        if collected() is None:
            break
        assert time.monotonic() < deadline, "the collected lease is still kept alive"
        time.sleep(0.01)
    # The row runs out (a last renewal may have landed meanwhile) and then stays as it
    # was: nobody renews it any more.
    deadline = time.monotonic() + 10
    while not (row := model.peek("job")).expired:
        assert time.monotonic() < deadline, row
        time.sleep(0.02)
    time.sleep(0.3)  # six renewal intervals
    after = model.peek("job")
    assert after.expired
    assert (after.expires_at, after.fence) == (row.expires_at, row.fence)  # not renewed
    model.dispose()


def test_module_level_lease_uses_the_default_model(tmp_path: Any) -> None:
    from joblocks._sync import run as _run

    joblocks.configure(f"sqlite:///{tmp_path / 'd.db'}")
    try:
        with joblocks.lease("job", 5_000) as held:
            assert joblocks.get_model().peek("job").fence == held.token
        assert joblocks.get_model().peek("job") is None
    finally:
        joblocks.configure()
        _run.sync_registry._specs = None
