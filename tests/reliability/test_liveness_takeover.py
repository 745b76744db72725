"""``liveness="session"`` under kill -9: how soon a killed holder is replaced, with a
60 s ttl, and that a paused one is not (every database × face, real processes).

Three holder processes (``tests/support/liveness_holder.py``) ask for one key with
``liveness="session"`` and a long ``wait``; the one that gets it keeps it until it is
killed. The test kills the holder (SIGKILL) as soon as another process is waiting,
notes the time, and reads when the next process says it holds the key: the takeover
time. A new waiter replaces each killed holder. Overlaps: a process saying "held"
while an earlier holder is still alive (never killed) — must be 0. Run with ``-s`` to
see the figures (docs/reliability.md, "Fast takeover").
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Callable

import pytest

import joblocks

from ..support.liveness_holder import HolderProcess
from ._support import Reporter, percentile

pytestmark = pytest.mark.reliability

TTL_MS = 60_000
KILLS = {False: 8, True: 60}
WAITERS = 3
PAUSE_TTL_MS = 3_000


class Crowd:
    """Holder processes on one key; reads who says what, in order."""

    def __init__(self, face: str, url: str, table: str, key: str, ttl_ms: int) -> None:
        self.args = (face, url, table, key, ttl_ms, "session", 600_000)
        self.procs: list[HolderProcess] = []
        self.ready: set[int] = set()

    def spawn(self) -> HolderProcess:
        proc = HolderProcess(*self.args)
        self.procs.append(proc)
        return proc

    def poll(self) -> list[tuple[HolderProcess, list[str]]]:
        """What each live process said since the last poll (nothing is waited for)."""
        said = []
        for proc in self.procs:
            lines = []
            while not proc.lines.empty():
                lines.append(proc.lines.get_nowait())
            if lines:
                said.append((proc, lines))
        return said

    def close(self) -> None:
        for proc in self.procs:
            proc.close()


@pytest.fixture
def crowd(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Crowd]]:
    made: list[Crowd] = []

    def make(ttl_ms: int = TTL_MS) -> Crowd:
        found = Crowd(face, db_url, table_name, f"live-{uuid.uuid4().hex[:8]}", ttl_ms)
        made.append(found)
        return found

    yield make
    for each in made:
        each.close()


def starting(group: Crowd, waiting: set[int]) -> list[HolderProcess]:
    """The processes started that have said nothing yet."""
    return [p for p in group.procs if p.token is None and id(p) not in waiting]


def short_of_waiters(group: Crowd, waiting: set[int]) -> bool:
    """Fewer than ``WAITERS - 1`` processes wait or are starting up."""
    coming = sum(p.proc.poll() is None for p in starting(group, waiting))
    return len(waiting) + coming < WAITERS - 1


def test_killed_holders_are_replaced_at_once(
    crowd: Callable[..., Crowd],
    backend: str,
    face: str,
    long_run: bool,
    report: Reporter,
) -> None:
    kills = KILLS[long_run]
    group = crowd()
    for _ in range(WAITERS):
        group.spawn()
    holder: HolderProcess | None = None
    alive_holders: list[HolderProcess] = []
    waiting: set[int] = set()
    killed_at: float | None = None
    takeovers_ms: list[float] = []
    tokens: list[int] = []
    overlaps = 0
    deadline = time.monotonic() + 120 + kills * 10
    while len(takeovers_ms) < kills:
        assert time.monotonic() < deadline, f"only {len(takeovers_ms)} takeovers in time"
        for proc, lines in group.poll():
            for line in lines:
                word = line.split()
                if word[0] == "ready":
                    waiting.add(id(proc))
                elif word[0] == "held":
                    waiting.discard(id(proc))
                    if any(p.proc.poll() is None for p in alive_holders):
                        overlaps += 1
                    proc.token, proc.held_at = int(word[1]), float(word[2])
                    tokens.append(proc.token)
                    holder = proc
                    alive_holders = [proc]
                    if killed_at is not None:
                        takeovers_ms.append((proc.held_at - killed_at) * 1000)
                        killed_at = None
                else:
                    raise AssertionError(f"a holder process said {line!r}")
        if holder is not None and killed_at is None and len(waiting) >= WAITERS - 1:
            # Every waiter is up and asking (none still starting, using the CPU).
            killed_at = holder.kill()
            holder = None
        elif holder is not None and killed_at is None and short_of_waiters(group, waiting):
            group.spawn()  # the next waiter
        time.sleep(0.002)
    assert overlaps == 0
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == len(tokens)
    p50, worst = percentile(takeovers_ms, 50), max(takeovers_ms)
    report(
        "liveness session: kill -9 takeover",
        f"{backend}/{face}",
        kills=len(takeovers_ms),
        ttl_ms=TTL_MS,
        p50_ms=p50,
        p90_ms=percentile(takeovers_ms, 90),
        max_ms=worst,
        overlaps=overlaps,
    )
    # Far below the ttl: the key was taken over, not waited out. (The targets
    # are p50 < 100 ms, max < 1 s; on a shared 2-core machine only the order is asserted.)
    assert worst < TTL_MS / 10


def test_a_paused_holder_keeps_the_key_until_its_ttl(
    crowd: Callable[..., Crowd],
    backend: str,
    face: str,
    db_url: str,
    table_name: str,
    report: Reporter,
) -> None:
    group = crowd(PAUSE_TTL_MS)
    first = group.spawn().held()
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        row = model.peek(group.args[3])
        assert row is not None
        expires = row.expires_at.timestamp()
        second = group.spawn()
        assert second.line() == "ready"
        os.kill(first.proc.pid, signal.SIGSTOP)
        stopped_at = time.time()
        said = second.line(timeout=PAUSE_TTL_MS / 1000 + 30).split()
        assert said[0] == "held"
        held_at = float(said[2])
        assert int(said[1]) > (first.token or 0)
        # Not before the paused holder's row expired (the clocks are this machine's).
        assert held_at >= expires - 0.005
        report(
            "liveness session: SIGSTOP'd holder",
            f"{backend}/{face}",
            ttl_ms=PAUSE_TTL_MS,
            taken_after_stop_ms=(held_at - stopped_at) * 1000,
            taken_after_expiry_ms=(held_at - expires) * 1000,
        )
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
        model.dispose()
