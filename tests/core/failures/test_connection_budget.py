"""The connection budget: keep-alive leases on a PostgreSQL server with few slots.

A throwaway server of its own with ``max_connections`` small. Another process takes
every slot the server has (after ending this process's connections, so that renewals
need new ones) and keeps them for a while: the renewals are refused meanwhile, keep
trying, and the leases survive once the slots are free again. And a model at rest
keeps one connection, not one per call that ran at the same time.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
from joblocks._db import connections as _connections

from ...support.faces import eventually, run_on
from ...support.matrix import server_or_skip
from ...support.servers import Server, start_postgres

#: Client slots of the small server (the tests connect as a superuser, who may use all).
SLOTS = 12
#: How long the filler keeps every slot (s): several renewal intervals, within the ttl.
FULL_FOR_S = 2.5
TTL_MS = 6_000
RENEW_MS = 500

_FILLER = r"""
import sys, time, psycopg
dsn, ready, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
conns = []
def fill(deadline):
    while time.monotonic() < deadline:
        try:
            conns.append(psycopg.connect(dsn, connect_timeout=2))
        except psycopg.OperationalError:
            time.sleep(0.005)
fill(time.monotonic() + 0.5)
# End every other client connection (the test's), then take the slots they held too.
conns[0].execute(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
    "AND application_name <> 'filler'"
)
conns[0].commit()
fill(time.monotonic() + 0.3)
open(ready, "w").write(str(len(conns)))
time.sleep(hold)
for conn in conns:
    conn.close()
"""


@pytest.fixture(scope="session")
def small_pg(request: pytest.FixtureRequest) -> Server:
    def start(base: Path) -> Server:
        return start_postgres(base, settings={"max_connections": str(SLOTS)})

    return server_or_skip(request, "postgresql-small", start)


@pytest.fixture
def small_url(small_pg: Server) -> str:
    return small_pg.url


def _dsn(url: str, application_name: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://") + (
        f"?application_name={application_name}"
    )


@pytest.fixture
def events() -> Iterator[list[tuple[float, joblocks.Event]]]:
    """Every event, with the monotonic time it was seen at."""
    seen: list[tuple[float, joblocks.Event]] = []

    def listen(event: joblocks.Event) -> None:
        seen.append((time.monotonic(), event))

    joblocks.add_listener(listen)
    yield seen
    joblocks.remove_listener(listen)


@pytest.mark.parametrize("backend", ["postgresql"])
def test_keepalive_leases_survive_a_server_out_of_connections(
    make_model: Callable[..., Any],
    small_url: str,
    tmp_path: Path,
    events: list[tuple[float, joblocks.Event]],
) -> None:
    model = make_model(url=small_url)
    keys = [f"budget-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    leases = [model.try_lease(k, TTL_MS, keepalive=True, renew_every=RENEW_MS) for k in keys]
    assert all(held is not None for held in leases)
    ready = tmp_path / "full"
    filler = subprocess.Popen(
        [sys.executable, "-c", _FILLER, _dsn(small_url, "filler"), str(ready), str(FULL_FOR_S)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert filler.poll() is None, filler.communicate()
            assert time.monotonic() < deadline, "the filler never filled the server"
            time.sleep(0.01)
        full_until = time.monotonic() + FULL_FOR_S
        taken = int(ready.read_text() or 0)
        assert taken >= SLOTS - 1, f"the filler holds {taken} of {SLOTS} slots"
        # While the server is full: renewals fail, and the leases are not given up.
        while time.monotonic() < full_until - 0.2:
            assert not any(held.lost for held in leases), [h.lost_reason for h in leases]
            time.sleep(0.05)
        _, err = filler.communicate(timeout=30)
        assert filler.returncode == 0, err
    finally:
        if filler.poll() is None:
            filler.kill()
            filler.communicate()
    failed = [e for _, e in events if e.kind == "error" and e.key in keys]
    assert failed, "no renewal failed: the test did not take the server's slots"
    # Slots free again: every lease renews, none was lost, each still holds its row.
    renewed_after = time.monotonic()
    deadline = renewed_after + TTL_MS / 1000

    def renewed_since(key: str) -> bool:
        return any(e.kind == "renewed" and e.key == key and at >= renewed_after for at, e in events)

    while not all(renewed_since(k) for k in keys):
        assert time.monotonic() < deadline, "a lease did not renew once the slots were free"
        time.sleep(0.05)
    assert not any(held.lost for held in leases), [h.lost_reason for h in leases]
    for held in leases:
        assert held.release() is True


_HOARDER = r"""
import sys, threading, time, joblocks
import os
url, table, key, ready, victim, burst_s, go = sys.argv[1:8]
model = joblocks.JobLockModel(url, table_name=table)
held = model.try_lease(key, 8000, keepalive=True, renew_every=500)
from sqlalchemy import text
killer = model.engine.connect() if victim else None  # before the server is full
open(ready + ".started", "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
stop = time.monotonic() + float(burst_s)
def burst():
    while time.monotonic() < stop:
        try:
            model.peek(key)
        except joblocks.LockBackendError:
            time.sleep(0.005)  # the server is full: try again
threads = [threading.Thread(target=burst) for _ in range(4)]
for thread in threads:
    thread.start()
if victim:
    time.sleep(0.3)
    killer.execute(text(  # end the test's connections
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = :name"), {"name": victim})
    killer.close()
for thread in threads:
    thread.join()
open(ready, "w").close()
time.sleep(60)  # at rest, holding what it kept
"""


@pytest.mark.parametrize("backend", ["postgresql"])
def test_leases_survive_idle_processes_after_their_concurrent_use(
    make_model: Callable[..., Any],
    small_url: str,
    tmp_path: Path,
    table_name: str,
    events: list[tuple[float, joblocks.Event]],
) -> None:
    """The finding: processes that used their model from several threads kept one
    connection per thread until dispose(), the server stayed full, and a lease that
    needed a new connection (its own was ended) could not renew until it ran out."""
    name = f"lease-{uuid.uuid4().hex[:8]}"
    model = make_model(url=f"{small_url}?application_name={name}")
    key = f"budget-{uuid.uuid4().hex[:6]}"
    held = model.try_lease(key, 8_000, keepalive=True, renew_every=RENEW_MS)
    assert held is not None
    hoarders: list[subprocess.Popen[str]] = []
    go = tmp_path / "go"

    def wait_for(suffix: str, what: str) -> None:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{i}{suffix}").exists() for i in range(3)):
            for i, proc in enumerate(hoarders):
                assert proc.poll() is None, (tmp_path / f"hoarder-{i}.log").read_text()
            assert time.monotonic() < deadline, f"the hoarders did not {what}"
            time.sleep(0.02)

    try:
        for i in range(3):
            argv = [sys.executable, "-c", _HOARDER, small_url, table_name, f"{key}-h{i}",
                    str(tmp_path / f"ready-{i}"), name if i == 0 else "", "1.5",
                    str(go)]  # fmt: skip
            with (tmp_path / f"hoarder-{i}.log").open("w") as log:
                hoarders.append(subprocess.Popen(argv, stderr=log, text=True))
        wait_for(".started", "start")
        go.touch()
        wait_for("", "finish their bursts")
        rested = time.monotonic()
        assert [e for _, e in events if e.kind == "error" and e.key == key], (
            "no renewal failed: the server was never full for the lease"
        )
        # The hoarders are at rest now; the lease must renew again before it runs out.
        while not any(e.kind == "renewed" and e.key == key and at > rested for at, e in events):
            assert not held.lost, held.lost_reason
            assert time.monotonic() < rested + 30
            time.sleep(0.05)
        assert not held.lost
        assert held.release() is True
    finally:
        for proc in hoarders:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


def _server_connections(url: str, application_name: str) -> int:
    import psycopg

    with psycopg.connect(_dsn(url, "observer"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_an_idle_model_keeps_one_connection(small_url: str) -> None:
    """After calls from four threads at once, the model closes all idle connections
    but one within IDLE_LINGER_S (before: one per concurrent call, until dispose())."""
    name = f"idle-{uuid.uuid4().hex[:8]}"
    model = joblocks.JobLockModel(f"{small_url}?application_name={name}")
    try:
        model.create_table()
        barrier = threading.Barrier(4)

        def work(i: int) -> None:
            barrier.wait(timeout=10)
            for _ in range(30):
                model.peek(f"k-{i}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        opened = _server_connections(small_url, name)
        assert opened >= 2, "the calls did not overlap: nothing to check"
        deadline = time.monotonic() + _connections.IDLE_LINGER_S + 5
        while _server_connections(small_url, name) > _connections.MAX_IDLE:
            assert time.monotonic() < deadline, (
                f"{_server_connections(small_url, name)} idle connections kept"
            )
            time.sleep(0.1)
        model.peek("k-0")  # the one kept still works
        assert _server_connections(small_url, name) == 1
    finally:
        model.dispose()
    assert _server_connections(small_url, name) == 0


def test_renewal_retries_come_until_the_deadline() -> None:
    """Backoff from _backoff (25 ms doubling to 1 s, full jitter), at least 10 ms, and
    never later than half the time left: tries keep coming as the deadline nears."""
    from joblocks._core.renewal import RETRY_MIN_S, renewal_retry_s

    for failures in range(1, 40):
        for remaining in (10.0, 3.0, 0.5, 0.05, 0.0, -1.0):
            pause = renewal_retry_s(failures, remaining)
            assert RETRY_MIN_S <= pause <= max(RETRY_MIN_S, min(1.0, remaining / 2))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_lease_is_reported_lost_on_time_while_the_pool_is_exhausted(
    make_model: Callable[..., Any], key: str
) -> None:
    """Every connection the engine's pool allows is in use (other threads' work) for
    longer than the lease's ttl. On both faces the renewals run on the connection the
    model keeps for them: the lease is held. Where they go through a pool (asyncio on a
    SQLite file, whose operations run through sqlite3 on the loop's thread), the renewal
    must not wait 30 s in the pool; it keeps trying and the lease is reported lost when
    it runs out, while the pool is still exhausted."""
    model = make_model()
    lost: list[Any] = []
    held = model.try_lease(key, 1_000, keepalive=True, renew_every=300, on_lost=lost.append)
    engine = model.model.engine
    cache = model.model._cache if model.face == "sync" else None
    loop_sqlite = getattr(model.model, "_loop_sqlite", None)
    if loop_sqlite is not None:
        # asyncio on a SQLite URL: the renewals go through the sqlite3 engine of
        # ``_aio_sqlite``, whose connections come from a sync pool and cache.
        engine, cache = loop_sqlite.engine, loop_sqlite.cache
    pool = engine.pool if cache is not None else engine.sync_engine.pool
    size = pool.size() + pool._max_overflow
    if cache is not None:
        cache.close()  # no idle connection left for the renewal
        # The sync face's renewals have a connection of their own, kept while the model
        # has keep-alive leases: every other connection the pool allows is taken.
        taken = [engine.connect() for _ in range(size - pool.checkedout())]

        def give_back() -> None:
            for conn in taken:
                conn.close()
    else:
        if loop_sqlite is None:
            # The asyncio face's renewals too have a connection of their own, taken
            # right after the grant.
            assert eventually(lambda: model.model._keeper is not None)

        async def take() -> list[Any]:
            return [await engine.connect() for _ in range(size - pool.checkedout())]

        async def close_all() -> None:
            for conn in taken:
                await conn.close()

        taken = run_on(model.loop, take())

        def give_back() -> None:
            run_on(model.loop, close_all())

    try:
        assert pool.checkedout() == size
        if loop_sqlite is None:
            # Renewed on the connection kept for them: held past several ttls.
            until = time.monotonic() + 3.0
            while time.monotonic() < until:
                assert not held.lost, held.lost_reason
                time.sleep(0.05)
            assert not lost
            held.release()
            return
        deadline = time.monotonic() + 15
        while not held.lost:
            assert time.monotonic() < deadline, "not reported lost while the pool was full"
            time.sleep(0.02)
        assert "ran out" in (held.lost_reason or "")
        assert len(lost) == 1
    finally:
        give_back()
