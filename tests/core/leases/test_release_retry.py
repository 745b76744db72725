"""A release that failed (the database unreachable) can be sent again, and
``run_with_lock`` sends it again by itself, briefly, before giving up.

The failures are real: a PostgreSQL or MariaDB server of this module's own (the shared
ones serve other tests meanwhile) is killed and started again on the same port and data
directory, and a SQLite file is locked by
another connection's exclusive transaction (the release waits out the model's busy
time-out, then fails). Both faces.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import sqlalchemy as sa

import joblocks
from joblocks._core import lifecycle as _lifecycle

from ...support.matrix import own_server
from ...support.servers import Server

pytestmark = pytest.mark.server

_CONNECT_TIMEOUT: dict[str, dict[str, Any]] = {
    "postgresql": {"connect_timeout": 2},
    "mariadb": {"connect_timeout": 2},
}


class Outage:
    """Make the database fail, then bring it back (``break_`` / ``restore``)."""

    def __init__(self, request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> None:
        self.backend = backend
        self.server: Server | None = None
        self.blocker: sqlite3.Connection | None = None
        if backend == "sqlite":
            self.url = f"sqlite:///{tmp_path / 'locks.db'}"
        else:
            fixture = "own_pg_server" if backend == "postgresql" else "own_mariadb_server"
            self.server = request.getfixturevalue(fixture)
            self.url = self.server.url
        self.down = False

    def break_(self) -> None:
        if self.server is not None:
            self.server.kill()
            # The premise of every test here: the server no longer answers.
            probe = sa.create_engine(self.url, connect_args=_CONNECT_TIMEOUT[self.backend])
            try:
                with pytest.raises(sa.exc.OperationalError):
                    probe.connect().close()
            finally:
                probe.dispose()
        else:
            path = self.url.removeprefix("sqlite:///")
            self.blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.blocker.execute("BEGIN EXCLUSIVE")
        self.down = True

    def restore(self) -> None:
        if not self.down:
            return
        self.down = False
        if self.server is not None:
            self.server.start()
        elif self.blocker is not None:
            self.blocker.execute("ROLLBACK")
            self.blocker.close()
            self.blocker = None


@pytest.fixture(scope="module")
def own_pg_server() -> Iterator[Server]:
    with own_server("postgresql") as server:
        yield server


@pytest.fixture(scope="module")
def own_mariadb_server() -> Iterator[Server]:
    with own_server("mariadb") as server:
        yield server


@pytest.fixture(params=("sqlite", "postgresql", "mariadb"))
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Outage]:
    made = Outage(request, request.param, tmp_path)
    try:
        yield made
    finally:
        made.restore()


def _model(make_face_model: Callable[..., Any], outage: Outage) -> Any:
    # A short time-out: each failed try of the release ends within about a second.
    return make_face_model(outage.url, timeout=1000)


def test_a_release_that_raised_can_be_sent_again(
    make_face_model: Callable[..., Any], outage: Outage, key: str
) -> None:
    model = _model(make_face_model, outage)
    lease = model.try_lease(key, 120_000)
    assert lease is not None
    outage.break_()
    with pytest.raises(joblocks.LockBackendError):
        lease.release()
    assert not lease.released  # nothing is known to be let go
    outage.restore()
    assert lease.release() is True  # sent again, with the same token check
    assert lease.released
    assert model.peek(key) is None  # the key is free now, not at the end of the ttl
    assert model.try_lease(key, 1000) is not None


def test_a_retried_release_keeps_the_token_check(
    make_face_model: Callable[..., Any], outage: Outage, key: str
) -> None:
    model = _model(make_face_model, outage)
    lease = model.try_lease(key, 120_000)
    assert lease is not None
    outage.break_()
    with pytest.raises(joblocks.LockBackendError):
        lease.release()
    outage.restore()
    # Meanwhile the row became another grant (forced release, then someone else).
    assert model.delete(key)
    assert model.acquire(key, 120_000, "someone-else")
    assert lease.release() is False
    row = model.peek(key)
    assert row is not None
    assert row.holder == "someone-else"


def test_run_with_lock_sends_a_failed_release_again(
    make_face_model: Callable[..., Any], outage: Outage, key: str
) -> None:
    model = _model(make_face_model, outage)
    failures: list[joblocks.Event] = []

    def listener(event: joblocks.Event) -> None:
        # The first try of the release failed: the database comes back before the next.
        if event.kind == "error" and event.key == key and outage.down:
            failures.append(event)
            outage.restore()

    joblocks.add_listener(listener)
    try:
        assert model.run_with_lock(key, 120_000, outage.break_) is True
    finally:
        joblocks.remove_listener(listener)
        outage.restore()
    assert len(failures) == 1, failures
    assert model.peek(key) is None  # released by the second try


def test_run_with_lock_gives_up_after_a_few_tries(
    make_face_model: Callable[..., Any], outage: Outage, key: str, caplog: Any
) -> None:
    model = _model(make_face_model, outage)
    errors: list[joblocks.Event] = []
    lock = threading.Lock()

    def listener(event: joblocks.Event) -> None:
        if event.kind == "error" and event.key == key:
            with lock:
                errors.append(event)

    joblocks.add_listener(listener)
    try:
        with caplog.at_level("WARNING", logger="joblocks"):
            assert model.run_with_lock(key, 120_000, outage.break_) is True
    finally:
        joblocks.remove_listener(listener)
        outage.restore()
    assert len(errors) == _lifecycle.RELEASE_ATTEMPTS
    assert "it expires on its own" in caplog.text
    row = model.peek(key)
    assert row is not None  # left to its ttl, as the log says
    assert not row.expired
