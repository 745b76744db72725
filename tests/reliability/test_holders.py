"""A holder killed (SIGKILL) and a holder paused past its ttl (SIGSTOP … SIGCONT)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks

from ..support.pool import SPAWN, Pool
from . import _workers as workers
from ._support import Reporter

pytestmark = pytest.mark.reliability

KILL_TTLS_MS = {False: [1_000], True: [500, 1_000, 3_000]}
RETRY_INTERVAL_S = 0.05
WAITERS = 3
MARGIN_MS = 150  # scheduling on a busy 2-core machine

PAUSE_TTL_MS = 800
RENEW_EVERY_MS = 200


def epoch_ms(row: joblocks.JobLock) -> tuple[int, int]:
    return round(row.acquired_at.timestamp() * 1000), round(row.expires_at.timestamp() * 1000)


@contextlib.contextmanager
def reaped(process: Any) -> Iterator[Any]:
    """A started process that is surely gone (SIGKILL) when the block exits."""
    try:
        yield process
    finally:
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
                os.kill(process.pid, signal.SIGKILL)
        process.join(10)


def test_holder_killed(
    pool: Pool,
    backend: str,
    db_url: str,
    table_name: str,
    long_run: bool,
    report: Reporter,
) -> None:
    """SIGKILL the holder mid-job: a waiting worker gets the lock within ttl + one retry."""
    model = workers.make_model(db_url, table_name)
    for ttl_ms in KILL_TTLS_MS[long_run]:
        key = f"killed-{uuid.uuid4().hex[:8]}"
        receive, send = SPAWN.Pipe(duplex=False)
        holder = SPAWN.Process(
            target=workers.hold_and_block, args=(db_url, table_name, key, ttl_ms, send)
        )
        holder.start()
        with reaped(holder):
            send.close()
            assert receive.poll(60), "the holder never reported"
            pid, holder_id, token, _ = receive.recv()
            receive.close()
            row = model.peek(key)
            assert row is not None
            assert (row.holder, row.fence) == (holder_id, token)
            _, expires_ms = epoch_ms(row)

            pool.reset()
            give_up_s = ttl_ms / 1000 + 5
            calls = [(db_url, table_name, key, 60_000, RETRY_INTERVAL_S, give_up_s)] * WAITERS
            waiting = pool.submit(workers.poll_acquire, calls)
            time.sleep(0.1)  # the waiters are refused meanwhile
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            holder.join(10)
            assert holder.exitcode == -signal.SIGKILL
            results = pool.collect(waiting)

        winners = [r for r in results if r["token"] is not None]
        assert len(winners) == 1, f"{len(winners)} of {WAITERS} waiters got the lock"
        winner = winners[0]
        reclaim_ms = (winner["got_at"] - killed_at) * 1000
        after_expiry_ms = winner["acquired_ms"] - expires_ms
        report(
            "holder killed",
            backend,
            ttl_ms=ttl_ms,
            retry_interval_ms=RETRY_INTERVAL_S * 1000,
            reclaim_latency_ms=round(reclaim_ms, 1),
            taken_after_expiry_ms=after_expiry_ms,
            waiters=WAITERS,
            waiter_attempts=sum(r["attempts"] for r in results),
        )
        assert winner["token"] > token
        assert all(r["attempts"] > 1 for r in results), "a waiter was never refused"
        # Taken only once the dead holder's lease expired, by the database's clock ...
        assert after_expiry_ms >= 0
        # ... and within one retry interval of that; from the kill: within ttl + one retry.
        assert after_expiry_ms <= RETRY_INTERVAL_S * 1000 + MARGIN_MS
        assert reclaim_ms <= ttl_ms + RETRY_INTERVAL_S * 1000 + MARGIN_MS
    model.dispose()


def _write_lock_free(db_url: str) -> bool:
    """SQLite: whether no connection holds the write lock right now."""
    path = sa.make_url(db_url).database
    assert path is not None
    probe = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def _stop(pid: int, backend: str, db_url: str) -> float:
    """SIGSTOP ``pid``; on SQLite never while it holds the file's write lock (a stopped
    writer would block every other process: the scenario is a paused holder, not a
    stuck database)."""
    for _ in range(20):
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        if backend != "sqlite" or _write_lock_free(db_url):
            return stopped_at
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.03)
    pytest.fail("could not stop the holder outside a write")


def test_holder_paused_past_ttl(
    backend: str, db_url: str, table_name: str, app_table: str, report: Reporter
) -> None:
    """SIGSTOP a keep-alive holder past its ttl; a second holder takes over; SIGCONT.

    The second holder starts only after the first lease expired; the first one's
    keep-alive reports the loss, its fenced write changes nothing and its release
    deletes nothing.
    """
    key = f"paused-{uuid.uuid4().hex[:8]}"
    model = workers.make_model(db_url, table_name)
    engine = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
    app = workers.app_table(app_table)
    parent, child = SPAWN.Pipe()
    first = SPAWN.Process(
        target=workers.paused_holder,
        args=(db_url, table_name, app_table, key, PAUSE_TTL_MS, RENEW_EVERY_MS, child),
    )
    first.start()
    with reaped(first):
        assert parent.poll(60), "the first holder never reported"
        pid, first_holder, first_token = parent.recv()
        time.sleep(0.3)  # a renewal or two
        stopped_at = _stop(pid, backend, db_url)
        time.sleep(0.05)  # a renewal sent just before the stop has landed
        row = model.peek(key)
        assert row is not None
        assert (row.holder, row.fence) == (first_holder, first_token)
        _, first_expires_ms = epoch_ms(row)

        refused = 0
        while (second := model.try_lease(key, 60_000, holder="second")) is None:
            refused += 1
            assert time.monotonic() - stopped_at < PAUSE_TTL_MS / 1000 + 5, "never taken over"
            time.sleep(0.02)
        second_acquired_ms, _ = epoch_ms(model.peek(key))  # type: ignore[arg-type]
        with engine.connect() as conn:
            applied = conn.execute(
                app.update()
                .where(app.c.id == 1, second.is_held_clause())
                .values(value=1, owner="second")
            ).rowcount
        assert applied == 1, "the live holder's fenced write was refused"
        time.sleep(0.2)  # paused well past the ttl
        os.kill(pid, signal.SIGCONT)
        paused_ms = (time.monotonic() - stopped_at) * 1000
        parent.send("go")
        assert parent.poll(30), "the first holder never reported after SIGCONT"
        outcome = parent.recv()
        first.join(10)
        assert first.exitcode == 0

    row = model.peek(key)
    with engine.connect() as conn:
        value, owner = conn.execute(sa.select(app.c.value, app.c.owner)).one()
    stale_release = int(row is None or row.holder != "second" or outcome["released"])
    stale_writes = int(outcome["fenced_rows"] != 0 or (value, owner) != (1, "second"))
    report(
        "holder paused past ttl",
        backend,
        ttl_ms=PAUSE_TTL_MS,
        paused_ms=round(paused_ms),
        second_started_after_first_expiry_ms=second_acquired_ms - first_expires_ms,
        second_refused_while_first_live=refused,
        keepalive_reported_loss=outcome["lost_reported"],
        loss_reported_after_resume_ms=outcome["loss_reported_after_resume_ms"],
        loss_reason=outcome["lost_reason"],
        stale_releases_deleting=stale_release,
        stale_fenced_writes_applied=stale_writes,
    )
    assert refused > 0
    assert second_acquired_ms >= first_expires_ms
    assert outcome["lost_reported"]
    assert stale_release == 0
    assert stale_writes == 0
    assert second.release()
    engine.dispose()
    model.dispose()
