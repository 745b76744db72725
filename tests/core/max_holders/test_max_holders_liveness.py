"""``max_holders=N`` with ``liveness="session"``: each place has its own session lock, so
a killed holder's place is taken over at once while the other places keep their
holders; a paused one's is not (real holder processes, every database × face).

The holders are processes of their own (``tests/support/liveness_holder.py``) killed
with SIGKILL or paused with SIGSTOP; the contender is the test's model of the same face.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import pytest

import joblocks

from ...support.cli import run_cli
from ...support.liveness_holder import HolderProcess as Holder

LONG_TTL = 60_000
N = 2
CLI_TIMEOUT = 60


@pytest.fixture
def holders(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Holder]]:
    made: list[Holder] = []

    def start(key: str, ttl_ms: int = LONG_TTL, liveness: str = "session") -> Holder:
        holder = Holder(face, db_url, table_name, key, ttl_ms, liveness, max_holders=N)
        made.append(holder)
        return holder.held()

    yield start
    for holder in made:
        holder.close()


def take(model: Any, key: str, **options: Any) -> Any:
    return model.try_lease(key, LONG_TTL, liveness="session", max_holders=N, **options)


def live_places(model: Any, key: str) -> dict[str, int]:
    """Place row id -> token of the live places of ``key``."""
    return {row.key: row.fence for row in model.holders(key) if not row.expired}


def test_a_killed_holders_place_is_taken_over_the_other_keeps_its_own(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    """Before: refused (ValueError); a killed holder's place would stay taken its ttl."""
    model = make_model()
    first, second = holders(key), holders(key)
    assert {first.place, second.place} == set(live_places(model, key))
    assert take(model, key) is None  # both alive: never more than N inside
    first.kill()
    lease = take(model, key, wait=10_000)
    assert lease is not None, "a killed holder's place stayed taken"
    assert lease.key == first.place
    assert lease.token > first.token
    assert lease.remaining() > timedelta(seconds=50)  # taken over, not expired
    assert live_places(model, key) == {first.place: lease.token, second.place: second.token}
    assert take(model, key, holder="fourth") is None  # still N at most
    assert lease.release()
    assert live_places(model, key) == {second.place: second.token}


def test_a_paused_holders_place_is_not_taken_before_its_ttl(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    model = make_model()
    alive = holders(key)
    paused = holders(key, ttl_ms=3_000)
    os.kill(paused.proc.pid, signal.SIGSTOP)
    try:
        for _ in range(5):
            assert take(model, key) is None
            time.sleep(0.1)
        assert live_places(model, key) == {alive.place: alive.token, paused.place: paused.token}
        # Its ttl runs out: its place is taken by the usual rules, with a larger token.
        lease = take(model, key, wait=15_000)
        assert lease is not None
        assert lease.key == paused.place
        assert lease.token > paused.token
        assert live_places(model, key) == {alive.place: alive.token, paused.place: lease.token}
        assert lease.release()
    finally:
        os.kill(paused.proc.pid, signal.SIGCONT)


def test_a_killed_ttl_holders_place_is_not_taken_over(
    make_model: Callable[..., Any], holders: Callable[..., Holder], key: str
) -> None:
    """A place granted without the session lock (``liveness="ttl"``) keeps its ttl."""
    model = make_model()
    plain, other = holders(key, liveness="ttl"), holders(key)
    plain.kill()
    assert take(model, key, wait=300) is None
    assert live_places(model, key) == {plain.place: plain.token, other.place: other.token}


def test_places_in_one_process_and_re_entrance(make_model: Callable[..., Any], key: str) -> None:
    model, other = make_model(), make_model()
    a = take(model, key, holder="a")
    b = take(other, key, holder="b")
    assert a is not None
    assert b is not None
    assert a.key != b.key
    assert take(model, key, holder="c") is None
    again = take(model, key, holder="a")  # re-entrant: a's own place, never a second
    assert again is not None
    assert again.key == a.key
    assert b.release()
    c = take(model, key, holder="c")
    assert c is not None
    assert c.key == b.key
    assert c.token > b.token
    assert again.release()
    assert c.release()
    a.release()  # its row went with ``again``: this lets a's session lock go
    assert model.peek(key) is None  # the group row went with the last place


def test_a_released_min_hold_place_is_kept_from_session_contenders(
    make_model: Callable[..., Any], key: str
) -> None:
    model = make_model()
    a = take(model, key, holder="a", min_hold=30_000)
    b = take(model, key, holder="b")
    assert a is not None
    assert b is not None
    assert a.release()
    assert take(model, key, holder="c") is None  # a's place is kept, b's is held
    assert b.release()
    c = take(model, key, holder="c")
    assert c is not None
    assert c.key == b.key
    assert c.release()


def test_run_with_lock_and_lease_with_both(make_model: Callable[..., Any], key: str) -> None:
    model, other = make_model(), make_model()
    seen: list[Any] = []

    def work() -> None:
        inner = take(other, key, holder="x")
        seen.append(inner.key if inner is not None else None)
        seen.append(take(other, key, holder="y"))
        if inner is not None:
            inner.release()

    assert model.run_with_lock(key, LONG_TTL, work, liveness="session", max_holders=N)
    assert seen[0] is not None
    assert seen[1] is None
    with model.lease(key, LONG_TTL, liveness="session", max_holders=N) as held:
        assert held.token > 0
    assert model.peek(key) is None


def _argv(url: str, table: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "joblocks", *_words(url, table, *args)]


def _words(url: str, table: str, *args: str) -> list[str]:
    return ["--url", url, "--table", table, *args]


def test_cli_a_killed_runs_place_is_taken_by_the_next_run(
    db_url: str, table_name: str, key: str, tmp_path: Path
) -> None:
    """``joblocks run --max-holders 2 --liveness session``: the runs that are killed are
    real ``joblocks`` processes, the others run in this process (``tests/support/cli.py``)."""
    run = ("run", key, "--ttl", "60s", "--liveness", "session", "--max-holders", str(N))
    run += ("--conflict-exit-code", "9")
    runs = [
        subprocess.Popen(
            _argv(db_url, table_name, *run, "--", "sleep", "600"),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(N)
    ]
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        deadline = time.monotonic() + CLI_TIMEOUT
        while len(live_places(model, key)) < N:
            assert all(p.poll() is None for p in runs), "a run ended early"
            assert time.monotonic() < deadline, "the runs never took their places"
            time.sleep(0.05)
        before = live_places(model, key)
        third = run_cli(*_words(db_url, table_name, *run, "--", "true"))
        assert third.returncode == 9, third.stderr  # N inside: refused
        os.killpg(runs[0].pid, signal.SIGKILL)
        runs[0].wait(timeout=CLI_TIMEOUT)
        ran = tmp_path / "ran"
        fourth = run_cli(*_words(db_url, table_name, *run, "--", "touch", str(ran)))
        assert fourth.returncode == 0, fourth.stderr
        assert ran.exists(), "the killed run's place was not taken over"
        after = live_places(model, key)
        assert len(after) == 1  # the fourth run released its place; the second holds on
        assert set(after.items()) < set(before.items())
    finally:
        for proc in runs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=CLI_TIMEOUT)
        model.dispose()
