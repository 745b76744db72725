"""Keep-alive load and loss detection, on each database.

    python benchmarks/keepalive.py [--leases 1000] [--seconds 5] [--databases ...]

1. Renewal throughput: one process holds N keep-alive leases whose renewal interval is
   far shorter than one renewer can serve, so the renewer is always busy; prints the
   renewals per second it sustains, the process CPU time per renewal, and whether any
   lease was lost.
2. A steady load: N leases with ttl 3 s (renewed every second by default) need N
   renewals per second; prints the CPU share of the process that costs.
3. Loss detection: a keep-alive lease (renew every 100 ms) whose row is deleted by an
   operator; prints the delay until the lease is marked lost (p50/max over 20 trials).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.servers import ServerUnavailable, start_mariadb, start_postgres

import joblocks


def renewal_throughput(url: str, leases: int, seconds: float) -> dict[str, Any]:
    model = joblocks.JobLockModel(url, table_name=f"b_{uuid.uuid4().hex[:10]}")
    model.create_table()
    renewed = 0

    def count(event: joblocks.Event) -> None:
        nonlocal renewed
        if event.kind == "renewed":
            renewed += 1

    held = [model.try_lease(f"k{i}", 60_000, keepalive=True, renew_every=1) for i in range(leases)]
    joblocks.add_listener(count)
    cpu0, wall0, renewed0 = time.process_time(), time.monotonic(), renewed
    time.sleep(seconds)
    cpu, wall, done = time.process_time() - cpu0, time.monotonic() - wall0, renewed - renewed0
    joblocks.remove_listener(count)
    lost = sum(1 for lease in held if lease is not None and lease.lost)
    for lease in held:
        if lease is not None:
            lease.release()
    model.dispose()
    return {
        "renewals_per_s": done / wall,
        "cpu_us_per_renewal": cpu / max(done, 1) * 1e6,
        "lost": lost,
    }


def realistic_cpu(url: str, leases: int, seconds: float) -> dict[str, Any]:
    model = joblocks.JobLockModel(url, table_name=f"b_{uuid.uuid4().hex[:10]}")
    model.create_table()
    held = [model.try_lease(f"k{i}", 3_000, keepalive=True) for i in range(leases)]
    threads = threading.active_count()
    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    lost = sum(1 for lease in held if lease is not None and lease.lost)
    for lease in held:
        if lease is not None:
            lease.release()
    model.dispose()
    return {"cpu_share": cpu / wall, "lost": lost, "threads": threads}


def _setter(event: threading.Event) -> Any:
    return lambda _lease: event.set()


def loss_detection(url: str, trials: int = 20) -> dict[str, Any]:
    model = joblocks.JobLockModel(url, table_name=f"b_{uuid.uuid4().hex[:10]}")
    model.create_table()
    delays = []
    for i in range(trials):
        found = threading.Event()
        lease = model.try_lease(
            f"k{i}", 3_000, keepalive=True, renew_every=100, on_lost=_setter(found)
        )
        assert lease is not None
        time.sleep(0.05 + (i % 10) / 100)  # delete at varying points of the interval
        deleted = time.monotonic()
        model.delete(f"k{i}")
        found.wait(5)
        delays.append((time.monotonic() - deleted) * 1000)
    model.dispose()
    return {"p50_ms": statistics.median(delays), "max_ms": max(delays)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leases", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb")
    args = parser.parse_args()
    logging.getLogger("joblocks").setLevel(logging.ERROR)  # the loss trials warn by design
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
            print(f"{args.leases} keep-alive leases in one process, {args.seconds:g} s each")
            print(
                f"{'database':<11} {'renewals/s':>11} {'CPU us/renewal':>15} {'lost':>5}"
                f" {'CPU, N/s due':>14} {'threads':>8} {'loss p50 ms':>12} {'loss max ms':>12}"
            )
            for name in wanted:
                if name not in urls:
                    continue
                busy = renewal_throughput(urls[name], args.leases, args.seconds)
                calm = realistic_cpu(urls[name], args.leases, args.seconds)
                loss = loss_detection(urls[name])
                print(
                    f"{name:<11} {busy['renewals_per_s']:>11,.0f} "
                    f"{busy['cpu_us_per_renewal']:>15,.0f} {busy['lost'] + calm['lost']:>5} "
                    f"{calm['cpu_share']:>13.1%} {calm['threads']:>8} "
                    f"{loss['p50_ms']:>12.0f} {loss['max_ms']:>12.0f}"
                )
        finally:
            for server in servers:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
