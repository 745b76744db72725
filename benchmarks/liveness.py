"""What ``liveness="session"`` costs an uncontended lease: take + release, per database
and face, against the default ``liveness="ttl"``, and the connections a lease holds.

    python benchmarks/liveness.py [--databases sqlite,postgresql,mariadb] [--seconds 2]

Throwaway servers are started as for the test suite. Each round times ``try_lease`` +
``release`` on one key for ``--seconds``; two interleaved rounds, the median shown.
The figures behind docs/concepts.md ("Liveness").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
import joblocks.aio
from benchmarks import _common as C

TTL_MS = 60_000


def sync_round(url: str, table: str, liveness: str, seconds: float) -> Any:
    model = joblocks.JobLockModel(url, table_name=table)
    key = C.holder_name("bench")

    def pair() -> None:
        lease = model.try_lease(key, TTL_MS, liveness=liveness)
        if lease is None:
            raise C.Unexpected("an uncontended key was taken")
        lease.release()

    try:
        return C.time_sync(pair, seconds, 0.3)
    finally:
        model.dispose()


async def aio_round(url: str, table: str, liveness: str, seconds: float) -> Any:
    model = joblocks.aio.JobLockModel(url, table_name=table)
    key = C.holder_name("bench")

    async def pair() -> None:
        lease = await model.try_lease(key, TTL_MS, liveness=liveness)
        if lease is None:
            raise C.Unexpected("an uncontended key was taken")
        await lease.release()

    try:
        return await C.time_async(pair, seconds, 0.3)
    finally:
        await model.dispose()


def extra_connections(url: str, table: str) -> int:
    """Connections of the model's engine a held session lease keeps checked out beyond
    those a held ttl lease does (the model's own idle connection is in both)."""
    model = joblocks.JobLockModel(url, table_name=table)
    pool = model.engine.pool
    try:
        counts = []
        for liveness in ("ttl", "session"):
            lease = model.try_lease(C.holder_name("count"), TTL_MS, liveness=liveness)
            assert lease is not None
            counts.append(int(pool.checkedout()))
            lease.release()
        return counts[1] - counts[0]
    finally:
        model.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        dbs = C.start_databases(args.databases.split(","), Path(folder))
        try:
            print(f"\nuncontended try_lease + release, pairs/s and p50 µs ({C.load()})")
            rows = []
            for db, url in dbs.urls.items():
                table = C.make_table(url)
                for face in ("sync", "aio"):
                    cells = [db, face]
                    for liveness in ("ttl", "session"):
                        rounds = []
                        for _ in range(2):
                            if face == "sync":
                                rounds.append(sync_round(url, table, liveness, args.seconds))
                            else:
                                coro = aio_round(url, table, liveness, args.seconds)
                                rounds.append(asyncio.run(coro))
                        got = C.combine(rounds)
                        cells += [C.num(got, "per_s"), C.num(got, "p50_us")]
                    rows.append(cells)
                print(
                    f"  {db}: extra connections held by a session lease: "
                    f"{extra_connections(url, table)}"
                )
            headers = ["database", "face", "ttl /s", "ttl p50 µs", "session /s", "session p50 µs"]
            print(C.table(headers, rows))
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
