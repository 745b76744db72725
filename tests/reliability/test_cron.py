"""Cron double fire: two schedulers fire the same slot a little apart.

Each scheduler is a process of its own. For every slot, one fires first and the other
fires ``skew`` later, with the skew longer than the job (so without ``min_hold`` both
would run it) and shorter than ``min_hold``. The same firings also run the job on a
control key without ``min_hold``, which shows the double runs that ``min_hold``
prevents.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import pytest

from ..support.pool import Pool
from . import _workers as workers
from ._support import Reporter

pytestmark = pytest.mark.reliability

SLOTS = {False: 4, True: 30}
PERIOD_S = 0.8
MIN_HOLD_MS = 400
JOB_S = 0.03
SKEWS_S = (0.1, 0.15, 0.2, 0.25)  # all well longer than the job, shorter than min_hold


def test_cron_double_fire(
    pool: Pool,
    backend: str,
    db_url: str,
    table_name: str,
    long_run: bool,
    report: Reporter,
) -> None:
    slots = SLOTS[long_run]
    key = f"cron-{uuid.uuid4().hex[:8]}"
    control_key = f"{key}-control"
    workers.make_model(db_url, table_name).dispose()
    offsets: list[list[float]] = [[], []]
    for _ in range(slots):
        first = random.randrange(2)  # which scheduler fires first
        offsets[first].append(0.0)
        offsets[1 - first].append(random.choice(SKEWS_S))
    t0 = time.monotonic() + 1.0  # both processes are ready by then
    calls = [
        (db_url, table_name, key, control_key, t0, PERIOD_S, own, MIN_HOLD_MS, JOB_S)
        for own in offsets
    ]
    results = pool.run(workers.scheduler, calls)
    runs = Counter(slot for r in results for slot in r["runs"])
    control = Counter(slot for r in results for slot in r["control"])
    per_slot = [runs[slot] for slot in range(slots)]
    report(
        "cron double fire",
        backend,
        schedulers=2,
        slots=slots,
        min_hold_ms=MIN_HOLD_MS,
        skews_ms=[round(s * 1000) for s in SKEWS_S],
        runs_per_slot_max=max(per_slot),
        runs_per_slot_min=min(per_slot),
        control_without_min_hold_double_runs=sum(1 for s in range(slots) if control[s] > 1),
        scheduler_late_ms_max=round(max(r["late_ms"] for r in results), 1),
    )
    assert per_slot == [1] * slots, per_slot
    assert any(control[s] > 1 for s in range(slots)), "the control never ran twice"
