"""One peer lock library on PostgreSQL, timed the way the suite times joblocks.

    PEERS_PYTHON benchmarks/peers/worker.py PEER DSN SECONDS REPEAT

Run with the peers' own python (``benchmarks/peers/setup.sh``) by ``suite.py --sections
peers``; ``advisory`` needs only psycopg. Prints one JSON object: acquire (non-blocking)
+ release pairs on one key (pairs/s, p50 µs) and a refused acquire while another holder
has the key (p50 µs), medians of ``REPEAT`` rounds, or ``{"error": ...}``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

KEY = "bench-key"
TTL_S = 60


def timed(op: Callable[[], None], seconds: float) -> tuple[float, float]:
    """(ops/s, p50 µs) of ``op`` run back to back for ``seconds``."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    start = t = clock()
    end = start + int(seconds * 1e9)
    while t < end:
        op()
        now = clock()
        samples.append(now - t)
        t = now
    return len(samples) / ((t - start) / 1e9), statistics.median(samples) / 1000


def advisory(dsn: str) -> Callable[[], Any]:
    """``pg_try_advisory_lock`` / ``pg_advisory_unlock`` on one held psycopg connection."""
    import psycopg

    key = int.from_bytes(uuid.uuid5(uuid.NAMESPACE_URL, KEY).bytes[:8], "big", signed=True)

    def make() -> Any:
        conn = psycopg.connect(dsn, autocommit=True)

        class Handle:
            def acquire(self) -> bool:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                return bool(row and row[0])

            def release(self) -> None:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

        return Handle()

    return make


def pglease(dsn: str) -> Callable[[], Any]:
    """pglease ``PGLease.try_acquire(ttl=...)`` / ``release``."""
    import pglease as pl

    backend = pl.PostgresBackend(dsn, auto_initialize=True)

    def make() -> Any:
        lease = pl.PGLease(backend, owner_id=f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}")

        class Handle:
            def acquire(self) -> bool:
                return bool(lease.try_acquire(KEY, ttl=TTL_S))

            def release(self) -> None:
                lease.release(KEY)

        return Handle()

    return make


def dislock(dsn: str) -> Callable[[], Any]:
    """dislock ``LeaseLock`` on its documented ``key_value`` table."""
    import dislock as dl
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS key_value (key text PRIMARY KEY,"
            " value text NOT NULL, expire_at timestamptz NOT NULL)"
        )

    def make() -> Any:
        context = dl.LockContext(
            url=dsn,
            table_parts=["key_value"],
            lock_key=KEY,
            owner=f"{os.getpid()}:{uuid.uuid4().hex[:8]}",
            run_ttl_seconds=TTL_S,
            lease_interval_seconds=10.0,
        )

        class Handle:
            lock: Any = None

            def acquire(self) -> bool:
                self.lock = dl.LeaseLock(context)
                try:
                    self.lock.__enter__()
                except dl.LockNotAcquiredError:
                    return False
                return True

            def release(self) -> None:
                self.lock.__exit__(None, None, None)

        return Handle()

    return make


PEERS = {"advisory": ("psycopg", advisory), "pglease": ("pglease", pglease)}
PEERS["dislock"] = ("dislock", dislock)


def main() -> int:
    peer, dsn, seconds, repeat = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    dist, factory = PEERS[peer]
    try:
        make = factory(dsn)
        me, other = make(), make()

        def pair() -> None:
            if not me.acquire():
                raise RuntimeError("uncontended acquire refused")
            me.release()

        def refused() -> None:
            if other.acquire():
                raise RuntimeError("acquire of a held key granted")

        pairs = [timed(pair, seconds) for _ in range(repeat)]
        if not me.acquire():
            raise RuntimeError("acquire refused")
        refusals = [timed(refused, seconds / 2) for _ in range(repeat)]
        me.release()
        out = {
            "version": f"{dist} {importlib.metadata.version(dist)}",
            "per_s": statistics.median(p[0] for p in pairs),
            "p50_us": statistics.median(p[1] for p in pairs),
            "refused_p50_us": statistics.median(r[1] for r in refusals),
        }
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
