"""Contention: N spawned processes looping acquire → release on one key.

Every worker records, for every lease it won, the interval from "acquire returned" to
"release called" (``time.monotonic_ns``, one clock for all processes on Linux) and the
fencing token. That interval lies inside the real holding window, so two intervals of
different workers that overlap are two holders at once. The parent checks:

* ``overlaps``: intervals (sorted by start) that begin before an earlier one ended;
* ``fence_errors``: tokens that do not strictly grow in that order;
* ``lost``: a won lease whose release found no row of ours (ttl 60 s: cannot expire);
* ``rows_left``: rows in the table after the run.

Runs: joblocks sync or asyncio face on any acquire path, or the raw driver
(``RawClient``: one-statement upsert or the two-statement update/insert variant).
"""

from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import logging
import multiprocessing
import os
import queue
import time
import traceback
from typing import Any

from benchmarks._common import KEY, TTL_MS, RawClient, Stats, holder_name, make_table

READY_TIMEOUT_S = 90.0
RETRY_MESSAGE = "retried after a transient error"


class _RetryCounter(logging.Handler):
    """Counts joblocks' debug records of transient-error retries (deadlocks...)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counting = False
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.counting and RETRY_MESSAGE in record.getMessage():
            self.count += 1


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text.split(' [SQL: ')[0][:140]}"


class _Tally:
    def __init__(self) -> None:
        self.wins = self.attempts = self.errors = self.lost = self.retries = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.spans = array.array("q")  # start, end, fence, start, end, fence, ...
        self.cpu_ns = 0  # this process's CPU time while counting, in this side's slices
        self.busy_cores: float | None = None  # the machine's, over the counted window

    def result(self, retries: int) -> dict[str, Any]:
        return {
            "wins": self.wins,
            "attempts": self.attempts,
            "errors": self.errors,
            "lost": self.lost,
            "retries": self.retries + retries,
            "error_kinds": dict(self.kinds.most_common(5)),
            "spans": self.spans.tobytes(),
            "cpu_ns": self.cpu_ns,
            "busy_cores": self.busy_cores,
        }


def _sync_ops(job: dict[str, Any], holder: str) -> tuple[Any, Any, Any, tuple[type, ...]]:
    if job["kind"] == "raw":
        client = RawClient(job["db"], job["url"], job["table"], job["variant"])
        return (
            lambda: client.acquire(KEY, holder),
            lambda: client.release(KEY, holder),
            client.close,
            client.transient,
        )
    import joblocks

    model = joblocks.JobLockModel(
        job["url"], table_name=job["table"], acquire_path=job["path"], create_table=False
    )
    model.now_ms()  # open the connection before the clock
    return (
        lambda: model.acquire_token(KEY, TTL_MS, holder),
        lambda: model.release(KEY, holder),
        model.dispose,
        (),
    )


def _contend_sync(
    job: dict[str, Any], index: int, results: Any, go: Any, window: Any, retries: _RetryCounter
) -> dict[str, Any]:
    ops = _sync_ops(job, holder_name(f"w{index}"))
    (tally,) = _contend_sides((ops,), 0, index, results, go, window, retries)
    return tally.result(retries.count)


def _contend_alternating(
    job: dict[str, Any], index: int, results: Any, go: Any, window: Any, retries: _RetryCounter
) -> dict[str, Any]:
    """joblocks sync (default path, ``job["table"]``) and the raw driver sending the same
    statements (``job["raw_table"]``), alternating in slices of ``job["slice_s"]`` that
    every worker switches at together (one clock): both see the same load.

    An attempt counts for the variant whose slice it started in; a hold still running at
    a slice's end finishes on its own table, so the two variants never share a row."""
    holder = holder_name(f"s{index}")
    sides = (
        _sync_ops(dict(job, kind="joblocks"), holder),
        _sync_ops(dict(job, kind="raw", table=job["raw_table"], variant="upsert"), holder),
    )
    slice_ns = int(job["slice_s"] * 1e9)
    jl, raw = _contend_sides(sides, slice_ns, index, results, go, window, retries)
    return {"joblocks": jl.result(retries.count), "raw": raw.result(0)}


def _machine_cpu() -> tuple[int, int] | None:
    """The machine's (busy, total) CPU ticks so far, all cores (``/proc/stat``; None
    where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks[:8]) - idle, sum(ticks[:8])


def _busy_cores(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """How many of the machine's cores were busy on average between two
    :func:`_machine_cpu` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    cores = os.cpu_count() or 1
    return (after[0] - before[0]) / (after[1] - before[1]) * cores


def _contend_sides(
    sides: tuple[tuple[Any, Any, Any, tuple[type, ...]], ...],
    slice_ns: int,
    index: int,
    results: Any,
    go: Any,
    window: Any,
    retries: _RetryCounter,
) -> list[_Tally]:
    """The sync contention loop over ``sides`` (``_sync_ops`` results): with one side,
    that side all the time; with two, in turn, slices of ``slice_ns`` counted from the
    window's start. Closes every side's client at the end."""
    tallies = [_Tally() for _ in sides]
    clock = time.monotonic_ns
    cpu = time.process_time_ns
    try:
        results.put(("ready", index, None))
        go.wait()
        start_ns, end_ns = int(window[0] * 1e9), int(window[1] * 1e9)
        counting = False
        machine: tuple[int, int] | None = None
        # The process's CPU time is read at each slice's start (a few times a second,
        # not per attempt) and charged to the side that slice ran.
        segment = -1
        cpu_mark = 0
        while True:
            now = clock()
            if now >= end_ns:
                break
            if not counting and now >= start_ns:
                counting = retries.counting = True
                machine = _machine_cpu() if index == 0 else None
            turn = 0 if len(sides) == 1 else (now - start_ns) // slice_ns
            if counting and turn != segment:
                cpu_now = cpu()
                if segment >= 0:
                    tallies[segment % len(sides)].cpu_ns += cpu_now - cpu_mark
                segment, cpu_mark = turn, cpu_now
            side = turn % len(sides)
            acquire, release, _close, transient = sides[side]
            tally = tallies[side]
            try:
                token = acquire()
                if token is not None:
                    held = clock()
                    releasing = clock()
                    tally.spans.extend((held, releasing, token))
                    if not release() and counting:
                        tally.lost += 1
            except transient:
                if counting:
                    tally.retries += 1
                continue
            except Exception as exc:
                if counting:
                    tally.errors += 1
                    tally.kinds[_short(exc)] += 1
                continue
            if counting:
                tally.attempts += 1
                tally.wins += token is not None
        if segment >= 0:
            tallies[segment % len(sides)].cpu_ns += cpu() - cpu_mark
        if counting and machine is not None:
            busy_cores = _busy_cores(machine, _machine_cpu())
            for tally in tallies:
                tally.busy_cores = busy_cores
        for _acquire, release, _close, _transient in sides:
            with contextlib.suppress(Exception):
                release()
        return tallies
    finally:
        for _acquire, _release, close, _transient in sides:
            with contextlib.suppress(Exception):
                close()


def _contend_aio(
    job: dict[str, Any], index: int, results: Any, go: Any, window: Any, retries: _RetryCounter
) -> dict[str, Any]:
    import joblocks.aio

    async def main() -> dict[str, Any]:
        holder = holder_name(f"a{index}")
        model = joblocks.aio.JobLockModel(
            job["url"], table_name=job["table"], acquire_path=job["path"], create_table=False
        )
        tally = _Tally()
        clock = time.monotonic_ns
        try:
            await model.now_ms()
            results.put(("ready", index, None))
            await asyncio.get_running_loop().run_in_executor(None, go.wait)
            start_ns, end_ns = int(window[0] * 1e9), int(window[1] * 1e9)
            counting = False
            while True:
                now = clock()
                if now >= end_ns:
                    break
                if not counting and now >= start_ns:
                    counting = retries.counting = True
                try:
                    token = await model.acquire_token(KEY, TTL_MS, holder)
                    if token is not None:
                        held = clock()
                        releasing = clock()
                        tally.spans.extend((held, releasing, token))
                        if not await model.release(KEY, holder) and counting:
                            tally.lost += 1
                except Exception as exc:
                    if counting:
                        tally.errors += 1
                        tally.kinds[_short(exc)] += 1
                    continue
                if counting:
                    tally.attempts += 1
                    tally.wins += token is not None
            with contextlib.suppress(Exception):
                await model.release(KEY, holder)
            return tally.result(retries.count)
        finally:
            await model.dispose()

    return asyncio.run(main())


def _worker_main(index: int, jobs: Any, results: Any, go: Any, window: Any) -> None:
    retries = _RetryCounter()
    log = logging.getLogger("joblocks")
    log.addHandler(retries)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    import joblocks
    import joblocks.aio  # noqa: F401

    results.put(("started", index, None))
    while True:
        job = jobs.get()
        if job is None:
            return
        retries.counting = False
        retries.count = 0
        try:
            if job["kind"] == "alternating":
                outcome = _contend_alternating(job, index, results, go, window, retries)
            elif job["kind"] == "joblocks" and job["face"] == "aio":
                outcome = _contend_aio(job, index, results, go, window, retries)
            else:
                outcome = _contend_sync(job, index, results, go, window, retries)
        except Exception:
            results.put(("failed", index, traceback.format_exc(limit=4)))
        else:
            results.put(("done", index, outcome))


def check_spans(outcomes: list[dict[str, Any]]) -> tuple[int, int, int, list[str]]:
    """(holding intervals, overlaps between them, tokens out of order, a few examples)."""
    spans: list[tuple[int, int, int]] = []
    for o in outcomes:
        flat = array.array("q")
        flat.frombytes(o["spans"])
        spans.extend(zip(flat[0::3], flat[1::3], flat[2::3]))
    spans.sort()
    overlaps = fence_errors = 0
    max_end = -1
    last_fence = -1
    last_start = 0
    examples: list[str] = []
    for start, end, fence in spans:
        if start < max_end:
            overlaps += 1
            if len(examples) < 3:
                examples.append(
                    f"overlap: a hold began {(max_end - start) / 1000:.1f} µs "
                    "before the previous one ended"
                )
        if fence <= last_fence:
            fence_errors += 1
            if len(examples) < 3:
                examples.append(
                    f"token {fence} granted {(start - last_start) / 1000:.0f} µs "
                    f"after a grant with token {last_fence}"
                )
        max_end = max(max_end, end)
        last_fence = fence
        last_start = start
    return len(spans), overlaps, fence_errors, examples


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
                name=f"bench-worker-{i}",
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
            try:
                kind, index, payload = self.results.get(timeout=left)
            except queue.Empty:
                continue
            got[index] = (kind, payload)
        return got

    def run(self, job: dict[str, Any], seconds: float, warmup: float) -> Stats:
        """One contention run; ``job`` without ``table`` (a fresh one is made)."""
        job = dict(job, table=make_table(job["url"]))
        outcomes, failed = self._run(job, seconds, warmup)
        return _stats(job, outcomes, failed, seconds, job["table"])

    def run_alternating(
        self, job: dict[str, Any], seconds: float, warmup: float, slice_s: float
    ) -> dict[str, Stats]:
        """joblocks sync and the raw upsert in alternating slices of ``slice_s`` within
        one run (``_contend_alternating``): ``{"joblocks": stats, "raw": stats}``, each
        over the half of ``seconds`` its slices took."""
        job = dict(
            job,
            kind="alternating",
            table=make_table(job["url"]),
            raw_table=make_table(job["url"]),
            slice_s=slice_s,
        )
        outcomes, failed = self._run(job, seconds, warmup)
        return {
            side: _stats(job, [o[side] for o in outcomes], failed, seconds / 2, table)
            for side, table in (("joblocks", job["table"]), ("raw", job["raw_table"]))
        }

    def _run(
        self, job: dict[str, Any], seconds: float, warmup: float
    ) -> tuple[list[dict[str, Any]], dict[int, Any]]:
        self.go.clear()
        for q in self.jobs:
            q.put(job)
        everyone = set(range(self.size))
        answers = self._collect(everyone, READY_TIMEOUT_S)
        failed = {i: p for i, (k, p) in answers.items() if k == "failed"}
        running = everyone - failed.keys()
        now = time.monotonic()
        self.window[0] = now + warmup
        self.window[1] = now + warmup + seconds
        self.go.set()
        done = self._collect(running, warmup + seconds + READY_TIMEOUT_S)
        self.go.clear()
        outcomes = []
        for i, (kind, payload) in sorted(done.items()):
            if kind == "failed":
                failed[i] = payload
            else:
                outcomes.append(payload)
        return outcomes, failed

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
    job: dict[str, Any],
    outcomes: list[dict[str, Any]],
    failed: dict[int, Any],
    seconds: float,
    table: str,
) -> Stats:
    """One variant's figures from its workers' tallies (``seconds``: its timed span)."""
    import joblocks

    counter = joblocks.JobLockModel(job["url"], table_name=table, create_table=False)
    try:
        rows_left = counter.count()
    finally:
        counter.dispose()
    kinds: collections.Counter[str] = collections.Counter()
    for o in outcomes:
        kinds.update(o["error_kinds"])
    wins = [o["wins"] for o in outcomes]
    spans, overlaps, fence_errors, examples = check_spans(outcomes)
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
        "holds_checked": spans,
        "overlaps": overlaps,
        "fence_errors": fence_errors,
        "examples": examples,
        "rows_left": rows_left,
        # CPU time of the workers while counting (this variant's slices only), and how
        # many of the machine's cores were busy over the whole counted window.
        "seconds": seconds,
        "client_cpu_s": sum(o.get("cpu_ns", 0) for o in outcomes) / 1e9,
        "wins": sum(wins),
        "busy_cores": next((o["busy_cores"] for o in outcomes if o.get("busy_cores")), None),
    }
