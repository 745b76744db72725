"""Six replicas, each with its own scheduler, fire the same cron slot up to 5/6 of a
slot apart: ``schedule=`` starts the job exactly once per slot; ``min_hold`` alone
(the usual "lock at least for" a part of the interval) starts it again whenever a
replica fires after the hold.

The issue's scenario is a one-minute slot (``* * * * *``) and firings spread over
50 s: that is ``--long`` (4 slots, about 5 minutes). CI runs the same proportions on a
6-second slot (``*/6 * * * * *``, firings spread over 5 s, 3 slots, a 100 ms job,
about 25 s): the slot logic does not depend on the slot's length, only the wall time does.
Every database at once (each firing runs the job on each of them), so one run of the
scenario covers all three.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from joblocks import JobLockModel, Schedule

from ..support.matrix import url_for
from ..support.pool import Pool
from . import _schedule_workers as workers
from . import _workers
from ._support import Reporter

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]  # --long: 5 minutes

REPLICAS = 6
#: (expression, slot length s, firings spread over s, slots, job s), CI and --long: the
#: CI slot is a tenth of a minute and its job half the long one's, so that a firing's
#: six runs (three databases, two kinds) end well before the next replica fires
SIZES = {
    False: ("*/6 * * * * *", 6, 5.0, 3, 0.1),
    True: ("* * * * *", 60, 50.0, 4, 0.2),
}
BACKENDS = ("sqlite", "postgresql", "mariadb")


def test_six_replicas_one_start_per_slot(
    request: pytest.FixtureRequest, tmp_path: Path, long_run: bool, report: Reporter
) -> None:
    expression, slot_s, spread_s, n_slots, job_s = SIZES[long_run]
    min_hold_ms = int(slot_s * 1000 / 4)  # a quarter of the slot
    urls = {backend: url_for(request, backend, tmp_path) for backend in BACKENDS}
    table_name = f"t_{uuid.uuid4().hex[:12]}"
    key = f"cron-{uuid.uuid4().hex[:8]}"
    for url in urls.values():
        JobLockModel(url, table_name=table_name).create_table()
    pool = Pool(REPLICAS, result_timeout_s=n_slots * slot_s + 120)
    request.addfinalizer(pool.close)
    assert len(set(pool.run(_workers.hello, [() for _ in range(REPLICAS)]))) == REPLICAS
    schedule = Schedule.parse(expression)
    # the first slot starting at least 3 s from now (the processes are ready by then)
    first = schedule.slot(int(time.time() * 1000) + 3_000)[1]
    # replica r fires each slot at offsets[r]: spread evenly over spread_s, shuffled per
    # slot so that a different replica fires first each time
    steps = [spread_s * r / (REPLICAS - 1) for r in range(REPLICAS)]
    per_slot = [random.sample(steps, REPLICAS) for _ in range(n_slots)]
    calls = [
        (urls, table_name, key, expression, first, [per_slot[s][r] for s in range(n_slots)],
         min_hold_ms, job_s)
        for r in range(REPLICAS)
    ]  # fmt: skip
    results = pool.run(workers.replica, calls)
    slots = [first]
    for _ in range(n_slots - 1):
        slots.append(schedule.slot(slots[-1])[1])
    figures: dict[str, object] = {}
    for backend in BACKENDS:
        starts = Counter(s for r in results for s in r["runs"][backend]["schedule"])
        held = Counter(s for r in results for s in r["runs"][backend]["min_hold"])
        figures[backend] = {
            "schedule_starts_per_slot": [starts[s] for s in slots],
            "min_hold_starts_per_slot": [held[s] for s in slots],
            "skipped": sum(r["skipped"][backend] for r in results),
        }
    report(
        "six replicas, one start per slot",
        "all",
        replicas=REPLICAS,
        slots=n_slots,
        expression=expression,
        firings_spread_s=spread_s,
        min_hold_ms=min_hold_ms,
        scheduler_late_ms_max=round(max(r["late_ms"] for r in results), 1),
        **figures,
    )
    for backend in BACKENDS:
        got = figures[backend]
        assert isinstance(got, dict)
        assert got["schedule_starts_per_slot"] == [1] * n_slots, (backend, got)
        assert got["skipped"] == (REPLICAS - 1) * n_slots, (backend, got)
        assert any(n > 1 for n in got["min_hold_starts_per_slot"]), (backend, got)
