"""Where the asyncio face's time goes on PostgreSQL, layer by layer (µs per pair).

    python benchmarks/aio_pg_layers.py [--calls 2000] [--rounds 3] [--url URL]

Starts a throwaway PostgreSQL (as the suite does), or measures on ``--url``; one
process, one key per layer, each layer timed in interleaved rounds, the median of client
CPU (``time.process_time``) and wall time per acquire+release pair printed:

- raw psycopg ``AsyncConnection`` of its own (autocommit), the suite's raw statements;
- the same on the psycopg connection behind a connection of joblocks' pool, joblocks'
  own statements (what the face's statements cost the client with no layer around);
- ``greenlet_spawn`` of a function doing nothing, twice (each call of the face pays one);
- one ``greenlet_spawn`` per call awaiting joblocks' statement on that same pooled
  connection, held (no check-out, no joblocks code): the least a call costs on the
  path DESIGN.md prescribes for the asyncio face (the sync functions run through
  ``AsyncConnection.run_sync``, i.e. in a greenlet, awaiting each statement with one
  switch to the loop and back);
- the same, checking a connection out of the pool and back in (``_execute.Checkout``);
- ``_ops.acquire`` + ``_ops.release`` run as the face runs them (``_in_greenlet``: the
  greenlet, the check-out, the statements awaited on psycopg), without the life cycle;
- ``joblocks.aio`` ``acquire`` + ``release`` (adds validation and the life cycle).
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
from joblocks._execute import Checkout, _awaited
from joblocks._sqla import awaited, greenlet_spawn

HOLDER = "h"
RAW = "raw psycopg async, own connection"
FLOOR = "greenlet per call, pooled connection held, SQL only"
FACE = "joblocks.aio acquire + release"


async def measure(url: str, calls: int, rounds: int) -> dict[str, tuple[float, float]]:
    table = C.make_table(url)
    raw = C.RawAsyncClient("postgresql", url, table)
    await raw.open()
    model = joblocks.aio.JobLockModel(url, table_name=table, create_table=False)
    await model.now_ms()
    held = await model.engine.connect()
    pooled = (await held.get_raw_connection()).driver_connection
    engine = model.engine.sync_engine
    st = model.statements
    up = st.acquire[0].stmt

    async def raw_pair() -> None:
        await raw.acquire("k1", HOLDER)
        await raw.release("k1", HOLDER)

    async def pooled_pair() -> None:
        cur = await pooled.execute(up.sql, up.params({"key": "k2", "holder": HOLDER, "ttl": 1}))
        await cur.fetchall()
        await pooled.execute(st.release.sql, st.release.params({"key": "k2", "holder": HOLDER}))

    def nothing() -> None:
        return None

    def held_statement(sql: str, params: Any) -> None:
        awaited(_awaited(pooled, sql, params))

    async def greenlet_floor() -> None:
        await greenlet_spawn(
            held_statement, up.sql, up.params({"key": "k5", "holder": HOLDER, "ttl": 1})
        )
        await greenlet_spawn(
            held_statement, st.release.sql, st.release.params({"key": "k5", "holder": HOLDER})
        )

    def checkout() -> None:
        Checkout(engine).close()

    async def spawns(fn: Callable[[], None]) -> None:
        await greenlet_spawn(fn)
        await greenlet_spawn(fn)

    async def in_greenlet() -> None:
        await greenlet_spawn(model._in_greenlet, _ops.acquire, "k3", HOLDER, C.TTL_MS)
        await greenlet_spawn(model._in_greenlet, _ops.release, "k3", HOLDER)

    async def face() -> None:
        await model.acquire("k4", C.TTL_MS, HOLDER)
        await model.release("k4", HOLDER)

    async def each(fn: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
        for _ in range(min(200, calls)):
            await fn()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            await fn()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        return cpu / calls * 1e6, wall / calls * 1e6

    layers: dict[str, Callable[[], Awaitable[Any]]] = {
        RAW: raw_pair,
        "psycopg connection of the pool, joblocks' SQL": pooled_pair,
        "greenlet_spawn x2, nothing in it": lambda: spawns(nothing),
        "greenlet_spawn x2 + pool check-out/in": lambda: spawns(checkout),
        FLOOR: greenlet_floor,
        "_in_greenlet acquire + release (no life cycle)": in_greenlet,
        FACE: face,
    }
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in layers}
    try:
        for _ in range(rounds):
            for name, fn in layers.items():
                found[name].append(await each(fn))
    finally:
        await held.close()
        await raw.close()
        await model.dispose()
    return {
        name: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        for name, values in found.items()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--url", help="a PostgreSQL URL to measure on (default: start a throwaway server)"
    )
    args = ap.parse_args()
    if args.calls < 1 or args.rounds < 1:
        ap.error("--calls and --rounds: at least 1")
    if args.url:
        result = asyncio.run(measure(args.url, args.calls, args.rounds))
    else:
        with tempfile.TemporaryDirectory(prefix="joblocks-aio-pg-") as folder:
            dbs = C.start_databases(["postgresql"], Path(folder))
            try:
                if "postgresql" not in dbs.urls:
                    print("no PostgreSQL server could be started")
                    return 1
                result = asyncio.run(measure(dbs.urls["postgresql"], args.calls, args.rounds))
            finally:
                dbs.stop()
    print(f"asyncio face on PostgreSQL, µs per pair, median of {args.rounds} rounds ({C.load()})")
    print(f"  {'layer':48} {'CPU':>7} {'wall':>7}")
    for name, (cpu, wall) in result.items():
        print(f"  {name:48} {cpu:7.1f} {wall:7.1f}")
    raw_cpu, raw_wall = result[RAW]
    floor_cpu, floor_wall = result[FLOOR]
    face_cpu, face_wall = result[FACE]
    print(
        f"  the face ÷ raw: {raw_wall / face_wall:.2f} wall, {raw_cpu / face_cpu:.2f} CPU; "
        f"ceiling on the run_sync path (raw ÷ {FLOOR!r}): "
        f"{raw_wall / floor_wall:.2f} wall, {raw_cpu / floor_cpu:.2f} CPU (issue 14's bar: ≥ 0.85)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
