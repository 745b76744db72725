"""One peer lock library, measured the way the suite measures joblocks; prints JSON.

Runs with the python of the peers venv (benchmarks/peers/setup.sh); only the
``joblocks`` peer (run by ``benchmarks/peers_pg.py`` with the project's python, so
that joblocks goes through the very same harness) imports joblocks. For the chosen
peer and face (``--face sync|aio``), on one key:

* ``--mode pairs`` (default): uncontended acquire (non-blocking) + release, pairs/s and
  p50/p99 µs; then ``refused``: a non-blocking acquire of a key another holder has;
* ``--mode setup``: create the peer's table (once, before the other modes);
* ``--mode contend``: one of N contending processes (``benchmarks/peers_pg.py``):
  prints ``ready``, reads ``start end`` (``time.monotonic`` seconds) from stdin, then
  loops acquire → read-modify-write of a counter row → release on ``--key``, and prints
  JSON: the holding intervals with the counter value read (for the overlap check of
  ``benchmarks/_contention.py``), wins, attempts, errors, lost, increments;
* ``--mode hold``: take ``--key`` with ``--ttl`` seconds, print ``held`` and the
  ``time.monotonic_ns()`` of the grant, wait (to be
  SIGKILLed); ``--mode takeover``: print ``ready``, read a line, then poll every
  ``--poll-ms`` until granted and print the ``time.monotonic_ns()`` of the grant.

    .venv-peers/bin/python benchmarks/peers/worker.py --peer tooz-redis --redis-port 6390
    .venv-peers/bin/python benchmarks/peers/worker.py --peer dislock --face aio --pg "host=..."
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import importlib.metadata
import inspect
import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY = "bench-key"
TTL_S = 60


def stats(samples: list[int], elapsed: int) -> dict[str, Any]:
    ordered = sorted(samples)
    n = len(ordered)

    def pct(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1000 if n else float("nan")

    return {
        "n": n,
        "per_s": n / (elapsed / 1e9) if elapsed else 0.0,
        "p50_us": pct(0.5),
        "p99_us": pct(0.99),
        "max_us": ordered[-1] / 1000 if n else float("nan"),
    }


def time_op(op: Callable[[], None], seconds: float, warmup: float) -> dict[str, Any]:
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    start = t = clock()
    stop = start + int(seconds * 1e9)
    while t < stop:
        op()
        now = clock()
        samples.append(now - t)
        t = now
    return stats(samples, t - start)


class Peer:
    """make(name) → an object with acquire() -> bool and release()."""

    version_of = ""

    def make(self, name: str) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class ToozPeer(Peer):
    def __init__(self, url: str) -> None:
        from tooz import coordination

        self.coordination = coordination
        self.url = url
        self.coords: list[Any] = []
        self.version_of = "tooz"

    def make(self, name: str) -> Any:
        coord = self.coordination.get_coordinator(self.url, uuid.uuid4().hex.encode())
        coord.start()
        self.coords.append(coord)
        lock = coord.get_lock(name.encode())

        class Handle:
            def acquire(self) -> bool:
                return bool(lock.acquire(blocking=False))

            def release(self) -> None:
                if not lock.release():
                    raise RuntimeError("tooz release returned False")

        return Handle()

    def close(self) -> None:
        for coord in self.coords:
            coord.stop()


class AdvisoryPeer(Peer):
    """pg_try_advisory_lock on one held psycopg (3) connection per holder."""

    version_of = "psycopg"

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.dsn = dsn
        self.conns: list[Any] = []

    def make(self, name: str) -> Any:
        conn = self.psycopg.connect(self.dsn, autocommit=True)
        self.conns.append(conn)
        key = int.from_bytes(uuid.uuid5(uuid.NAMESPACE_URL, name).bytes[:8], "big", signed=True)

        class Handle:
            def acquire(self) -> bool:
                return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])

            def release(self) -> None:
                if not conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()[0]:
                    raise RuntimeError("advisory unlock returned false")

        return Handle()

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


class RedisLockPeer(Peer):
    version_of = "python-redis-lock"

    def __init__(self, port: int) -> None:
        import redis
        import redis_lock

        self.redis_lock = redis_lock
        self.client = redis.Redis(host="127.0.0.1", port=port)

    def make(self, name: str) -> Any:
        lock = self.redis_lock.Lock(self.client, name, expire=TTL_S)

        class Handle:
            def acquire(self) -> bool:
                return bool(lock.acquire(blocking=False))

            def release(self) -> None:
                lock.release()

        return Handle()


class PotteryPeer(Peer):
    version_of = "pottery"

    def __init__(self, port: int) -> None:
        import redis
        from pottery import Redlock

        self.Redlock = Redlock
        self.client = redis.Redis(host="127.0.0.1", port=port)

    def make(self, name: str) -> Any:
        lock = self.Redlock(key=name, masters={self.client}, auto_release_time=TTL_S)

        class Handle:
            def acquire(self) -> bool:
                return bool(lock.acquire(blocking=False))

            def release(self) -> None:
                lock.release()

        return Handle()


class SherlockPeer(Peer):
    version_of = "sherlock"

    def __init__(self, port: int) -> None:
        import redis
        import sherlock

        self.sherlock = sherlock
        self.client = redis.StrictRedis(host="127.0.0.1", port=port)

    def make(self, name: str) -> Any:
        lock = self.sherlock.RedisLock(name, client=self.client, expire=TTL_S)

        class Handle:
            def acquire(self) -> bool:
                return bool(lock.acquire(blocking=False))

            def release(self) -> None:
                lock.release()

        return Handle()


class FileLockPeer(Peer):
    version_of = "filelock"

    def __init__(self, folder: Path) -> None:
        import filelock

        self.filelock = filelock
        self.folder = folder

    def make(self, name: str) -> Any:
        lock = self.filelock.FileLock(str(self.folder / f"{name}.lock"))
        timeout = self.filelock.Timeout

        class Handle:
            def acquire(self) -> bool:
                try:
                    lock.acquire(timeout=0)
                except timeout:
                    return False
                return True

            def release(self) -> None:
                lock.release()

        return Handle()


# ------------------------------------------------- PostgreSQL lease and advisory peers
# Each takes the libpq DSN (``--pg``), the ttl in seconds (``--ttl``) and the face.
# ``make(name)`` returns a handle whose ``acquire()`` (non-blocking) returns True/False
# and whose ``release()`` returns False when the peer reports the lease was lost, None
# when the peer cannot tell; both coroutines on the ``aio`` face.


def pg_parts(dsn: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in dsn.split())


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class DislockPeer(Peer):
    """dislock LeaseLock: its documented table, ttl ``run_ttl_seconds``, heartbeat thread
    (or task) every clamp(ttl × 0.3, 1 s, 10 s) as its CLI derives it."""

    version_of = "dislock"
    TABLE = "key_value"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        import dislock
        import dislock.aio

        self.dislock = dislock
        self.aio = dislock.aio
        self.dsn, self.ttl, self.face = dsn, ttl, face
        self.owner = owner_name()

    def setup(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.TABLE} (key text PRIMARY KEY,"
                " value text NOT NULL, expire_at timestamptz NOT NULL)"
            )

    def make(self, name: str) -> Any:
        context = self.dislock.LockContext(
            url=self.dsn,
            table_parts=[self.TABLE],
            lock_key=name,
            owner=self.owner,
            run_ttl_seconds=self.ttl,
            lease_interval_seconds=min(max(self.ttl * 0.3, 1.0), 10.0),
        )
        not_acquired = self.dislock.LockNotAcquiredError
        peer = self

        class Handle:
            lock: Any = None

            def acquire(self) -> bool:
                self.lock = peer.dislock.LeaseLock(context)
                try:
                    self.lock.__enter__()
                except not_acquired:
                    return False
                return True

            def release(self) -> bool:
                self.lock.__exit__(None, None, None)
                return bool(self.lock.lease_renewer.ok)

        class AsyncHandle:
            lock: Any = None

            async def acquire(self) -> bool:
                self.lock = peer.aio.LeaseLock(context)
                try:
                    await self.lock.__aenter__()
                except not_acquired:
                    return False
                return True

            async def release(self) -> bool:
                await self.lock.__aexit__(None, None, None)
                return bool(self.lock.renewer.ok)

        return AsyncHandle() if self.face == "aio" else Handle()


class PgleasePeer(Peer):
    """pglease PGLease.try_acquire(ttl=...) / release; a heartbeat thread per lease every
    clamp(ttl // 3, 1, 10) s (its default is 10 s, longer than a 2 s ttl); the asyncio
    face is its AsyncPGLease (the sync calls in the loop's thread pool)."""

    version_of = "pglease"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        import pglease

        self.pglease = pglease
        self.ttl = max(1, int(ttl))
        self.face = face
        backend = pglease.PostgresBackend(dsn, auto_initialize=False)
        self.sync = pglease.PGLease(
            backend, owner_id=owner_name(), heartbeat_interval=min(max(self.ttl // 3, 1), 10)
        )
        self.aio = pglease.AsyncPGLease(self.sync)

    def setup(self) -> None:
        self.sync.backend.initialize()

    def make(self, name: str) -> Any:
        sync, aio, ttl = self.sync, self.aio, self.ttl

        class Handle:
            def acquire(self) -> bool:
                return bool(sync.try_acquire(name, ttl=ttl))

            def release(self) -> bool:
                return bool(sync.release(name))

        class AsyncHandle:
            async def acquire(self) -> bool:
                return bool(await aio.try_acquire(name, ttl=ttl))

            async def release(self) -> bool:
                return bool(await aio.release(name))

        return AsyncHandle() if self.face == "aio" else Handle()

    def close(self) -> None:
        self.sync.close()


class DistributedPgLockPeer(Peer):
    """distributed-pg-lock DistributedLockManager: the ttl is ``lock_timeout_minutes``,
    a whole number of minutes (1 at least), so a 2 s ttl cannot be expressed; no asyncio
    face. Its SQLAlchemy engine (psycopg2) is its own module-level singleton."""

    version_of = "distributed-pg-lock"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        if face != "sync":
            raise SystemExit("distributed-pg-lock has no asyncio face")
        # It installs an INFO handler writing to stdout (our JSON channel) on import.
        log = logging.getLogger("distributed_pg_lock")
        import distributed_pg_lock

        log.handlers.clear()
        log.setLevel(logging.WARNING)
        kv = pg_parts(dsn)
        distributed_pg_lock.db.initialize(
            f"postgresql+psycopg2://{kv['user']}@{kv['host']}:{kv['port']}/{kv['dbname']}"
        )
        self.db = distributed_pg_lock.db
        self.minutes = max(1, round(ttl / 60))
        self.manager = distributed_pg_lock.DistributedLockManager(
            lock_timeout_minutes=self.minutes, owner_id=owner_name()
        )

    def setup(self) -> None:
        self.db.create_tables()

    def make(self, name: str) -> Any:
        lock = self.manager.get_lock(name)
        manager = self.manager

        class Handle:
            def acquire(self) -> bool:
                return bool(lock.acquire())

            def release(self) -> bool:
                lock.release()
                # release() only forgets the lock when its UPDATE found our row.
                lost = name in manager.active_locks
                manager.active_locks.discard(name)
                return not lost

        return Handle()

    def close(self) -> None:
        self.db.engine.dispose()


class PostgresqlLockPeer(Peer):
    """postgresql-lock Lock(conn, key) on one held psycopg 3 connection (autocommit),
    session scope, acquire(block=False). A Lock object counts every acquire call, granted
    or not, and refuses to acquire again once a refusal came before a grant, so a fresh
    Lock is made per attempt (construction is a sha1 of the key)."""

    version_of = "postgresql-lock"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        import postgresql_lock
        import psycopg

        self.Lock = postgresql_lock.Lock
        self.psycopg = psycopg
        self.dsn, self.face = dsn, face
        self.conns: list[Any] = []

    def make(self, name: str) -> Any:
        make_lock = self.Lock
        if self.face == "aio":
            peer = self

            class AsyncHandle:
                conn: Any = None
                lock: Any = None

                async def acquire(self) -> bool:
                    if self.conn is None:
                        self.conn = await peer.psycopg.AsyncConnection.connect(
                            peer.dsn, autocommit=True
                        )
                        peer.conns.append(self.conn)
                    self.lock = make_lock(self.conn, name)
                    return bool(await self.lock.acquire_async(block=False))

                async def release(self) -> bool:
                    return bool(await self.lock.release_async())

            return AsyncHandle()
        conn = self.psycopg.connect(self.dsn, autocommit=True)
        self.conns.append(conn)

        class Handle:
            lock: Any = None

            def acquire(self) -> bool:
                self.lock = make_lock(conn, name)
                return bool(self.lock.acquire(block=False))

            def release(self) -> bool:
                return bool(self.lock.release())

        return Handle()

    def close(self) -> None:
        for conn in self.conns:
            result = conn.close()
            if inspect.isawaitable(result):
                asyncio.run(result)


class DjangoPglockPeer(Peer):
    """django-pglock ``pglock.advisory(key, timeout=0)`` (pg_try_advisory_lock) through a
    minimal Django configuration: one PostgreSQL database (Django's psycopg 3 backend),
    the apps pgactivity and pglock. Django's ORM is sync only: no asyncio face."""

    version_of = "django-pglock"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        if face != "sync":
            raise SystemExit("django-pglock has no asyncio face")
        import django
        from django.conf import settings

        kv = pg_parts(dsn)
        settings.configure(
            DATABASES={
                "default": {
                    "ENGINE": "django.db.backends.postgresql",
                    "NAME": kv["dbname"],
                    "USER": kv["user"],
                    "HOST": kv["host"],
                    "PORT": kv["port"],
                }
            },
            INSTALLED_APPS=["pgactivity", "pglock"],
            USE_TZ=True,
        )
        django.setup()
        import pglock

        self.pglock = pglock

    def make(self, name: str) -> Any:
        pglock = self.pglock

        class Handle:
            lock: Any = None

            def acquire(self) -> bool:
                self.lock = pglock.advisory(name, timeout=0)
                return bool(self.lock.acquire())

            def release(self) -> None:
                self.lock.release()  # returns nothing: whether it was held is not told

        return Handle()

    def close(self) -> None:
        from django.db import connections

        connections.close_all()


class JoblocksPeer(Peer):
    """joblocks itself in the same harness (run with the project's python, not the peers
    venv): acquire_token(ttl) / release on ``JobLockModel`` or ``joblocks.aio``."""

    version_of = "joblocks"
    TABLE = "job_locks_peers"

    def __init__(self, dsn: str, ttl: float, face: str) -> None:
        import joblocks
        import joblocks.aio

        kv = pg_parts(dsn)
        url = f"postgresql+psycopg://{kv['user']}@{kv['host']}:{kv['port']}/{kv['dbname']}"
        module: Any = joblocks.aio if face == "aio" else joblocks
        self.model = module.JobLockModel(url, table_name=self.TABLE, create_table=False)
        self.url, self.ttl_ms, self.face = url, int(ttl * 1000), face
        self.holder = owner_name()

    def setup(self) -> None:
        import joblocks

        model = joblocks.JobLockModel(self.url, table_name=self.TABLE)
        try:
            model.create_table()
        finally:
            model.dispose()

    def make(self, name: str) -> Any:
        model, ttl_ms, holder = self.model, self.ttl_ms, self.holder

        class Handle:
            def acquire(self) -> bool:
                return model.acquire_token(name, ttl_ms, holder) is not None

            def release(self) -> bool:
                return bool(model.release(name, holder))

        class AsyncHandle:
            async def acquire(self) -> bool:
                return await model.acquire_token(name, ttl_ms, holder) is not None

            async def release(self) -> bool:
                return bool(await model.release(name, holder))

        return AsyncHandle() if self.face == "aio" else Handle()

    def close(self) -> None:
        result = self.model.dispose()
        if inspect.isawaitable(result):
            asyncio.run(result)


PG_PEERS: dict[str, type[Peer]] = {
    "joblocks": JoblocksPeer,
    "dislock": DislockPeer,
    "pglease": PgleasePeer,
    "distributed-pg-lock": DistributedPgLockPeer,
    "postgresql-lock": PostgresqlLockPeer,
    "django-pglock": DjangoPglockPeer,
}


async def time_op_async(op: Callable[[], Any], seconds: float, warmup: float) -> dict[str, Any]:
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        await op()
    clock = time.perf_counter_ns
    samples: list[int] = []
    start = t = clock()
    stop = start + int(seconds * 1e9)
    while t < stop:
        await op()
        now = clock()
        samples.append(now - t)
        t = now
    return stats(samples, t - start)


async def maybe(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


class Counter:
    """The shared state a holder updates: read, then write the value + 1, in two
    autocommit statements (a lost update when two holders overlap)."""

    def __init__(self, dsn: str, table: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.read_sql = f"SELECT n FROM {table} WHERE id = 1"  # noqa: S608
        self.write_sql = f"UPDATE {table} SET n = %s WHERE id = 1"  # noqa: S608

    def bump(self) -> int:
        value = int(self.conn.execute(self.read_sql).fetchone()[0])
        self.conn.execute(self.write_sql, (value + 1,))
        return value


async def contend(peer: Peer, args: argparse.Namespace) -> dict[str, Any]:
    handle = peer.make(args.key)
    counter = Counter(args.pg, args.counter_table)
    print("ready", flush=True)
    start_s, end_s = (float(x) for x in sys.stdin.readline().split())
    start_ns, end_ns = int(start_s * 1e9), int(end_s * 1e9)
    clock = time.monotonic_ns
    spans = array.array("q")
    wins = attempts = errors = lost = increments = 0
    kinds: dict[str, int] = {}
    while True:
        now = clock()
        if now >= end_ns:
            break
        counting = now >= start_ns
        try:
            got = await maybe(handle.acquire())
        except Exception as exc:
            if counting:
                errors += 1
                kind = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
                kinds[kind] = kinds.get(kind, 0) + 1
            continue
        if got:
            held = clock()
            value = counter.bump()
            increments += 1
            releasing = clock()
            spans.extend((held, releasing, value))
            try:
                released = await maybe(handle.release())
            except Exception as exc:
                released = None
                if counting:
                    errors += 1
                    kind = f"release {type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
                    kinds[kind] = kinds.get(kind, 0) + 1
            if released is False and counting:
                lost += 1
        if counting:
            attempts += 1
            wins += bool(got)
    counter.conn.close()
    return {
        "wins": wins,
        "attempts": attempts,
        "errors": errors,
        "error_kinds": kinds,
        "lost": lost,
        "increments": increments,
        "spans": base64.b64encode(spans.tobytes()).decode(),
    }


async def hold_or_take(peer: Peer, args: argparse.Namespace) -> int:
    handle = peer.make(args.key)
    if args.mode == "hold":
        if not await maybe(handle.acquire()):
            print("refused", flush=True)
            return 1
        print(f"held {time.monotonic_ns()}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        return 0
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    deadline = time.monotonic() + args.takeover_timeout
    polls = 0
    while time.monotonic() < deadline:
        polls += 1
        if await maybe(handle.acquire()):
            granted = time.monotonic_ns()
            print(json.dumps({"granted_ns": granted, "polls": polls}), flush=True)
            await maybe(handle.release())
            return 0
        await asyncio.sleep(args.poll_ms / 1000)
    print(json.dumps({"error": f"not granted within {args.takeover_timeout} s"}), flush=True)
    return 1


async def pg_pairs(peer: Peer, args: argparse.Namespace) -> dict[str, Any]:
    name = f"{KEY}-{uuid.uuid4().hex[:8]}"
    mine = peer.make(name)

    async def pair() -> None:
        if not await maybe(mine.acquire()):
            raise RuntimeError(f"{args.peer}: uncontended acquire refused")
        await maybe(mine.release())

    pairs = await time_op_async(pair, args.seconds, args.warmup)
    # The key is held by another process: a session advisory lock is re-entrant on its
    # connection, and Django has one connection per thread.
    held_name = f"{KEY}-held-{uuid.uuid4().hex[:8]}"
    argv = list(sys.argv[1:])
    other = hold_elsewhere(args.peer, [*argv, "--mode", "hold", "--key", held_name], None)
    contender = peer.make(held_name)

    async def refused() -> None:
        if await maybe(contender.acquire()):
            raise RuntimeError(f"{args.peer}: acquire of a held lock granted")

    try:
        refused_stats = await time_op_async(refused, args.refused_seconds, args.warmup)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=30)
    return {"pairs": pairs, "refused": refused_stats}


# The same three drivers without asyncio for the sync face (generated from the ones
# above by dropping the awaits: keep the two in step).


def contend_sync(peer: Peer, args: argparse.Namespace) -> dict[str, Any]:
    handle = peer.make(args.key)
    counter = Counter(args.pg, args.counter_table)
    print("ready", flush=True)
    start_s, end_s = (float(x) for x in sys.stdin.readline().split())
    start_ns, end_ns = int(start_s * 1e9), int(end_s * 1e9)
    clock = time.monotonic_ns
    spans = array.array("q")
    wins = attempts = errors = lost = increments = 0
    kinds: dict[str, int] = {}
    while True:
        now = clock()
        if now >= end_ns:
            break
        counting = now >= start_ns
        try:
            got = handle.acquire()
        except Exception as exc:
            if counting:
                errors += 1
                kind = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
                kinds[kind] = kinds.get(kind, 0) + 1
            continue
        if got:
            held = clock()
            value = counter.bump()
            increments += 1
            releasing = clock()
            spans.extend((held, releasing, value))
            try:
                released = handle.release()
            except Exception as exc:
                released = None
                if counting:
                    errors += 1
                    kind = f"release {type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
                    kinds[kind] = kinds.get(kind, 0) + 1
            if released is False and counting:
                lost += 1
        if counting:
            attempts += 1
            wins += bool(got)
    counter.conn.close()
    return {
        "wins": wins,
        "attempts": attempts,
        "errors": errors,
        "error_kinds": kinds,
        "lost": lost,
        "increments": increments,
        "spans": base64.b64encode(spans.tobytes()).decode(),
    }


def hold_or_take_sync(peer: Peer, args: argparse.Namespace) -> int:
    handle = peer.make(args.key)
    if args.mode == "hold":
        if not handle.acquire():
            print("refused", flush=True)
            return 1
        print(f"held {time.monotonic_ns()}", flush=True)
        sys.stdin.read()
        return 0
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + args.takeover_timeout
    polls = 0
    while time.monotonic() < deadline:
        polls += 1
        if handle.acquire():
            granted = time.monotonic_ns()
            print(json.dumps({"granted_ns": granted, "polls": polls}), flush=True)
            handle.release()
            return 0
        time.sleep(args.poll_ms / 1000)
    print(json.dumps({"error": f"not granted within {args.takeover_timeout} s"}), flush=True)
    return 1


def pg_pairs_sync(peer: Peer, args: argparse.Namespace) -> dict[str, Any]:
    name = f"{KEY}-{uuid.uuid4().hex[:8]}"
    mine = peer.make(name)

    def pair() -> None:
        if not mine.acquire():
            raise RuntimeError(f"{args.peer}: uncontended acquire refused")
        mine.release()

    pairs = time_op(pair, args.seconds, args.warmup)
    # The key is held by another process: a session advisory lock is re-entrant on its
    # connection, and Django has one connection per thread.
    held_name = f"{KEY}-held-{uuid.uuid4().hex[:8]}"
    argv = list(sys.argv[1:])
    other = hold_elsewhere(args.peer, [*argv, "--mode", "hold", "--key", held_name], None)
    contender = peer.make(held_name)

    def refused() -> None:
        if contender.acquire():
            raise RuntimeError(f"{args.peer}: acquire of a held lock granted")

    try:
        refused_stats = time_op(refused, args.refused_seconds, args.warmup)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=30)
    return {"pairs": pairs, "refused": refused_stats}


def run_pg_peer(args: argparse.Namespace) -> int:
    peer = PG_PEERS[args.peer](args.pg, args.ttl, args.face)

    async def main() -> Any:
        if args.mode == "contend":
            return await contend(peer, args)
        if args.mode in ("hold", "takeover"):
            return await hold_or_take(peer, args)
        return await pg_pairs(peer, args)

    def main_sync() -> Any:
        if args.mode == "contend":
            return contend_sync(peer, args)
        if args.mode in ("hold", "takeover"):
            return hold_or_take_sync(peer, args)
        return pg_pairs_sync(peer, args)

    try:
        if args.mode == "setup":
            result = peer.setup() if hasattr(peer, "setup") else None
        elif args.face == "aio":
            result = asyncio.run(main())
        else:
            result = main_sync()
    finally:
        peer.close()
    if args.mode in ("hold", "takeover"):
        return int(result)
    out = {
        "peer": args.peer,
        "face": args.face,
        "version": importlib.metadata.version(peer.version_of),
    }
    if isinstance(result, dict):
        out.update(result)
    print(json.dumps(out), flush=True)
    return 0


def hold_elsewhere(peer_name: str, argv: list[str], name: str | None) -> subprocess.Popen[str]:
    """Another process holds ``name`` (used for filelock, whose locks are per process,
    and the PostgreSQL peers; ``name`` None: ``argv`` says what to hold)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, *argv, *(["--hold", name] if name else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().split()[:1] != ["held"]:
        raise RuntimeError(f"{peer_name}: the other holder could not take the lock")
    return proc


def build(args: argparse.Namespace) -> Peer:
    if args.peer == "tooz-postgresql":
        kv = dict(part.split("=", 1) for part in args.pg.split())
        return ToozPeer(f"postgresql://{kv['user']}@{kv['host']}:{kv['port']}/{kv['dbname']}")
    if args.peer == "pg-advisory":
        return AdvisoryPeer(args.pg)
    if args.peer == "tooz-redis":
        return ToozPeer(f"redis://127.0.0.1:{args.redis_port}?lock_timeout={TTL_S}")
    if args.peer == "python-redis-lock":
        return RedisLockPeer(args.redis_port)
    if args.peer == "pottery-redlock":
        return PotteryPeer(args.redis_port)
    if args.peer == "sherlock-redis":
        return SherlockPeer(args.redis_port)
    if args.peer == "filelock":
        return FileLockPeer(Path(args.dir))
    raise SystemExit(f"unknown peer {args.peer!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--refused-seconds", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--pg", default="")
    ap.add_argument("--redis-port", type=int, default=0)
    ap.add_argument("--dir", default=".")
    ap.add_argument("--hold")
    ap.add_argument("--face", choices=("sync", "aio"), default="sync")
    ap.add_argument(
        "--mode", choices=("pairs", "setup", "contend", "hold", "takeover"), default="pairs"
    )
    ap.add_argument("--ttl", type=float, default=TTL_S, help="lease ttl, seconds")
    ap.add_argument("--key", default=KEY)
    ap.add_argument("--counter-table", default="peers_counter")
    ap.add_argument("--poll-ms", type=float, default=5.0)
    ap.add_argument("--takeover-timeout", type=float, default=150.0)
    args = ap.parse_args()
    # Libraries that log a refused acquire (python-redis-lock warns) pay for building
    # the record, as under any configured logging; the record itself is dropped.
    logging.basicConfig(handlers=[logging.NullHandler()], level=logging.INFO)
    if args.peer in PG_PEERS:
        return run_pg_peer(args)
    peer = build(args)
    try:
        if args.hold:
            handle = peer.make(args.hold)
            if not handle.acquire():
                print("refused", flush=True)
                return 1
            print("held", flush=True)
            sys.stdin.read()
            handle.release()
            return 0
        name = f"{KEY}-{uuid.uuid4().hex[:8]}"
        mine = peer.make(name)

        def pair() -> None:
            if not mine.acquire():
                raise RuntimeError(f"{args.peer}: uncontended acquire refused")
            mine.release()

        pairs = time_op(pair, args.seconds, args.warmup)

        held_name = f"{KEY}-held-{uuid.uuid4().hex[:8]}"
        other_proc = None
        if args.peer == "filelock":
            argv = list(sys.argv[1:])
            other_proc = hold_elsewhere(args.peer, argv, held_name)
        else:
            owner = peer.make(held_name)
            if not owner.acquire():
                raise RuntimeError(f"{args.peer}: first acquire refused")
        contender = peer.make(held_name)

        def refused() -> None:
            if contender.acquire():
                raise RuntimeError(f"{args.peer}: acquire of a held lock granted")

        refused_stats = time_op(refused, args.refused_seconds, args.warmup)
        if other_proc is not None:
            assert other_proc.stdin is not None
            other_proc.stdin.close()
            other_proc.wait(timeout=10)
        else:
            owner.release()
    finally:
        peer.close()
    print(
        json.dumps(
            {
                "peer": args.peer,
                "version": importlib.metadata.version(peer.version_of),
                "pairs": pairs,
                "refused": refused_stats,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
