"""joblocks' benchmark suite: the figures of docs/performance.md.

    python benchmarks/suite.py [--databases sqlite,postgresql,mariadb]
        [--sections uncontended,refused,contention,keepalive,cli,peers]
        [--seconds 1.5] [--repeat 3] [--json FILE] [--smoke]
        [--pg-url URL] [--mariadb-url URL]

Sections (per database):

uncontended  acquire+release pairs on one key, sync and asyncio faces, against the raw
             driver sending the same statement on a held connection (sqlite3, psycopg
             sync and async, PyMySQL / aiomysql); rounds interleaved, ratio per round
refused      latency of an acquire refused because another holder has the key, and the
             statements it sends, counted by the server (PostgreSQL's statement log,
             MariaDB's status counters) or by sqlite3's trace callback
contention   ``--workers`` processes on one key: wins/s, and the checks — overlapping
             holds, tokens out of grant order, lost leases, errors, rows left: all zero
keepalive    one process holding ``--leases`` keep-alive leases: renewals/s, CPU
cli          ``joblocks run k --ttl 1m -- true`` against ``python -c 'import sqlalchemy'``
peers        PostgreSQL lock libraries on the same server (advisory locks always; the
             libraries of ``benchmarks/peers/setup.sh`` when their venv exists)

Only joblocks' public API is used (``joblocks``, ``joblocks.aio``, the CLI). Servers:
``--pg-url``/``--mariadb-url``, or throwaway ones started as the test suite does
(``tests/support/servers.py``). Exit status 1 when a correctness check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
import joblocks.aio
from benchmarks import _common as C
from benchmarks._common import KEY, TTL_MS, Stats, Unexpected

HERE = Path(__file__).resolve().parent
SECTIONS = ("uncontended", "refused", "contention", "keepalive", "cli", "peers")
CHECKS = ("overlaps", "fence_errors", "lost", "errors", "rows_left", "workers_failed")


@dataclass
class Ctx:
    urls: dict[str, str]
    servers: dict[str, Any]
    seconds: float
    repeat: int
    smoke: bool
    workers: int = 8
    contention_seconds: float = 3.0
    leases: int = 1000
    keepalive_seconds: float = 3.0
    loss_trials: int = 10
    cli_runs: int = 15
    count_ops: int = 300
    aio_renew_ms: int = 1000
    warmup: float = field(init=False)

    def __post_init__(self) -> None:
        self.warmup = min(0.3, self.seconds / 4)


# =============================================================== uncontended


def _pairs_sync(acquire: Callable[[], object], release: Callable[[], bool], c: Ctx) -> Stats:
    def pair() -> None:
        if not acquire():
            raise Unexpected("uncontended acquire refused")
        if not release():
            raise Unexpected("release found no row")

    return C.time_sync(pair, c.seconds, c.warmup)


def jl_pairs(db: str, url: str, c: Ctx) -> Stats:
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
    holder = C.holder_name("jl")
    try:
        return _pairs_sync(
            lambda: model.acquire(KEY, TTL_MS, holder), lambda: model.release(KEY, holder), c
        )
    finally:
        model.dispose()


def raw_pairs(db: str, url: str, c: Ctx) -> Stats:
    with C.raw_client(db, url) as raw:
        holder = C.holder_name("raw")
        return _pairs_sync(
            lambda: raw.acquire(KEY, holder) is not None, lambda: raw.release(KEY, holder), c
        )


async def _pairs_async(acquire: Callable[[], Any], release: Callable[[], Any], c: Ctx) -> Stats:
    async def pair() -> None:
        if not await acquire():
            raise Unexpected("uncontended acquire refused")
        if not await release():
            raise Unexpected("release found no row")

    return await C.time_async(pair, c.seconds, c.warmup)


def aio_pairs(db: str, url: str, c: Ctx) -> Stats:
    async def main() -> Stats:
        model = joblocks.aio.JobLockModel(url, table_name=C.fresh_table())
        holder = C.holder_name("aio")
        try:
            return await _pairs_async(
                lambda: model.acquire(KEY, TTL_MS, holder), lambda: model.release(KEY, holder), c
            )
        finally:
            await model.dispose()

    return asyncio.run(main())


def raw_aio_pairs(db: str, url: str, c: Ctx) -> Stats:
    async def main() -> Stats:
        raw = C.RawAsyncClient(db, url, C.make_table(url))
        await raw.open()
        holder = C.holder_name("rawaio")

        async def acquire() -> bool:
            return await raw.acquire(KEY, holder) is not None

        try:
            return await _pairs_async(acquire, lambda: raw.release(KEY, holder), c)
        finally:
            await raw.close()

    return asyncio.run(main())


UNCONTENDED = {
    "raw": ("raw driver, sync", raw_pairs),
    "sync": ("joblocks", jl_pairs),
    "raw_aio": ("raw driver, asyncio", raw_aio_pairs),
    "aio": ("joblocks.aio", aio_pairs),
}
RATIOS = {"sync": "raw", "aio": "raw_aio"}  # joblocks variant → its raw baseline


def interleaved(db: str, url: str, c: Ctx, variants: dict[str, Any], what: str) -> dict[str, Any]:
    """Every variant once per round, ``c.repeat`` rounds; medians, each round kept."""
    rounds: dict[str, list[Stats]] = {name: [] for name in variants}
    for _ in range(c.repeat):
        for name, (label, fn) in variants.items():
            rounds[name].append(C.attempt(f"{db} {what} {label}", fn, db, url, c))
    return {name: C.combine(r) for name, r in rounds.items()}


def ratios(jl: Stats, raw: Stats) -> list[float]:
    """joblocks ÷ raw pairs/s, per round (both measured back to back)."""
    return [
        a["per_s"] / b["per_s"]
        for a, b in zip(jl.get("rounds", []), raw.get("rounds", []))
        if "per_s" in a and "per_s" in b and b["per_s"]
    ]


def section_uncontended(c: Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = []
    for db, url in c.urls.items():
        res = interleaved(db, url, c, UNCONTENDED, "pairs")
        for jl, raw in RATIOS.items():
            r = ratios(res[jl], res[raw])
            res[jl]["ratio_rounds"] = r
            res[jl]["ratio"] = statistics.median(r) if r else None
        out[db] = res
        for name, (label, _) in UNCONTENDED.items():
            s = res[name]
            r = s.get("ratio_rounds")
            rows.append(
                [
                    f"{db}: {label}",
                    C.num(s, "per_s"),
                    C.num(s, "p50_us"),
                    C.num(s, "p99_us"),
                    "" if not r else f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})",
                ]
            )
    print(
        f"\n  uncontended: acquire+release pairs on one key ({C.load()})\n"
        + C.table(["variant", "pairs/s", "p50 µs", "p99 µs", "÷ raw (per round)"], rows),
        flush=True,
    )
    return out


# =================================================================== refused


def jl_refused(db: str, url: str, c: Ctx) -> Stats:
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
    try:
        if not model.acquire(KEY, TTL_MS, "owner"):
            raise Unexpected("first acquire refused")

        def refused() -> None:
            if model.acquire(KEY, TTL_MS, "other"):
                raise Unexpected("acquire of a held key granted")

        return C.time_sync(refused, c.seconds / 2, c.warmup)
    finally:
        model.dispose()


def aio_refused(db: str, url: str, c: Ctx) -> Stats:
    async def main() -> Stats:
        model = joblocks.aio.JobLockModel(url, table_name=C.fresh_table())
        try:
            if not await model.acquire(KEY, TTL_MS, "owner"):
                raise Unexpected("first acquire refused")

            async def refused() -> None:
                if await model.acquire(KEY, TTL_MS, "other"):
                    raise Unexpected("acquire of a held key granted")

            return await C.time_async(refused, c.seconds / 2, c.warmup)
        finally:
            await model.dispose()

    return asyncio.run(main())


def raw_refused(db: str, url: str, c: Ctx) -> Stats:
    with C.raw_client(db, url) as raw:
        if raw.acquire(KEY, "owner") is None:
            raise Unexpected("first acquire refused")

        def refused() -> None:
            if raw.acquire(KEY, "other") is not None:
                raise Unexpected("acquire of a held key granted")

        return C.time_sync(refused, c.seconds / 2, c.warmup)


REFUSED = {
    "raw": ("raw driver, sync", raw_refused),
    "sync": ("joblocks", jl_refused),
    "aio": ("joblocks.aio", aio_refused),
}


def count_refused(db: str, url: str, c: Ctx, face: str) -> dict[str, Any]:
    """Statements per refused acquire, counted outside joblocks (``_counters``)."""
    from sqlalchemy import event

    from benchmarks._counters import count_statements

    server = c.servers.get(db)
    if db == "postgresql" and server is None:
        return {"error": "counted on a throwaway server only (its statement log)"}
    k = c.count_ops
    if face == "raw":
        with C.raw_client(db, url) as raw:

            def run(n: int, start: Callable[[], None], end: Callable[[], None]) -> None:
                raw.acquire(KEY, "owner")
                start()
                for _ in range(n):
                    raw.acquire(KEY, "other")
                end()

            trace = raw.conn.set_trace_callback if db == "sqlite" else None
            return count_statements(db, url, server, k, run, trace)
    if face == "aio":
        if db == "sqlite":
            return {"error": "no public hook on the asyncio face's SQLite connection"}

        def run(n: int, start: Callable[[], None], end: Callable[[], None]) -> None:
            async def main() -> None:
                model = joblocks.aio.JobLockModel(url, table_name=C.fresh_table())
                try:
                    await model.acquire(KEY, TTL_MS, "owner")
                    await model.acquire(KEY, TTL_MS, "other")
                    start()
                    for _ in range(n):
                        await model.acquire(KEY, TTL_MS, "other")
                    end()
                finally:
                    await model.dispose()

            asyncio.run(main())

        return count_statements(db, url, server, k, run)
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())

    def run(n: int, start: Callable[[], None], end: Callable[[], None]) -> None:
        model.acquire(KEY, TTL_MS, "owner")
        model.acquire(KEY, TTL_MS, "other")
        start()
        for _ in range(n):
            model.acquire(KEY, TTL_MS, "other")
        end()

    def install(callback: Callable[[str], None]) -> None:
        event.listen(model.engine, "connect", lambda dbapi, _r: dbapi.set_trace_callback(callback))

    try:
        return count_statements(db, url, server, k, run, install if db == "sqlite" else None)
    finally:
        model.dispose()


def section_refused(c: Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = []
    for db, url in c.urls.items():
        res = interleaved(db, url, c, REFUSED, "refused")
        for face, (label, _) in REFUSED.items():
            counted = C.attempt(f"{db} count {label}", count_refused, db, url, c, face)
            res[face]["statements"] = counted
            s = res[face]
            per_op = counted.get("per_op") if isinstance(counted, dict) else None
            rows.append(
                [
                    f"{db}: {label}",
                    C.num(s, "p50_us"),
                    C.num(s, "p99_us"),
                    C.num(s, "per_s"),
                    "-" if per_op is None else f"{per_op:.2f}",
                ]
            )
        out[db] = res
    print(
        f"\n  refused: acquire of a key another holder has ({C.load()})\n"
        + C.table(["variant", "p50 µs", "p99 µs", "refusals/s", "statements"], rows),
        flush=True,
    )
    return out


# ================================================================ contention


def section_contention(c: Ctx) -> dict[str, Any]:
    from benchmarks._contention import WorkerPool

    out: dict[str, Any] = {}
    rows = []
    pool = WorkerPool(c.workers)
    try:
        for db, url in c.urls.items():
            rounds: dict[str, list[Stats]] = {"raw": [], "sync": [], "aio": []}
            for _ in range(max(1, c.repeat - 1)):
                for kind, runs in rounds.items():
                    job = {"kind": kind, "db": db, "url": url}
                    runs.append(
                        C.attempt(
                            f"{db} contention {kind}",
                            pool.run,
                            job,
                            c.contention_seconds,
                            c.warmup,
                        )
                    )
            res: dict[str, Any] = {}
            for kind, runs in rounds.items():
                good = [r for r in runs if "error" not in r]
                s: dict[str, Any] = {"rounds": runs}
                if not good:
                    s["error"] = runs[0].get("error", "not measured")
                else:
                    for key in ("wins_per_s", "attempts_per_s"):
                        s[key] = statistics.median(r[key] for r in good)
                    for key in (*CHECKS, "holds_checked", "retries"):
                        s[key] = sum(r[key] for r in good)
                    s["min_wins"] = min(r["min_wins"] for r in good)
                    s["max_wins"] = max(r["max_wins"] for r in good)
                res[kind] = s
                label = {"raw": "raw driver", "sync": "joblocks", "aio": "joblocks.aio"}[kind]
                rows.append(
                    [f"{db}: {label}", C.num(s, "wins_per_s"), C.num(s, "attempts_per_s")]
                    + [C.num(s, k, "{:,}") for k in ("holds_checked", *CHECKS[:5])]
                )
            out[db] = res
    finally:
        pool.close()
    print(
        f"\n  contention: {c.workers} processes on one key, {c.contention_seconds:g} s a run"
        f" ({C.load()})\n"
        + C.table(
            [
                "variant",
                "wins/s",
                "tries/s",
                "holds",
                "overlaps",
                "order",
                "lost",
                "errors",
                "left",
            ],
            rows,
        ),
        flush=True,
    )
    return out


# ================================================================= keepalive


def renewals_sync(url: str, c: Ctx) -> dict[str, Any]:
    """A renewer that never idles (renew every 1 ms): renewals/s and CPU per renewal."""
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
    renewed = [0]

    def count(event: joblocks.Event) -> None:
        renewed[0] += event.kind == "renewed"

    held = [
        model.try_lease(f"k{i}", 60_000, keepalive=True, renew_every=1) for i in range(c.leases)
    ]
    joblocks.add_listener(count)
    cpu0, wall0, n0 = time.process_time(), time.monotonic(), renewed[0]
    time.sleep(c.keepalive_seconds)
    cpu, wall, done = time.process_time() - cpu0, time.monotonic() - wall0, renewed[0] - n0
    joblocks.remove_listener(count)
    lost = sum(1 for lease in held if lease is None or lease.lost)
    for lease in held:
        if lease is not None:
            lease.release()
    model.dispose()
    return {"per_s": done / wall, "cpu_us": cpu / max(done, 1) * 1e6, "lost": lost}


def renewals_aio(url: str, c: Ctx) -> dict[str, Any]:
    """The asyncio face's renewer with ``leases`` renewals due every ``aio_renew_ms``."""

    async def main() -> dict[str, Any]:
        model = joblocks.aio.JobLockModel(url, table_name=C.fresh_table())
        renewed = [0]

        def count(event: joblocks.Event) -> None:
            renewed[0] += event.kind == "renewed"

        held = [
            await model.try_lease(f"k{i}", 60_000, keepalive=True, renew_every=c.aio_renew_ms)
            for i in range(c.leases)
        ]
        joblocks.add_listener(count)
        cpu0, wall0, n0 = time.process_time(), time.monotonic(), renewed[0]
        await asyncio.sleep(c.keepalive_seconds)
        cpu, wall, done = time.process_time() - cpu0, time.monotonic() - wall0, renewed[0] - n0
        joblocks.remove_listener(count)
        lost = sum(1 for lease in held if lease is None or lease.lost)
        for lease in held:
            if lease is not None:
                await lease.release()
        await model.dispose()
        return {"per_s": done / wall, "cpu_us": cpu / max(done, 1) * 1e6, "lost": lost}

    return asyncio.run(main())


def steady_cpu(url: str, c: Ctx) -> dict[str, Any]:
    """CPU share of ``leases`` leases at the default load (ttl 3 s, renewed every 1 s)."""
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
    held = [model.try_lease(f"k{i}", 3_000, keepalive=True) for i in range(c.leases)]
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(c.keepalive_seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    lost = sum(1 for lease in held if lease is None or lease.lost)
    for lease in held:
        if lease is not None:
            lease.release()
    model.dispose()
    return {"cpu_share": cpu / wall, "lost": lost}


def loss_detection(url: str, c: Ctx) -> dict[str, Any]:
    """A lease renewed every 100 ms whose row an operator deletes: ms until it is lost."""
    model = joblocks.JobLockModel(url, table_name=C.fresh_table())
    delays = []
    for i in range(c.loss_trials):
        found = threading.Event()
        lease = model.try_lease(
            f"k{i}", 3_000, keepalive=True, renew_every=100, on_lost=lambda _l, f=found: f.set()
        )
        if lease is None:
            raise Unexpected("uncontended try_lease refused")
        time.sleep(0.05 + (i % 10) / 100)  # delete at varying points of the interval
        deleted = time.monotonic()
        model.delete(f"k{i}")
        if not found.wait(10):
            raise Unexpected("a deleted lease was not reported lost within 10 s")
        delays.append((time.monotonic() - deleted) * 1000)
    model.dispose()
    return {"p50_ms": statistics.median(delays), "max_ms": max(delays), "lost": 0}


def section_keepalive(c: Ctx) -> dict[str, Any]:
    logging.getLogger("joblocks").setLevel(logging.ERROR)  # the loss trials warn by design
    out: dict[str, Any] = {}
    rows = []
    for db, url in c.urls.items():
        res = {
            name: C.attempt(f"{db} keepalive {name}", fn, url, c)
            for name, fn in (
                ("sync", renewals_sync),
                ("aio", renewals_aio),
                ("steady", steady_cpu),
                ("loss", loss_detection),
            )
        }
        res["lost"] = sum(r.get("lost", 0) for r in res.values())
        out[db] = res
        rows.append(
            [
                db,
                C.num(res["sync"], "per_s"),
                C.num(res["sync"], "cpu_us"),
                C.num(res["aio"], "per_s"),
                C.num(res["steady"], "cpu_share", "{:.1%}"),
                str(res["lost"]),
                C.num(res["loss"], "p50_ms"),
                C.num(res["loss"], "max_ms"),
            ]
        )
    logging.getLogger("joblocks").setLevel(logging.NOTSET)
    print(
        f"\n  keep-alive: one process holding {c.leases:,} leases ({C.load()})\n"
        + C.table(
            [
                "database",
                "renewals/s",
                "CPU µs each",
                "aio renewals/s",
                f"CPU, {c.leases:,} leases at ttl 3 s",
                "lost",
                "loss seen p50 ms",
                "max ms",
            ],
            rows,
        )
        + "\n  (renewals/s: the renewer never idles; aio: each lease renewed every"
        + f" {c.aio_renew_ms} ms, {c.leases * 1000 / c.aio_renew_ms:,.0f} renewals due a second)",
        flush=True,
    )
    return out


# ======================================================================= cli


def peers_python() -> Path | None:
    venv = Path(os.environ.get("JOBLOCKS_PEERS_VENV", HERE / ".venv-peers"))
    py = venv / "bin" / "python"
    return py if py.exists() else None


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {done.returncode}: {done.stderr[-300:]!r}")
    return took


def section_cli(c: Ctx) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    script = shutil.which("joblocks", path=str(Path(sys.executable).parent)) or shutil.which(
        "joblocks"
    )
    run = [script] if script else [sys.executable, "-m", "joblocks"]
    run += ["run", "k", "--ttl", "1m", "--", "true"]
    variants: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], env),
        ("python -c 'import sqlalchemy'", [sys.executable, "-c", "import sqlalchemy"], env),
    ]
    for db, url in c.urls.items():
        variants.append(
            (f"joblocks run k --ttl 1m -- true ({db})", run, dict(env, JOBLOCKS_URL=url))
        )
    py = peers_python()
    dislock = None if py is None else py.parent / "dislock"
    if dislock is not None and dislock.exists() and "postgresql" in c.urls:
        from sqlalchemy import make_url

        dsn = make_url(c.urls["postgresql"]).set(drivername="postgresql")
        libpq = dsn.render_as_string(hide_password=False)
        import psycopg

        with psycopg.connect(libpq, autocommit=True) as conn:  # dislock's documented table
            conn.execute(
                "CREATE TABLE IF NOT EXISTS key_value (key text PRIMARY KEY,"
                " value text NOT NULL, expire_at timestamptz NOT NULL)"
            )
        denv = dict(env, DATABASE_URL=libpq, LOCK_STRATEGY="lease", LOCK_KEY="k")
        denv["RUN_LOCK_TTL_SECONDS"] = "60"
        variants.append(
            ("dislock DATABASE_URL true (postgresql)", [str(dislock), "DATABASE_URL", "true"], denv)
        )
    for label, argv, e in variants:  # warm the page cache and the bytecode once
        C.attempt(f"cli {label}", _wall, argv, e)
    times: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    for _ in range(c.cli_runs):
        for label, argv, e in variants:
            with contextlib.suppress(Exception):
                times[label].append(_wall(argv, e))
    out: dict[str, Any] = {}
    base = statistics.median(times["python -c 'import sqlalchemy'"] or [float("nan")])
    rows = []
    for label, _, _ in variants:
        t = times[label]
        if not t:
            out[label] = {"error": "every run failed"}
            rows.append([label, "ERROR", "", ""])
            continue
        med = statistics.median(t)
        out[label] = {"median_ms": med * 1000, "min_ms": min(t) * 1000, "runs": len(t)}
        out[label]["over_import_sqlalchemy"] = med / base
        rows.append([label, f"{med * 1000:.0f}", f"{min(t) * 1000:.0f}", f"{med / base:.2f}"])
    print(
        f"\n  cli: wall time of one process, {c.cli_runs} runs each, interleaved ({C.load()})\n"
        + C.table(["command", "median ms", "min ms", "÷ import sqlalchemy"], rows),
        flush=True,
    )
    return out


# ===================================================================== peers


PEERS = ("advisory", "pglease", "dislock")


def section_peers(c: Ctx) -> dict[str, Any]:
    url = c.urls.get("postgresql")
    if url is None:
        print("\n  peers: skipped (needs PostgreSQL)", flush=True)
        return {"skipped": "needs PostgreSQL"}
    from sqlalchemy import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    py = peers_python()
    out: dict[str, Any] = {}
    worker = str(HERE / "peers" / "worker.py")
    for peer in PEERS:
        python = sys.executable if peer == "advisory" and py is None else py
        if python is None:
            out[peer] = {"skipped": "no peers venv (bash benchmarks/peers/setup.sh)"}
            continue
        argv = [str(python), worker, peer, dsn, str(c.seconds), str(c.repeat)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        try:
            out[peer] = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            out[peer] = {"error": (done.stderr or done.stdout).strip()[-300:]}
    jl = C.combine([jl_pairs("postgresql", url, c) for _ in range(c.repeat)])
    jl_ref = C.combine([jl_refused("postgresql", url, c) for _ in range(c.repeat)])
    out["joblocks"] = {
        "version": f"joblocks {joblocks.__version__}",
        "per_s": jl["per_s"],
        "p50_us": jl["p50_us"],
        "refused_p50_us": jl_ref["p50_us"],
    }
    rows = []
    for name in ("joblocks", *PEERS):
        r = out[name]
        if "per_s" not in r:
            rows.append([name, r.get("skipped") or f"ERROR {r.get('error', '')[:60]}", "", "", ""])
            continue
        rows.append(
            [
                r["version"],
                f"{r['per_s']:,.0f}",
                f"{r['p50_us']:,.0f}",
                f"{r['refused_p50_us']:,.0f}",
                f"{r['per_s'] / out['joblocks']['per_s']:.2f}",
            ]
        )
    print(
        f"\n  peers: PostgreSQL, sync, one key ({C.load()})\n"
        + C.table(["library", "pairs/s", "p50 µs", "refused p50 µs", "÷ joblocks"], rows),
        flush=True,
    )
    return out


# ====================================================================== main


RUNNERS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "uncontended": section_uncontended,
    "refused": section_refused,
    "contention": section_contention,
    "keepalive": section_keepalive,
    "cli": section_cli,
    "peers": section_peers,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--databases", default="sqlite,postgresql,mariadb")
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--seconds", type=float, default=1.5, help="timed seconds per measurement")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    p.add_argument("--workers", type=int, default=8, help="contention processes")
    p.add_argument("--leases", type=int, default=1000, help="keep-alive leases")
    p.add_argument("--cli-runs", type=int, default=15)
    p.add_argument("--json", type=Path, help="write every figure to this file")
    p.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    p.add_argument("--pg-url", help="a PostgreSQL URL instead of a throwaway server")
    p.add_argument("--mariadb-url", help="a MariaDB URL instead of a throwaway server")
    args = p.parse_args(argv)
    for name, known in (("databases", C.DATABASES), ("sections", SECTIONS)):
        wanted = [w for w in getattr(args, name).split(",") if w]
        if bad := [w for w in wanted if w not in known]:
            p.error(f"--{name}: unknown {', '.join(bad)} (known: {', '.join(known)})")
        setattr(args, name, wanted)
    return args


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "joblocks": joblocks.__version__}
    for dist in ("SQLAlchemy", "psycopg", "PyMySQL", "aiosqlite", "aiomysql"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[dist] = importlib.metadata.version(dist)
    return out


def failures(results: dict[str, Any]) -> list[str]:
    """Correctness checks that failed (any non-zero counter, any failed measurement)."""
    bad = []
    for db, res in results.get("contention", {}).items():
        for kind, s in res.items():
            if "error" in s:
                bad.append(f"contention {db} {kind}: {s['error']}")
            # The raw statement draws its token before it knows it wins, so its tokens
            # need not follow the grants: only joblocks' order is a check.
            checks = [k for k in CHECKS if kind != "raw" or k != "fence_errors"]
            bad += [f"contention {db} {kind}: {k} = {s[k]}" for k in checks if s.get(k)]
    for db, res in results.get("keepalive", {}).items():
        if res.get("lost"):
            bad.append(f"keepalive {db}: {res['lost']} leases lost")
    for section in ("uncontended", "refused"):
        for db, res in results.get(section, {}).items():
            bad += [f"{section} {db} {n}: {s['error']}" for n, s in res.items() if "error" in s]
    return bad


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    given = {"postgresql": args.pg_url, "mariadb": args.mariadb_url}
    given = {db: url for db, url in given.items() if url}
    meta: dict[str, Any] = {
        "argv": sys.argv[1:] if argv is None else argv,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
        "load_before": os.getloadavg(),
        "versions": versions(),
    }
    print(f"joblocks {joblocks.__version__} · {meta['machine']} · {C.load()}", flush=True)
    results: dict[str, Any] = {"meta": meta}
    with tempfile.TemporaryDirectory(prefix="joblocks-bench-") as tmp:
        dbs = C.start_databases(args.databases, Path(tmp), given)
        try:
            c = Ctx(dbs.urls, dbs.servers, args.seconds, args.repeat, args.smoke)
            c.workers, c.leases, c.cli_runs = args.workers, args.leases, args.cli_runs
            if args.smoke:
                c.seconds, c.warmup, c.repeat = min(c.seconds, 0.2), 0.05, min(c.repeat, 2)
                c.workers, c.contention_seconds, c.leases = min(c.workers, 3), 0.5, 50
                c.keepalive_seconds, c.loss_trials, c.cli_runs, c.count_ops = 0.5, 2, 2, 20
                c.aio_renew_ms = 100
            meta["settings"] = {k: v for k, v in vars(c).items() if k not in ("urls", "servers")}
            meta["databases"] = sorted(dbs.urls)
            meta["skipped"] = dbs.skipped
            for section in args.sections:
                results[section] = RUNNERS[section](c)
        finally:
            dbs.stop()
    meta["load_after"] = os.getloadavg()
    bad = failures(results)
    results["failures"] = bad
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(
        "\n" + ("\n".join(f"FAILED {b}" for b in bad) if bad else "all correctness checks met"),
        flush=True,
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
