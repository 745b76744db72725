"""Run one hot loop of joblocks for a profiler, and summarise where its time goes.

    python benchmarks/profile_hot.py --db postgresql --op pair [--face sync|aio]
        [--seconds 10] [--cprofile]

Starts a throwaway server (as the suite does), warms up, prints ``looping PID`` and runs
the loop for ``--seconds``. Attach a sampling profiler to that PID, e.g.::

    python benchmarks/profile_hot.py --db postgresql --op pair --seconds 12 &
    # after "looping 1234":
    py-spy record --pid 1234 --duration 8 --rate 400 --format raw -o /tmp/pg.txt
    python benchmarks/profile_hot.py --summarise /tmp/pg.txt

``--cprofile`` profiles the loop in-process instead and prints the functions with the
most own time. ``--layers`` (sync face, SQLite) prints the CPU time per acquire+release
pair layer by layer instead: the raw ``sqlite3`` baselines, joblocks' statements on the
bare cursor, then each joblocks layer added on top (interleaved rounds, medians), and
last the whole call with a stand-in for the driver's cursor (joblocks' Python alone).
``--fence`` prints what drawing the fencing token costs raw ``sqlite3`` per pair (no
token, the counter read without its trigger, the counter table and its triggers).
``--summarise FILE`` reads py-spy's raw (collapsed) output and prints the
functions with the most own ("self") and inclusive time, and the share by layer
(joblocks, SQLAlchemy, driver, asyncio, other).

Ops: ``pair`` (acquire+release on one key), ``refused`` (acquire of a held key),
``raw`` (the raw-driver pair, for comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as C

LAYERS = (
    ("joblocks", ("joblocks/",)),
    ("sqlalchemy", ("sqlalchemy/",)),
    ("driver", ("psycopg/", "psycopg_binary", "pymysql/", "aiomysql/", "aiosqlite/", "sqlite3/")),
    ("asyncio", ("asyncio/", "greenlet")),
)


def layer(frame: str) -> str:
    for name, marks in LAYERS:
        if any(m in frame for m in marks):
            return name
    return "other"


def summarise(path: Path, top: int = 15) -> None:
    """Own and inclusive time per function from py-spy's --format raw output."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    layers: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        total += n
        leaf = frames[-1]
        own[leaf] += n
        layers[layer(leaf)] += n
        for f in set(frames):
            incl[f] += n
    print(f"{total} samples")
    print("\nown time by layer (where the leaf frame is):")
    for name, n in layers.most_common():
        print(f"  {n / total:6.1%}  {name}")
    print(f"\ntop {top} functions by own time:")
    for f, n in own.most_common(top):
        print(f"  {n / total:6.1%}  {f}")
    print(f"\ntop {top} joblocks/SQLAlchemy/driver functions by inclusive time:")
    shown = 0
    for f, n in incl.most_common():
        if layer(f) in ("joblocks", "sqlalchemy", "driver"):
            print(f"  {n / total:6.1%}  {f}")
            shown += 1
            if shown == top:
                break


class _StandIn:
    """A driver connection and its cursor that do nothing: an acquire's row, a
    release's one deleted row."""

    description: Any = None
    rowcount = 1
    lastrowid = 0

    def cursor(self) -> _StandIn:
        return self

    def execute(self, sql: str, params: Any) -> None:
        self.description = ("fence",) if sql.startswith("INSERT") else None

    def fetchall(self) -> list[tuple[int, int, int]]:
        return [(1, 0, 60_000)]

    def close(self) -> None:
        pass


def sqlite_layers(rounds: int, pairs: int) -> None:
    """CPU µs per sync acquire+release pair on SQLite, one layer added at a time.

    Every layer runs ``pairs`` pairs per round, all layers one after the other in every
    round (so that a load that changes weighs on all alike); the median and the
    minimum over the rounds are printed. CPU time of this thread (``thread_time``), not
    wall time: waiting for the scheduler on a shared machine is not counted.
    """
    import sqlite3
    import statistics

    import joblocks
    from joblocks import _execute, _lifecycle, _ops
    from joblocks._steps import Attempt

    with tempfile.TemporaryDirectory(prefix="joblocks-layers-") as folder:
        url = f"sqlite:///{Path(folder) / 'layers.db'}"
        notoken = C.RawClient("sqlite", url, C.make_table(url), token=False)
        token = C.RawClient("sqlite", url, C.make_table(url))
        model = joblocks.JobLockModel(url, table_name=C.fresh_table())
        model.acquire(C.KEY, C.TTL_MS, "warm")
        model.release(C.KEY, "warm")
        st = model.statements
        conn = model.engine.connect()
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        acq, rel = st.acquire[0].stmt, st.release
        key, who, ttl = C.KEY, C.holder_name("l"), C.TTL_MS

        def raw_notoken() -> None:
            notoken.acquire(key, who)
            notoken.release(key, who)

        def raw_token() -> None:
            token.acquire(key, who)
            token.release(key, who)

        def cursor() -> None:
            cur = dbapi.cursor()
            cur.execute(acq.sql, (key, who, ttl))
            cur.fetchall()
            cur.close()
            cur = dbapi.cursor()
            cur.execute(rel.sql, (key, who))
            cur.close()

        # The least any library adds around those statements: its arguments checked,
        # a connection taken from and put back in a list, the driver's errors turned
        # into its own; no life cycle, no retry, no events.
        kept = [dbapi]
        driver_error = sqlite3.Error

        def thin_call(sql: str, params: tuple[Any, ...], rows: bool) -> Any:
            c = kept.pop()
            try:
                cur = c.cursor()
                try:
                    cur.execute(sql, params)
                    return cur.fetchall() if rows else cur.rowcount
                finally:
                    cur.close()
            except driver_error as exc:
                raise RuntimeError(str(exc)) from exc
            finally:
                kept.append(c)

        def thin_acquire(k: Any, t: Any, h: Any) -> int | None:
            if type(k) is not str or not k or type(h) is not str or not h:
                raise ValueError("lock_key and holder: non-empty text")
            if type(t) is not int or t <= 0:
                raise ValueError("ttl: a positive int")
            found = thin_call(acq.sql, (k, h, t), True)
            return int(found[0][0]) if found else None

        def thin_release(k: Any, h: Any) -> bool:
            if type(k) is not str or not k or type(h) is not str or not h:
                raise ValueError("lock_key and holder: non-empty text")
            return bool(thin_call(rel.sql, (k, h), False) > 0)

        def thinnest() -> None:
            thin_acquire(key, ttl, who)
            thin_release(key, who)

        def execute() -> None:
            _execute.execute(conn, acq, {"key": key, "holder": who, "ttl": ttl})
            _execute.execute(conn, rel, {"key": key, "holder": who})

        def ops() -> None:
            _ops.acquire(conn, st, key, who, ttl)
            _ops.release(conn, st, key, who)

        def attempt() -> None:
            model._attempt(Attempt(_ops.acquire, (key, who, ttl)))
            model._attempt(Attempt(_ops.release, (key, who)))

        def drive() -> None:
            model._drive(_lifecycle.acquire_token(model, key, ttl, who))
            model._drive(_lifecycle.release(model, key, who))

        def face() -> None:
            model.acquire(key, ttl, who)
            model.release(key, who)

        # The same calls with the driver's cursor replaced by a stand-in that returns
        # at once: joblocks' Python alone, without the database's work between calls.
        idle = joblocks.JobLockModel(url, table_name=model.table_name)
        idle.acquire(key, ttl, who)
        idle.release(key, who)
        assert idle._cache is not None
        held = idle._cache.take()
        held_info = held.connection.info
        held_info[_execute._DIRECT] = _StandIn()
        idle._cache.put(held)

        def stand_in() -> None:
            idle.acquire(key, ttl, who)
            idle.release(key, who)

        layers = (
            ("raw sqlite3, no token (the bar's baseline)", raw_notoken),
            ("raw sqlite3, with token", raw_token),
            ("joblocks' statements, bare sqlite3 cursor", cursor),
            ("the thinnest library: checks, a kept connection, errors", thinnest),
            ("+ _execute.execute", execute),
            ("+ _ops (parameters, outcome)", ops),
            ("+ the connection cache (_attempt)", attempt),
            ("+ life cycle, validation, call (_drive)", drive),
            ("JobLockModel.acquire + release", face),
            ("the same, stand-in cursor (no database)", stand_in),
        )
        cpu: dict[str, list[float]] = {name: [] for name, _ in layers}
        for _, fn in layers:
            for _ in range(300):
                fn()
        for _ in range(rounds):
            for name, fn in layers:
                t0 = time.thread_time_ns()
                for _ in range(pairs):
                    fn()
                cpu[name].append((time.thread_time_ns() - t0) / pairs / 1000)
        conn.close()
        held_info.pop(_execute._DIRECT)  # the driver connection decides again
        idle.dispose()
        model.dispose()
        notoken.close()
        token.close()
    base = statistics.median(cpu[layers[0][0]])
    print(f"CPU µs per pair, {rounds} interleaved rounds of {pairs} pairs ({C.load()})")
    rows = []
    for name, values in cpu.items():
        med = statistics.median(values)
        rows.append([name, f"{med:.1f}", f"{min(values):.1f}", f"{base / med:.2f}"])
    print(C.table(["layer", "median µs", "min µs", "baseline ÷ this"], rows))


def sqlite_fence(rounds: int, pairs: int) -> None:
    """CPU µs per raw ``sqlite3`` acquire+release pair (joblocks' own statements, WAL,
    ``synchronous=NORMAL``, one held connection each) by what drawing the token costs:
    no token (0 written), the counter read but no trigger (tokens would not grow past a
    deleted row), and the counter table with its triggers (what joblocks does).
    Interleaved rounds, medians."""
    import sqlite3
    import statistics

    import joblocks

    with tempfile.TemporaryDirectory(prefix="joblocks-fence-") as folder:
        variants: list[tuple[str, Any, str]] = []
        release = ""
        for name, draw, triggers in (
            ("no token", False, True),
            ("counter read, no trigger", True, False),
            ("counter table + triggers (joblocks)", True, True),
        ):
            path = Path(folder) / f"{len(variants)}.db"
            model = joblocks.JobLockModel(f"sqlite:///{path}", table_name="t")
            model.create_table()
            acquire = model.statements.acquire[0].stmt.sql
            release = model.statements.release.sql
            model.dispose()
            conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not triggers:
                conn.execute('DROP TRIGGER "t_fence_ins"')
                conn.execute('DROP TRIGGER "t_fence_upd"')
            if not draw:
                acquire = acquire.replace('(SELECT value FROM "t_fence") + 1', "0")
            variants.append((name, conn, acquire))
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        for r in range(rounds + 1):
            for name, conn, acquire in variants if r % 2 else variants[::-1]:
                t0 = time.thread_time_ns()
                for _ in range(pairs if r else 300):
                    conn.execute(acquire, ("k", "h", C.TTL_MS)).fetchall()
                    conn.execute(release, ("k", "h"))
                if r:  # round 0 warms up
                    cpu[name].append((time.thread_time_ns() - t0) / pairs / 1000)
        for _, conn, _ in variants:
            conn.close()
    base = statistics.median(cpu[variants[0][0]])
    print(f"raw sqlite3, CPU µs per pair, {rounds} interleaved rounds of {pairs} ({C.load()})")
    rows = []
    for name, values in cpu.items():
        med = statistics.median(values)
        rows.append([name, f"{med:.1f}", f"{min(values):.1f}", f"{base / med:.2f}"])
    print(C.table(["token", "median µs", "min µs", "no token ÷ this"], rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=C.DATABASES, default="postgresql")
    ap.add_argument("--face", choices=("sync", "aio"), default="sync")
    ap.add_argument("--op", choices=("pair", "refused", "raw"), default="pair")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--summarise", type=Path)
    ap.add_argument("--layers", action="store_true", help="sync SQLite: CPU per layer")
    ap.add_argument("--fence", action="store_true", help="raw SQLite: what the token costs")
    ap.add_argument("--rounds", type=int, default=15, help="--layers: interleaved rounds")
    ap.add_argument("--pairs", type=int, default=2000, help="--layers: pairs per round")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.summarise)
        return 0
    if args.fence:
        sqlite_fence(args.rounds, args.pairs)
        return 0
    if args.layers:
        sqlite_layers(args.rounds, args.pairs)
        return 0
    import joblocks
    import joblocks.aio

    with tempfile.TemporaryDirectory(prefix="joblocks-prof-") as folder:
        dbs = C.start_databases([args.db], Path(folder))
        try:
            url = dbs.urls[args.db]
            holder, other = C.holder_name("p"), C.holder_name("o")
            if args.face == "aio":
                model: Any = joblocks.aio.JobLockModel(url, table_name=C.fresh_table())

                async def pair() -> None:
                    await model.acquire(C.KEY, C.TTL_MS, holder)
                    await model.release(C.KEY, holder)

                async def refused() -> None:
                    await model.acquire(C.KEY, C.TTL_MS, other)

                async def loop(seconds: float) -> int:
                    if args.op == "refused":
                        await model.acquire(C.KEY, C.TTL_MS, holder)
                    op = refused if args.op == "refused" else pair
                    n, end = 0, time.perf_counter() + seconds
                    while time.perf_counter() < end:
                        await op()
                        n += 1
                    return n

                def run(seconds: float) -> int:
                    return asyncio.run(loop(seconds))
            else:
                if args.op == "raw":
                    raw = C.RawClient(args.db, url, C.make_table(url))

                    def op() -> None:
                        raw.acquire(C.KEY, holder)
                        raw.release(C.KEY, holder)
                else:
                    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
                    if args.op == "refused":
                        model.acquire(C.KEY, C.TTL_MS, holder)

                        def op() -> None:
                            model.acquire(C.KEY, C.TTL_MS, other)
                    else:

                        def op() -> None:
                            model.acquire(C.KEY, C.TTL_MS, holder)
                            model.release(C.KEY, holder)

                def run(seconds: float) -> int:
                    n, end = 0, time.perf_counter() + seconds
                    while time.perf_counter() < end:
                        op()
                        n += 1
                    return n

            run(0.5)  # warm up (connections, prepared statements)
            print(f"looping {os.getpid()}", flush=True)
            if args.cprofile:
                prof = cProfile.Profile()
                t0 = time.perf_counter()
                n = prof.runcall(run, args.seconds)
                took = time.perf_counter() - t0
                print(f"{n} ops in {took:.1f} s under cProfile ({n / took:,.0f}/s, inflated cost)")
                pstats.Stats(prof).sort_stats("tottime").print_stats(20)
            else:
                t0 = time.perf_counter()
                n = run(args.seconds)
                took = time.perf_counter() - t0
                print(f"{n} ops in {took:.1f} s ({n / took:,.0f}/s)")
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
