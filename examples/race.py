"""Two processes fire the same job at the same moment; the lock lets exactly one run it.

    python examples/race.py            # a fresh SQLite file in a temporary folder
    python examples/race.py locks.db   # or a file (or any database URL) of your choice

This is what happens when cron, APScheduler or a Kubernetes CronJob fires on every
replica: each replica calls ``run_with_lock``; the one that takes the lease runs the
job, the others return False and skip it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from typing import Any

import joblocks

JOB = "nightly-report"
TTL_MS = 60_000  # longer than the job's worst case


def replica(number: int, database: str, start: Any, results: Any) -> None:
    joblocks.configure(database)
    start.wait()  # both replicas fire at the same moment, like a schedule would

    def job() -> None:
        print(f"replica {number} (pid {os.getpid()}): running {JOB!r}", flush=True)
        time.sleep(1.0)  # the work; the other replica tries while this runs

    ran = joblocks.run_with_lock(JOB, TTL_MS, job)
    if not ran:
        print(f"replica {number} (pid {os.getpid()}): skipped, another replica holds {JOB!r}")
    results.put((number, ran))


def main() -> int:
    target = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as folder:
        if target is None:
            database = f"sqlite:///{os.path.join(folder, 'locks.db')}"
        elif "://" in target:
            database = target
        else:
            database = f"sqlite:///{os.path.abspath(target)}"
        print(f"database: {database}")
        joblocks.JobLockModel(database).create_table()
        ctx = multiprocessing.get_context("spawn")
        start, results = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=replica, args=(n, database, start, results)) for n in (1, 2)]
        for proc in procs:
            proc.start()
        time.sleep(0.5)  # let both processes import and wait at the start line
        start.set()
        outcome = dict(results.get(timeout=60) for _ in procs)
        for proc in procs:
            proc.join()
    runs = sum(outcome.values())
    print(f"the job ran {runs} time(s) for 2 replicas")
    return 0 if runs == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
