"""SQLite through a caller's engine, and a SQLite file deleted under a held lease."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event

import joblocks

from ...support.faces import run_on

TTL = 30_000


def journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def user_model(face: str, make_face_model: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A model of the test's face on a caller's own engine (``create_engine`` or
    ``create_async_engine``), made with ``connect_args``; the engine is the caller's to
    dispose of, and is disposed after the test."""
    made: list[tuple[Any, Any]] = []

    def make(
        path: Path, *, connect_args: dict[str, Any] | None = None, **options: Any
    ) -> tuple[Any, Any]:
        args = connect_args or {}
        if face == "sync":
            engine: Any = create_engine(f"sqlite:///{path}", connect_args=args)
        else:
            from sqlalchemy.ext.asyncio import create_async_engine

            engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args=args)
        if options.pop("truncate_journal", False):
            _truncate_journal(engine)
        model = make_face_model(engine, **options)
        made.append((engine, model))
        return model, engine

    yield make
    for engine, model in made:
        if face == "sync":
            engine.dispose()
        else:
            run_on(model.loop, engine.dispose())


def _truncate_journal(engine: Any) -> None:
    """A caller's deliberate journal mode, set on every connection."""

    @event.listens_for(getattr(engine, "sync_engine", engine), "connect")
    def deliberate(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode = TRUNCATE")
        cursor.close()


def test_a_readers_open_transaction_does_not_block_lock_writes(
    user_model: Callable[..., Any],
    tmp_path: Path,
    table_name: str,
    key: str,
) -> None:
    path = tmp_path / "fresh.db"
    # A short busy timeout: without WAL the write below would fail after it.
    model, _ = user_model(path, connect_args={"timeout": 1})
    assert model.acquire(key, TTL, "w1") is True  # first use: table, and the file to WAL
    assert journal_mode(path) == "wal"
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute(f"SELECT count(*) FROM {table_name}").fetchone() == (1,)
        # The caller's read transaction stays open while joblocks writes.
        assert model.acquire(f"{key}-2", TTL, "w1") is True
        assert model.refresh(key, TTL, "w1") is True
        assert model.release(key, "w1") is True
        assert reader.execute(f"SELECT count(*) FROM {table_name}").fetchone() == (1,)
    finally:
        reader.close()


def test_the_switch_happens_without_create_table(
    user_model: Callable[..., Any],
    tmp_path: Path,
    key: str,
) -> None:
    path = tmp_path / "made.db"
    joblocks.JobLockModel(f"sqlite:///{path}", table_name="job_locks").create_table()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # as a file made elsewhere may be
    conn.close()
    model, _ = user_model(path, table_name="job_locks", create_table=False)
    assert model.acquire(key, TTL, "w1") is True
    assert journal_mode(path) == "wal"


@pytest.mark.parametrize(
    ("setting", "warning"),
    [
        ("journal_mode=TRUNCATE", "is not in WAL mode (it is in journal mode 'truncate')"),
        ("timeout=0", "has no busy timeout"),
    ],
)
def test_settings_joblocks_leaves_are_warned_about(
    user_model: Callable[..., Any],
    tmp_path: Path,
    key: str,
    caplog: pytest.LogCaptureFixture,
    setting: str,
    warning: str,
) -> None:
    path = tmp_path / "own.db"
    if setting == "timeout=0":
        model, _ = user_model(path, connect_args={"timeout": 0})
    else:
        model, _ = user_model(path, truncate_journal=True)
    with caplog.at_level(logging.WARNING, logger="joblocks"):
        assert model.acquire(key, TTL, "w1") is True
        assert model.acquire(key, TTL, "w1") is True  # warned once, at first use
    messages = [r.getMessage() for r in caplog.records if r.name == "joblocks"]
    assert len([m for m in messages if warning in m]) == 1, messages
    if setting == "journal_mode=TRUNCATE":
        assert journal_mode(path) != "wal"  # a deliberate mode is left alone


def test_engines_joblocks_makes_are_not_warned_about(
    make_face_model: Callable[..., Any], tmp_path: Path, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = make_face_model(f"sqlite:///{tmp_path}/locks.db")
    with caplog.at_level(logging.WARNING, logger="joblocks"):
        assert model.acquire(key, TTL, "w1") is True
    assert [r for r in caplog.records if r.name == "joblocks"] == []


# -- the file deleted while a keep-alive lease holds ---------------------------------------


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_keepalive_lease_notices_its_sqlite_file_is_gone(
    make_face_model: Callable[..., Any], tmp_path: Path, table_name: str, key: str, how: str
) -> None:
    url = f"sqlite:///{tmp_path}/locks.db"
    model = make_face_model(url)
    lost = threading.Event()
    held = model.lease(key, 5_000, keepalive=True, renew_every=100, on_lost=lambda _: lost.set())
    assert held.token == 1
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"locks.db{suffix}").unlink(missing_ok=True)
    if how == "replaced":
        # A new process finds no file, makes a new one, and takes the key (token 1 again).
        other = joblocks.JobLockModel(url, table_name=table_name)
        try:
            assert other.acquire_token(key, TTL, "intruder") == 1
        finally:
            other.dispose()
    assert lost.wait(timeout=30)
    assert held.lost
    assert f"the SQLite file {tmp_path / 'locks.db'} was {how}" in held.lost_reason
    # Found by the file check, not by the lease running out (5 s, renewed every 0.1 s).
    assert "ran out" not in held.lost_reason
    with pytest.raises(joblocks.LeaseLost):
        held.ensure_held()
    held.release()
