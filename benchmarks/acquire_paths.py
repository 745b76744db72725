"""Compare joblocks' acquire paths on SQLite, PostgreSQL and MariaDB, in one run.

Usage::

    python benchmarks/acquire_paths.py [--seconds S] [--json out.json]
                                       [--databases sqlite,postgresql,mariadb]

For every database × acquire path it measures (each on a fresh table):

1. uncontended, sync face: acquire+release pairs per second and p50/p99 latency of a
   pair, on distinct keys and on one key;
2. the same on one key for the asyncio face (``joblocks.aio``);
3. a refused acquire (the key held by another holder): latency of one acquire;
4. contention: 8 processes (spawned before the clock, released together by an Event)
   looping acquire → release on one key: wins/s, min/max wins per process, errors
   (any exception, counted by the workers) and transient-error retries done inside
   joblocks;

and, once per database, a raw-driver baseline of the uncontended one-key pair (the
very SQL text of the ``upsert`` path sent straight through sqlite3 / psycopg /
pymysql), with the joblocks/raw ratio of every path.

PostgreSQL and MariaDB are throwaway servers (``tests/support/servers.py``) stopped at the
end, even on error; SQLite uses a file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import importlib.metadata
import json
import logging
import multiprocessing
import os
import platform
import queue
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy  # noqa: E402
from sqlalchemy import make_url  # noqa: E402
from tests.support.servers import Server, ServerUnavailable, start_mariadb, start_postgres  # noqa: E402

import joblocks  # noqa: E402
import joblocks.aio  # noqa: E402

DATABASES = ("sqlite", "postgresql", "mariadb")
PATHS: dict[str, tuple[str, ...]] = {
    "sqlite": ("upsert", "update_insert", "portable"),
    "postgresql": ("upsert", "update_insert", "portable"),
    "mariadb": ("upsert", "portable"),
}
WORKERS = 8
TTL_MS = 60_000
KEY = "bench-key"
READY_TIMEOUT_S = 60.0
RETRY_MESSAGE = "retried after a transient error"

Stats = dict[str, Any]


# ----------------------------------------------------------------- measuring


def _stats(samples_ns: list[int], elapsed_ns: int) -> Stats:
    """Rate and latency percentiles (µs) of a timed loop."""
    ordered = sorted(samples_ns)
    n = len(ordered)

    def pct(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1000 if n else float("nan")

    return {
        "n": n,
        "per_s": n / (elapsed_ns / 1e9) if elapsed_ns else 0.0,
        "p50_us": pct(0.50),
        "p99_us": pct(0.99),
        "max_us": ordered[-1] / 1000 if n else float("nan"),
    }


def time_sync(op: Callable[[], None], seconds: float, warmup: float) -> Stats:
    """Run ``op`` for ``warmup`` seconds untimed, then ``seconds`` timed, one at a time."""
    warm_end = time.perf_counter() + warmup
    while time.perf_counter() < warm_end:
        op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    start = t = clock()
    end = start + int(seconds * 1e9)
    while t < end:
        op()
        now = clock()
        samples.append(now - t)
        t = now
    return _stats(samples, t - start)


async def time_async(op: Callable[[], Awaitable[None]], seconds: float, warmup: float) -> Stats:
    """``time_sync`` for a coroutine function, awaited one at a time."""
    warm_end = time.perf_counter() + warmup
    while time.perf_counter() < warm_end:
        await op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    start = t = clock()
    end = start + int(seconds * 1e9)
    while t < end:
        await op()
        now = clock()
        samples.append(now - t)
        t = now
    return _stats(samples, t - start)


def fresh_table() -> str:
    return f"bench_{uuid.uuid4().hex[:16]}"


def holder_name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


class Unexpected(RuntimeError):
    """An operation returned what it must not in this scenario (a library bug)."""


# ---------------------------------------------------------- uncontended, sync


def bench_sync_pairs(url: str, path: str, distinct: bool, seconds: float, warmup: float) -> Stats:
    model = joblocks.JobLockModel(url, table_name=fresh_table(), acquire_path=path)
    holder = holder_name("solo")
    counter = iter(range(1 << 62))
    try:

        def pair() -> None:
            key = f"k{next(counter)}" if distinct else KEY
            if not model.acquire(key, TTL_MS, holder):
                raise Unexpected(f"uncontended acquire of {key!r} refused")
            if not model.release(key, holder):
                raise Unexpected(f"release of {key!r} found no row")

        return time_sync(pair, seconds, warmup)
    finally:
        model.dispose()


def bench_refused(url: str, path: str, seconds: float, warmup: float) -> Stats:
    model = joblocks.JobLockModel(url, table_name=fresh_table(), acquire_path=path)
    owner, other = holder_name("owner"), holder_name("other")
    try:
        if not model.acquire(KEY, TTL_MS, owner):
            raise Unexpected("first acquire refused")

        def refused() -> None:
            if model.acquire(KEY, TTL_MS, other):
                raise Unexpected("acquire of a held key granted to another holder")

        return time_sync(refused, seconds, warmup)
    finally:
        model.dispose()


# ------------------------------------------------------- uncontended, asyncio


def bench_aio_pairs(url: str, path: str, seconds: float, warmup: float) -> Stats:
    async def main() -> Stats:
        model = joblocks.aio.JobLockModel(url, table_name=fresh_table(), acquire_path=path)
        holder = holder_name("aio")
        try:

            async def pair() -> None:
                if not await model.acquire(KEY, TTL_MS, holder):
                    raise Unexpected("uncontended aio acquire refused")
                if not await model.release(KEY, holder):
                    raise Unexpected("aio release found no row")

            return await time_async(pair, seconds, warmup)
        finally:
            await model.dispose()

    return asyncio.run(main())


# ------------------------------------------------------------ raw baseline


def _upsert_statements(url: str) -> tuple[Any, Any]:
    """Make a fresh table with joblocks; its upsert acquire and release statements."""
    model = joblocks.JobLockModel(url, table_name=fresh_table(), acquire_path="upsert")
    try:
        model.create_table()
        (step,) = model.statements.acquire
        return step.stmt, model.statements.release
    finally:
        model.dispose()


def bench_raw(db: str, url: str, seconds: float, warmup: float) -> Stats:
    """The one-key pair with the upsert path's SQL, sent straight through the driver."""
    acq, rel = _upsert_statements(url)
    acquire_sql, release_sql = acq.sql, rel.sql
    holder = holder_name("raw")
    acquire_params = acq.params({"key": KEY, "holder": holder, "ttl": TTL_MS})
    release_params = rel.params({"key": KEY, "holder": holder})
    u = make_url(url)
    if db == "sqlite":
        conn = sqlite3.connect(u.database or "", timeout=5.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")

        def pair() -> None:
            if not conn.execute(acquire_sql, acquire_params).fetchall():
                raise Unexpected("raw sqlite acquire refused")
            if conn.execute(release_sql, release_params).rowcount != 1:
                raise Unexpected("raw sqlite release found no row")

        closer: Callable[[], None] = conn.close
    elif db == "postgresql":
        import psycopg

        pg = psycopg.connect(
            host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
        )

        def pair() -> None:
            if pg.execute(acquire_sql, acquire_params).fetchone() is None:
                raise Unexpected("raw psycopg acquire refused")
            if pg.execute(release_sql, release_params).rowcount != 1:
                raise Unexpected("raw psycopg release found no row")

        closer = pg.close
    else:
        import pymysql

        my = pymysql.connect(
            host=u.host, port=u.port, user=u.username, database=u.database, autocommit=True
        )
        cur = my.cursor()

        def pair() -> None:
            cur.execute(acquire_sql, acquire_params)
            if not cur.lastrowid:
                raise Unexpected("raw pymysql acquire refused")
            if cur.execute(release_sql, release_params) != 1:
                raise Unexpected("raw pymysql release found no row")

        def closer() -> None:
            cur.close()
            my.close()

    try:
        return time_sync(pair, seconds, warmup)
    finally:
        closer()


# --------------------------------------------------------------- contention


class _RetryCounter(logging.Handler):
    """Counts joblocks' debug records of transient-error retries (deadlocks...)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counting = False
        self.kinds: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.counting and RETRY_MESSAGE in message:
            self.kinds[_short(message.split(RETRY_MESSAGE, 1)[1].lstrip(": "))] += 1


def _short(detail: str) -> str:
    """One line: the driver error and the statement's first word, no parameters."""
    text, _, sql = " ".join(detail.split()).partition(" [SQL: ")
    verb = sql.split(" ", 1)[0]
    return f"{text[:120]} (in {verb})" if verb else text[:160]


def _worker_main(
    index: int,
    jobs: multiprocessing.Queue[Any],
    results: multiprocessing.Queue[Any],
    go: Any,
    window: Any,
) -> None:
    """A contention worker: waits for jobs, one per contention measurement."""
    retries = _RetryCounter()
    log = logging.getLogger("joblocks")
    log.addHandler(retries)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    results.put(("started", index, None))
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            outcome = _contend(index, job, results, go, window, retries)
        except Exception:
            results.put(("failed", index, traceback.format_exc(limit=4)))
        else:
            results.put(("done", index, outcome))


def _contend(
    index: int,
    job: dict[str, Any],
    results: multiprocessing.Queue[Any],
    go: Any,
    window: Any,
    retries: _RetryCounter,
) -> dict[str, Any]:
    model = joblocks.JobLockModel(
        job["url"], table_name=job["table"], acquire_path=job["path"], create_table=False
    )
    holder = holder_name(f"w{index}")
    wins = attempts = errors = lost = 0
    kinds: collections.Counter[str] = collections.Counter()
    retries.counting = False
    retries.kinds.clear()
    try:
        model.now_ms()  # open the connection before the clock
        results.put(("ready", index, None))
        go.wait()
        start, end = window[0], window[1]
        counting = False
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if not counting and now >= start:
                counting = True
                retries.counting = True
            try:
                won = model.acquire(KEY, TTL_MS, holder)
                # The lease (TTL_MS) cannot expire within the run: a release that finds
                # no row of ours means someone else took a live lease.
                if won and not model.release(KEY, holder) and counting:
                    lost += 1
            except Exception as exc:
                if counting:
                    errors += 1
                    kinds[f"{type(exc).__name__}: {_short(str(exc))}"] += 1
                continue
            if counting:
                attempts += 1
                wins += won
        # A win whose release failed leaves our row behind: clear it for the others.
        with contextlib.suppress(Exception):
            model.release(KEY, holder)
        return {
            "wins": wins,
            "attempts": attempts,
            "errors": errors,
            "retries": sum(retries.kinds.values()),
            "retry_kinds": dict(retries.kinds),
            "lost_releases": lost,
            "error_kinds": dict(kinds),
        }
    finally:
        model.dispose()


class WorkerPool:
    """WORKERS spawned processes, reused for every contention measurement."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.results: multiprocessing.Queue[Any] = ctx.Queue()
        self.go = ctx.Event()
        self.window = ctx.Array("d", 2, lock=False)
        self.jobs: list[multiprocessing.Queue[Any]] = [ctx.Queue() for _ in range(size)]
        self.procs = [
            ctx.Process(
                target=_worker_main,
                args=(i, self.jobs[i], self.results, self.go, self.window),
                name=f"bench-worker-{i}",
                daemon=True,
            )
            for i in range(size)
        ]
        for proc in self.procs:
            proc.start()
        # Wait until every worker has imported everything: spawning 8 interpreters
        # takes seconds of CPU that must not overlap the first measurements.
        self._collect(set(range(size)), READY_TIMEOUT_S)

    def _collect(self, expected: set[int], timeout: float) -> dict[int, tuple[str, Any]]:
        got: dict[int, tuple[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while expected - got.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"workers {sorted(expected - got.keys())} did not answer")
            try:
                kind, index, payload = self.results.get(timeout=left)
            except queue.Empty:
                continue
            got[index] = (kind, payload)
        return got

    def run(self, url: str, path: str, seconds: float, warmup: float) -> Stats:
        table = fresh_table()
        setup = joblocks.JobLockModel(url, table_name=table, acquire_path=path)
        try:
            setup.create_table()
            self.go.clear()
            job = {"url": url, "table": table, "path": path}
            for q in self.jobs:
                q.put(job)
            everyone = set(range(len(self.procs)))
            answers = self._collect(everyone, READY_TIMEOUT_S)
            failed = {i: p for i, (k, p) in answers.items() if k == "failed"}
            running = everyone - failed.keys()
            now = time.monotonic()
            self.window[0] = now + warmup
            self.window[1] = now + warmup + seconds
            self.go.set()
            done = self._collect(running, warmup + seconds + READY_TIMEOUT_S)
            self.go.clear()
            leftover = setup.count()
        finally:
            setup.dispose()
        outcomes = []
        for i, (kind, payload) in sorted(done.items()):
            if kind == "failed":
                failed[i] = payload
            else:
                outcomes.append(payload)
        kinds: collections.Counter[str] = collections.Counter()
        retry_kinds: collections.Counter[str] = collections.Counter()
        for o in outcomes:
            kinds.update(o["error_kinds"])
            retry_kinds.update(o["retry_kinds"])
        wins = [o["wins"] for o in outcomes]
        return {
            "workers": len(self.procs),
            "workers_failed": len(failed),
            "worker_failures": list(failed.values()),
            "wins_per_s": sum(wins) / seconds,
            "attempts_per_s": sum(o["attempts"] for o in outcomes) / seconds,
            "min_wins": min(wins, default=0),
            "max_wins": max(wins, default=0),
            "errors": sum(o["errors"] for o in outcomes),
            "retries": sum(o["retries"] for o in outcomes),
            "retry_kinds": dict(retry_kinds.most_common(5)),
            "lost_releases": sum(o["lost_releases"] for o in outcomes),
            "error_kinds": dict(kinds.most_common(5)),
            "leftover_rows": leftover,
        }

    def close(self) -> None:
        for q in self.jobs:
            with contextlib.suppress(Exception):
                q.put(None)
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


# ------------------------------------------------------------------ driving


def server_version(db: str, url: str) -> str:
    if db == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            # "PostgreSQL 15.4 (Debian ...) on x86_64-pc-linux-gnu, ..." → up to " on "
            return str(conn.exec_driver_sql("SELECT version()").scalar()).split(" on ")[0]
    finally:
        engine.dispose()


def attempt(what: str, fn: Callable[[], Stats]) -> Stats:
    """Run one measurement; a failure is recorded and printed, not fatal."""
    try:
        return fn()
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        print(f"  !! {what} failed: {detail}", flush=True)
        return {"error": detail}


def bench_database(
    db: str, url: str, pool: WorkerPool, seconds: float, warmup: float
) -> dict[str, Any]:
    out: dict[str, Any] = {"server": server_version(db, url), "paths": {}}
    print(f"\n== {db}: {out['server']}", flush=True)
    for path in PATHS[db]:
        print(f"  measuring {path} ...", flush=True)
        label = f"{db}/{path}"
        out["paths"][path] = {
            "sync_distinct": attempt(
                f"{label} sync distinct",
                lambda p=path: bench_sync_pairs(url, p, True, seconds, warmup),
            ),
            "sync_one": attempt(
                f"{label} sync one key",
                lambda p=path: bench_sync_pairs(url, p, False, seconds, warmup),
            ),
            "aio_one": attempt(
                f"{label} aio one key", lambda p=path: bench_aio_pairs(url, p, seconds, warmup)
            ),
            "refused": attempt(
                f"{label} refused", lambda p=path: bench_refused(url, p, seconds, warmup)
            ),
            "contention": attempt(
                f"{label} contention", lambda p=path: pool.run(url, p, seconds, warmup)
            ),
        }
    print("  measuring raw driver baseline ...", flush=True)
    out["raw"] = attempt(f"{db} raw", lambda: bench_raw(db, url, seconds, warmup))
    return out


# ----------------------------------------------------------------- printing


def _num(stats: Stats, field: str, fmt: str = "{:,.0f}") -> str:
    if "error" in stats:
        return "ERROR"
    value = stats.get(field)
    return "-" if value is None else fmt.format(value)


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append(indent + "  ".join("-" * w for w in widths))
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append(indent + "  ".join(cells))
    return "\n".join(lines)


def render(db: str, res: dict[str, Any], seconds: float) -> str:
    paths: dict[str, dict[str, Stats]] = res["paths"]
    raw: Stats = res["raw"]
    us = "{:,.1f}"
    refused_fields = (("per_s", "{:,.0f}"), ("p50_us", us), ("p99_us", us))
    parts = [f"\n=== {db} ({res['server']})"]

    rows = []
    for path, m in paths.items():
        for name, face, keys in (
            ("sync_distinct", "sync", "distinct"),
            ("sync_one", "sync", "one"),
            ("aio_one", "aio", "one"),
        ):
            s = m[name]
            rows.append(
                [
                    path,
                    face,
                    keys,
                    _num(s, "per_s"),
                    _num(s, "p50_us", us),
                    _num(s, "p99_us", us),
                ]
            )
    rows.append(
        [
            "raw driver (upsert SQL)",
            "sync",
            "one",
            _num(raw, "per_s"),
            _num(raw, "p50_us", us),
            _num(raw, "p99_us", us),
        ]
    )
    parts.append("\n  Uncontended, one process: acquire+release pairs (latency per pair)")
    parts.append(_table(["path", "face", "keys", "pairs/s", "p50 us", "p99 us"], rows))

    rows = [
        [path, *(_num(m["refused"], f, fmt) for f, fmt in refused_fields)]
        for path, m in paths.items()
    ]
    parts.append("\n  Refused acquire (key held by another holder; latency per acquire)")
    parts.append(_table(["path", "acquires/s", "p50 us", "p99 us"], rows))

    rows = []
    notes = []
    for path, m in paths.items():
        c = m["contention"]
        rows.append(
            [
                path,
                _num(c, "wins_per_s"),
                _num(c, "attempts_per_s"),
                _num(c, "min_wins", "{:,}"),
                _num(c, "max_wins", "{:,}"),
                _num(c, "errors", "{:,}"),
                _num(c, "retries", "{:,}"),
                _num(c, "lost_releases", "{:,}"),
                _num(c, "leftover_rows", "{:,}"),
            ]
        )
        notes.extend(f"    {path}: {n} × {kind}" for kind, n in c.get("error_kinds", {}).items())
        notes.extend(
            f"    {path}: {n} retried inside joblocks × {kind}"
            for kind, n in c.get("retry_kinds", {}).items()
        )
        notes.extend(
            f"    {path}: worker failed: {failure.strip().splitlines()[-1]}"
            for failure in c.get("worker_failures", [])
        )
    parts.append(
        f"\n  Contention: {WORKERS} processes, one key, acquire → release for {seconds:g} s"
    )
    parts.append(
        _table(
            [
                "path",
                "wins/s",
                "attempts/s",
                "min wins/proc",
                "max wins/proc",
                "errors",
                "retries",
                "lost",
                "rows left",
            ],
            rows,
        )
    )
    parts.append(
        "  (errors: exceptions out of acquire/release; retries: transient errors joblocks\n"
        "   retried itself; lost: a won lease whose release found no row of ours; rows\n"
        "   left: rows in the table after the run)"
    )
    if notes:
        parts.append("  errors and retries seen:\n" + "\n".join(notes))

    rows = []
    for path, m in paths.items():
        s = m["sync_one"]
        if "error" in s or "error" in raw:
            rows.append([path, "ERROR", "ERROR"])
            continue
        rows.append(
            [
                path,
                f"{s['per_s'] / raw['per_s']:.2f}",
                f"{s['p50_us'] / raw['p50_us']:.2f}",
            ]
        )
    parts.append("\n  joblocks sync one-key pair ÷ raw driver upsert pair")
    parts.append(_table(["path", "pairs/s ratio", "p50 latency ratio"], rows))
    return "\n".join(parts)


def _best(paths: dict[str, dict[str, Stats]], measure: str, field: str) -> str:
    scored = [
        (m[measure][field], path)
        for path, m in paths.items()
        if "error" not in m[measure] and m[measure].get(field) is not None
    ]
    if not scored:
        return "n/a"
    value, path = max(scored)
    return f"{path} ({value:,.0f}/s)"


def render_summary(results: dict[str, Any]) -> str:
    rows = []
    for db, res in results.items():
        paths = res["paths"]
        errors = sum(m["contention"].get("errors", 0) for m in paths.values())
        rows.append(
            [
                db,
                _best(paths, "sync_one", "per_s"),
                _best(paths, "sync_distinct", "per_s"),
                _best(paths, "contention", "wins_per_s"),
                f"{errors:,}",
            ]
        )
    return "\n=== Summary\n" + _table(
        [
            "database",
            "fastest uncontended (one key)",
            "fastest (distinct keys)",
            "most wins under contention",
            "contention errors",
        ],
        rows,
    )


def _versions() -> dict[str, str]:
    out = {
        "python": platform.python_version(),
        "joblocks": joblocks.__version__,
        "sqlalchemy": sqlalchemy.__version__,
        "sqlite": sqlite3.sqlite_version,
    }
    for dist in ("psycopg", "PyMySQL", "aiomysql", "aiosqlite"):
        with contextlib.suppress(Exception):
            out[dist.lower()] = importlib.metadata.version(dist)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="timed seconds per measurement (default 3)"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument(
        "--databases",
        default=",".join(DATABASES),
        help="comma-separated subset of sqlite,postgresql,mariadb (default: all)",
    )
    args = parser.parse_args(argv)
    args.databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    unknown = sorted(set(args.databases) - set(DATABASES))
    if unknown or not args.databases:
        parser.error(f"--databases: unknown {unknown}; choose from {', '.join(DATABASES)}")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seconds: float = args.seconds
    warmup = min(0.3, seconds / 4)
    signal.signal(signal.SIGTERM, _terminate)
    began = time.monotonic()
    meta = {
        "seconds": seconds,
        "warmup_seconds": warmup,
        "workers": WORKERS,
        "ttl_ms": TTL_MS,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "versions": _versions(),
    }
    print(
        f"joblocks acquire paths: {seconds:g} s per measurement (+{warmup:g} s warm-up), "
        f"{WORKERS} contention workers, {os.cpu_count()} CPUs, "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        flush=True,
    )
    results: dict[str, Any] = {}
    servers: list[Server] = []
    pool: WorkerPool | None = None
    with tempfile.TemporaryDirectory(prefix="joblocks-bench-") as tmp:
        try:
            urls: dict[str, str] = {}
            for db in args.databases:
                if db == "sqlite":
                    urls[db] = f"sqlite:///{Path(tmp) / 'locks.db'}"
                    continue
                print(f"starting throwaway {db} ...", flush=True)
                start = start_postgres if db == "postgresql" else start_mariadb
                try:
                    server = start(Path(tmp) / db)
                except ServerUnavailable as exc:
                    print(f"  skipping {db}: {exc}", flush=True)
                    continue
                servers.append(server)
                urls[db] = server.url
            pool = WorkerPool(WORKERS)
            for db in urls:
                results[db] = bench_database(db, urls[db], pool, seconds, warmup)
                print(render(db, results[db], seconds), flush=True)
        finally:
            if pool is not None:
                pool.close()
            for server in servers:
                with contextlib.suppress(Exception):
                    server.stop()
    print(render_summary(results))
    meta["wall_seconds"] = round(time.monotonic() - began, 1)
    print(f"\n(total {meta['wall_seconds']:g} s)")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
