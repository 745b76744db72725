"""Contention: N spawned processes looping acquire → release on one key.

Every worker records, for every lease it won, the interval from "acquire returned" to
"release called" (``time.monotonic_ns``, one clock for all processes on Linux) and the
fencing token. That interval lies inside the real holding window, so two intervals of
different workers that overlap are two holders at once. The parent checks:

* ``overlaps``: intervals (sorted by start) that begin before an earlier one ended;
* ``fence_errors``: tokens that do not strictly grow in that order;
* ``lost``: a won lease whose release found no row of ours (ttl 60 s: cannot expire);
* ``rows_left``: rows in the table after the run.

Variants: joblocks' sync or asyncio face, or the raw driver's one-statement upsert.
"""

from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import multiprocessing
import queue
import time
import traceback
from typing import Any

from benchmarks._common import KEY, TTL_MS, RawClient, Stats, holder_name, make_table

READY_TIMEOUT_S = 90.0


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text.split(' [SQL: ')[0][:140]}"


class _Tally:
    def __init__(self) -> None:
        self.wins = self.attempts = self.errors = self.lost = self.retries = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.spans = array.array("q")  # start, end, fence, start, end, fence, ...

    def count(self, counting: bool, token: int | None) -> None:
        if counting:
            self.attempts += 1
            self.wins += token is not None

    def failed(self, counting: bool, exc: BaseException) -> None:
        if counting:
            self.errors += 1
            self.kinds[_short(exc)] += 1

    def result(self) -> dict[str, Any]:
        return {
            "wins": self.wins,
            "attempts": self.attempts,
            "errors": self.errors,
            "lost": self.lost,
            "retries": self.retries,
            "error_kinds": dict(self.kinds.most_common(5)),
            "spans": self.spans.tobytes(),
        }


def _contend_sync(job: dict[str, Any], index: int, results: Any, go: Any, window: Any) -> Any:
    holder = holder_name(f"w{index}")
    transient: tuple[type[BaseException], ...] = ()
    if job["kind"] == "raw":
        client = RawClient(job["db"], job["url"], job["table"])
        acquire = lambda: client.acquire(KEY, holder)  # noqa: E731
        release = lambda: client.release(KEY, holder)  # noqa: E731
        close, transient = client.close, client.transient
    else:
        import joblocks

        model = joblocks.JobLockModel(job["url"], table_name=job["table"], create_table=False)
        model.now_ms()  # open the connection before the clock
        acquire = lambda: model.acquire_token(KEY, TTL_MS, holder)  # noqa: E731
        release = lambda: model.release(KEY, holder)  # noqa: E731
        close = model.dispose
    tally = _Tally()
    clock = time.monotonic_ns
    try:
        results.put(("ready", index, None))
        go.wait()
        start_ns, end_ns = int(window[0] * 1e9), int(window[1] * 1e9)
        while (now := clock()) < end_ns:
            counting = now >= start_ns
            try:
                token = acquire()
                if token is not None:
                    held = clock()
                    tally.spans.extend((held, clock(), token))
                    if not release() and counting:
                        tally.lost += 1
            except transient:
                tally.retries += counting
                continue
            except Exception as exc:
                tally.failed(counting, exc)
                continue
            tally.count(counting, token)
        with contextlib.suppress(Exception):
            release()
        return tally.result()
    finally:
        with contextlib.suppress(Exception):
            close()


def _contend_aio(job: dict[str, Any], index: int, results: Any, go: Any, window: Any) -> Any:
    import joblocks.aio

    async def main() -> dict[str, Any]:
        holder = holder_name(f"a{index}")
        model = joblocks.aio.JobLockModel(job["url"], table_name=job["table"], create_table=False)
        tally = _Tally()
        clock = time.monotonic_ns
        try:
            await model.now_ms()
            results.put(("ready", index, None))
            await asyncio.get_running_loop().run_in_executor(None, go.wait)
            start_ns, end_ns = int(window[0] * 1e9), int(window[1] * 1e9)
            while (now := clock()) < end_ns:
                counting = now >= start_ns
                try:
                    token = await model.acquire_token(KEY, TTL_MS, holder)
                    if token is not None:
                        held = clock()
                        tally.spans.extend((held, clock(), token))
                        if not await model.release(KEY, holder) and counting:
                            tally.lost += 1
                except Exception as exc:
                    tally.failed(counting, exc)
                    continue
                tally.count(counting, token)
            with contextlib.suppress(Exception):
                await model.release(KEY, holder)
            return tally.result()
        finally:
            await model.dispose()

    return asyncio.run(main())


def _worker_main(index: int, jobs: Any, results: Any, go: Any, window: Any) -> None:
    import joblocks
    import joblocks.aio  # noqa: F401

    results.put(("started", index, None))
    while (job := jobs.get()) is not None:
        run = _contend_aio if job["kind"] == "aio" else _contend_sync
        try:
            outcome = run(job, index, results, go, window)
        except Exception:
            results.put(("failed", index, traceback.format_exc(limit=4)))
        else:
            results.put(("done", index, outcome))


def check_spans(outcomes: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(holding intervals, overlaps between them, tokens out of grant order)."""
    spans: list[tuple[int, int, int]] = []
    for o in outcomes:
        flat = array.array("q")
        flat.frombytes(o["spans"])
        spans.extend(zip(flat[0::3], flat[1::3], flat[2::3]))
    spans.sort()
    overlaps = fence_errors = 0
    max_end = last_fence = -1
    for start, end, fence in spans:
        overlaps += start < max_end
        fence_errors += fence <= last_fence
        max_end = max(max_end, end)
        last_fence = fence
    return len(spans), overlaps, fence_errors


class WorkerPool:
    """``size`` spawned processes, reused for every contention run."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.size = size
        self.results: Any = ctx.Queue()
        self.go = ctx.Event()
        self.window = ctx.Array("d", 2, lock=False)
        self.jobs: list[Any] = [ctx.Queue() for _ in range(size)]
        self.procs = [
            ctx.Process(
                target=_worker_main,
                args=(i, self.jobs[i], self.results, self.go, self.window),
                daemon=True,
            )
            for i in range(size)
        ]
        for proc in self.procs:
            proc.start()
        # Spawning interpreters costs seconds of CPU: wait for all before measuring.
        self._collect(set(range(size)), READY_TIMEOUT_S)

    def _collect(self, expected: set[int], timeout: float) -> dict[int, tuple[str, Any]]:
        got: dict[int, tuple[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while expected - got.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"workers {sorted(expected - got.keys())} did not answer")
            with contextlib.suppress(queue.Empty):
                kind, index, payload = self.results.get(timeout=left)
                got[index] = (kind, payload)
        return got

    def run(self, job: dict[str, Any], seconds: float, warmup: float) -> Stats:
        """One contention run of ``job`` (kind ``sync``, ``aio`` or ``raw``; db, url) on a
        fresh table."""
        job = dict(job, table=make_table(job["url"]))
        self.go.clear()
        for q in self.jobs:
            q.put(job)
        everyone = set(range(self.size))
        answers = self._collect(everyone, READY_TIMEOUT_S)
        failed = {i: p for i, (k, p) in answers.items() if k == "failed"}
        now = time.monotonic()
        self.window[0], self.window[1] = now + warmup, now + warmup + seconds
        self.go.set()
        done = self._collect(everyone - failed.keys(), warmup + seconds + READY_TIMEOUT_S)
        self.go.clear()
        outcomes = []
        for i, (kind, payload) in sorted(done.items()):
            if kind == "failed":
                failed[i] = payload
            else:
                outcomes.append(payload)
        return _stats(job, outcomes, failed, seconds)

    def close(self) -> None:
        for q in self.jobs:
            with contextlib.suppress(Exception):
                q.put(None)
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


def _stats(
    job: dict[str, Any], outcomes: list[dict[str, Any]], failed: dict[int, Any], seconds: float
) -> Stats:
    import joblocks

    counter = joblocks.JobLockModel(job["url"], table_name=job["table"], create_table=False)
    try:
        rows_left = counter.count()
    finally:
        counter.dispose()
    kinds: collections.Counter[str] = collections.Counter()
    for o in outcomes:
        kinds.update(o["error_kinds"])
    wins = [o["wins"] for o in outcomes]
    holds, overlaps, fence_errors = check_spans(outcomes)
    return {
        "workers": len(outcomes) + len(failed),
        "workers_failed": len(failed),
        "worker_failures": [f.strip().splitlines()[-1] for f in failed.values()],
        "wins_per_s": sum(wins) / seconds,
        "attempts_per_s": sum(o["attempts"] for o in outcomes) / seconds,
        "min_wins": min(wins, default=0),
        "max_wins": max(wins, default=0),
        "errors": sum(o["errors"] for o in outcomes),
        "error_kinds": dict(kinds.most_common(5)),
        "retries": sum(o["retries"] for o in outcomes),
        "lost": sum(o["lost"] for o in outcomes),
        "holds_checked": holds,
        "overlaps": overlaps,
        "fence_errors": fence_errors,
        "rows_left": rows_left,
    }
