"""What a counted lease (``max_holders=N``) costs next to a single lease, sync face.

    python benchmarks/max_holders.py [--databases sqlite,postgresql,mariadb] [--seconds 2]

One process, one key, no contention: ``try_lease`` + ``release`` pairs of a single
lease and of a counted lease with N = 1, 3 and 10 (the other N-1 places held by other
holders, so the grant is of the last free place), and a refused counted try (all N
places held). Interleaved rounds, the median of three; latencies in µs per pair (per
try when refused).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
from benchmarks import _common as C

ROUNDS = 3
TTL_MS = 60_000


def variants(model: joblocks.JobLockModel) -> dict[str, Any]:
    def pair(key: str, n: int | None) -> Any:
        def op() -> None:
            lease = model.try_lease(key, TTL_MS, holder="me", max_holders=n)
            assert lease is not None
            lease.release()

        return op

    out: dict[str, Any] = {"single lease": pair("single", None)}
    for n in (1, 3, 10):
        key = f"counted-{n}"
        for i in range(n - 1):  # the other places are held by others
            model.try_lease(key, TTL_MS, holder=f"other-{i}", max_holders=n)
        out[f"max_holders={n}"] = pair(key, n)
    full = "full-3"
    for i in range(3):
        model.try_lease(full, TTL_MS, holder=f"other-{i}", max_holders=3)

    def refused() -> None:
        assert model.try_lease(full, TTL_MS, holder="me", max_holders=3) is None

    out["max_holders=3, refused"] = refused
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--databases", default=",".join(C.DATABASES))
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    wanted = [d for d in args.databases.split(",") if d]
    with tempfile.TemporaryDirectory(prefix="joblocks-max-holders-") as folder:
        dbs = C.start_databases(wanted, Path(folder))
        try:
            print(f"\ncounted leases, sync face, µs per try_lease+release ({C.load()})")
            for db, url in dbs.urls.items():
                model = joblocks.JobLockModel(url, table_name=C.fresh_table())
                ops = variants(model)
                rounds: dict[str, list[Any]] = {name: [] for name in ops}
                for _ in range(ROUNDS):
                    for name, op in ops.items():
                        rounds[name].append(C.time_sync(op, args.seconds, args.seconds / 4))
                rows = []
                for name, measured in rounds.items():
                    s = C.combine(measured)
                    rows.append([name, C.num(s, "per_s"), C.num(s, "p50_us"), C.num(s, "p99_us")])
                print(f"\n  {db}")
                print(C.table(["variant", "per s", "p50 µs", "p99 µs"], rows, indent="    "))
                model.dispose()
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
