"""Worker processes for ``test_poolers.py`` and ``test_serializable.py``.

Each worker is a spawned process of its own with its own model (sync or asyncio face)
and connections; nothing but strings and numbers crosses the process boundary. All
start together at a barrier and run their loop for the same number of seconds; each
returns a dict of counts (``errors`` maps an error's text to how often a caller saw it,
``retried`` the deadlocks and serialization failures joblocks retried by itself).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import random
import time
from collections import Counter
from typing import Any, Callable

import joblocks
import joblocks.aio

SPAWN = multiprocessing.get_context("spawn")
#: How long a worker waits at the start barrier (seconds).
BARRIER_TIMEOUT_S = 60.0
#: How long the parent waits for a worker's result beyond its run time (seconds).
RESULT_GRACE_S = 90.0


class Face:
    """One model of either face, called synchronously: ``face.do("peek", key)``."""

    def __init__(self, face: str, url: str, table_name: str) -> None:
        self.face = face
        if face == "aio":
            self.loop = asyncio.new_event_loop()
            self.model: Any = joblocks.aio.JobLockModel(url, table_name=table_name)
        else:
            self.model = joblocks.JobLockModel(url, table_name=table_name)

    def do(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.run(getattr(self.model, name), *args, **kwargs)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        if self.face == "aio":
            result = self.loop.run_until_complete(asyncio.wait_for(result, 60))
        return result

    def sleep(self, seconds: float) -> None:
        if self.face == "aio":  # keep-alive tasks run meanwhile
            self.loop.run_until_complete(asyncio.sleep(seconds))
        else:
            time.sleep(seconds)

    def close(self) -> None:
        self.do("dispose")
        if self.face == "aio":
            self.loop.close()


class _CountWarnings(logging.Handler):
    """joblocks's warnings (e.g. a release that failed inside ``run_with_lock``) count
    as errors, instead of being printed."""

    def __init__(self, out: dict[str, Any]) -> None:
        super().__init__(logging.DEBUG)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            self.out["errors"][f"logged: {text}"[:160]] += 1
        elif "retried after a transient error" in text:
            # A deadlock or serialization failure joblocks retried: not seen by the
            # caller, but counted (it costs a round trip and a pause).
            self.out["retried"][text.split(": ", 2)[-1][:100]] += 1


def _error(errors: Counter[str], exc: BaseException) -> None:
    text = getattr(exc, "detail", None) or f"{type(exc).__name__}: {exc}"
    errors[str(text)[:160]] += 1


def hammer(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """``run_with_lock`` on ``key`` in a loop; the work records when it ran, and the row."""
    holder = joblocks.worker_id()
    intervals: list[tuple[int, int, int, str]] = []
    runs = 0

    def work() -> None:
        start = time.monotonic_ns()
        row = face.do("peek", key)
        time.sleep(random.uniform(0, 0.002))
        end = time.monotonic_ns()
        fence, owner = (-1, "") if row is None else (row.fence, row.holder)
        intervals.append((start, end, fence, owner))

    if face.face == "aio":

        async def awork() -> None:
            # peek is a coroutine there: run it on the loop, not through face.do.
            start = time.monotonic_ns()
            row = await face.model.peek(key)
            await asyncio.sleep(random.uniform(0, 0.002))
            end = time.monotonic_ns()
            fence, owner = (-1, "") if row is None else (row.fence, row.holder)
            intervals.append((start, end, fence, owner))

        def once() -> bool:
            return bool(face.run(joblocks.aio.run_with_lock, key, 10_000, awork, model=face.model))
    else:

        def once() -> bool:
            return joblocks.run_with_lock(key, 10_000, work, model=face.model)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out["calls"] += 1
        try:
            runs += once()
        except joblocks.LockError as exc:
            _error(out["errors"], exc)
    out["runs"] = runs
    out["intervals"] = intervals
    out["holder"] = holder


def churn(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """Take, release and delete a key nobody else uses: every step must do just that."""
    holder = joblocks.worker_id()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out["calls"] += 1
        try:
            token = face.do("acquire_token", key, 30_000, holder)
            if token is None:
                out["wrong"] += 1  # nobody else holds this key
                continue
            row = face.do("peek", key)
            if row is None or (row.holder, row.fence) != (holder, token):
                out["wrong"] += 1
            if face.do("release", key, holder) is not True:
                out["wrong"] += 1
            if face.do("peek", key) is not None:
                out["wrong"] += 1
            # A one-parameter DELETE, as a peek has one parameter: released already.
            if face.do("delete", key) is not False:
                out["wrong"] += 1
        except joblocks.LockError as exc:
            _error(out["errors"], exc)


def peeker(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """Only read ``key`` (held by the parent for the whole run) and a key never written."""
    holder, fence = out.pop("expect")
    missing = f"never-{os.getpid()}"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out["calls"] += 1
        try:
            row = face.do("peek", key)
            if row is None or (row.holder, row.fence) != (holder, fence):
                out["wrong"] += 1
            if face.do("peek", missing) is not None:
                out["wrong"] += 1
        except joblocks.LockError as exc:
            _error(out["errors"], exc)


def intruder(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """Try to take ``key`` (live, held by the parent) again and again: never granted."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out["calls"] += 1
        try:
            if face.do("acquire", key, 30_000, "intruder"):
                out["wrong"] += 1
        except joblocks.LockError as exc:
            _error(out["errors"], exc)


def deleter(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """Only delete a key of its own that never exists (a clean-up job, say)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out["calls"] += 1
        try:
            if face.do("delete", key) is not False:
                out["wrong"] += 1
        except joblocks.LockError as exc:
            _error(out["errors"], exc)


def keeper(face: Face, key: str, seconds: float, out: dict[str, Any]) -> None:
    """Hold a keep-alive lease (ttl 1.5 s) for the whole run: it must never be lost."""
    lease = face.do("try_lease", key, 1_500, keepalive=True, renew_every=300)
    if lease is None:
        out["wrong"] += 1
        return
    out["calls"] += 1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not lease.lost:
        face.sleep(0.05)
    if lease.lost:
        out["wrong"] += 1
        out["errors"][f"lease lost: {lease.lost_reason}"] += 1
    else:
        try:
            face.run(lease.release)
        except joblocks.LockError as exc:
            _error(out["errors"], exc)


ROLES: dict[str, Callable[[Face, str, float, dict[str, Any]], None]] = {
    "hammer": hammer,
    "churn": churn,
    "peeker": peeker,
    "intruder": intruder,
    "deleter": deleter,
    "keeper": keeper,
}


def run_role(
    role: str,
    face_name: str,
    url: str,
    table_name: str,
    key: str,
    seconds: float,
    extra: dict[str, Any],
    barrier: Any,
    results: Any,
) -> None:
    """Process entry point: make the model, connect, wait for all, run, report."""
    out: dict[str, Any] = {
        "role": role,
        "pid": os.getpid(),
        "calls": 0,
        "wrong": 0,
        "errors": Counter(),
        "retried": Counter(),
        **extra,
    }
    logger = logging.getLogger("joblocks")
    logger.addHandler(_CountWarnings(out))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        face = Face(face_name, url, table_name)
        try:
            face.do("now_ms")  # connect now, not inside the run
            barrier.wait(BARRIER_TIMEOUT_S)
            ROLES[role](face, key, seconds, out)
        finally:
            face.close()
    except BaseException as exc:  # reported to the parent, which fails the test
        out["crash"] = f"{type(exc).__name__}: {exc}"
    out["errors"] = dict(out["errors"])
    out["retried"] = dict(out["retried"])
    results.put(out)


def run_processes(
    face: str,
    url: str,
    table_name: str,
    seconds: float,
    roles: list[tuple[str, str, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Run one process per ``(role, key, extra)``, all starting together; their results."""
    barrier = SPAWN.Barrier(len(roles))
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(
            target=run_role,
            args=(role, face, url, table_name, key, seconds, extra, barrier, results),
        )
        for role, key, extra in roles
    ]
    for proc in procs:
        proc.start()
    collected: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + BARRIER_TIMEOUT_S + seconds + RESULT_GRACE_S
        collected.extend(results.get(timeout=max(1.0, deadline - time.monotonic())) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
    return collected
