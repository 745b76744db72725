"""One peer lock library, measured the way the suite measures joblocks; prints JSON.

Runs with the python of the peers venv (benchmarks/peers/setup.sh), never imports
joblocks. For the chosen peer, on one key:

* ``pairs``: uncontended acquire (non-blocking) + release, pairs/s and p50/p99 µs;
* ``refused``: a non-blocking acquire of a key another holder has, latency.

    .venv-peers/bin/python benchmarks/peers/worker.py --peer tooz-redis --redis-port 6390
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
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


def hold_elsewhere(peer_name: str, argv: list[str], name: str) -> subprocess.Popen[str]:
    """Another process holds ``name`` (used for filelock, whose locks are per process)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, *argv, "--hold", name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "held":
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
    args = ap.parse_args()
    # Libraries that log a refused acquire (python-redis-lock warns) pay for building
    # the record, as under any configured logging; the record itself is dropped.
    logging.basicConfig(handlers=[logging.NullHandler()], level=logging.INFO)
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
