"""A cancelled waiting acquire (asyncio) never leaves a grant to nobody.

Each try: another connection holds the database in the way of the key (a PostgreSQL or
MariaDB row lock on the expired row, SQLite's write lock), so the waiting
``try_lease(..., wait=30_000)`` has its acquire in flight; then the key frees and the
waiter is cancelled, at varied points around that moment (before the blocker ends,
just after, some milliseconds later). Afterwards the row must not be held by the
cancelled waiter: either its caller received the lease (and released it), or the
grant was released before the cancellation went on.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks.aio

pytestmark = pytest.mark.server

TRIES = 15
LONG_TRIES = 50


class Blocker:
    """Another connection in the way of ``key``'s acquire until :meth:`end`."""

    def __init__(self, url: str, table: sa.Table) -> None:
        self.url = url
        self.table = table
        self.engine = None if url.startswith("sqlite") else sa.create_engine(url)
        self.conn: Any = None

    def hold(self, key: str) -> None:
        if self.engine is None:
            self.conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")  # the write lock
            return
        self.conn = self.engine.connect()
        self.conn.begin()
        t = self.table
        self.conn.execute(sa.select(t.c.id).where(t.c.id == key).with_for_update())

    def end(self) -> None:
        if self.conn is None:
            return
        if self.engine is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.commit()
        self.conn.close()
        self.conn = None

    def close(self) -> None:
        self.end()
        if self.engine is not None:
            self.engine.dispose()


async def _cancel_around_the_grant(waiter: asyncio.Future[Any], blocker: Any, point: int) -> None:
    """With ``waiter``'s acquire in flight behind ``blocker``, free the way and cancel
    the waiter at a point chosen by ``point``; wait (bounded) for the waiter to end."""
    await asyncio.sleep(0.05 + 0.01 * (point % 5))  # its acquire is in flight, blocked
    mode = point % 3
    if mode == 0:  # cancelled first, then the key frees
        waiter.cancel()
        await asyncio.sleep(0)
        blocker.end()
    elif mode == 1:  # the key frees, cancelled at once
        blocker.end()
        waiter.cancel()
    else:  # the key frees, cancelled a moment later (the grant on its way back)
        blocker.end()
        await asyncio.sleep(0.001 * (point % 7))
        waiter.cancel()
    done, _ = await asyncio.wait((waiter,), timeout=30)
    assert done, "the cancelled waiter did not end within 30 s"


async def _one_try(model: Any, blocker: Blocker, key: str, point: int) -> str:
    """One cancelled waiter; what it left: ``returned``, ``cancelled`` or ``leaked``."""
    holder = f"cancelled-{uuid.uuid4().hex[:8]}"
    assert await model.acquire(key, 1, "before")  # a row, expired a moment later
    await asyncio.sleep(0.01)
    blocker.hold(key)
    waiter = asyncio.ensure_future(model.try_lease(key, 60_000, holder=holder, wait=30_000))
    await _cancel_around_the_grant(waiter, blocker, point)
    outcome = "cancelled"
    if not waiter.cancelled():
        lease = waiter.result()
        assert lease is not None
        await lease.release()
        outcome = "returned"
    # A statement the cancellation left running on the server commits by now.
    await asyncio.sleep(0.3)
    row = await model.peek(key)
    if row is not None and row.holder == holder and not row.expired:
        outcome = "leaked"
    await model.delete(key)
    return outcome


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_a_cancelled_waiting_acquire_leaves_no_grant(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, table_name: str, long_run: bool
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'locks.db'}"
    else:
        url = request.getfixturevalue(
            "pg_server" if backend == "postgresql" else "mariadb_server"
        ).url
    tries = LONG_TRIES if long_run else TRIES

    async def main() -> list[str]:
        model = joblocks.aio.JobLockModel(url, table_name=table_name)
        blocker = Blocker(url, model.table)
        key = f"cancel-{uuid.uuid4().hex[:8]}"
        try:
            return [await _one_try(model, blocker, key, point) for point in range(tries)]
        finally:
            blocker.close()
            await model.dispose()

    outcomes = asyncio.run(main())
    print(f"{backend}: {', '.join(f'{o} {outcomes.count(o)}' for o in sorted(set(outcomes)))}")
    assert "leaked" not in outcomes, outcomes


class TableBlocker:
    """Another connection holding the whole lock table against writes until :meth:`end`
    (SQLite's write lock, PostgreSQL's ``LOCK TABLE … IN EXCLUSIVE MODE``, MariaDB's
    ``LOCK TABLES … WRITE``): every acquire waits, whatever rows it writes."""

    def __init__(self, url: str, table: sa.Table) -> None:
        self.url = url
        self.table = table
        self.engine = None if url.startswith("sqlite") else sa.create_engine(url)
        self.conn: Any = None

    def hold(self) -> None:
        if self.engine is None:
            self.conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
            return
        self.conn = self.engine.connect()
        name = self.table.name
        if self.engine.dialect.name == "postgresql":
            self.conn.begin()
            self.conn.exec_driver_sql(f'LOCK TABLE "{name}" IN EXCLUSIVE MODE')
        else:
            self.conn.exec_driver_sql(f"LOCK TABLES `{name}` WRITE")

    def end(self) -> None:
        if self.conn is None:
            return
        if self.engine is None:
            self.conn.execute("COMMIT")
        elif self.engine.dialect.name == "postgresql":
            self.conn.commit()
        else:
            self.conn.exec_driver_sql("UNLOCK TABLES")
        self.conn.close()
        self.conn = None

    def close(self) -> None:
        self.end()
        if self.engine is not None:
            self.engine.dispose()


async def _one_feature_try(model: Any, blocker: TableBlocker, point: int, options: dict) -> str:
    """As :func:`_one_try`, for a counted lease or a schedule slot, on a key of its own."""
    key = f"f-{uuid.uuid4().hex[:8]}"
    holder = f"cancelled-{uuid.uuid4().hex[:8]}"
    blocker.hold()
    waiter = asyncio.ensure_future(
        model.try_lease(key, 60_000, holder=holder, wait=30_000, **options)
    )
    await _cancel_around_the_grant(waiter, blocker, point)
    if not waiter.cancelled():
        lease = waiter.result()
        assert lease is not None
        await lease.release()  # a slot's row stays until its end: not judged
        return "returned"
    await asyncio.sleep(0.3)  # a statement the cancellation left running commits by now
    rows = (await model.holders(key)) if "max_holders" in options else [await model.peek(key)]
    if any(r is not None and r.holder == holder and not r.expired for r in rows):
        return "leaked"
    return "cancelled"


@pytest.mark.parametrize("feature", ["max_holders", "schedule"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_a_cancelled_counted_or_scheduled_acquire_leaves_no_grant(
    request: pytest.FixtureRequest,
    backend: str,
    feature: str,
    tmp_path: Path,
    table_name: str,
    long_run: bool,
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'locks.db'}"
    else:
        url = request.getfixturevalue(
            "pg_server" if backend == "postgresql" else "mariadb_server"
        ).url
    tries = LONG_TRIES if long_run else TRIES
    options: dict = {"max_holders": 2} if feature == "max_holders" else {"schedule": "* * * * *"}

    async def main() -> list[str]:
        model = joblocks.aio.JobLockModel(url, table_name=table_name)
        await model.peek("warm-up")  # the table exists before the blocker locks it
        blocker = TableBlocker(url, model.table)
        try:
            return [await _one_feature_try(model, blocker, p, options) for p in range(tries)]
        finally:
            blocker.close()
            await model.dispose()

    outcomes = asyncio.run(main())
    print(f"{backend} {feature}: {', '.join(f'{o} {outcomes.count(o)}' for o in set(outcomes))}")
    assert "leaked" not in outcomes, outcomes
