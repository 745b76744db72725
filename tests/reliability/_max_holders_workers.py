"""Worker functions of tests/reliability/test_max_holders.py (run in spawned processes)."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from typing import Any

import joblocks
import joblocks.aio

#: How long one try waits for a place (ms): far longer than any fair wait here.
WAIT_MS = 20_000


def contend(
    url: str, table_name: str, key: str, n: int, face: str, think_s: tuple[float, float], conn: Any
) -> None:
    """Say "ready" once connected, receive ``(start_at, end_at)`` (time.monotonic, one
    clock for every process on Linux); until ``end_at``: wait for a place of ``key``
    (max_holders=n), hold it 10-30 ms, release, do other work for ``think_s`` (a range,
    seconds). Send back,
    per grant, (asked, got, releasing) in monotonic ns, the place and the token."""
    rng = random.Random(os.getpid())

    def window() -> tuple[float, float]:
        conn.send("ready")
        start_at, end_at = conn.recv()
        return float(start_at), float(end_at)

    grants: list[tuple[int, int, int, int, int]] = []
    misses = 0
    if face == "sync":
        model = joblocks.JobLockModel(url, table_name=table_name)
        model.now_ms()
        start_at, end_at = window()
        time.sleep(max(0.0, start_at - time.monotonic()))
        while time.monotonic() < end_at:
            asked = time.monotonic_ns()
            lease = model.try_lease(key, 60_000, max_holders=n, wait=WAIT_MS)
            if lease is None:
                misses += 1
                continue
            got = time.monotonic_ns()
            time.sleep(rng.uniform(0.01, 0.03))
            releasing = time.monotonic_ns()
            assert lease.release()
            grants.append((asked, got, releasing, lease.place or 0, lease.token))
            time.sleep(rng.uniform(*think_s))
        model.dispose()
    else:

        async def main() -> int:
            model = joblocks.aio.JobLockModel(url, table_name=table_name)
            await model.now_ms()
            start_at, end_at = window()
            await asyncio.sleep(max(0.0, start_at - time.monotonic()))
            missed = 0
            while time.monotonic() < end_at:
                asked = time.monotonic_ns()
                lease = await model.try_lease(key, 60_000, max_holders=n, wait=WAIT_MS)
                if lease is None:
                    missed += 1
                    continue
                got = time.monotonic_ns()
                await asyncio.sleep(rng.uniform(0.01, 0.03))
                releasing = time.monotonic_ns()
                assert await lease.release()
                grants.append((asked, got, releasing, lease.place or 0, lease.token))
                await asyncio.sleep(rng.uniform(*think_s))
            await model.dispose()
            return missed

        misses = asyncio.run(main())
    conn.send({"pid": os.getpid(), "grants": grants, "misses": misses})
    conn.close()


def hold_place(url: str, table_name: str, key: str, n: int, ttl_ms: int, conn: Any) -> None:
    """Once connected say "ready"; at "go" take a place of ``key`` with keep-alive,
    report it, then block forever (until killed)."""
    model = joblocks.JobLockModel(url, table_name=table_name)
    model.now_ms()
    conn.send("ready")
    conn.recv()
    lease = model.try_lease(key, ttl_ms, max_holders=n, keepalive=True)
    if lease is None:
        conn.send(None)
        return
    conn.send((os.getpid(), lease.holder, lease.place, lease.token, lease.key))
    threading.Event().wait()
