"""Two versions of joblocks' asyncio face side by side: client CPU and wall per pair.

    python benchmarks/aio_versions_cpu.py OLD_SRC [NEW_SRC] [--databases sqlite,postgresql]
        [--pairs 3000] [--repeat 4]

Like ``benchmarks/versions.py`` (``OLD_SRC``/``NEW_SRC``: ``src`` folders of two
checkouts; each measurement a fresh child process with ``PYTHONPATH`` set to one
version, rounds interleaved old, new, old, new, ... on the same throwaway servers), but
for the asyncio face and by client CPU time (``time.process_time``) per acquire+release
pair, which a loaded machine moves far less than pairs/s. Each child also measures the
raw asyncio driver (aiosqlite, psycopg async: ``benchmarks/_common.RawAsyncClient``) on
the same table, so every round gives a ratio raw CPU ÷ joblocks CPU of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, load, start_databases

CHILD = r"""
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[4])
from benchmarks import _common as C
import joblocks.aio

async def cpu(op, n):
    for _ in range(min(300, n)):
        await op()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        await op()
    return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - w0) / n * 1e6

async def main(db, url, n):
    name = C.make_table(url)
    raw = C.RawAsyncClient(db, url, name)
    await raw.open()
    model = joblocks.aio.JobLockModel(url, table_name=name, create_table=False)
    async def raw_pair():
        await raw.acquire("r", "h")
        await raw.release("r", "h")
    async def jl_pair():
        await model.acquire("j", 60000, "h")
        await model.release("j", "h")
    try:
        r = await cpu(raw_pair, n)
        j = await cpu(jl_pair, n)
    finally:
        await raw.close()
        await model.dispose()
    print(json.dumps({"raw": r, "jl": j}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def child(src: Path, db: str, url: str, pairs: int) -> dict[str, list[float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, db, url, str(pairs), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    found: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?", default=ROOT / "src")
    ap.add_argument("--databases", default="sqlite,postgresql")
    ap.add_argument("--pairs", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="joblocks-aio-versions-") as folder:
        dbs = start_databases([d for d in args.databases.split(",") if d], Path(folder))
        try:
            print(f"asyncio face, µs per acquire+release pair, old = {args.old}, new = {args.new}")
            for db, url in dbs.urls.items():
                rounds: dict[str, list[dict[str, list[float]]]] = {"old": [], "new": []}
                for _ in range(args.repeat):
                    for which, src in (("old", args.old), ("new", args.new)):
                        rounds[which].append(child(src, db, url, args.pairs))
                print(f"  {db} ({load()})")
                for which, found in rounds.items():
                    jl_cpu = statistics.median(r["jl"][0] for r in found)
                    jl_wall = statistics.median(r["jl"][1] for r in found)
                    raw_cpu = statistics.median(r["raw"][0] for r in found)
                    ratio = [r["raw"][0] / r["jl"][0] for r in found]
                    shown = ", ".join(f"{x:.2f}" for x in ratio)
                    print(
                        f"    {which}: joblocks CPU {jl_cpu:6.1f} (wall {jl_wall:6.1f}), raw async "
                        f"CPU {raw_cpu:6.1f}; raw ÷ joblocks CPU {statistics.median(ratio):.2f}"
                        f" (rounds {shown})"
                    )
                old = [r["jl"][0] for r in rounds["old"]]
                new = [r["jl"][0] for r in rounds["new"]]
                per = ", ".join(f"{n / o:.2f}" for o, n in zip(old, new))
                print(f"    new ÷ old joblocks CPU per pair, per round: {per}")
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
