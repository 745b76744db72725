"""Where joblocks' cost over the driver goes: two experiments behind docs/performance.md.

    python benchmarks/overhead.py [--databases sqlite,postgresql,mariadb] [--seconds 2]

1. Client CPU per call (``time.process_time``), sync face against the raw driver: a
   refused acquire and an acquire+release pair, two interleaved rounds.
2. The asyncio layers, one key, pairs/s, two interleaved rounds (best shown): the raw
   asyncio driver; SQLAlchemy with one ``AsyncConnection`` held and ``run_sync`` per
   statement; SQLAlchemy with ``engine.connect()`` per statement (what the asyncio face
   does today); joblocks' asyncio face.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
import joblocks.aio
from benchmarks import _common as C


def cpu_per_call(op: Callable[[], object], n: int) -> tuple[float, float]:
    for _ in range(min(300, n)):
        op()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        op()
    return (time.process_time() - cpu0) / n * 1e6, (time.perf_counter() - wall0) / n * 1e6


def client_cpu(db: str, url: str, n: int) -> None:
    table = C.make_table(url)
    raw = C.RawClient(db, url, table)
    model = joblocks.JobLockModel(url, table_name=table, create_table=False)
    owner, other = C.holder_name("o"), C.holder_name("x")
    raw.acquire("held", owner)
    ops: dict[str, Callable[[], object]] = {
        "raw refused": lambda: raw.acquire("held", other),
        "joblocks refused": lambda: model.acquire("held", C.TTL_MS, other),
        "raw pair": lambda: (raw.acquire("p1", owner), raw.release("p1", owner)),
        "joblocks pair": lambda: (
            model.acquire("p2", C.TTL_MS, owner),
            model.release("p2", owner),
        ),
    }
    try:
        for rnd in range(2):
            for name, op in ops.items():
                cpu, wall = cpu_per_call(op, n)
                print(
                    f"  {db:10} round {rnd + 1}  {name:17} client CPU {cpu:6.1f} µs/call"
                    f"   wall {wall:6.1f} µs/call"
                )
    finally:
        model.dispose()
        raw.close()


async def _rate(op: Callable[[], Awaitable[object]], seconds: float) -> float:
    for _ in range(100):
        await op()
    n, t0 = 0, time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        await op()
        n += 1
    return n / (time.perf_counter() - t0)


async def aio_layers(db: str, url: str, seconds: float) -> None:
    table = C.make_table(url)
    sql = C.raw_sql(db, table)
    holder = C.holder_name("a")
    raw = C.RawAsyncClient(db, url, table)
    await raw.open()
    model = joblocks.aio.JobLockModel(url, table_name=table, create_table=False)
    engine = model.engine

    def acquire(conn: Any, key: str) -> None:
        cur = conn.connection.dbapi_connection.cursor()
        cur.execute(sql.acquire, {"key": key, "holder": holder, "ttl": C.TTL_MS})
        if db != "mariadb":
            cur.fetchall()
        cur.close()

    def release(conn: Any, key: str) -> None:
        cur = conn.connection.dbapi_connection.cursor()
        cur.execute(sql.release, {"key": key, "holder": holder})
        cur.close()

    async def raw_pair() -> None:
        await raw.acquire("k1", holder)
        await raw.release("k1", holder)

    held = await engine.connect()

    async def held_pair() -> None:
        await held.run_sync(acquire, "k2")
        await held.run_sync(release, "k2")

    async def connect_pair() -> None:
        async with engine.connect() as conn:
            await conn.run_sync(acquire, "k3")
        async with engine.connect() as conn:
            await conn.run_sync(release, "k3")

    async def joblocks_pair() -> None:
        await model.acquire("k4", C.TTL_MS, holder)
        await model.release("k4", holder)

    variants = {
        "raw asyncio driver": raw_pair,
        "SQLAlchemy, held AsyncConnection": held_pair,
        "SQLAlchemy, connect per statement": connect_pair,
        "joblocks asyncio": joblocks_pair,
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for _ in range(2):
            for name, op in variants.items():
                rates[name].append(await _rate(op, seconds))
    finally:
        await held.close()
        await raw.close()
        await model.dispose()
    for name, values in rates.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"  {db:10} {name:34} {max(values):7,.0f} pairs/s  (rounds: {shown})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--databases", default=",".join(C.DATABASES))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    wanted = [d for d in args.databases.split(",") if d]
    with tempfile.TemporaryDirectory(prefix="joblocks-overhead-") as folder:
        dbs = C.start_databases(wanted, Path(folder))
        try:
            print(f"\nclient CPU per call, sync face against the raw driver ({C.load()})")
            for db, url in dbs.urls.items():
                client_cpu(db, url, args.calls)
            print(f"\nasyncio layers, one key, acquire+release pairs/s ({C.load()})")
            for db, url in dbs.urls.items():
                asyncio.run(aio_layers(db, url, args.seconds))
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
