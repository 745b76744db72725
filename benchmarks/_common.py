"""Shared pieces of the benchmark suite: timing, statistics, tables, servers, raw SQL.

Nothing here imports joblocks' private modules: the raw-driver SQL is written out per
dialect below (the same statements joblocks' ``upsert`` path sends), so the suite keeps
working while the library's internals change.
"""

# SQL text is built from generated table names only; every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import make_url  # noqa: E402

DATABASES = ("sqlite", "postgresql", "mariadb")
TTL_MS = 60_000
KEY = "bench-key"

Stats = dict[str, Any]


# ------------------------------------------------------------------ timing


def stats(samples_ns: Sequence[int], elapsed_ns: int) -> Stats:
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


def time_sync(op: Callable[[], object], seconds: float, warmup: float) -> Stats:
    """Run ``op`` for ``warmup`` seconds untimed, then ``seconds`` timed, back to back."""
    warm_end = time.perf_counter() + warmup
    while time.perf_counter() < warm_end:
        op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    append = samples.append
    start = t = clock()
    end = start + int(seconds * 1e9)
    while t < end:
        op()
        now = clock()
        append(now - t)
        t = now
    return stats(samples, t - start)


async def time_async(op: Callable[[], Awaitable[object]], seconds: float, warmup: float) -> Stats:
    """``time_sync`` for a coroutine function, awaited one at a time."""
    warm_end = time.perf_counter() + warmup
    while time.perf_counter() < warm_end:
        await op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    append = samples.append
    start = t = clock()
    end = start + int(seconds * 1e9)
    while t < end:
        await op()
        now = clock()
        append(now - t)
        t = now
    return stats(samples, t - start)


def combine(rounds: list[Stats]) -> Stats:
    """Median over repeated rounds of the same measurement (keeps each round)."""
    good = [r for r in rounds if "error" not in r]
    if not good:
        return {"error": rounds[0]["error"] if rounds else "not measured", "rounds": rounds}
    out: Stats = {
        key: statistics.median(r[key] for r in good)
        for key in ("per_s", "p50_us", "p99_us")
        if all(key in r for r in good)
    }
    out["n"] = sum(r.get("n", 0) for r in good)
    out["rounds"] = rounds
    if len(good) < len(rounds):
        out["failed_rounds"] = len(rounds) - len(good)
    return out


def fresh_table() -> str:
    return f"bench_{uuid.uuid4().hex[:16]}"


def holder_name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


class Unexpected(RuntimeError):
    """An operation returned what it must not in this scenario (a bug)."""


def load() -> str:
    """The machine's load averages, as ``uptime`` prints them."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def attempt(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)``; a failure is recorded and printed, not fatal."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        print(f"  !! {what} failed: {detail}", flush=True)
        return {"error": detail}


# ------------------------------------------------------------------ tables


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths))]
    lines.append(indent + "  ".join("-" * w for w in widths))
    for row in rows:
        cells = [str(row[0]).ljust(widths[0])]
        cells += [str(c).rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append(indent + "  ".join(cells))
    return "\n".join(lines)


def num(s: Stats | None, field_name: str, fmt: str = "{:,.0f}") -> str:
    if s is None:
        return "-"
    if "error" in s:
        return "ERROR"
    value = s.get(field_name)
    return "-" if value is None else fmt.format(value)


US = "{:,.0f}"


# ------------------------------------------------------------------ servers


@dataclass
class Databases:
    """The databases of one run: URLs, and the throwaway servers behind them."""

    urls: dict[str, str] = field(default_factory=dict)
    servers: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                server.stop()


def start_databases(wanted: Sequence[str], tmp: Path, given: dict[str, str]) -> Databases:
    """URLs of the ``wanted`` databases: ``given`` ones as they are, a SQLite file in
    ``tmp``, and throwaway servers (``tests/support/servers.py``) for the rest."""
    from tests.support.servers import ServerUnavailable, start_mariadb, start_postgres

    dbs = Databases()
    for db in wanted:
        if db in given:
            dbs.urls[db] = given[db]
            continue
        if db == "sqlite":
            dbs.urls[db] = f"sqlite:///{tmp / 'locks.db'}"
            continue
        print(f"starting throwaway {db} ...", flush=True)
        start = start_postgres if db == "postgresql" else start_mariadb
        try:
            server = start(tmp / db)
        except ServerUnavailable as exc:
            print(f"  skipping {db}: {exc}", flush=True)
            dbs.skipped[db] = str(exc)
            continue
        dbs.servers[db] = server
        dbs.urls[db] = server.url
    return dbs


# ------------------------------------------------------------------ raw drivers


def server_params(url: str) -> dict[str, Any]:
    u = make_url(url)
    return {
        "host": u.host,
        "port": u.port,
        "user": u.username,
        "password": u.password,
        "database": u.database,
        "path": u.database if u.get_backend_name() == "sqlite" else None,
    }


# "now" as epoch milliseconds by the server's clock: the expressions joblocks uses.
NOW = {
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    "postgresql": "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)",
    "mariadb": "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000"
    " AS SIGNED)",
}


@dataclass(frozen=True)
class RawSQL:
    """The best single statement per operation, in the driver's parameter style.

    ``acquire`` is the one-statement upsert (grant if free, expired or ours; returns the
    fencing token, or nothing / 0 when another holder's lease is live); ``update`` +
    ``insert`` are the two-statement variant (conditional UPDATE, then an INSERT whose
    conflict means "taken"); ``release`` deletes our own row.
    """

    db: str
    acquire: str
    update: str
    insert: str
    release: str
    insert_conflict_is_error: bool  # MariaDB: plain INSERT, duplicate key = taken


def raw_sql(db: str, table_name: str, token: bool = True) -> RawSQL:
    """Statements over a table made by ``JobLockModel.create_table()``.

    ``token=False`` (SQLite, PostgreSQL): the same statements writing 0 for the token,
    so no fencing counter is read or advanced (a baseline, not a lock with tokens).
    """
    now = NOW[db]
    cols = "id, holder, acquired_at, expires_at, fence"
    if db == "mariadb":
        p = {k: f"%({k})s" for k in ("key", "holder", "ttl")}
        nxt = f"NEXTVAL(`{table_name}_fence_seq`)"
        t = f"`{table_name}`"
        cond = "(expires_at <= VALUES(acquired_at) OR holder = VALUES(holder))"
        values = (
            f"VALUES ({p['key']}, {p['holder']}, {now}, {now} + {p['ttl']}, LAST_INSERT_ID({nxt}))"
        )
        return RawSQL(
            db,
            acquire=(
                f"INSERT INTO {t} ({cols}) {values} ON DUPLICATE KEY UPDATE "
                f"fence = IF({cond}, LAST_INSERT_ID(IF(holder = VALUES(holder), fence,"
                f" VALUES(fence))), fence + LAST_INSERT_ID(0)), "
                f"acquired_at = IF({cond}, VALUES(acquired_at), acquired_at), "
                f"holder = IF({cond}, VALUES(holder), holder), "
                f"expires_at = IF({cond}, VALUES(expires_at), expires_at)"
            ),
            update=(
                f"UPDATE {t} SET fence = IF(holder = {p['holder']}, LAST_INSERT_ID(fence), "
                f"LAST_INSERT_ID({nxt})), holder = {p['holder']}, acquired_at = {now}, "
                f"expires_at = {now} + {p['ttl']} WHERE id = {p['key']} "
                f"AND (expires_at <= {now} OR holder = {p['holder']})"
            ),
            insert=f"INSERT INTO {t} ({cols}) {values}",
            release=f"DELETE FROM {t} WHERE id = {p['key']} AND holder = {p['holder']}",
            insert_conflict_is_error=True,
        )
    if db == "postgresql":
        p = {k: f"%({k})s" for k in ("key", "holder", "ttl")}
        nxt = f"nextval('{table_name}_fence_seq')"
    else:
        p = {k: f":{k}" for k in ("key", "holder", "ttl")}
        nxt = f'(SELECT value FROM "{table_name}_fence") + 1'
    if not token:
        nxt = "0"
    t = f'"{table_name}"'
    values = f"VALUES ({p['key']}, {p['holder']}, {now}, {now} + {p['ttl']}, {nxt})"
    returning = "RETURNING fence"
    return RawSQL(
        db,
        acquire=(
            f"INSERT INTO {t} AS cur ({cols}) {values} ON CONFLICT (id) DO UPDATE SET "
            "holder = excluded.holder, acquired_at = excluded.acquired_at, "
            "expires_at = excluded.expires_at, fence = CASE WHEN cur.holder = excluded.holder "
            "THEN cur.fence ELSE excluded.fence END WHERE cur.expires_at <= excluded.acquired_at "
            f"OR cur.holder = excluded.holder {returning}"
        ),
        update=(
            f"UPDATE {t} SET holder = {p['holder']}, acquired_at = {now}, "
            f"expires_at = {now} + {p['ttl']}, fence = CASE WHEN holder = {p['holder']} "
            f"THEN fence ELSE {nxt} END WHERE id = {p['key']} AND "
            f"(expires_at <= {now} OR holder = {p['holder']}) {returning}"
        ),
        insert=f"INSERT INTO {t} ({cols}) {values} ON CONFLICT (id) DO NOTHING {returning}",
        release=f"DELETE FROM {t} WHERE id = {p['key']} AND holder = {p['holder']}",
        insert_conflict_is_error=False,
    )


class RawClient:
    """One held driver connection in autocommit, running the raw statements.

    ``acquire`` returns the fencing token or None; ``release`` True when our row went.
    ``variant``: "upsert" (one statement) or "update_insert" (two).
    """

    def __init__(
        self, db: str, url: str, table_name: str, variant: str = "upsert", token: bool = True
    ) -> None:
        self.db = db
        self.sql = raw_sql(db, table_name, token)
        self.variant = variant
        p = server_params(url)
        if db == "sqlite":
            import sqlite3

            conn = sqlite3.connect(p["path"], timeout=5.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self.conn: Any = conn
            self._errors: tuple[type[BaseException], ...] = ()
        elif db == "postgresql":
            import psycopg

            self.conn = psycopg.connect(
                host=p["host"],
                port=p["port"],
                user=p["user"],
                password=p["password"],
                dbname=p["database"],
                autocommit=True,
            )
            self._errors = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
        else:
            import pymysql

            self.conn = pymysql.connect(
                host=p["host"],
                port=p["port"],
                user=p["user"],
                password=p["password"] or "",
                database=p["database"],
                autocommit=True,
            )
            self.cur = self.conn.cursor()
            self._errors = (pymysql.err.OperationalError,)
        self.transient = self._errors

    def _one(self, sql: str, params: dict[str, Any]) -> int | None:
        """Run a statement returning the token: the token, or None."""
        if self.db == "mariadb":
            cur = self.cur
            try:
                affected = cur.execute(sql, params)
            except self._integrity:
                return None
            token = cur.lastrowid
            return int(token) if affected and token else None
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else int(row[0])

    @property
    def _integrity(self) -> type[BaseException]:
        import pymysql

        return pymysql.err.IntegrityError

    def acquire(self, key: str, holder: str, ttl: int = TTL_MS) -> int | None:
        params = {"key": key, "holder": holder, "ttl": ttl}
        if self.variant == "upsert":
            return self._one(self.sql.acquire, params)
        token = self._one(self.sql.update, params)
        if token is not None:
            return token
        return self._one(self.sql.insert, params)

    def release(self, key: str, holder: str) -> bool:
        params = {"key": key, "holder": holder}
        if self.db == "mariadb":
            return bool(self.cur.execute(self.sql.release, params) == 1)
        return bool(self.conn.execute(self.sql.release, params).rowcount == 1)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.db == "mariadb":
                self.cur.close()
            self.conn.close()


class RawAsyncClient:
    """The raw upsert pair through the asyncio drivers (aiosqlite, psycopg async, aiomysql)."""

    def __init__(self, db: str, url: str, table_name: str) -> None:
        self.db, self.url = db, url
        self.sql = raw_sql(db, table_name)
        self.conn: Any = None

    async def open(self) -> None:
        p = server_params(self.url)
        if self.db == "sqlite":
            import aiosqlite

            self.conn = await aiosqlite.connect(p["path"], timeout=5.0, isolation_level=None)
            for pragma in ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = NORMAL"):
                await self.conn.execute(f"PRAGMA {pragma}")
        elif self.db == "postgresql":
            import psycopg

            self.conn = await psycopg.AsyncConnection.connect(
                host=p["host"],
                port=p["port"],
                user=p["user"],
                password=p["password"],
                dbname=p["database"],
                autocommit=True,
            )
        else:
            import aiomysql

            self.conn = await aiomysql.connect(
                host=p["host"],
                port=p["port"],
                user=p["user"],
                password=p["password"] or "",
                db=p["database"],
                autocommit=True,
            )
            self.cur = await self.conn.cursor()

    async def acquire(self, key: str, holder: str) -> int | None:
        params = {"key": key, "holder": holder, "ttl": TTL_MS}
        if self.db == "mariadb":
            affected = await self.cur.execute(self.sql.acquire, params)
            return int(self.cur.lastrowid) if affected and self.cur.lastrowid else None
        if self.db == "sqlite":
            async with self.conn.execute(self.sql.acquire, params) as cur:
                row = await cur.fetchone()
        else:
            cur = await self.conn.execute(self.sql.acquire, params)
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def release(self, key: str, holder: str) -> bool:
        params = {"key": key, "holder": holder}
        if self.db == "mariadb":
            return bool(await self.cur.execute(self.sql.release, params) == 1)
        cur = await self.conn.execute(self.sql.release, params)
        n = cur.rowcount
        if self.db == "sqlite":
            await cur.close()
        return bool(n == 1)

    async def close(self) -> None:
        if self.conn is None:
            return
        with contextlib.suppress(Exception):
            if self.db == "mariadb":
                await self.cur.close()
                self.conn.close()
            else:
                await self.conn.close()


def make_table(url: str) -> str:
    """A fresh lock table made by joblocks (``create_table()``), for raw clients."""
    import joblocks

    name = fresh_table()
    model = joblocks.JobLockModel(url, table_name=name)
    try:
        model.create_table()
    finally:
        model.dispose()
    return name


@contextlib.contextmanager
def raw_client(
    db: str, url: str, variant: str = "upsert", token: bool = True
) -> Iterator[RawClient]:
    client = RawClient(db, url, make_table(url), variant, token)
    try:
        yield client
    finally:
        client.close()
