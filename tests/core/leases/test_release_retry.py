"""A release that failed (the database unreachable) can be sent again, and
``run_with_lock`` sends it again by itself, briefly, before giving up.

The failures are real: a PostgreSQL or MariaDB server of this module's own (the shared
ones serve other tests meanwhile) is killed and started again on the same port and data
directory, and a SQLite file is locked by
another connection's exclusive transaction (the release waits out the model's busy
time-out, then fails). Both faces.

While the server is down, the test holds its port (a socket listening on it, never
accepting): on a machine where other test runs start servers on free ports, the killed
server's port may otherwise be taken by another PostgreSQL or MariaDB (same user, same
database name, no password), which would answer in its place. Every check that the
server is this module's own (its data directory) makes such a mix-up a precise failure.
"""

from __future__ import annotations

import os
import socket
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
_DATA_DIR = {"postgresql": "SHOW data_directory", "mariadb": "SELECT @@datadir"}


def _answers_as(server: Server, backend: str) -> Path:
    """The data directory of the server answering on ``server``'s port."""
    engine = sa.create_engine(server.url, connect_args=_CONNECT_TIMEOUT[backend])
    try:
        with engine.connect() as conn:
            return Path(str(conn.exec_driver_sql(_DATA_DIR[backend]).scalar())).resolve()
    finally:
        engine.dispose()


def _check_own(server: Server, backend: str) -> None:
    """The premise of every test here: the server on the port is this module's own."""
    answering = _answers_as(server, backend)
    assert answering == server.data_dir.resolve(), (
        f"another server answers on port {server.port}: {answering}"
    )


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
        self.port_guard: _PortGuard | None = None
        if self.server is not None:
            _check_own(self.server, backend)

    def break_(self) -> None:
        if self.server is not None:
            pgid = self.server.pid
            assert pgid is not None
            self.server.kill()
            # No process of the killed server is left (no backend to answer a
            # connection the model keeps).
            with pytest.raises(ProcessLookupError):
                os.killpg(pgid, 0)
            # Its port is held until restore(): no other server can listen on it.
            self.port_guard = _PortGuard(self.server.port)
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
            if self.port_guard is not None:
                self.port_guard.close()
                self.port_guard = None
            self.server.start()
            _check_own(self.server, self.backend)
        elif self.blocker is not None:
            self.blocker.execute("ROLLBACK")
            self.blocker.close()
            self.blocker = None


class _PortGuard:
    """Holds loopback ``port`` while the server is down: listening on it, it closes
    every connection at once (the client sees the server gone, as with no listener),
    and no other process can listen on the port while it is open."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # As the servers do: the killed server's connections may be in TIME_WAIT.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", port))
            self.sock.listen(16)
            self.sock.settimeout(0.05)
        except BaseException:
            self.sock.close()
            raise
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._refuse, daemon=True)
        self.thread.start()

    def _refuse(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the time-out: look at ``done`` again
                continue
            conn.close()

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=30)
        self.sock.close()


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
