"""Where the asyncio face's time goes on SQLite, layer by layer (µs per call, wall).

    python benchmarks/aio_sqlite_layers.py [--calls 3000] [--rounds 3]

One process, one SQLite file (WAL, ``synchronous=NORMAL``, as joblocks sets it), one
key; each layer timed in interleaved rounds, the median printed:

- ``greenlet_spawn`` of a function that does nothing (each call of the face pays one);
- the same, checking a connection out of the engine's pool and back in;
- the acquire+release statements sent on the ``sqlite3`` connection behind aiosqlite,
  from the event loop's thread, on one held connection (the floor of ``_ops.in_place``);
- ``_ops.in_place`` running ``_ops.acquire`` and ``_ops.release`` on that connection
  (adds the busy-timeout switch and ``_ops``);
- ``joblocks.aio`` ``acquire`` + ``release`` (adds validation, the life cycle, the
  greenlet and the pool check-out per call);
- raw aiosqlite (``await conn.execute``), the same statements, for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks.aio
from benchmarks import _common as C
from joblocks import _ops
from joblocks._sqla import driver_connection, greenlet_spawn

KEY, HOLDER = "k", "h"


async def measure(calls: int, rounds: int) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="joblocks-aio-layers-")
    model = joblocks.aio.JobLockModel(f"sqlite:///{folder}/l.db", table_name=C.fresh_table())
    await model.acquire(KEY, C.TTL_MS, HOLDER)
    await model.release(KEY, HOLDER)
    engine = model.engine.sync_engine
    st = model.statements
    acquire_values = {"key": KEY, "holder": HOLDER, "ttl": C.TTL_MS}
    release_values = {"key": KEY, "holder": HOLDER}

    def nothing() -> None:
        return None

    def checkout() -> None:
        with engine.connect():
            return None

    def held(n: int, in_place: bool) -> None:
        with engine.connect() as conn:
            raw = driver_connection(conn.connection.dbapi_connection)
            for _ in range(n):
                if in_place:
                    _ops.in_place(conn, st, _ops.acquire, (KEY, HOLDER, C.TTL_MS))
                    _ops.in_place(conn, st, _ops.release, (KEY, HOLDER))
                else:
                    up = st.acquire[0].stmt
                    raw.execute(up.sql, up.params(acquire_values)).fetchall()
                    raw.execute(st.release.sql, st.release.params(release_values))

    import aiosqlite

    aio = await aiosqlite.connect(f"{folder}/l.db", isolation_level=None)
    for pragma in ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = NORMAL"):
        await aio.execute(f"PRAGMA {pragma}")
    up = st.acquire[0].stmt

    async def raw_aiosqlite() -> None:
        async with aio.execute(up.sql, up.params(acquire_values)) as cur:
            await cur.fetchall()
        await (await aio.execute(st.release.sql, st.release.params(release_values))).close()

    async def face_pair() -> None:
        await model.acquire(KEY, C.TTL_MS, HOLDER)
        await model.release(KEY, HOLDER)

    async def each(fn: Callable[[], Awaitable[Any]]) -> float:
        for _ in range(min(200, calls)):
            await fn()
        t0 = time.perf_counter()
        for _ in range(calls):
            await fn()
        return (time.perf_counter() - t0) / calls * 1e6

    async def batch(in_place: bool) -> float:
        await greenlet_spawn(held, min(200, calls), in_place)
        t0 = time.perf_counter()
        await greenlet_spawn(held, calls, in_place)
        return (time.perf_counter() - t0) / calls * 1e6

    layers: dict[str, Callable[[], Awaitable[float]]] = {
        "greenlet_spawn, nothing in it (per call)": lambda: each(lambda: greenlet_spawn(nothing)),
        "greenlet_spawn + pool check-out/in (per call)": lambda: each(
            lambda: greenlet_spawn(checkout)
        ),
        "raw statements on the loop's thread (pair)": lambda: batch(False),
        "_ops.in_place acquire + release (pair)": lambda: batch(True),
        "joblocks.aio acquire + release (pair)": lambda: each(face_pair),
        "raw aiosqlite, await execute (pair)": lambda: each(raw_aiosqlite),
    }
    found: dict[str, list[float]] = {name: [] for name in layers}
    try:
        for _ in range(rounds):
            for name, fn in layers.items():
                found[name].append(await fn())
    finally:
        await aio.close()
        await model.dispose()
    return {name: statistics.median(values) for name, values in found.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    result = asyncio.run(measure(args.calls, args.rounds))
    print(f"asyncio face on SQLite, µs per call, median of {args.rounds} rounds ({C.load()})")
    for name, us in result.items():
        print(f"  {name:48} {us:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
