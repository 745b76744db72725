"""The asyncio face on SQLite sends its statements on the event loop's thread, and hands
an operation to another thread only to wait for another writer: through ``sqlite3``
itself on a file joblocks opened from a URL (``_aio_sqlite``), through the ``sqlite3``
connection behind aiosqlite on an engine passed in (``_db.execute.in_place``)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.util import await_only

import joblocks

pytest.importorskip("aiosqlite")
pytest.importorskip("greenlet")

import joblocks.aio

TTL = 30_000


def _traced(model: joblocks.aio.JobLockModel) -> list[tuple[int, str]]:
    """(thread id, statement) of every statement the model's connections run: those of
    its aiosqlite engine, and those of the ``sqlite3`` engine it keeps for the one-key
    operations (a model made from a URL)."""
    seen: list[tuple[int, str]] = []

    def note(sql: str) -> None:
        seen.append((threading.get_ident(), sql))

    @event.listens_for(model.engine.sync_engine, "connect")
    def trace(dbapi_connection: Any, record: Any) -> None:
        # In the greenlet SQLAlchemy connects in: aiosqlite's own (async) API.
        await_only(dbapi_connection.driver_connection.set_trace_callback(note))

    if model._loop_sqlite is not None:

        @event.listens_for(model._loop_sqlite.engine, "connect")
        def trace_loop(dbapi_connection: Any, record: Any) -> None:
            dbapi_connection.set_trace_callback(note)

    return seen


def test_uncontended_operations_run_on_the_loop_thread(tmp_path: Path, table_name: str) -> None:
    async def main() -> tuple[int, list[tuple[int, str]]]:
        model = joblocks.aio.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}", table_name=table_name)
        seen = _traced(model)
        try:
            assert await model.acquire("k", TTL, "h") is True
            seen.clear()  # the first use (table, identity) goes through SQLAlchemy
            assert await model.acquire("k", TTL, "other") is False
            assert await model.refresh("k", TTL, "h") is True
            assert (await model.peek("k")) is not None
            assert await model.release("k", "h") is True
            per_key = list(seen)
            seen.clear()
            # Reading many rows stays off the loop's thread.
            assert await model.count() == 0
            assert await model.list() == []
            return threading.get_ident(), per_key, list(seen)
        finally:
            await model.dispose()

    loop_thread, per_key, many = asyncio.run(main())
    assert len([sql for _, sql in per_key if table_name in sql]) == 4
    assert {tid for tid, _ in per_key} == {loop_thread}
    assert len([sql for _, sql in many if table_name in sql]) == 2
    assert loop_thread not in {tid for tid, _ in many}


def _hold_write_lock(path: Path, seconds: float, started: threading.Event) -> None:
    holder = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        holder.execute("BEGIN IMMEDIATE")
        started.set()
        time.sleep(seconds)
        holder.execute("COMMIT")
    finally:
        holder.close()


async def _writer_holding(path: Path, seconds: float) -> threading.Thread:
    """A thread holding ``path``'s write lock for ``seconds``, once it holds it."""
    started = threading.Event()
    writer = threading.Thread(target=_hold_write_lock, args=(path, seconds, started))
    writer.start()
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    return writer


def test_a_statement_meeting_another_writer_waits_off_the_loop(
    tmp_path: Path, table_name: str
) -> None:
    path = tmp_path / "l.db"

    async def main() -> tuple[bool, int, int]:
        model = joblocks.aio.JobLockModel(f"sqlite:///{path}", table_name=table_name)
        seen = _traced(model)
        try:
            assert await model.acquire("warm", TTL, "h") is True
            seen.clear()
            writer = await _writer_holding(path, 0.5)
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticking = asyncio.ensure_future(ticker())
            try:
                got = await asyncio.wait_for(model.acquire("k", TTL, "h"), 10)
            finally:
                ticking.cancel()
            await asyncio.get_running_loop().run_in_executor(None, writer.join, 10)
            off_loop = sum(1 for tid, _ in seen if tid != threading.get_ident())
            # The connection keeps its busy timeout for everything else it runs.
            async with model.engine.connect() as conn:
                busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar_one()
            return got, ticks, off_loop + 1000 * int(busy != model.timeout_ms)
        finally:
            await model.dispose()

    got, ticks, off_loop = asyncio.run(main())
    assert got is True
    assert ticks >= 10  # the loop ran on while the statement waited for the writer
    assert 1 <= off_loop < 1000  # it waited on aiosqlite's thread, busy timeout restored


def test_a_writer_holding_on_past_the_timeout_is_a_backend_error(
    tmp_path: Path, table_name: str
) -> None:
    path = tmp_path / "l.db"

    async def main() -> None:
        model = joblocks.aio.JobLockModel(f"sqlite:///{path}", table_name=table_name, timeout=300)
        try:
            assert await model.acquire("warm", TTL, "h") is True
            writer = await _writer_holding(path, 2.0)
            try:
                with pytest.raises(joblocks.LockBackendError):
                    await asyncio.wait_for(model.acquire("k", TTL, "h"), 10)
            finally:
                await asyncio.get_running_loop().run_in_executor(None, writer.join, 10)
            assert await model.acquire("k", TTL, "h") is True  # the connection still works
        finally:
            await model.dispose()

    asyncio.run(main())


def test_operations_waiting_together_each_keep_their_connection(
    tmp_path: Path, table_name: str
) -> None:
    """Several tasks meet the same writer, wait off the loop together, and go on with
    their second statement (``update_insert``: UPDATE, then INSERT) each on its own
    connection."""
    path = tmp_path / "l.db"

    async def main() -> tuple[list[bool], list[str]]:
        model = joblocks.aio.JobLockModel(
            f"sqlite:///{path}", table_name=table_name, acquire_path="update_insert"
        )
        try:
            assert await model.acquire("warm", TTL, "h") is True
            writer = await _writer_holding(path, 0.5)
            try:
                got = await asyncio.wait_for(
                    asyncio.gather(*(model.acquire(f"k{i}", TTL, f"h{i}") for i in range(4))),
                    10,
                )
            finally:
                await asyncio.get_running_loop().run_in_executor(None, writer.join, 10)
            holders = [lock.holder for lock in await model.list() if lock.key != "warm"]
            return list(got), holders
        finally:
            await model.dispose()

    got, holders = asyncio.run(main())
    assert got == [True] * 4
    assert holders == [f"h{i}" for i in range(4)]


def test_a_connection_only_aiosqlites_thread_may_use_goes_through_aiosqlite(
    tmp_path: Path, table_name: str
) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> tuple[bool, bool, bool]:
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{tmp_path / 'l.db'}",
            connect_args={"check_same_thread": True},
        )
        try:
            model = joblocks.aio.JobLockModel(engine, table_name=table_name)
            return (
                await model.acquire("k", TTL, "h"),
                await model.acquire("k", TTL, "other"),
                await model.release("k", "h"),
            )
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == (True, False, True)


def _open_handles(path: Path) -> int:
    """How many file descriptors of this process are open on ``path`` (Linux)."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            if Path(os.readlink(fd)) == path:
                count += 1
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_model_used_from_two_loops_and_dropped_leaves_nothing_open(
    tmp_path: Path, table_name: str
) -> None:
    """The sqlite3 connections kept between calls need no event loop: the same model
    works from one ``asyncio.run`` to the next, and dropping it without ``dispose()``
    closes them (no file handle left, no warning)."""
    path = tmp_path / "l.db"
    model = joblocks.aio.JobLockModel(f"sqlite:///{path}", table_name=table_name)
    assert model._loop_sqlite is not None

    async def take(model: joblocks.aio.JobLockModel, holder: str) -> bool:
        got = await model.acquire("k", TTL, holder)
        return got and await model.release("k", holder)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert asyncio.run(take(model, "first loop")) is True
        assert asyncio.run(take(model, "second loop")) is True
        assert _open_handles(path) >= 1  # the idle connection, kept between calls
        del model
        gc.collect()
    assert _open_handles(path) == 0


def test_loop_connections_rest_without_waiting(tmp_path: Path, table_name: str) -> None:
    """On the loop's thread a connection never waits for another writer (busy timeout
    0); the busy timeout the model was made with is what a worker thread waits with."""
    path = tmp_path / "l.db"

    async def main() -> tuple[int, int]:
        model = joblocks.aio.JobLockModel(f"sqlite:///{path}", table_name=table_name, timeout=1234)
        try:
            assert await model.acquire("k", TTL, "h") is True
            loop = model._loop_sqlite
            assert loop is not None
            conn = loop.cache.take()
            try:
                resting = conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one()
                waiting = conn.connection.info["joblocks_loop_busy_ms"]
            finally:
                loop.cache.put(conn)
            return resting, waiting
        finally:
            await model.dispose()

    assert asyncio.run(main()) == (0, 1234)


def test_a_url_asking_for_check_same_thread_goes_through_aiosqlite(
    tmp_path: Path, table_name: str
) -> None:
    async def main() -> tuple[bool, bool, bool, bool]:
        model = joblocks.aio.JobLockModel(
            f"sqlite:///{tmp_path / 'l.db'}?check_same_thread=true", table_name=table_name
        )
        try:
            return (
                model._loop_sqlite is None,
                await model.acquire("k", TTL, "h"),
                await model.acquire("k", TTL, "other"),
                await model.release("k", "h"),
            )
        finally:
            await model.dispose()

    assert asyncio.run(main()) == (True, True, False, True)


def test_a_cancelled_wait_off_the_loop_finishes_and_keeps_the_model_usable(
    tmp_path: Path, table_name: str
) -> None:
    """A caller cancelled while its operation waits for another writer on a worker
    thread: the thread finishes the operation (the grant it made is a row like any
    other, here released by the ttl), and the model goes on working."""
    path = tmp_path / "l.db"

    async def main() -> tuple[bool, bool]:
        model = joblocks.aio.JobLockModel(f"sqlite:///{path}", table_name=table_name)
        try:
            assert await model.acquire("warm", TTL, "h") is True
            writer = await _writer_holding(path, 0.5)
            try:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(model.acquire("k", 200, "cancelled"), 0.1)
            finally:
                await asyncio.get_running_loop().run_in_executor(None, writer.join, 10)
            granted = False
            for _ in range(200):  # the worker thread finishes the acquire (10 s at most)
                granted = (await model.peek("k")) is not None
                if granted:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # its ttl (200 ms) runs out
            return granted, await model.acquire("k", TTL, "next")
        finally:
            await model.dispose()

    assert asyncio.run(main()) == (True, True)
