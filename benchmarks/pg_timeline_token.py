"""What folding the server's timeline into PostgreSQL's fencing tokens costs a grant.

A token is ``nextval(seq) + (timeline - 1) * 2**44``, the timeline read from the name
of the current WAL file (``joblocks._statements``). Two measurements, rounds interleaved:

- server side: the token expression alone, without and with the timeline, evaluated
  ``--rows`` times in one statement (µs per token; no round trip, no client);
- end to end: one grant of the ``upsert`` path and its release (``acquire_token`` +
  ``release``) through a joblocks model, against the same statement with the timeline
  term taken out (pairs/s).

    python benchmarks/pg_timeline_token.py [--rounds 7] [--rows 200000] [--seconds 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "src"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import psycopg  # noqa: E402

import joblocks  # noqa: E402
from joblocks import _statements  # noqa: E402

TIMELINE = _statements.PG_TIMELINE_SQL


def server_side(port: int, rows: int) -> tuple[float, float]:
    """µs per token: plain nextval, nextval + the timeline term."""
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as c:
        c.execute("CREATE SEQUENCE IF NOT EXISTS bench_seq")
        out = []
        for expression in (
            "nextval('bench_seq')",
            f"nextval('bench_seq') + ({TIMELINE} - 1) * {1 << _statements.TIMELINE_SHIFT}",
        ):
            started = time.perf_counter()
            c.execute(f"SELECT sum({expression}) FROM generate_series(1, {rows})")  # noqa: S608
            out.append((time.perf_counter() - started) / rows * 1e6)
        c.rollback()
    return out[0], out[1]


def pairs_per_second(model: joblocks.JobLockModel, seconds: float) -> float:
    done = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        model.acquire_token("bench", 60_000, "me")
        model.release("bench", "me")
        done += 1
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    from tests.support.servers import start_postgres

    base = Path(tempfile.mkdtemp(prefix="jl-bench-"))
    server = start_postgres(base)
    try:
        with_timeline = joblocks.JobLockModel(server.url, table_name="bench_new")
        # The statement as it was: the timeline term replaced by 1 (same statement shape).
        _statements.PG_TIMELINE_SQL = "1"
        without = joblocks.JobLockModel(server.url, table_name="bench_old")
        _statements.PG_TIMELINE_SQL = TIMELINE
        plain: list[float] = []
        folded: list[float] = []
        old_rate: list[float] = []
        new_rate: list[float] = []
        for _ in range(args.rounds):
            a, b = server_side(server.port, args.rows)
            plain.append(a)
            folded.append(b)
            old_rate.append(pairs_per_second(without, args.seconds))
            new_rate.append(pairs_per_second(with_timeline, args.seconds))
        with_timeline.dispose()
        without.dispose()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    med = statistics.median
    print(f"rounds {args.rounds}, interleaved; medians (min-max)")
    print(
        f"  server side, µs per token: nextval {med(plain):.3f} "
        f"({min(plain):.3f}-{max(plain):.3f}); with timeline {med(folded):.3f} "
        f"({min(folded):.3f}-{max(folded):.3f}); added {med(folded) - med(plain):.3f}"
    )
    ratios = [n / o for n, o in zip(new_rate, old_rate)]
    print(
        f"  acquire+release pairs/s: without timeline {med(old_rate):,.0f}; with "
        f"{med(new_rate):,.0f}; with/without per round {med(ratios):.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
