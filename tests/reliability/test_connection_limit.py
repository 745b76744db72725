"""Renewals at a server's connection limit.

A PostgreSQL server of its own with few connection slots; several processes each hold
a keep-alive lease with a short ttl while two threads (sync face) or four tasks
(asyncio face) of the same process call ``peek`` in a loop, wanting more connections
than the server has. Peeks may fail (``LockBackendError``: too many clients); the
renewals must not, since each process's renewals run on the connection its model keeps
while it has keep-alive leases.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import joblocks

from ..support.matrix import server_or_skip
from ..support.servers import Server, start_postgres
from ._support import Reporter

pytestmark = [pytest.mark.reliability, pytest.mark.server]

#: Connection slots of the server (the test connects as a superuser, who may use all).
SLOTS = 10
PROCESSES = 6
TTL_MS = 1_500
HAMMER_S = {False: 4.0, True: 15.0}
GUARD_S = 120.0

_WORKER = r"""
import json, sys, threading, time
import joblocks
url, table, key = sys.argv[1:4]
seconds, ttl = float(sys.argv[4]), int(sys.argv[5])
model = joblocks.JobLockModel(url, table_name=table)
lost = []
def on_lost(held):
    lost.append(held.lost_reason)
lease = model.try_lease(key, ttl, keepalive=True, on_lost=on_lost)
print("ready" if lease is not None else "taken", flush=True)
sys.stdin.readline()  # every process starts hammering at once
stop = time.monotonic() + seconds
counts = {"peeks": 0, "refused": 0}
def hammer():
    while time.monotonic() < stop:
        try:
            model.peek(key)
            counts["peeks"] += 1
        except joblocks.LockBackendError:
            counts["refused"] += 1
threads = [threading.Thread(target=hammer) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"lost": lost, "held": not lease.lost, **counts}), flush=True)
if not lease.lost:
    try:
        lease.release()
    except joblocks.LockBackendError:
        pass  # the server has no slot left: the row expires by itself
model.dispose()
"""

_AIO_WORKER = r"""
import asyncio, json, sys, time
import joblocks, joblocks.aio
url, table, key = sys.argv[1:4]
seconds, ttl = float(sys.argv[4]), int(sys.argv[5])
async def main():
    model = joblocks.aio.JobLockModel(url, table_name=table)
    lost = []
    def on_lost(held):
        lost.append(held.lost_reason)
    lease = await model.try_lease(key, ttl, keepalive=True, on_lost=on_lost)
    print("ready" if lease is not None else "taken", flush=True)
    # every process starts hammering at once
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    stop = time.monotonic() + seconds
    counts = {"peeks": 0, "refused": 0}
    async def hammer():
        while time.monotonic() < stop:
            try:
                await model.peek(key)
                counts["peeks"] += 1
            except joblocks.LockBackendError:
                counts["refused"] += 1
    await asyncio.gather(*(hammer() for _ in range(4)))
    print(json.dumps({"lost": lost, "held": not lease.lost, **counts}), flush=True)
    if not lease.lost:
        try:
            await lease.release()
        except joblocks.LockBackendError:
            pass  # the server has no slot left: the row expires by itself
    await model.dispose()
asyncio.run(main())
"""

WORKERS = {"sync": _WORKER, "aio": _AIO_WORKER}


@pytest.fixture(scope="session")
def pg_few_slots(request: pytest.FixtureRequest) -> Server:
    def start(base: Path) -> Server:
        return start_postgres(
            base, {"max_connections": str(SLOTS), "superuser_reserved_connections": "0"}
        )

    return server_or_skip(request, "postgresql-few-slots", start)


@pytest.mark.parametrize("worker_face", ["sync", "aio"])
def test_keepalive_renewals_are_never_starved_by_the_process_own_calls(
    pg_few_slots: Server, table_name: str, long_run: bool, report: Reporter, worker_face: str
) -> None:
    made = joblocks.JobLockModel(pg_few_slots.url, table_name=table_name)
    made.create_table()
    made.dispose()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKERS[worker_face],
                pg_few_slots.url,
                table_name,
                f"slots-{i}-{uuid.uuid4().hex[:6]}",
                str(HAMMER_S[long_run]),
                str(TTL_MS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    results = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, _ = proc.communicate(timeout=GUARD_S)
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=GUARD_S)
    lost = [r["lost"] for r in results if r["lost"] or not r["held"]]
    report(
        "connection limit, keep-alive renewals",
        "postgresql",
        face=worker_face,
        slots=SLOTS,
        processes=PROCESSES,
        ttl_s=TTL_MS / 1000,
        peeks=sum(r["peeks"] for r in results),
        peeks_refused=sum(r["refused"] for r in results),
        leases_lost=len(lost),
    )
    assert not lost, lost
