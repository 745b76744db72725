"""Fixtures of the reliability suite (see docs/reliability.md).

``report`` records a scenario's figures; ``pool`` is a set of spawned worker processes
shared by the whole session (spawning and importing SQLAlchemy and the drivers costs
about a second per batch on the project's 2-core machine); ``app_table`` is a table of
the application's own, in the same database as the locks.
"""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from typing import Any, Callable

import pytest
import sqlalchemy as sa

from . import _workers as workers
from ._support import Reporter

SPAWN = multiprocessing.get_context("spawn")
#: Worker processes of the shared pool: CI sizes, and with --long.
POOL_SIZE = {False: 4, True: 8}
RESULT_TIMEOUT_S = 120.0


@pytest.fixture
def report(request: pytest.FixtureRequest, long_run: bool) -> Reporter:
    """``report(scenario, backend, **figures)``: print them and append them as JSON."""
    return Reporter(request.node.nodeid, "long" if long_run else "ci")


class Pool:
    """Spawned worker processes with start barriers and a few shared counters."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.barriers = {n: SPAWN.Barrier(n) for n in range(1, size + 1)}
        self.shared = workers.Shared(
            stop=SPAWN.Value("i", 0),
            inside=SPAWN.Value("i", 0),
            max_inside=SPAWN.Value("i", 0),
        )
        self.executor = ProcessPoolExecutor(
            size,
            mp_context=SPAWN,
            initializer=workers.init_pool,
            initargs=(self.barriers, self.shared),
        )

    def reset(self) -> None:
        for value in self.shared:
            value.value = 0

    def submit(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Future[Any]]:
        """Start ``fn(*args)`` for every ``args`` in ``calls``, each in a process of its own.

        ``fn`` may wait at the start barrier of ``len(calls)`` parties
        (``workers.start_together()``), so no process can take two of the calls.
        """
        assert 1 <= len(calls) <= self.size
        self.barriers[len(calls)].reset()
        return [self.executor.submit(workers.task, len(calls), fn, args) for args in calls]

    def collect(self, futures: list[Future[Any]], timeout: float = RESULT_TIMEOUT_S) -> list[Any]:
        done, pending = wait(futures, timeout=timeout, return_when=FIRST_EXCEPTION)
        failed = [f for f in done if f.exception() is not None]
        if failed or pending:
            self.shared.stop.value = 1
            for barrier in self.barriers.values():
                barrier.abort()
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
            pytest.fail(f"{len(pending)} of {len(futures)} workers did not finish in {timeout}s")
        return [f.result() for f in futures]

    def run(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        return self.collect(self.submit(fn, calls))

    def close(self) -> None:
        for barrier in self.barriers.values():
            barrier.abort()
        self.executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def pool(long_run: bool) -> Iterator[Pool]:
    pool = Pool(POOL_SIZE[long_run])
    try:
        pids = pool.run(workers.hello, [() for _ in range(pool.size)])
        assert len(set(pids)) == pool.size
        yield pool
    finally:
        pool.close()


@pytest.fixture
def app_table(db_url: str) -> Iterator[str]:
    """A one-row table of the application (``id``, ``value``, ``owner``) next to the locks."""
    name = f"app_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(db_url)
    table = workers.app_table(name)
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert().values(id=1, value=0, owner=""))
    try:
        yield name
    finally:
        table.drop(engine)
        engine.dispose()
