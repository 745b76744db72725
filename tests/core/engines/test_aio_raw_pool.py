"""The asyncio face's own connections on a server (``_async.raw``), for a model whose
engine joblocks made: a connection cut off mid-statement is never used again, a model
used from two event loops one after the other closes the first loop's connections, and
``dispose()`` closes every one of them. Each is checked on the server itself
(``pg_stat_activity``, ``information_schema.PROCESSLIST``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import make_url

import joblocks

pytest.importorskip("greenlet")

import joblocks.aio

TTL = 30_000
#: How long a test waits for the server to show what it expects (seconds).
WAIT_S = 20.0

SERVERS = pytest.mark.parametrize("backend", ["postgresql", "mariadb"])


@contextlib.contextmanager
def _server(db_url: str) -> Iterator[Any]:
    """A connection of the test's own to the server (autocommit)."""
    url = make_url(db_url)
    if url.get_backend_name() == "postgresql":
        import psycopg

        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            yield conn
        return
    import pymysql

    conn = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
        autocommit=True,
    )
    try:
        yield conn
    finally:
        conn.close()


def _sessions(db_url: str) -> set[int]:
    """The ids of every session the server has now."""
    with _server(db_url) as conn:
        cursor = conn.cursor()
        if make_url(db_url).get_backend_name() == "postgresql":
            cursor.execute("SELECT pid FROM pg_stat_activity")
        else:
            cursor.execute("SELECT ID FROM information_schema.PROCESSLIST")
        return {int(row[0]) for row in cursor.fetchall()}


def _running(db_url: str, session: int) -> bool:
    """Whether the server session ``session`` is running a statement now."""
    with _server(db_url) as conn:
        cursor = conn.cursor()
        if make_url(db_url).get_backend_name() == "postgresql":
            cursor.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (session,))
            row = cursor.fetchone()
            return row is not None and row[0] == "active"
        cursor.execute(
            "SELECT COMMAND FROM information_schema.PROCESSLIST WHERE ID = %s", (session,)
        )
        row = cursor.fetchone()
        return row is not None and row[0] == "Query"


def _session_of(raw: Any) -> int:
    """The server's id of the session of one of the model's own connections."""
    driver = raw.driver
    if hasattr(driver, "pgconn"):
        return int(driver.info.backend_pid)
    return int(driver.server_thread_id[0])


def _own_sessions(model: joblocks.aio.JobLockModel) -> set[int]:
    """The sessions of the model's own idle connections and its kept one."""
    pool = model._raw_pool
    assert pool is not None, "the model has no connections of its own"
    found = {_session_of(raw) for raw in pool._idle}
    if model._keeper is not None:
        found.add(_session_of(model._keeper))
    return found


async def _gone(db_url: str, sessions: set[int]) -> set[int]:
    """Wait until none of ``sessions`` exists on the server; those still there."""
    deadline = time.monotonic() + WAIT_S
    left = sessions & _sessions(db_url)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        left = sessions & _sessions(db_url)
    return left


@contextlib.contextmanager
def _table_locked(db_url: str, table: str) -> Iterator[None]:
    """The lock table locked by a session of the test: every statement on it waits."""
    with _server(db_url) as conn:
        cursor = conn.cursor()
        if make_url(db_url).get_backend_name() == "postgresql":
            cursor.execute("BEGIN")
            cursor.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
            try:
                yield
            finally:
                cursor.execute("ROLLBACK")
        else:
            cursor.execute(f"LOCK TABLES `{table}` WRITE")
            try:
                yield
            finally:
                cursor.execute("UNLOCK TABLES")


@SERVERS
@pytest.mark.parametrize("how", ["cancelled", "timed out"])
def test_a_connection_cut_off_mid_statement_is_never_used_again(
    db_url: str, table_name: str, how: str
) -> None:
    async def main() -> tuple[Any, int, set[int], bool, bool]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name, timeout=1_500)
        try:
            assert await model.acquire("k", TTL, "h") is True
            pool = model._raw_pool
            assert pool is not None
            assert len(pool._idle) == 1
            cut = pool._idle[-1]  # the next call takes it
            session = _session_of(cut)
            with _table_locked(db_url, table_name):
                call = asyncio.ensure_future(model.refresh("k", TTL, "h"))
                deadline = time.monotonic() + WAIT_S
                while not _running(db_url, session):
                    assert not call.done(), call.result()
                    assert time.monotonic() < deadline, "the call never reached the server"
                    await asyncio.sleep(0.02)
                if how == "cancelled":
                    call.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await call
                else:
                    with pytest.raises(joblocks.LockTimeoutError):
                        await call
            # The table is free again: the next calls work, on another connection.
            assert await model.refresh("k", TTL, "h") is True
            assert await model.peek("k") is not None
            reused = any(raw is cut for raw in pool._idle)
            left = await _gone(db_url, {session})
            return cut, session, left, reused, await model.release("k", "h")
        finally:
            await model.dispose()

    cut, session, left, reused, released = asyncio.run(main())
    assert cut.lost is True
    assert reused is False
    assert left == set(), f"the cut connection's session {session} is still open"
    assert released is True


@SERVERS
def test_a_model_used_from_two_loops_closes_the_first_loops_connections(
    db_url: str, table_name: str
) -> None:
    model = joblocks.aio.JobLockModel(db_url, table_name=table_name)

    async def calls(key: str) -> set[int]:
        assert await model.acquire(key, TTL, "h") is True
        await asyncio.gather(*(model.peek(key) for _ in range(4)))
        assert await model.release(key, "h") is True
        return _own_sessions(model)

    async def second() -> tuple[set[int], set[int]]:
        used = await calls("second")
        # The first loop's connections were closed when this loop took the model.
        return used, await _gone(db_url, first)

    async def last() -> set[int]:
        await model.dispose()
        return await _gone(db_url, used)

    first = asyncio.run(calls("first"))
    assert first, "the first loop kept no connection"
    used, left_of_first = asyncio.run(second())
    assert left_of_first == set()
    assert used
    assert not (used & first)
    assert asyncio.run(last()) == set()


@SERVERS
def test_dispose_closes_every_connection_of_the_model(db_url: str, table_name: str) -> None:
    async def main() -> tuple[set[int], set[int]]:
        model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
        lease = await model.try_lease("kept", TTL, keepalive=True, renew_every=200)
        assert lease is not None
        gate = asyncio.Event()

        async def held_open(i: int) -> None:
            # Several calls at once: several connections.
            assert await model.acquire(f"k{i}", TTL, "h") is True
            await gate.wait()
            assert await model.release(f"k{i}", "h") is True

        tasks = [asyncio.ensure_future(held_open(i)) for i in range(6)]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(*tasks)
        deadline = time.monotonic() + WAIT_S
        while model._keeper is None:  # the renewals' connection
            assert time.monotonic() < deadline, "no connection kept for the renewals"
            await asyncio.sleep(0.05)
        pool = model._raw_pool
        assert pool is not None
        opened = pool.open
        sessions = _own_sessions(model)
        assert len(sessions) >= 2, sessions
        assert opened == len(pool._idle) + 1  # every one idle, or kept
        await lease.release()
        await model.dispose()
        return sessions, await _gone(db_url, sessions)

    sessions, left = asyncio.run(main())
    assert left == set(), f"sessions {left} of {sessions} are still open after dispose()"


@pytest.mark.parametrize("backend", ["postgresql"])
def test_no_more_connections_than_the_engines_pool_allows(db_url: str, table_name: str) -> None:
    """Twenty calls at once while every statement on the table waits: fifteen
    connections at most (the engine's pool: 5 + 10 overflow), the other calls wait for
    one, and all end once the table is free."""
    name = f"budget-{table_name}"
    url = f"{db_url}?application_name={name}"

    def sessions_of_the_model() -> int:
        with _server(db_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()
        return int(row[0])

    async def main() -> tuple[int, int, int, list[bool]]:
        model = joblocks.aio.JobLockModel(url, table_name=table_name, timeout=20_000)
        try:
            await model.now_ms()  # first use
            link = model._link
            assert link is not None
            with _table_locked(db_url, table_name):
                calls = [asyncio.ensure_future(model.acquire(f"k{i}", TTL, "h")) for i in range(20)]
                pool = model._here()
                deadline = time.monotonic() + WAIT_S
                while pool.open < 15 or len(pool._waiters) < 5:
                    assert not any(call.done() for call in calls)
                    assert time.monotonic() < deadline, (pool.open, len(pool._waiters))
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.3)  # a call beyond the limit would have opened by now
                most, on_server = pool.open, sessions_of_the_model()
            taken = await asyncio.gather(*calls)
            return int(link.limit or 0), most, on_server, taken
        finally:
            await model.dispose()

    limit, most, on_server, taken = asyncio.run(main())
    assert limit == 15
    assert most == 15
    assert on_server == 15
    assert taken == [True] * 20


@SERVERS
def test_a_model_dropped_without_dispose_ends_its_sessions_quietly(
    db_url: str, table_name: str
) -> None:
    """A model never disposed, on a loop closed without ``shutdown_asyncgens`` (as a
    hand-made loop often is): its connections end their sessions when collected,
    without the driver's ``ResourceWarning`` of a connection deleted while open."""
    import gc
    import warnings

    loop = asyncio.new_event_loop()
    model: Any = joblocks.aio.JobLockModel(db_url, table_name=table_name)

    async def use(model: Any) -> set[int]:
        gate = asyncio.Event()

        async def held_open(i: int) -> None:
            assert await model.acquire(f"d{i}", TTL, "h") is True
            await gate.wait()
            assert await model.release(f"d{i}", "h") is True

        tasks = [asyncio.ensure_future(held_open(i)) for i in range(3)]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(*tasks)
        return _own_sessions(model)

    sessions = loop.run_until_complete(use(model))
    assert sessions
    loop.close()  # no shutdown_asyncgens(): the pool is not closed with the loop
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del model
        for _ in range(3):
            gc.collect()
    leaked = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == [], [str(w.message) for w in leaked]
    left = asyncio.run(_gone(db_url, sessions))
    assert left == set(), f"sessions {left} of {sessions} outlived the collected model"
