"""Spawned worker processes that start their calls together: the one process pool of the
suite (the races of tests/core/races/test_races.py, the reliability scenarios).

:class:`Pool` runs in the test process. Its calls run in processes made with the
``spawn`` start method, each making its own model from plain arguments, so nothing but
strings and numbers crosses a process boundary. A batch of ``n`` calls shares a start
barrier of ``n`` parties: a worker function calls :func:`start_together` (in its own
process) to wait until every call of its batch is there, so no process can take two
calls of a batch and the calls hit the database together. The barriers and the shared
counters (:class:`Shared`) reach the processes through the pool's initializer (process
creation is the one way a ``multiprocessing`` barrier may be shared).

Worker functions live next to their tests (``tests/core/races/_race_workers.py``,
``tests/reliability/_workers.py``) and must be importable by the spawned processes.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, NamedTuple

import pytest

SPAWN = multiprocessing.get_context("spawn")

#: How long a worker waits at a start barrier before giving up (seconds).
BARRIER_TIMEOUT_S = 60.0
#: How long :meth:`Pool.collect` waits for a batch's results (seconds).
RESULT_TIMEOUT_S = 120.0


class Shared(NamedTuple):
    """Counters in shared memory, inherited by the pool's processes."""

    stop: Any
    inside: Any
    max_inside: Any


class Pool:
    """``size`` spawned processes with start barriers and a few shared counters."""

    def __init__(
        self,
        size: int,
        result_timeout_s: float = RESULT_TIMEOUT_S,
        barrier_timeout_s: float = BARRIER_TIMEOUT_S,
    ) -> None:
        self.size = size
        self.result_timeout_s = result_timeout_s
        self.barriers = {n: SPAWN.Barrier(n) for n in range(1, size + 1)}
        self.shared = Shared(
            stop=SPAWN.Value("i", 0),
            inside=SPAWN.Value("i", 0),
            max_inside=SPAWN.Value("i", 0),
        )
        self.executor = ProcessPoolExecutor(
            size,
            mp_context=SPAWN,
            initializer=init_pool,
            initargs=(self.barriers, self.shared, barrier_timeout_s),
        )

    def reset(self) -> None:
        for value in self.shared:
            value.value = 0

    def submit(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Future[Any]]:
        """Start ``fn(*args)`` for every ``args`` in ``calls``, each in a process of its own.

        ``fn`` may wait at the start barrier of ``len(calls)`` parties
        (:func:`start_together`), so no process can take two of the calls.
        """
        assert 1 <= len(calls) <= self.size
        self.barriers[len(calls)].reset()
        return [self.executor.submit(task, len(calls), fn, args) for args in calls]

    def collect(self, futures: list[Future[Any]], timeout: float | None = None) -> list[Any]:
        """The results of ``futures``, in order; the first error raised, or a failure when
        they do not all finish within ``timeout`` seconds (the pool's result time-out)."""
        timeout = self.result_timeout_s if timeout is None else timeout
        done, pending = wait(futures, timeout=timeout, return_when=FIRST_EXCEPTION)
        failed = [f for f in done if f.exception() is not None]
        if failed or pending:
            self.shared.stop.value = 1
            for barrier in self.barriers.values():
                barrier.abort()  # release the others, then report the first error
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
            pytest.fail(f"{len(pending)} of {len(futures)} workers did not finish in {timeout}s")
        return [f.result() for f in futures]

    def run(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        """:meth:`submit` then :meth:`collect`."""
        return self.collect(self.submit(fn, calls))

    def run_all(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Run ``fn(*args)`` once in each of the ``size`` processes at the same time."""
        return self.run(fn, [args] * self.size)

    def close(self) -> None:
        for barrier in self.barriers.values():
            barrier.abort()
        self.executor.shutdown(wait=True, cancel_futures=True)


# -- in the pool's processes ------------------------------------------------------------

_barriers: dict[int, Any] = {}
_shared: Shared | None = None
_party = 1
_barrier_timeout_s = BARRIER_TIMEOUT_S


def init_pool(barriers: dict[int, Any], shared: Shared, barrier_timeout_s: float) -> None:
    """Pool initializer: keep the barriers and counters; import the drivers up front."""
    global _barriers, _shared, _barrier_timeout_s
    _barriers = barriers
    _shared = shared
    _barrier_timeout_s = barrier_timeout_s
    # Imported here so that the first batch does not pay for the imports.
    import psycopg  # noqa: F401
    import pymysql  # noqa: F401


def task(party: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run one call of a batch of ``party`` calls (see :meth:`Pool.submit`)."""
    global _party
    _party = party
    return fn(*args)


def shared() -> Shared:
    """The pool's shared counters (in a pool process only)."""
    assert _shared is not None, "not in a pool process"
    return _shared


def start_together() -> None:
    """Block until every call of this batch is at the barrier."""
    _barriers[_party].wait(_barrier_timeout_s)


def stopped() -> bool:
    """Whether the test process asked the pool's calls to stop."""
    return bool(shared().stop.value)
