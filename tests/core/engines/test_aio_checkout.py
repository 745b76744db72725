"""The asyncio face's one-key operations take no SQLAlchemy ``Connection`` per call: on an
engine joblocks made on a server their statements are awaited on the asyncio driver's
own connections (``_async.raw``: no pool check-out, no adapter, no greenlet), on a
SQLite file joblocks opened they run through ``sqlite3`` on the loop's thread; a
failure there is still a ``LockBackendError`` and a lost connection is replaced."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event, text

import joblocks

pytest.importorskip("greenlet")

import joblocks.aio

TTL = 30_000
#: Run on PostgreSQL as deployed too (PgBouncer in both modes, a serializable server).
DEPLOYMENTS = True


def _sync_engine(db_url: str) -> Any:
    """A sync engine of joblocks' own making on ``db_url`` (for the test's own statements)."""
    return joblocks.JobLockModel(db_url, create_table=False).engine


async def _async_url(db_url: str) -> Any:
    """``db_url`` with the asyncio driver joblocks picks."""
    made = joblocks.aio.JobLockModel(db_url, create_table=False)
    url = made.engine.url
    await made.dispose()
    return url


async def _one_key_calls(model: joblocks.aio.JobLockModel, key: str) -> None:
    assert await model.acquire(key, TTL, "h") is True
    assert await model.acquire(key, TTL, "other") is False
    assert await model.refresh(key, TTL, "h") is True
    assert (await model.peek(key)) is not None
    assert await model.release(key, "h") is True


def test_one_key_operations_take_no_connection_object(
    db_url: str, table_name: str, backend: str
) -> None:
    async def main() -> tuple[int, int, list[int], int]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        engine = model.engine.sync_engine
        connects: list[Any] = []
        checkouts: list[Any] = []
        event.listen(engine, "engine_connect", connects.append)
        event.listen(engine.pool, "checkout", lambda *args: checkouts.append(args))
        loop_checkouts: list[Any] = []
        if model._loop_sqlite is not None:
            event.listen(
                model._loop_sqlite.engine.pool, "checkout", lambda *a: loop_checkouts.append(a)
            )
        held_between: list[int] = []
        try:
            await model.now_ms()  # first use (table, identity) goes through Connection
            connects.clear()
            checkouts.clear()
            for key in ("a", "b"):
                await _one_key_calls(model, key)
                held_between.append(engine.pool.checkedout())
            return len(connects), len(checkouts), held_between, len(loop_checkouts)
        finally:
            await model.dispose()

    connects, checkouts, held_between, loop_checkouts = asyncio.run(main())
    assert connects == 0  # no Engine.connect() per call
    if backend != "sqlite":
        # The model's own connections: no check-out of the engine's pool at all.
        assert checkouts == 0
        assert loop_checkouts == 0
    elif backend == "sqlite":
        # A SQLite file joblocks opened: the one-key operations run through sqlite3 on
        # the loop's thread (``_aio_sqlite``), never through aiosqlite's pool; the one
        # sqlite3 connection they use is checked out once and kept idle between calls.
        assert checkouts == 0
        assert loop_checkouts == 1
    assert held_between == [0, 0]  # and none kept between calls


def test_a_given_engine_keeps_its_connection_objects(db_url: str, table_name: str) -> None:
    # An engine of the caller is autocommit by execution options, which a Connection
    # applies at each check-out: joblocks keeps using Connection objects on it.
    from sqlalchemy.ext.asyncio import create_async_engine

    async def main() -> int:
        engine = create_async_engine(await _async_url(db_url))
        model = joblocks.aio.JobLockModel(engine, table_name=table_name)
        connects: list[Any] = []
        event.listen(engine.sync_engine, "engine_connect", connects.append)
        try:
            await model.now_ms()  # first use
            connects.clear()
            await _one_key_calls(model, "k")
            return len(connects)
        finally:
            await model.dispose()
            await engine.dispose()

    assert asyncio.run(main()) == 5


def _adapter_executes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements sent through SQLAlchemy's psycopg adapter cursor (observed, then
    sent as they would be)."""
    from sqlalchemy.dialects.postgresql.psycopg import AsyncAdapt_psycopg_cursor

    seen: list[str] = []
    real = AsyncAdapt_psycopg_cursor.execute

    def execute(self: Any, operation: Any, parameters: Any = None) -> Any:
        seen.append(str(operation))
        return real(self, operation, parameters)

    monkeypatch.setattr(AsyncAdapt_psycopg_cursor, "execute", execute)
    return seen


@pytest.mark.parametrize("backend", ["postgresql", "pgbouncer-transaction", "pgbouncer-session"])
def test_statements_are_awaited_on_psycopg_directly(
    db_url: str, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    through_adapter = _adapter_executes(monkeypatch)

    async def main() -> list[str]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        try:
            await model.now_ms()
            await model.now_ms()  # a connection's first statement learns its isolation
            through_adapter.clear()
            for key in ("a", "b", "c"):
                await _one_key_calls(model, key)
            return list(through_adapter)
        finally:
            await model.dispose()

    assert asyncio.run(main()) == []


@pytest.mark.parametrize("backend", ["postgresql-serializable"])
def test_a_stricter_default_isolation_keeps_its_read_committed_transactions(
    db_url: str, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    through_adapter = _adapter_executes(monkeypatch)

    import psycopg

    sent: list[str] = []
    real = psycopg.AsyncCursor.execute

    async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))  # observed, then sent as it is
        return await real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", execute)

    async def main() -> None:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        try:
            await model.now_ms()
            sent.clear()
            through_adapter.clear()
            await _one_key_calls(model, "k")
        finally:
            await model.dispose()

    asyncio.run(main())
    assert through_adapter == []
    assert sent.count("BEGIN ISOLATION LEVEL READ COMMITTED") == 5
    assert sent.count("COMMIT") == 5


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_killed_backend_is_a_backend_error_then_replaced(db_url: str, table_name: str) -> None:
    pytest.importorskip("psycopg")
    admin = _sync_engine(db_url)

    async def main() -> tuple[type[BaseException], bool, bool]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        pids: list[int] = []

        def pid() -> int:
            pool = model._raw_pool  # the model's own connections
            assert pool is not None
            assert len(pool._idle) == 1
            return int(pool._idle[-1].driver.info.backend_pid)

        try:
            await _one_key_calls(model, "k")
            pids.append(pid())
            with admin.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[-1]})
            with pytest.raises(joblocks.LockBackendError) as failed:
                await model.acquire("k", TTL, "h")
            # The lost connection was invalidated: the next call gets a new one.
            taken = await model.acquire("k", TTL, "h")
            pids.append(pid())
            return type(failed.value), taken, pids[-1] != pids[-2]
        finally:
            await model.dispose()
            admin.dispose()

    kind, taken, new_connection = asyncio.run(main())
    assert issubclass(kind, joblocks.LockBackendError)  # LockConnectionError
    assert taken is True
    assert new_connection is True


@pytest.mark.parametrize("backend", ["postgresql", "mariadb", "sqlite"])
def test_a_statement_error_is_a_backend_error(db_url: str, table_name: str) -> None:
    async def main() -> bool:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        try:
            await _one_key_calls(model, "k")
            await model.engine.dispose()  # no pooled connection caches the table's plan
            admin = _sync_engine(db_url)
            with admin.begin() as conn:
                conn.execute(text(f"DROP TABLE {table_name}"))
            admin.dispose()
            with pytest.raises(joblocks.LockBackendError):
                await model.acquire("k", TTL, "h")
            # The connection was not lost: the pool keeps it (on a SQLite file joblocks
            # opened, the cache of the sqlite3 connections of the loop's thread).
            if model._loop_sqlite is not None:
                return len(model._loop_sqlite.cache) == 1
            # (On a server, the model's own pool.)
            return model._raw_pool is not None and len(model._raw_pool) == 1
        finally:
            await model.dispose()

    assert asyncio.run(main()) is True
