"""Database restart: the server is SIGKILLed mid-run, with workers active, and restarted.

The throwaway servers of the test set-up run with their commits written to the OS
before they are acknowledged (PostgreSQL ``synchronous_commit=on``; MariaDB
``innodb_flush_log_at_trx_commit=2``), so a process crash loses no committed lease; an
OS crash or power loss is outside this scenario.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks

from ..support import servers as _servers
from ..support.pool import Pool
from . import _workers as workers
from ._support import Reporter, percentile

pytestmark = [pytest.mark.reliability, pytest.mark.server]

SURVIVORS = 5
BEFORE_S = 1.0  # workers run this long before the kill
DOWN_S = 0.5  # the server stays down at least this long
DOWN_MAX_S = 30.0  # and at most this long, waiting for the workers' calls to fail
AFTER_S = 1.5  # workers run this long after the restart
STARTED_S = 60.0  # how long the workers may take to start


def _waits_for_a_row_lock(observer: sa.Engine, backend: str) -> bool:
    """Whether a session of the server waits for a row lock (asked on a connection of
    ``observer``'s, outside any transaction: PostgreSQL keeps one snapshot of
    ``pg_stat_activity`` per transaction)."""
    if backend == "postgresql":
        query = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
    else:
        query = "SELECT count(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"
    with observer.connect() as conn:
        return bool(conn.execute(sa.text(query)).scalar())


def test_database_restart(
    request: pytest.FixtureRequest,
    pool: Pool,
    server_backend: str,
    table_name: str,
    report: Reporter,
) -> None:
    fixture = "pg_server" if server_backend == "postgresql" else "mariadb_server"
    server: _servers.Server = request.getfixturevalue(fixture)
    url = server.url
    parent = workers.make_model(url, table_name)
    prefix = f"restart-{uuid.uuid4().hex[:8]}"
    committed = {}
    for i in range(SURVIVORS):
        key = f"{prefix}-survivor-{i}"
        assert parent.acquire(key, 300_000, "survivor")
        committed[key] = parent.peek(key)

    # A call surely in flight at the kill: a refresh waiting for a row lock.
    blocked_key = f"{prefix}-blocked"
    assert parent.acquire(blocked_key, 300_000, "survivor")
    blocker = sa.create_engine(url).connect()
    blocker.execute(
        sa.select(parent.table.c.id).where(parent.table.c.id == blocked_key).with_for_update()
    )
    blocked: list[tuple[str, float]] = []

    def blocked_refresh() -> None:
        try:
            parent.refresh(blocked_key, 300_000, "survivor")
            blocked.append(("returned", time.monotonic()))
        except joblocks.LockBackendError:  # of any kind (a subclass)
            blocked.append(("LockBackendError", time.monotonic()))
        except Exception as exc:
            blocked.append((type(exc).__name__, time.monotonic()))

    pool.reset()
    calls = [(url, table_name, f"{prefix}-w{i}", 0.005) for i in range(pool.size)]
    running = pool.submit(workers.restart_worker, calls)
    waiter = threading.Thread(target=blocked_refresh)
    try:
        # Every worker holds its key and is in its loop (on a loaded machine spawned
        # processes may take seconds to get there): only then the run's clock starts.
        started_by = time.monotonic() + STARTED_S
        while pool.shared.inside.value < len(calls):
            if any(f.done() for f in running) or time.monotonic() > started_by:
                pool.collect(running, timeout=0)  # raises the worker's error
                pytest.fail(f"the workers did not all start within {STARTED_S} s")
            time.sleep(0.05)
        waiter.start()
        time.sleep(BEFORE_S)
        # The refresh is in flight only once the server shows it waiting for the row
        # lock (on a loaded machine the thread may not have sent it yet).
        waiting_by = time.monotonic() + STARTED_S
        observer = sa.create_engine(url, isolation_level="AUTOCOMMIT", pool_size=1)
        try:
            while not _waits_for_a_row_lock(observer, server_backend):
                assert not blocked, f"the blocked refresh did not wait for the row lock: {blocked}"
                if time.monotonic() > waiting_by:
                    pytest.fail(
                        f"the refresh was not seen waiting for the row lock in {STARTED_S} s"
                    )
                time.sleep(0.05)
        finally:
            observer.dispose()  # before the kill: no connection of its own left to break
        assert not blocked, "the blocked refresh did not wait for the row lock"
        killed_at = time.monotonic()
        server.kill()
        down_at = time.monotonic()
        errors_at_down = pool.shared.inside.value
        waiter.join(30)
        blocker.invalidate()
        blocker.close()
        outage_errors = 0

        def long_enough() -> bool:
            # DOWN_S, and (on a loaded machine calls are slow) until the workers' errors
            # include a call made while the server is down: each worker has at most one
            # call in flight at the kill, so one error more than there are workers.
            now = time.monotonic()
            if now < down_at + DOWN_S:
                return False
            errors = pool.shared.inside.value - errors_at_down
            return errors > len(calls) or now > down_at + DOWN_MAX_S

        while not long_enough():
            with pytest.raises(joblocks.LockBackendError):
                parent.peek(f"{prefix}-survivor-0")
            outage_errors += 1
            time.sleep(0.05)
        restart_at = time.monotonic()
        server.start()
        up_at = time.monotonic()
        time.sleep(AFTER_S)
    finally:
        pool.shared.stop.value = 1
        if not server.is_running():
            server.start()
    results: list[dict[str, Any]] = pool.collect(running)

    log = [entry for r in results for entry in r["log"]]
    others = [entry for entry in log if entry[3] not in ("ok", "LockBackendError")]
    in_flight = [e for e in log if e[0] < killed_at < e[1]]
    while_down = [e for e in log if e[0] >= down_at and e[1] <= restart_at]
    surfaced = [e for e in while_down if e[3] == "LockBackendError"]
    recovered = []
    for r in results:
        oks = [e for e in r["log"] if e[0] >= up_at and e[3] == "ok"]
        assert oks, "a worker never worked again after the restart"
        recovered.append(oks[0][1] - up_at)
    tokens_before = [e[4] for e in log if e[4] is not None and e[1] < killed_at]
    # A worker whose release of its own key failed (in flight at the kill or while the
    # server was down) still holds that key: its next acquire is a re-entrant one and
    # keeps the token it had. So may a worker whose acquire failed, if the grant was
    # committed before the answer was lost: that token was never seen, so it is only
    # checked to be nobody else's. Every other grant after the restart is a new one.
    kept: list[int] = []
    new_after: list[int] = []
    unseen: list[tuple[int, str]] = []
    for r in results:
        held: int | str | None = None  # the token held, "unknown", or None
        for began, _, op, outcome, token in r["log"]:
            if op == "acquire" and outcome == "ok":
                if began > up_at:
                    if held == "unknown":
                        unseen.append((token, r["holder"]))
                    elif token == held:
                        kept.append(token)
                    else:
                        new_after.append(token)
                held = token
            elif op == "acquire" and held is None:
                held = "unknown"
            elif op == "release" and outcome == "ok":
                held = None
    holders_of: dict[int, set[str]] = {}
    for r in results:
        for e in r["log"]:
            if e[4] is not None:
                holders_of.setdefault(e[4], set()).add(r["holder"])
    lost = sum(r["lost"] for r in results)
    survived = {key: parent.peek(key) for key in committed}  # the same model, reconnected
    lost += sum(
        1
        for key, row in committed.items()
        if survived[key] is None
        or (survived[key].holder, survived[key].fence, survived[key].expires_at)  # type: ignore[union-attr]
        != (row.holder, row.fence, row.expires_at)  # type: ignore[union-attr]
    )
    report(
        "database restart",
        server_backend,
        workers=pool.size,
        calls=len(log),
        calls_in_flight_at_kill=len(in_flight) + 1,
        in_flight_errors=sum(1 for e in in_flight if e[3] != "ok") + (blocked[0][0] != "returned"),
        blocked_call_outcome=blocked[0][0],
        blocked_call_error_after_kill_ms=round((blocked[0][1] - killed_at) * 1000, 1),
        calls_while_down=len(while_down) + outage_errors,
        error_while_down_ms_p50=round(percentile([(e[1] - e[0]) * 1000 for e in surfaced], 50), 1),
        error_while_down_ms_max=round(
            max(((e[1] - e[0]) * 1000 for e in surfaced), default=math.nan), 1
        ),
        errors_surfaced_pct=round(
            100 * (len(surfaced) + outage_errors) / (len(while_down) + outage_errors), 1
        ),
        other_exceptions=len(others),
        leases_lost=lost,
        refused_own_key=sum(r["false"] for r in results),
        down_ms=round((up_at - killed_at) * 1000),
        restart_ms=round((up_at - restart_at) * 1000),
        recover_after_up_ms_max=round(max(recovered) * 1000, 1),
        grants_after_up=len(new_after),
        reentrant_grants_after_up=len(kept) + len(unseen),
        tokens_repeated=sum(1 for t in new_after if t <= max(tokens_before)),
    )
    assert blocked
    assert blocked[0][0] == "LockBackendError", blocked
    assert not others, others[:3]
    assert while_down, "no worker call happened while the server was down"
    assert len(surfaced) == len(while_down)
    assert lost == 0
    assert sum(r["false"] for r in results) == 0
    assert tokens_before
    assert new_after
    assert min(new_after) > max(tokens_before), "a fencing token repeated after the crash"
    assert all(holders_of[token] == {holder} for token, holder in unseen), unseen
    parent.dispose()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server_backend" in metafunc.fixturenames:
        metafunc.parametrize("server_backend", ["postgresql", "mariadb"])
