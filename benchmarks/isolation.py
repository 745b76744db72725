"""What running joblocks's statements in read committed costs, on PostgreSQL.

    python benchmarks/isolation.py [--seconds 2] [--rounds 5] [--before-src DIR]

Starts two throwaway PostgreSQL servers (``tests/support/servers.py``): one as installed
(read committed), one with ``default_transaction_isolation = serializable``. Measures
uncontended acquire+release pairs on one key, sync face, in a fresh child process per
measurement: pairs/s and client CPU per pair (``time.process_time``, which the load of
other jobs on the machine disturbs less than wall time).

On the read committed server each statement runs alone, as before the change; the
only new work is one dict look-up per statement (and one query per new connection).
"unprepared" turns psycopg's automatic prepared statements off, as joblocks's engines
do on a connection through a pooler, to show what they are worth. With
``--before-src DIR`` (a copy of an older ``src/``, e.g. ``git archive <commit> src |
tar -x -C DIR``) the same measurement runs with that code too, interleaved round by
round, medians reported. On the serializable server each statement runs in
``BEGIN ISOLATION LEVEL READ COMMITTED`` … ``COMMIT``: two more round trips.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def child(url: str, seconds: float, unprepared: bool) -> None:
    """Measure in this process; print one JSON line."""
    from sqlalchemy import event

    import joblocks

    model = joblocks.JobLockModel(url, table_name="bench_isolation")
    if unprepared:  # as joblocks's engines do through a pooler

        @event.listens_for(model.engine, "connect")
        def unprepare(dbapi_connection: object, record: object) -> None:
            dbapi_connection.prepare_threshold = None  # type: ignore[attr-defined]

    key, holder = "bench-key", "bench-holder"
    for _ in range(200):  # warm-up: connect, create the table, first statements
        model.acquire(key, 60_000, holder)
        model.release(key, holder)
    pairs = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    end = wall0 + seconds
    while time.perf_counter() < end:
        model.acquire(key, 60_000, holder)
        model.release(key, holder)
        pairs += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    model.dispose()
    print(json.dumps({"pairs_per_s": pairs / wall, "cpu_us_per_pair": cpu / pairs * 1e6}))


def measure(url: str, seconds: float, src: Path | None, unprepared: bool) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src if src is not None else ROOT / "src")
    extra = ["--unprepared"] if unprepared else []
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, "--seconds", str(seconds), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=seconds * 10 + 120,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before-src", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--unprepared", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds, args.unprepared)
        return

    from tests.support.servers import start_postgres

    base = Path(tempfile.mkdtemp(prefix="joblocks-bench-isolation-"))
    plain = start_postgres(base)
    strict = start_postgres(base, {"default_transaction_isolation": "serializable"})
    # (name, url, src, prepared statements forced off)
    variants: list[tuple[str, str, Path | None, bool]] = [
        ("read committed, this checkout", plain.url, None, False),
        ("read committed, unprepared (as via a pooler)", plain.url, None, True),
        ("serializable, this checkout", strict.url, None, False),
    ]
    if args.before_src is not None:
        variants[1:1] = [("read committed, --before-src", plain.url, args.before_src, False)]
    try:
        figures: dict[str, list[dict[str, float]]] = {v[0]: [] for v in variants}
        for _ in range(args.rounds):
            for name, url, src, threshold in variants:
                figures[name].append(measure(url, args.seconds, src, threshold))
    finally:
        strict.stop()
        plain.stop()
    print(f"acquire+release pairs, one key, sync face; median of {args.rounds} rounds")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'variant':<46} {'pairs/s':>9} {'CPU µs/pair':>12}  rounds (pairs/s)")
    for name, runs in figures.items():
        rate = statistics.median(r["pairs_per_s"] for r in runs)
        cpu = statistics.median(r["cpu_us_per_pair"] for r in runs)
        each = " ".join(f"{r['pairs_per_s']:.0f}" for r in runs)
        print(f"{name:<46} {rate:>9,.0f} {cpu:>12.1f}  {each}")


if __name__ == "__main__":
    main()
