"""SQLite faults: another process holding the write lock, a full disk, a read-only disk.

Each must surface as ``LockBackendError`` — never as "taken" (False) — leave the file
intact (``PRAGMA integrity_check``), and stop mattering once the fault ends.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

import joblocks

from ..support.pool import SPAWN
from . import _workers as workers
from ._support import Reporter, fill, need_root_tool, remount, small_tmpfs

pytestmark = pytest.mark.reliability

BUSY_TIMEOUT_S = 0.3
HOLDER = "sqlite-holder"


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("LockBackendError", the error); anything else propagates."""
    try:
        return "ok", call()
    except joblocks.LockBackendError as exc:
        return "LockBackendError", exc


def _never(*_: object) -> None:
    raise AssertionError("work ran although the lock could not be taken")


def test_sqlite_busy(tmp_path: Path, report: Reporter) -> None:
    """Another process holds ``BEGIN IMMEDIATE``: writes fail after the busy timeout."""
    path = tmp_path / "locks.db"
    model = joblocks.JobLockModel(f"sqlite:///{path}?timeout={BUSY_TIMEOUT_S}")
    assert model.acquire("held", 60_000, HOLDER)
    lease = model.try_lease("leased", 60_000)
    assert lease is not None
    parent, child = SPAWN.Pipe()
    writer = SPAWN.Process(target=workers.sqlite_writer, args=(str(path), child))
    writer.start()
    try:
        assert parent.poll(60)
        assert parent.recv() == "locked"
        calls: dict[str, Callable[[], Any]] = {
            "acquire (free key)": lambda: model.acquire("free", 60_000, HOLDER),
            "acquire (own key)": lambda: model.acquire("held", 60_000, HOLDER),
            "refresh": lambda: model.refresh("held", 60_000, HOLDER),
            "release": lambda: model.release("held", HOLDER),
            "lease.refresh": lease.refresh,
            "run_with_lock": lambda: joblocks.run_with_lock("free", 60_000, _never, model=model),
        }
        seen = {}
        for name, call in calls.items():
            started = time.monotonic()
            kind, _ = outcome(call)
            seen[name] = (kind, round(time.monotonic() - started, 2))
        read_kind, row = outcome(lambda: model.peek("held"))  # WAL: readers go on
        parent.send("release")
        assert parent.poll(30)
        assert parent.recv() == "released"
    finally:
        writer.join(10)
        if writer.is_alive():
            writer.kill()
    after = [
        model.acquire("free", 60_000, HOLDER),
        model.refresh("held", 60_000, HOLDER),
        lease.release(),
        model.release("held", HOLDER),
        model.release("free", HOLDER),
    ]
    check = integrity(path)
    report(
        "sqlite busy",
        "sqlite",
        busy_timeout_s=BUSY_TIMEOUT_S,
        writes_tried=len(seen),
        errors=sum(kind == "LockBackendError" for kind, _ in seen.values()),
        seconds_to_error_max=max(s for _, s in seen.values()),
        reads_while_busy=read_kind,
        works_after=all(after),
        integrity=check,
    )
    assert all(kind == "LockBackendError" for kind, _ in seen.values()), seen
    assert all(BUSY_TIMEOUT_S * 0.8 <= s < BUSY_TIMEOUT_S + 2 for _, s in seen.values()), seen
    assert read_kind == "ok"
    assert row is not None
    assert row.holder == HOLDER
    assert all(after), after
    assert check == "ok"
    model.dispose()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    need_root_tool("mount", "umount")
    with small_tmpfs(tmp_path / "fs", "1m") as mounted:
        yield mounted


def test_sqlite_disk_full(tmpfs: Path, report: Reporter) -> None:
    """The file system fills up: grants fail with an error, none is reported as taken."""
    path = tmpfs / "locks.db"
    model = joblocks.JobLockModel(f"sqlite:///{path}?timeout={BUSY_TIMEOUT_S}")
    held = [f"held-{i}" for i in range(5)]
    for key in held:
        assert model.acquire(key, 60_000, HOLDER)
    filler = tmpfs / "filler"
    fill(filler)
    results: dict[str, tuple[str, Any]] = {}
    for i in range(200):  # fresh keys, long ones: the WAL must grow
        key = f"full-{i}-{uuid.uuid4().hex}-" + "x" * 400
        results[key] = outcome(lambda key=key: model.acquire(key, 60_000, HOLDER))
    refreshed = [outcome(lambda key=key: model.refresh(key, 60_000, HOLDER)) for key in held]
    filler.unlink()  # the fault ends

    taken = [key for key, (kind, value) in results.items() if kind == "ok" and value is False]
    granted = [key for key, (kind, value) in results.items() if kind == "ok" and value is True]
    failed = [key for key, (kind, _) in results.items() if kind == "LockBackendError"]
    # Every True is a row; an error may or may not have left one (SQLite rolls back).
    rows_missing = sum(model.peek(key) is None for key in granted)
    ambiguous = sum(model.peek(key) is not None for key in failed)
    works = model.acquire(f"after-{uuid.uuid4().hex}", 60_000, HOLDER)
    check = integrity(path)
    report(
        "sqlite disk full",
        "sqlite",
        fs_size="1 MiB tmpfs",
        acquires_tried=len(results),
        errors=len(failed),
        reported_taken=len(taken),
        granted=len(granted),
        granted_rows_missing=rows_missing,
        failed_but_written=ambiguous,
        refreshes_failed=sum(kind != "ok" for kind, _ in refreshed),
        works_after=works,
        integrity=check,
    )
    assert failed, "the full disk caused no error"
    assert not taken, "a full disk was reported as 'taken'"
    assert rows_missing == 0
    assert all(kind == "LockBackendError" or value is True for kind, value in refreshed)
    assert works
    assert check == "ok"
    assert all(model.peek(key) is not None for key in held)
    model.dispose()


def test_sqlite_read_only(tmpfs: Path, report: Reporter) -> None:
    """The file system is remounted read-only: every operation is a backend error.

    Linux refuses a read-only remount while any file on it is open for writing
    ("mount point is busy"), so the model's connection is closed first; the model
    opens a new one, on the read-only file system, at its next call.
    """
    path = tmpfs / "locks.db"
    model = joblocks.JobLockModel(f"sqlite:///{path}?timeout={BUSY_TIMEOUT_S}")
    assert model.acquire("held", 60_000, HOLDER)
    model.dispose()
    remount(tmpfs, "ro")
    try:
        seen = {
            "acquire": outcome(lambda: model.acquire("free", 60_000, HOLDER)),
            "acquire (own key)": outcome(lambda: model.acquire("held", 60_000, HOLDER)),
            "refresh": outcome(lambda: model.refresh("held", 60_000, HOLDER)),
            "release": outcome(lambda: model.release("held", HOLDER)),
            "peek": outcome(lambda: model.peek("held")),
        }
        fresh = joblocks.JobLockModel(f"sqlite:///{path}")  # a process started meanwhile
        seen["acquire (new model)"] = outcome(lambda: fresh.acquire("free", 60_000, HOLDER))
        fresh.dispose()
    finally:
        model.dispose()
        remount(tmpfs, "rw")
    after = [model.acquire("free", 60_000, HOLDER), model.release("held", HOLDER)]
    check = integrity(path)
    report(
        "sqlite read-only",
        "sqlite",
        operations_tried=len(seen),
        errors=sum(kind == "LockBackendError" for kind, _ in seen.values()),
        reported_taken=sum(kind == "ok" and value is False for kind, value in seen.values()),
        works_after=all(after),
        integrity=check,
    )
    # A read may still succeed (a correct answer is not a fault); no write may.
    for name, (kind, value) in seen.items():
        if name == "peek" and kind == "ok":
            assert value is not None
            assert value.holder == HOLDER
        else:
            assert kind == "LockBackendError", (name, value)
    assert all(after), after
    assert check == "ok"
    model.dispose()
