"""A stalled connection: a relay between the holder and the server stops forwarding
but keeps the sockets open (a hung pooler or load balancer).

The holder reaches the server through a relay process (``tests/support/relay.py``);
the second holder and every check connect to the server directly. What must hold:

- a keep-alive lease whose relay stalls is reported lost (``on_lost``, ``lost``,
  ``ensure_held()`` raising) by its own deadline, before a second holder gets the key,
  although its renewal call never returns by itself (both faces);
- ``joblocks run`` through a stalled relay stops its command (exit 75) before a second
  ``joblocks run`` straight to the server starts its own;
- an acquire whose reply does not come fails with ``LockTimeoutError`` saying that its
  outcome is unknown, within the model's ``timeout`` (both faces), and the model works
  again once the relay does;
- a renewal failing again and again is logged once, then counted, then once on
  recovery.

Orderings are asserted from events (who recorded first), never from durations.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks

from ..support.faces import eventually
from ..support.relay import Relay
from ..support.servers import Server
from ._support import Reporter

pytestmark = [pytest.mark.reliability, pytest.mark.server]

#: Hang guard of every wait of these tests (seconds): far longer than any outcome needs.
GUARD_S = 60.0
TTL_MS = 6_000
SERVERS = {"postgresql": "pg_server", "mariadb": "mariadb_server"}


@pytest.fixture(params=sorted(SERVERS))
def database(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(request: pytest.FixtureRequest, database: str) -> Server:
    found: Server = request.getfixturevalue(SERVERS[database])
    return found


@pytest.fixture
def relay(server: Server) -> Iterator[Relay]:
    relay = Relay(server.port)
    try:
        yield relay
    finally:
        relay.close()


def through(server: Server, relay: Relay) -> str:
    """The server's URL, through the relay."""
    return sa.make_url(server.url).set(port=relay.port).render_as_string(hide_password=False)


class Timeline:
    """Events in the order they were recorded (``(name, monotonic time)``)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float]] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def record(self, name: str) -> None:
        with self.changed:
            self.events.append((name, time.monotonic()))
            self.changed.notify_all()

    def wait_for(self, name: str, timeout: float = GUARD_S) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: self.at(name) is not None, timeout):
                pytest.fail(f"no {name!r} within {timeout} s; events: {self.events}")
        found = self.at(name)
        assert found is not None
        return found

    def at(self, name: str) -> float | None:
        return next((t for n, t in self.events if n == name), None)

    def names(self) -> list[str]:
        with self.lock:
            return [n for n, _ in self.events]


def take_when_free(url: str, table_name: str, key: str, timeline: Timeline) -> threading.Thread:
    """A second holder, connected directly, taking ``key`` as soon as it can."""

    def run() -> None:
        model = joblocks.JobLockModel(url, table_name=table_name)
        try:
            deadline = time.monotonic() + GUARD_S
            while time.monotonic() < deadline:
                if model.acquire(key, 60_000, "second-holder"):
                    timeline.record("second holder got the key")
                    return
                time.sleep(0.02)
        finally:
            model.dispose()

    thread = threading.Thread(target=run, name="second-holder", daemon=True)
    thread.start()
    return thread


def test_a_stalled_keepalive_lease_is_lost_by_its_deadline(
    database: str,
    server: Server,
    relay: Relay,
    face: str,
    make_face_model: Any,
    table_name: str,
    report: Reporter,
) -> None:
    holder = make_face_model(through(server, relay))
    key = f"stall-{uuid.uuid4().hex[:8]}"
    timeline = Timeline()
    seen: dict[str, Any] = {}

    def on_lost(lease: Any) -> None:
        seen["lost flag"] = lease.lost
        timeline.record("lost")

    lease = holder.try_lease(key, TTL_MS, keepalive=True, on_lost=on_lost)
    assert not lease.lost
    relay.stall()
    stalled = time.monotonic()
    second = take_when_free(server.url, table_name, key, timeline)
    lost_at = timeline.wait_for("lost")
    taken_at = timeline.wait_for("second holder got the key")
    second.join(GUARD_S)
    assert timeline.names() == ["lost", "second holder got the key"]
    assert seen["lost flag"] is True
    with pytest.raises(joblocks.LeaseLost):
        lease.ensure_held()  # known lost: no call, no wait on the stalled relay
    relay.resume()  # a renewal retry may be connecting through it: let it end
    report(
        "stalled relay, keep-alive lease",
        f"{database} {face}",
        ttl_s=TTL_MS / 1000,
        lost_after_stall_s=round(lost_at - stalled, 2),
        second_holder_after_stall_s=round(taken_at - stalled, 2),
        lost_before_second_s=round(taken_at - lost_at, 2),
    )


_COMMAND = """
import os, signal, sys, time
mine, other = sys.argv[1], sys.argv[2]
def note(path, text):  # whole or not at all: a reader never sees half of it
    open(path + ".tmp", "w").write(text)
    os.replace(path + ".tmp", path)
def stop(signum, frame):
    note(mine + ".stopped", "stopped")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
# What this run saw of the other one when it started: "running" means an overlap.
state = "none"
if os.path.exists(other + ".started"):
    state = "stopped" if os.path.exists(other + ".stopped") else "running"
note(mine + ".started", state)
time.sleep(120)
"""


def _run(url: str, table: str, tmp_path: Path, key: str, mine: str, other: str) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    argv = [
        sys.executable,
        "-m",
        "joblocks",
        "--url",
        url,
        "--table",
        table,
        "run",
        key,
        "--ttl",
        f"{TTL_MS // 1000}s",
        "--wait",
        "60s",
        "--",
        sys.executable,
        "-c",
        _COMMAND,
        str(tmp_path / mine),
        str(tmp_path / other),
    ]
    return subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _end(proc: subprocess.Popen[str]) -> None:
    """Stop a ``joblocks run`` still running (SIGTERM: passed on to its command), or
    its whole process group when it does not end."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=GUARD_S)


def _wait_file(path: Path, timeout: float = GUARD_S) -> float:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear within {timeout} s")
        time.sleep(0.02)
    return time.monotonic()


def test_joblocks_run_stops_its_command_when_the_relay_stalls(
    database: str,
    server: Server,
    relay: Relay,
    table_name: str,
    tmp_path: Path,
    report: Reporter,
) -> None:
    key = f"run-{uuid.uuid4().hex[:8]}"
    joblocks.JobLockModel(server.url, table_name=table_name).create_table()
    first = _run(through(server, relay), table_name, tmp_path, key, "first", "second")
    second = None
    try:
        _wait_file(tmp_path / "first.started")
        relay.stall()
        stalled = time.monotonic()
        second = _run(server.url, table_name, tmp_path, key, "second", "first")
        second_started = _wait_file(tmp_path / "second.started")
        first_stopped = _wait_file(tmp_path / "first.stopped")
        saw = (tmp_path / "second.started").read_text()
        first_out = first.communicate(timeout=GUARD_S)
    finally:
        relay.resume()
        for proc in (first, second):
            if proc is not None:
                _end(proc)
    report(
        "stalled relay, joblocks run",
        database,
        ttl_s=TTL_MS / 1000,
        first_stopped_after_stall_s=round(first_stopped - stalled, 2),
        second_started_after_stall_s=round(second_started - stalled, 2),
    )
    # The second run found the first's command stopped already, never running.
    assert saw == "stopped", first_out
    assert first.returncode == 75, first_out
    assert "lost the lock" in first_out[1]


@pytest.mark.parametrize("where", ["acquire", "connect"])
def test_a_stalled_acquire_fails_within_the_timeout(
    database: str,
    server: Server,
    relay: Relay,
    face: str,
    make_face_model: Any,
    table_name: str,
    where: str,
    report: Reporter,
) -> None:
    model = make_face_model(through(server, relay), timeout=2_000)
    key = f"acq-{uuid.uuid4().hex[:8]}"
    if where == "acquire":
        assert model.peek(key) is None  # a connection is open: the stall hits the call
    else:
        model.dispose()  # no connection: the stall hits the connect
    relay.stall()
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["result"] = model.acquire(key, 60_000, "stalled-holder")
        except BaseException as exc:
            outcome["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(GUARD_S)
    took = time.monotonic() - started
    assert not worker.is_alive(), "the acquire did not end: its timeout did not apply"
    error = outcome.get("error")
    assert isinstance(error, joblocks.LockTimeoutError), repr(outcome)
    if where == "acquire":
        assert "outcome is unknown" in str(error)
        assert "may have committed" in str(error)
    relay.resume()
    # The abandoned connection was discarded: the model works again, and the same
    # holder's retry is idempotent whatever the stalled call did.
    assert model.acquire(key, 60_000, "stalled-holder")
    assert model.peek(key).holder == "stalled-holder"
    report(
        "stalled relay, acquire",
        f"{database} {face} {where}",
        timeout_s=2.0,
        error=type(error).__name__,
        seconds=round(took, 2),
    )


def test_renewal_failures_are_logged_once_then_counted(
    server: Server,
    relay: Relay,
    make_face_model: Any,
    table_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder = make_face_model(through(server, relay))
    key = f"log-{uuid.uuid4().hex[:8]}"
    failures = threading.Semaphore(0)
    renewed = threading.Event()

    def listen(event: joblocks.Event) -> None:
        if event.key != key:
            return
        if event.kind == "error":
            failures.release()
        elif event.kind == "renewed":
            renewed.set()

    joblocks.add_listener(listen)
    try:
        with caplog.at_level(logging.WARNING, logger="joblocks"):
            lease = holder.try_lease(key, 20_000, keepalive=True, renew_every=100)
            relay.refuse()  # every renewal now fails at once (the connection is closed)
            for _ in range(25):
                assert failures.acquire(timeout=GUARD_S), "renewals stopped being tried"
            renewed.clear()
            relay.resume()
            assert renewed.wait(GUARD_S), "the renewal did not work again"
            assert not lease.lost
            lease.release()
    finally:
        joblocks.remove_listener(listen)
    lines = [r.getMessage() for r in caplog.records if key in r.getMessage()]
    first = [line for line in lines if line.startswith(f"joblocks: renewing {key!r} failed:")]
    counted = [line for line in lines if "still failing" in line]
    again = [line for line in lines if "works again" in line]
    assert len(first) == 1, lines
    assert 1 <= len(counted) <= 3, lines  # 25 or more failures: a count every 10
    assert len(again) == 1, lines


def test_a_renewal_abandoned_at_the_timeout_goes_on_over_a_fresh_kept_connection(
    database: str, server: Server, relay: Relay, face: str, make_face_model: Any, table_name: str
) -> None:
    """A renewal whose reply does not come is abandoned at the model's ``timeout``
    (shorter than the ttl) and the connection the model kept for the renewals is
    discarded; once the relay forwards again, the renewals go on over a fresh kept
    connection and the lease is held past several ttls (both faces)."""
    holder = make_face_model(through(server, relay), timeout=1_000)
    key = f"rekeep-{uuid.uuid4().hex[:8]}"
    lost: list[Any] = []
    lease = holder.try_lease(key, TTL_MS, keepalive=True, renew_every=500, on_lost=lost.append)

    def kept() -> Any:
        return holder.model._keeper

    assert eventually(lambda: kept() is not None, GUARD_S)
    first = kept()
    relay.stall()
    assert eventually(lambda: kept() is not first, GUARD_S), "the stalled connection was kept"
    relay.resume()
    assert eventually(lambda: kept() is not None and kept() is not first, GUARD_S)
    second = kept()
    # Held past the ttl counted from the stall: renewals landed over the fresh connection.
    until = time.monotonic() + TTL_MS / 1000 + 2.0
    while time.monotonic() < until:
        assert not lease.lost, lease.lost_reason
        time.sleep(0.1)
    assert not lost
    assert kept() is second
    lease.ensure_held()
    assert lease.release()


@pytest.mark.parametrize("database", ["mariadb"])  # PyMySQL's read_timeout
def test_a_drivers_own_read_timeout_is_an_unknown_outcome(
    server: Server, relay: Relay, table_name: str
) -> None:
    """PyMySQL gives up on a reply by its own ``read_timeout`` (here a URL's, shorter
    than the model's ``timeout``): the statement may have reached the server, so the
    error says that its outcome is unknown, as when joblocks's deadline abandons it."""
    url = through(server, relay) + "?read_timeout=1"
    model = joblocks.JobLockModel(url, table_name=table_name, timeout=30_000)
    try:
        key = f"rt-{uuid.uuid4().hex[:8]}"
        assert model.peek(key) is None
        relay.stall()
        with pytest.raises(joblocks.LockTimeoutError) as caught:
            model.acquire(key, 60_000, "stalled-holder")
        assert "outcome is unknown" in str(caught.value)
        assert "may have committed" in str(caught.value)
        relay.resume()
        assert model.acquire(key, 60_000, "stalled-holder")
        assert model.peek(key).holder == "stalled-holder"
    finally:
        model.dispose()
