"""The figures of issue 11 (lease state that is exact), on each database.

    python benchmarks/lease_state.py [--tries 300] [--databases sqlite,postgresql,mariadb]

1. Clock: how many of 10 x tries readings of joblocks' "now" differ from the exact
   epoch millisecond of the clock it reads (read in the same statement), and by how
   much.
2. Acquire after the ttl: ``acquire(k, 10, "A")``, sleep 10 ms, ``acquire(k, 10, "B")``:
   how many of ``tries`` are refused (they should all be granted).
3. ``remaining()``: for ``tries`` grants and as many refreshes, by how much the lease's
   ``remaining()`` exceeded the database's own view read just before it (``expires_at``
   minus the database's now): how many overstated, and the largest excess.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa
from tests.core.test_lease_state import MS, _clock_reading, _exact_ms, ms_of
from tests.support.servers import ServerUnavailable, start_mariadb, start_postgres

import joblocks
from joblocks._clock import statement_now_sql


def clock(backend: str, url: str, readings: int) -> tuple[int, list[int]]:
    engine = sa.create_engine(url)
    off: list[int] = []
    try:
        with engine.connect() as conn:
            reading = sa.text(_clock_reading(backend, statement_now_sql(engine.dialect)))
            for _ in range(readings):
                now, raw = conn.execute(reading).one()
                if int(now) != _exact_ms(backend, raw):
                    off.append(int(now) - _exact_ms(backend, raw))
    finally:
        engine.dispose()
    return len(off), sorted(set(off))


def refused_after_ttl(model: joblocks.JobLockModel, tries: int) -> int:
    refused = 0
    for i in range(tries):
        model.acquire(f"ttl-{i}", 10, "A")
        time.sleep(0.010)
        refused += not model.acquire(f"ttl-{i}", 10, "B")
    return refused


def overstated(model: joblocks.JobLockModel, tries: int) -> tuple[int, int, float]:
    excess: list[float] = []

    def measure(held: Any) -> None:
        db_now = model.now_ms()
        local = held.remaining() / MS
        excess.append(max(0.0, local - (ms_of(held.expires_at) - db_now)))

    for i in range(tries):
        held = model.try_lease(f"rem-{i}", 60_000)
        assert held is not None
        measure(held)
        held.refresh(30_000)
        measure(held)
        held.release()
    return sum(e > 0 for e in excess), len(excess), max(excess)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=300)
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb")
    args = parser.parse_args()
    wanted = args.databases.split(",")
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        urls: dict[str, str] = {"sqlite": f"sqlite:///{base / 'k.db'}"}
        servers = []
        try:
            for name, start in (("postgresql", start_postgres), ("mariadb", start_mariadb)):
                if name in wanted:
                    try:
                        server = start(base)
                    except ServerUnavailable as exc:
                        print(f"{name}: skipped ({exc})")
                        continue
                    servers.append(server)
                    urls[name] = server.url
            print(
                f"{'database':<11} {'clock off':>16} {'refused after ttl':>18}"
                f" {'remaining() overstated':>23} {'by at most':>11}"
            )
            for name in wanted:
                if name not in urls:
                    continue
                model = joblocks.JobLockModel(urls[name], table_name=f"b_{uuid.uuid4().hex[:10]}")
                n_off, by = clock(name, urls[name], 10 * args.tries)
                refused = refused_after_ttl(model, args.tries)
                over, of, worst = overstated(model, args.tries)
                model.dispose()
                clock_cell = f"{n_off}/{10 * args.tries}" + (f" ({by})" if by else "")
                print(
                    f"{name:<11} {clock_cell:>16} {f'{refused}/{args.tries}':>18}"
                    f" {f'{over}/{of}':>23} {worst:>8.3f} ms"
                )
        finally:
            for server in servers:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
