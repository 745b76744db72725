"""What the run ledger costs a run: ``run_with_lock`` without and with ``record=True``.

    python benchmarks/ledger.py [--databases sqlite,postgresql,mariadb] [--seconds 2]

Sync face, one key, an empty ``work``: runs per second and latency percentiles, in
interleaved rounds (median shown). ``record=False`` is the default path (it must be
as fast as before the ledger existed); ``record=True`` adds two statements per run
(an INSERT at the grant, an UPDATE at the release).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
from benchmarks import _common as C


def measure(db: str, url: str, seconds: float, rounds: int) -> list[list[str]]:
    table = C.fresh_table()
    model = joblocks.JobLockModel(url, table_name=table)
    results: dict[str, list[C.Stats]] = {"record=False": [], "record=True": []}
    try:
        for _ in range(rounds):
            for name in results:
                record = name == "record=True"

                def op(record: bool = record) -> None:
                    if not joblocks.run_with_lock(
                        "bench", 60_000, _nothing, model=model, record=record
                    ):
                        raise C.Unexpected("run_with_lock did not run")

                results[name].append(C.time_sync(op, seconds, warmup=0.3))
        recorded = len(model.runs(limit=100_000))
    finally:
        model.dispose()
    rows = []
    for name, got in results.items():
        combined = C.combine(got)
        rows.append(
            [
                db,
                name,
                C.num(combined, "per_s"),
                C.num(combined, "p50_us", "{:,.0f}"),
                C.num(combined, "p99_us", "{:,.0f}"),
            ]
        )
    print(f"  {db}: {recorded} ledger rows written", flush=True)
    return rows


def _nothing() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(C.load())
    with tempfile.TemporaryDirectory() as tmp:
        dbs = C.start_databases(args.databases.split(","), Path(tmp))
        try:
            rows: list[list[str]] = []
            for db, url in dbs.urls.items():
                rows += measure(db, url, args.seconds, args.rounds)
        finally:
            dbs.stop()
    print(C.table(["database", "run_with_lock", "runs/s", "p50 µs", "p99 µs"], rows))


if __name__ == "__main__":
    main()
