"""Real multi-process races: spawned processes, each with its own model and connection.

One pool of ``N`` spawned worker processes serves the whole module (spawning and
importing SQLAlchemy and the drivers costs about a second per batch on a small
machine). Every race starts at a shared barrier, so the workers' calls hit the
database together. Run with ``-s`` to see the throughput of ``test_no_overlap``.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import joblocks

from ...support.pool import SPAWN, Pool
from . import _race_workers as workers

pytestmark = pytest.mark.races

N = 8  # worker processes racing
ROUNDS = 4  # races per test in test_one_winner_*: a fresh key each round
RESULT_TIMEOUT_S = 60.0
BARRIER_TIMEOUT_S = 30.0  # how long a worker waits at the start barrier
HAMMER_SECONDS = 2.0
HOLD_TTL_MS = 1_500


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    pool = Pool(N, result_timeout_s=RESULT_TIMEOUT_S, barrier_timeout_s=BARRIER_TIMEOUT_S)
    try:
        hellos = pool.run_all(workers.hello)
        pids = {pid for pid, _ in hellos}
        assert len(pids) == N
        assert os.getpid() not in pids
        assert len({holder for _, holder in hellos}) == N  # one worker id per process
        yield pool
    finally:
        pool.close()


@pytest.fixture
def parent_model(db_url: str, table_name: str) -> Iterator[joblocks.JobLockModel]:
    """The test process's own model; it creates the table before any worker starts."""
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    model.create_table()
    try:
        yield model
    finally:
        model.dispose()


def _keys(n: int) -> list[str]:
    base = uuid.uuid4().hex[:8]
    return [f"race-{base}-{i}" for i in range(n)]


def _check_distinct_processes(results: list[dict[str, Any]]) -> None:
    assert len({r["pid"] for r in results}) == N
    assert len({r["holder"] for r in results}) == N


# -- 1, 2: one winner ------------------------------------------------------------------


def test_one_winner_on_absent_row(
    pool: Pool,
    parent_model: joblocks.JobLockModel,
    db_url: str,
    table_name: str,
    acquire_path: str,
) -> None:
    keys = _keys(ROUNDS)
    assert all(parent_model.peek(key) is None for key in keys)

    results = pool.run_all(
        workers.race_plain_acquire, db_url, table_name, acquire_path, keys, 30_000
    )

    _check_distinct_processes(results)
    for i, key in enumerate(keys):
        winners = [r["holder"] for r in results if r["won"][i]]
        assert len(winners) == 1, f"round {i}: {len(winners)} of {N} processes won {key!r}"
        row = parent_model.peek(key)
        assert row is not None
        assert row.holder == winners[0]
        assert not row.expired


def test_one_winner_on_expired_row(
    pool: Pool,
    parent_model: joblocks.JobLockModel,
    db_url: str,
    table_name: str,
    acquire_path: str,
) -> None:
    keys = _keys(ROUNDS)
    old = {}
    for key in keys:
        assert parent_model.acquire(key, 50, "stale-holder")
        old[key] = parent_model.peek(key)
    time.sleep(0.1)
    deadline = time.monotonic() + 5
    while not all(parent_model.peek(key).expired for key in keys):  # by the db's clock
        assert time.monotonic() < deadline, "the 50 ms leases never expired"
        time.sleep(0.02)

    results = pool.run_all(workers.race_acquire, db_url, table_name, acquire_path, keys, 30_000)

    _check_distinct_processes(results)
    for i, key in enumerate(keys):
        winners = [(r["holder"], r["tokens"][i]) for r in results if r["tokens"][i] is not None]
        assert len(winners) == 1, f"round {i}: {len(winners)} of {N} processes won {key!r}"
        holder, token = winners[0]
        row = parent_model.peek(key)
        assert row is not None
        assert row.holder == holder
        assert row.fence == token
        assert token > old[key].fence
        assert row.acquired_at >= old[key].expires_at


# -- 3: no overlap ---------------------------------------------------------------------


def test_no_overlap(
    pool: Pool,
    parent_model: joblocks.JobLockModel,
    backend: str,
    db_url: str,
    table_name: str,
) -> None:
    key = _keys(1)[0]
    started = time.monotonic()
    results = pool.run_all(workers.hammer, db_url, table_name, key, 10_000, HAMMER_SECONDS)
    elapsed = time.monotonic() - started

    _check_distinct_processes(results)
    runs = sorted(run for r in results for run in r["intervals"])
    wins = sum(r["wins"] for r in results)
    attempts = sum(r["attempts"] for r in results)
    assert wins == len(runs)
    paths = {r["path"] for r in results}
    print(
        f"\n[races] {backend} ({'/'.join(sorted(paths))}): {wins} runs in "
        f"{HAMMER_SECONDS:.1f}s = {wins / HAMMER_SECONDS:.0f} wins/s by {N} processes "
        f"({attempts} attempts, {elapsed:.2f}s with set-up); wins per process: "
        f"{sorted(r['wins'] for r in results)}"
    )
    assert wins > 10
    assert sum(1 for r in results if r["wins"]) >= 2, "no contention: one process won all"

    # No two runs overlapped, and their fencing tokens grew in the order they ran.
    for (_, e0, f0, _), (s1, _, f1, _) in zip(runs, runs[1:]):
        assert s1 >= e0, f"runs overlapped by {(e0 - s1) / 1e6:.3f} ms"
        assert f1 > f0, f"token {f1} ran after token {f0}"

    # Every run saw its own lease: the row's holder was the process running the work.
    for r in results:
        assert all(owner == r["holder"] for _, _, _, owner in r["intervals"])
    assert parent_model.peek(key) is None  # the last run released it


# -- 4: a killed holder ------------------------------------------------------------------


def test_killed_holder_is_replaced_after_expiry(
    parent_model: joblocks.JobLockModel, db_url: str, table_name: str
) -> None:
    key = _keys(1)[0]
    receive, send = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(
        target=workers.hold_forever, args=(db_url, table_name, key, HOLD_TTL_MS, send)
    )
    child.start()
    try:
        send.close()
        assert receive.poll(RESULT_TIMEOUT_S), "the holder never reported"
        pid, holder, token = receive.recv()
        assert pid == child.pid
        assert token is not None
        held = parent_model.peek(key)
        assert held is not None
        assert (held.holder, held.fence) == (holder, token)
        assert held.expires_at - held.acquired_at == timedelta(milliseconds=HOLD_TTL_MS)
        assert not held.expired
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        receive.close()
    assert child.exitcode == -signal.SIGKILL
    expires_ms = int(held.expires_at.timestamp() * 1000)

    successor = "successor"
    refused_at: list[int] = []
    deadline = time.monotonic() + (HOLD_TTL_MS + 500) / 1000
    while True:
        before = parent_model.now_ms()
        fence = parent_model.acquire_token(key, 30_000, successor)
        if fence is not None:
            break
        refused_at.append(before)
        assert time.monotonic() < deadline, "no takeover within ttl + 0.5 s"
        time.sleep(0.05)

    row = parent_model.peek(key)
    assert row is not None
    assert (row.holder, row.fence) == (successor, fence)
    assert fence > token
    assert refused_at, "the successor was never refused while the lease was live"
    # Refused only while the lease was live, by the database's clock ...
    assert all(at < expires_ms for at in refused_at)
    # ... taken no earlier than its expiry, and within 0.5 s of it.
    assert row.acquired_at >= held.expires_at
    assert row.acquired_at - held.expires_at <= timedelta(milliseconds=500)
