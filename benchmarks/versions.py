"""Two versions of joblocks side by side: uncontended acquire+release pairs per second.

    python benchmarks/versions.py OLD_SRC [NEW_SRC] [--databases sqlite,postgresql,mariadb]
        [--seconds 2] [--repeat 3]

``OLD_SRC`` and ``NEW_SRC`` are ``src`` folders of two checkouts (``NEW_SRC`` defaults to
this checkout's), e.g. one made with ``git worktree add /tmp/old 3a3e699``. Each
measurement runs in a fresh child process with ``PYTHONPATH`` set to one version, on a
table of its own, on the same throwaway servers. Rounds are interleaved (old, new, old,
new, ...) so both see the same load; the median of the rounds is printed, with the ratio
new ÷ old of each round beside it: on a shared machine compare ratios, not figures.
Measured: sync and asyncio, one key taken and released over and over (the row updated
in place) by the plain model API, ``acquire`` + ``release``.
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

from _common import ROOT, load, start_databases, table

CHILD = r"""
import asyncio, json, sys, time, uuid
url, face, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
import joblocks, joblocks.aio
name = "v_" + uuid.uuid4().hex[:12]
key, holder, ttl = "bench-key", "bench-holder", 60_000

def timed(op):
    end = time.perf_counter() + min(0.3, seconds / 4)
    while time.perf_counter() < end:
        op()
    n, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        op(); n += 1
    return n / (time.perf_counter() - start)

async def atimed(op):
    end = time.perf_counter() + min(0.3, seconds / 4)
    while time.perf_counter() < end:
        await op()
    n, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        await op(); n += 1
    return n / (time.perf_counter() - start)

if face == "sync":
    model = joblocks.JobLockModel(url, table_name=name)
    def pair():
        if not model.acquire(key, ttl, holder) or not model.release(key, holder):
            raise SystemExit("a pair failed")
    rate = timed(pair)
    model.dispose()
else:
    async def main():
        model = joblocks.aio.JobLockModel(url, table_name=name)
        async def pair():
            if not await model.acquire(key, ttl, holder) or not await model.release(key, holder):
                raise SystemExit("a pair failed")
        try:
            return await atimed(pair)
        finally:
            await model.dispose()
    rate = asyncio.run(main())
print(json.dumps({"per_s": rate, "version": joblocks.__version__, "file": joblocks.__file__}))
"""


def measure(src: Path, url: str, face: str, seconds: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, face, str(seconds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120 + seconds * 4,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{src} {face}: {done.stderr.strip().splitlines()[-1:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(found["file"]).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"imported joblocks from {found['file']}, not from {src}")
    return float(found["per_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path, help="src folder of the older checkout")
    ap.add_argument("new", type=Path, nargs="?", default=ROOT / "src")
    ap.add_argument("--databases", default="sqlite,postgresql,mariadb")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    for src in (args.old, args.new):
        if not (src / "joblocks" / "__init__.py").is_file():
            ap.error(f"{src} is not a src folder holding joblocks/")
    with tempfile.TemporaryDirectory(prefix="joblocks-versions-") as tmp:
        dbs = start_databases(args.databases.split(","), Path(tmp))
        try:
            print(f"old {args.old}\nnew {args.new}\n{load()}", flush=True)
            rows = []
            for db, url in dbs.urls.items():
                for face in ("sync", "asyncio"):
                    old: list[float] = []
                    new: list[float] = []
                    for _ in range(args.repeat):
                        old.append(measure(args.old, url, face, args.seconds))
                        new.append(measure(args.new, url, face, args.seconds))
                    ratios = [n / o for o, n in zip(old, new)]
                    rows.append(
                        [
                            f"{db} {face}",
                            f"{statistics.median(old):,.0f}",
                            f"{statistics.median(new):,.0f}",
                            f"{statistics.median(ratios):.2f}",
                            f"{min(ratios):.2f}-{max(ratios):.2f}",
                        ]
                    )
                    print(f"  {db} {face} done", flush=True)
            headers = ["pairs/s", "old", "new", "new/old", "per round"]
            print(table(headers, rows))
            print(load())
        finally:
            dbs.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
