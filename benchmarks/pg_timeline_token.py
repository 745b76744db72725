"""What folding the server's timeline into PostgreSQL's fencing tokens costs a grant.

A token is ``nextval(seq) + (timeline - 1) * 2**44``, the timeline read from the name
of the current WAL file (the expression joblocks sends). Measured server
side, rounds interleaved: the token expression alone, without and with the timeline,
evaluated ``--rows`` times in one statement (µs per token; no round trip, no client).

    python benchmarks/pg_timeline_token.py [--rounds 7] [--rows 200000]
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

# The expressions of joblocks' PostgreSQL acquire statements, spelled out here so the
# script needs no private module.
TIMELINE = (
    "CAST(CAST('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS BIT(32)) AS BIGINT)"
)
TIMELINE_SHIFT = 44


def server_side(port: int, rows: int) -> tuple[float, float]:
    """µs per token: plain nextval, nextval + the timeline term."""
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as c:
        c.execute("CREATE SEQUENCE IF NOT EXISTS bench_seq")
        out = []
        for expression in (
            "nextval('bench_seq')",
            f"nextval('bench_seq') + ({TIMELINE} - 1) * {1 << TIMELINE_SHIFT}",
        ):
            started = time.perf_counter()
            c.execute(f"SELECT sum({expression}) FROM generate_series(1, {rows})")  # noqa: S608
            out.append((time.perf_counter() - started) / rows * 1e6)
        c.rollback()
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    from tests.support.servers import start_postgres

    base = Path(tempfile.mkdtemp(prefix="jl-bench-"))
    server = start_postgres(base)
    try:
        plain: list[float] = []
        folded: list[float] = []
        for _ in range(args.rounds):
            a, b = server_side(server.port, args.rows)
            plain.append(a)
            folded.append(b)
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


if __name__ == "__main__":
    main()
