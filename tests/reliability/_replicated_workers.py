"""Worker functions of tests/reliability/test_replicated.py (run in the spawned pool)."""

from __future__ import annotations

import random
import time
from typing import Any

import joblocks

from ..support.pool import start_together
from ._workers import lease_times, make_model


def history(
    url: str, table_name: str, key: str, seconds: float, ttl_ms: int, overrun_p: float
) -> dict[str, Any]:
    """As ``_workers.history`` (one node's URL per worker), counting the database errors
    that reach the caller instead of stopping at the first."""
    model = make_model(url, table_name)
    holder = joblocks.worker_id()
    log: list[tuple[int, int, int, int, int, str, bool]] = []
    errors: list[str] = []
    start_together()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            lease = model.try_lease(key, ttl_ms)
            if lease is None:
                time.sleep(random.uniform(0, 0.002))
                continue
            begin = model.now_ms()
            if random.random() < overrun_p:
                time.sleep(ttl_ms * 1.5 / 1000)
            else:
                time.sleep(random.uniform(0, 0.003))
            end = model.now_ms()
            released = lease.release()
        except joblocks.LockBackendError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        acquired, expires = lease_times(lease)
        log.append((begin, end, lease.token, acquired, expires, holder, released))
    model.dispose()
    return {"holder": holder, "log": log, "errors": errors}
