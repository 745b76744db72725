"""Faults that must surface as backend errors, never as "taken" (DESIGN.md section 6)."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import time
import warnings
from pathlib import Path

import pytest

import joblocks
from joblocks._sync import keepalive as _keepalive

from ...support.servers import Server


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}")
    assert model.acquire("job", 1_000, "w1")
    with sqlite3.connect(tmp_path / "l.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    model.dispose()


def test_sqlite_busy_is_a_backend_error_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    model = joblocks.JobLockModel(f"sqlite:///{path}?timeout=0.3")
    model.create_table()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        started = time.monotonic()
        with pytest.raises(joblocks.LockBackendError, match="locked"):
            model.acquire("job", 1_000, "w1")
        assert 0.25 <= time.monotonic() - started < 3
        strict = joblocks.JobLockModel(f"sqlite:///{path}?timeout=0.1", errors_as_taken=False)
        with pytest.raises(joblocks.LockBackendError):
            strict.release("job", "w1")
        strict.dispose()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    # The fault ended: it works again, and the file is intact.
    assert model.acquire("job", 1_000, "w1")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    model.dispose()


def test_wrong_password_is_a_backend_error_with_the_password_masked(
    mariadb_server: Server,
) -> None:
    url = mariadb_server.url.replace("root@", "root:not-the-password@")
    model = joblocks.JobLockModel(url)
    with pytest.raises(joblocks.LockBackendError) as info:
        model.acquire("job", 1_000, "w1")
    assert "not-the-password" not in str(info.value)
    assert "Access denied" in str(info.value)
    model.dispose()


def test_errors_as_taken_covers_an_unreachable_server() -> None:
    model = joblocks.JobLockModel("postgresql://u:pw@127.0.0.1:1/db", errors_as_taken=True)
    assert model.acquire("job", 1_000, "w1") is False
    model.dispose()


def test_a_forked_child_renews_nothing_of_its_parent(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}")
    gc.collect()
    already = _keepalive.thread_renewer.count()
    held = model.try_lease("job", 5_000, keepalive=True)
    assert _keepalive.thread_renewer.count() == already + 1
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            state = [_keepalive.thread_renewer.count(), _keepalive.thread_renewer.running]
            os.write(write, json.dumps(state).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        count, running = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert (count, running) == (0, False)
    assert _keepalive.thread_renewer.count() == already + 1  # the parent still renews its own
    held.release()
    model.dispose()
