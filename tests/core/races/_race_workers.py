"""Worker functions for ``test_races.py``, run in spawned processes.

Each worker makes its own model from plain arguments (URL, table name, acquire path),
so nothing but strings and numbers crosses the process boundary. They run in the
processes of ``tests.support.pool.Pool``, whose ``start_together`` waits at the start
barrier of the batch.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import joblocks

from ...support.pool import start_together


def _model(url: str, table_name: str, acquire_path: str | None) -> joblocks.JobLockModel:
    model = joblocks.JobLockModel(url, table_name=table_name, acquire_path=acquire_path)
    model.now_ms()  # connect now, not inside the race
    return model


def hello() -> tuple[int, str]:
    """Warm-up task: proves that the worker runs, in a process of its own."""
    start_together()
    return os.getpid(), joblocks.worker_id()


def race_acquire(
    url: str, table_name: str, acquire_path: str, keys: list[str], ttl_ms: int
) -> dict[str, Any]:
    """For every key in turn: wait for all workers, then ``acquire_token`` at once.

    Returns this worker's pid, holder and one token (or None) per key.
    """
    model = _model(url, table_name, acquire_path)
    holder = joblocks.worker_id()
    tokens: list[int | None] = []
    try:
        for key in keys:
            start_together()
            tokens.append(model.acquire_token(key, ttl_ms, holder))
    finally:
        model.dispose()
    return {"pid": os.getpid(), "holder": holder, "tokens": tokens}


def race_plain_acquire(
    url: str, table_name: str, acquire_path: str, keys: list[str], ttl_ms: int
) -> dict[str, Any]:
    """Like :func:`race_acquire` with the boolean ``acquire``."""
    model = _model(url, table_name, acquire_path)
    holder = joblocks.worker_id()
    won: list[bool] = []
    try:
        for key in keys:
            start_together()
            won.append(model.acquire(key, ttl_ms, holder))
    finally:
        model.dispose()
    return {"pid": os.getpid(), "holder": holder, "won": won}


def hammer(
    url: str,
    table_name: str,
    key: str,
    ttl_ms: int,
    seconds: float,
    acquire_path: str | None = None,
) -> dict[str, Any]:
    """Call ``run_with_lock`` on ``key`` in a tight loop for ``seconds``.

    The work records when it ran (``time.monotonic_ns``: CLOCK_MONOTONIC is one clock
    for the whole machine, comparable across processes, and never stepped like the
    wall clock) and the row it ran under, then sleeps 0–2 ms. ``acquire_path`` None
    is the database's default path.
    """
    model = _model(url, table_name, acquire_path)
    holder = joblocks.worker_id()
    intervals: list[tuple[int, int, int, str]] = []
    attempts = wins = 0

    def work() -> None:
        start = time.monotonic_ns()
        row = model.peek(key)
        time.sleep(random.uniform(0, 0.002))
        end = time.monotonic_ns()
        fence, owner = (-1, "") if row is None else (row.fence, row.holder)
        intervals.append((start, end, fence, owner))

    try:
        start_together()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            attempts += 1
            if joblocks.run_with_lock(key, ttl_ms, work, model=model):
                wins += 1
    finally:
        model.dispose()
    return {
        "pid": os.getpid(),
        "holder": holder,
        "path": model.acquire_path,
        "intervals": intervals,
        "wins": wins,
        "attempts": attempts,
    }


def hold_forever(url: str, table_name: str, key: str, ttl_ms: int, conn: Any) -> None:
    """Take ``key``, report (holder, token) through ``conn``, then block until killed."""
    model = _model(url, table_name, None)
    holder = joblocks.worker_id()
    token = model.acquire_token(key, ttl_ms, holder)
    conn.send((os.getpid(), holder, token))
    conn.close()
    threading.Event().wait()
