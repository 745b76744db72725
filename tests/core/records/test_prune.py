"""``prune``: the library deletes expired rows in batches, on every database and face.

The concurrency test runs a real ``joblocks prune`` process on a SQLite file with a
million expired rows while this process releases and acquires a lock in the same
file: one ``DELETE`` of every row held SQLite's write lock for its whole run, and the
release failed with "database is locked"; batches leave room between them.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

import joblocks

DAY, HOUR = 86_400_000, 3_600_000


def fill(url: str, table_name: str, rows: list[tuple[str, int, int]]) -> None:
    """Insert ``(key, acquired_at, expires_at)`` rows (epoch ms) as they are."""
    model = joblocks.JobLockModel(url, table_name=table_name)
    try:
        model.create_table()
        with model.engine.begin() as conn:
            conn.execute(
                insert(model.table),
                [
                    {"id": k, "holder": "h", "acquired_at": a, "expires_at": e, "fence": i + 1}
                    for i, (k, a, e) in enumerate(rows)
                ],
            )
    finally:
        model.dispose()


def test_prune_deletes_expired_rows_in_batches(
    make_model: Callable[..., Any], db_url: str, table_name: str
) -> None:
    model = make_model()
    now = model.now_ms()
    old = [(f"old-{i:02d}", now - 3 * DAY, now - 2 * DAY) for i in range(11)]
    recent = [(f"recent-{i}", now - 2 * HOUR, now - HOUR) for i in range(3)]
    live = [(f"live-{i}", now, now + HOUR) for i in range(4)]
    fill(db_url, table_name, old + recent + live)

    assert model.prune(timedelta(days=1), dry_run=True) == 11
    assert model.count() == 18
    assert model.prune(DAY, batch_size=3) == 11  # three batches of 3, then the last 2
    assert {lock.key for lock in model.list()} == {k for k, _, _ in recent + live}
    assert model.prune(DAY) == 0
    assert model.prune(dry_run=True) == 3  # expired_for=0: every expired row
    assert model.prune() == 3
    assert sorted(lock.key for lock in model.list()) == sorted(k for k, _, _ in live)
    assert model.count("live") == 4


def test_prune_never_deletes_a_live_row(make_model: Callable[..., Any], key: str) -> None:
    model = make_model()
    assert model.acquire(key, 60_000, "worker")
    assert model.prune() == 0
    assert model.prune(0, batch_size=1) == 0
    assert model.peek(key) is not None


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"expired_for": -1}, ValueError, "expired_for"),
        ({"expired_for": "1d"}, TypeError, "expired_for"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 1.5}, TypeError, "batch_size"),
        ({"batch_size": True}, TypeError, "batch_size"),
        ({"dry_run": "yes"}, TypeError, "dry_run"),
    ],
)
def test_prune_checks_its_arguments(
    make_model: Callable[..., Any], kwargs: dict[str, Any], error: type[Exception], needle: str
) -> None:
    model = make_model(url="sqlite:////nonexistent-dir/never.db", create_table=False)
    with pytest.raises(error, match=needle):
        model.prune(**kwargs)


# -- a release during a large prune (SQLite) -----------------------------------------------

#: Expired rows: one DELETE of them all holds the write lock for about a second here.
BIG = 1_000_000
#: The releasing process waits this long for the write lock (seconds).
BUSY_TIMEOUT_S = 0.3


@pytest.fixture(scope="module")
def big_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite lock table with a million expired rows (copied for each test)."""
    path = tmp_path_factory.mktemp("big") / "locks.db"
    model = joblocks.JobLockModel(f"sqlite:///{path}")
    model.create_table()
    model.dispose()
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO job_locks (id, holder, acquired_at, expires_at, fence) "
            "VALUES (?, 'gone@host:1', 1, 2, ?)",
            ((f"day-{i:08d}", i + 1) for i in range(BIG)),
        )
        conn.execute("UPDATE job_locks_fence SET value = ?", (BIG,))
    conn.close()
    return path


def _write_locked(path: Path) -> bool:
    """Whether another connection holds the file's write lock right now."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return True
    finally:
        conn.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_release_succeeds_during_a_large_prune(
    make_model: Callable[..., Any], big_sqlite: Path, tmp_path: Path
) -> None:
    path = tmp_path / "locks.db"
    shutil.copy(big_sqlite, path)
    url = f"sqlite:///{path}"
    # This process waits at most BUSY_TIMEOUT_S for the write lock.
    model = make_model(url=f"{url}?timeout={BUSY_TIMEOUT_S}", table_name="job_locks")
    assert model.acquire("victim", 60_000, "worker")
    prune = subprocess.Popen(
        [sys.executable, "-m", "joblocks", "--url", url, "prune", "--expired-for", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _write_locked(path):  # the prune is deleting
            assert prune.poll() is None, prune.communicate()
            assert time.monotonic() < deadline, "the prune never took the write lock"
        assert model.release("victim", "worker")
        assert model.acquire("victim-2", 60_000, "worker")
        still_pruning = prune.poll() is None
        out, err = prune.communicate(timeout=120)
    finally:
        if prune.poll() is None:
            prune.kill()
            prune.communicate()
    assert prune.returncode == 0, err
    assert still_pruning, "the prune ended before the release: the test proves nothing"
    assert out.startswith(f"deleted {BIG} lock rows"), out
    assert [lock.key for lock in model.list()] == ["victim-2"]


def test_prune_keeps_keys_re_acquired_while_it_runs(
    make_model: Callable[..., Any], db_url: str, table_name: str
) -> None:
    """Another thread takes expired keys while the prune goes through them: every key
    it got is still held afterwards (the DELETE re-checks each row it deletes)."""
    model = make_model()
    now = model.now_ms()
    keys = [f"k-{i:05d}" for i in range(1500)]
    fill(db_url, table_name, [(k, now - 2 * HOUR, now - HOUR) for k in keys])
    taken: list[str] = []
    errors: list[BaseException] = []

    def take() -> None:
        try:
            # From the end: the prune meets them late.
            taken.extend(k for k in reversed(keys[::7]) if model.acquire(k, 600_000, "newcomer"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    deleted = model.prune(batch_size=20)
    taker.join(timeout=60)
    assert not errors, errors
    assert len(taken) == len(keys[::7])
    held = {lock.key for lock in model.list()}
    assert set(taken) <= held, sorted(set(taken) - held)[:5]
    assert all(lock.holder == "newcomer" for lock in model.list())
    assert deleted + len(held) >= len(keys)  # each expired row deleted or re-taken
