"""One time-out, the same on every database and face: ``timeout=`` (ms or timedelta).

Against a server that accepts connections and never answers (a socket on loopback),
the drivers of PostgreSQL and MariaDB must give up after the time-out with
``LockBackendError`` on both faces. The bounds below are hang guards, not speed
assertions: each call is given far longer than the time-out to fail.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

import joblocks
import joblocks.aio
from joblocks._db import engines as _engines

from ...support.silent import SilentServer

HANG_GUARD_S = 10.0


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


URLS = {
    "postgresql": "postgresql://u:secret@127.0.0.1:{port}/db",
    "mariadb": "mysql://u:secret@127.0.0.1:{port}/db",
}


def _fails_in_time(call: Any, guard: float = HANG_GUARD_S) -> BaseException:
    """Run ``call()`` in a thread; return what it raised, failing the test on a hang."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(guard)
    if worker.is_alive():
        pytest.fail(f"no answer within {guard} s: the time-out did not apply")
    assert outcome, "the call ended without an outcome"
    raised = outcome[0]
    assert raised is not None, "the call returned against a server that never answers"
    return raised


def _sync_peek(url: str, **options: Any) -> None:
    model = joblocks.JobLockModel(url, **options)
    try:
        model.peek("k")
    finally:
        model.dispose()


def _aio_peek(url: str, **options: Any) -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(url, **options)
        try:
            await model.peek("k")
        finally:
            await asyncio.wait_for(model.dispose(), HANG_GUARD_S)

    asyncio.run(main())


@pytest.mark.parametrize("timeout", [1000, timedelta(seconds=1)], ids=["ms", "timedelta"])
@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_a_silent_server_fails_after_the_timeout(
    silent: SilentServer, database: str, face: str, timeout: Any
) -> None:
    url = URLS[database].format(port=silent.port)
    peek = _sync_peek if face == "sync" else _aio_peek
    raised = _fails_in_time(lambda: peek(url, timeout=timeout))
    assert isinstance(raised, joblocks.LockBackendError), repr(raised)
    assert "secret" not in str(raised)


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_configure_timeout_applies_to_the_configured_models(
    silent: SilentServer, database: str, face: str
) -> None:
    url = URLS[database].format(port=silent.port)
    if face == "sync":
        joblocks.configure(url, timeout=1000)

        def call() -> None:
            joblocks.run_with_lock("k", 60_000, lambda: None)

    else:
        joblocks.aio.configure(url, timeout=1000)

        async def work() -> None:
            return None

        async def main() -> None:
            try:
                await joblocks.aio.run_with_lock("k", 60_000, work)
            finally:
                await joblocks.aio.get_model().dispose()

        def call() -> None:
            asyncio.run(main())

    try:
        raised = _fails_in_time(call)
    finally:
        joblocks.configure()
        joblocks.aio.configure()
    assert isinstance(raised, joblocks.LockBackendError), repr(raised)


@pytest.mark.parametrize("face", ["sync", "aio"])
def test_sqlite_waits_for_another_writer_up_to_the_timeout(tmp_path: Path, face: str) -> None:
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    joblocks.JobLockModel(url).create_table()
    blocker = sqlite3.connect(tmp_path / "locks.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        if face == "sync":

            def call() -> None:
                model = joblocks.JobLockModel(url, timeout=300)
                try:
                    model.acquire("k", 60_000, "w1")
                finally:
                    model.dispose()

        else:

            async def main() -> None:
                model = joblocks.aio.JobLockModel(url, timeout=300)
                try:
                    await model.acquire("k", 60_000, "w1")
                finally:
                    await model.dispose()

            def call() -> None:
                asyncio.run(main())

        raised = _fails_in_time(call)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert isinstance(raised, joblocks.LockBackendError), repr(raised)
    assert "locked" in str(raised)


@pytest.mark.parametrize(
    ("value", "error", "says"),
    [
        (0, ValueError, "timeout must be positive"),
        (-5, ValueError, "timeout must be positive"),
        (float("nan"), ValueError, "timeout must be a finite duration"),
        ("5s", TypeError, "timeout must be milliseconds"),
        (True, TypeError, "timeout must be milliseconds"),
    ],
)
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_bad_timeouts_are_refused(
    tmp_path: Path, face: str, value: Any, error: type[Exception], says: str
) -> None:
    cls = joblocks.JobLockModel if face == "sync" else joblocks.aio.JobLockModel
    with pytest.raises(error, match=says):
        cls(f"sqlite:///{tmp_path / 'l.db'}", timeout=value)


def test_timeout_is_refused_with_an_engine_of_your_own(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        with pytest.raises(ValueError, match="timeout applies to the engines joblocks makes"):
            joblocks.JobLockModel(engine, timeout=1000)
    finally:
        engine.dispose()


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_the_default_timeout_is_the_same_on_every_database(
    silent: SilentServer, database: str, face: str
) -> None:
    """With nothing set, the default (5 s) applies; before, MariaDB waited 15 s more."""
    assert _engines.TIMEOUT_MS == 5_000
    url = URLS[database].format(port=silent.port)
    peek = _sync_peek if face == "sync" else _aio_peek
    raised = _fails_in_time(lambda: peek(url), guard=_engines.TIMEOUT_MS / 1000 + HANG_GUARD_S)
    assert isinstance(raised, joblocks.LockBackendError), repr(raised)
