"""Fixtures of the reliability suite (see docs/reliability.md).

``report`` records a scenario's figures; ``pool`` is a set of spawned worker processes
(``tests.support.pool``) shared by the whole session (spawning and importing SQLAlchemy
and the drivers costs about a second per batch on the project's 2-core machine);
``app_table`` is a table of the application's own, in the same database as the locks.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from ..support.matrix import unavailable
from ..support.pool import Pool
from ..support.servers import GaleraCluster, ServerStartError, ServerUnavailable, start_galera
from . import _workers as workers
from ._support import Reporter

#: Worker processes of the shared pool: CI sizes, and with --long.
POOL_SIZE = {False: 4, True: 8}


@pytest.fixture
def report(request: pytest.FixtureRequest, long_run: bool) -> Reporter:
    """``report(scenario, backend, **figures)``: print them and append them as JSON."""
    return Reporter(request.node.nodeid, "long" if long_run else "ci")


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


@pytest.fixture(scope="session")
def galera_cluster(request: pytest.FixtureRequest) -> Iterator[GaleraCluster]:
    """A 3-node MariaDB Galera cluster on loopback, started when a test first needs it.

    Skips locally when MariaDB, galera-4 or rsync is missing; fails with ``CI=true``.
    """
    base = Path(tempfile.mkdtemp(prefix="joblocks-galera-"))
    try:
        try:
            try:
                cluster = start_galera(base)
            except ServerStartError:
                # Twelve ports picked free a moment before use: another process may
                # have taken one. Once more, on new ports.
                cluster = start_galera(base)
        except ServerUnavailable as exc:
            unavailable(f"galera unavailable: {exc}")
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
