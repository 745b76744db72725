"""The replicas of test_schedule_replicas.py: each one a process with its own scheduler."""

from __future__ import annotations

import time
from typing import Any

import joblocks
from joblocks import Schedule


def replica(
    urls: dict[str, str],
    table_name: str,
    key: str,
    expression: str,
    first_slot_ms: int,
    offsets_s: list[float],
    min_hold_ms: int,
    job_s: float,
) -> dict[str, Any]:
    """Fire slot ``i`` at its start (by this machine's clock) + ``offsets_s[i]``.

    Each firing runs the job, on every database, twice: under ``schedule=expression``
    on ``key``, and under ``min_hold`` alone on ``key + "-min-hold"``. Returns, per
    database, the slot starts (epoch ms) of the runs of each kind, and how late the
    firings were.
    """
    schedule = Schedule.parse(expression)
    models = {name: joblocks.JobLockModel(url, table_name=table_name) for name, url in urls.items()}
    for model in models.values():
        model.now_ms()  # connected before the first firing
    runs: dict[str, dict[str, list[int]]] = {n: {"schedule": [], "min_hold": []} for n in urls}
    skipped = dict.fromkeys(urls, 0)
    late: list[float] = []
    slot = schedule.slot(first_slot_ms)
    for offset in offsets_s:
        fire = slot[0] / 1000 + offset
        time.sleep(max(0.0, fire - time.time()))
        late.append(time.time() - fire)
        for name, model in models.items():
            lease = model.try_lease(key, 60_000, schedule=schedule)
            if lease is not None:
                assert lease.slot is not None
                runs[name]["schedule"].append(lease.slot[0])
                time.sleep(job_s)
                lease.release()
            else:
                skipped[name] += 1

            def job(name: str = name, start: int = slot[0]) -> None:
                runs[name]["min_hold"].append(start)
                time.sleep(job_s)

            joblocks.run_with_lock(
                key + "-min-hold", 60_000, job, model=model, min_hold=min_hold_ms
            )
        slot = schedule.slot(slot[1])
    for model in models.values():
        model.dispose()
    return {"runs": runs, "skipped": skipped, "late_ms": max(late) * 1000}
