"""Worker functions of the reliability scenarios, run in other processes.

Pool tasks (spawned processes of ``tests.support.pool.Pool``) make their own models from plain
arguments, so nothing but strings and numbers crosses a process boundary. Times are
``time.monotonic()``: CLOCK_MONOTONIC is one clock for the whole machine, comparable
across processes and never stepped. Times in milliseconds named ``*_ms`` are the
database's clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import sys
import threading
import time
from collections import Counter
from typing import Any

import sqlalchemy as sa

import joblocks

from ..support.pool import BARRIER_TIMEOUT_S, shared, start_together, stopped
from ._support import open_fds, rss_mb


def hello() -> int:
    start_together()
    return os.getpid()


def make_model(url: str, table_name: str, acquire_path: str | None = None) -> joblocks.JobLockModel:
    model = joblocks.JobLockModel(url, table_name=table_name, acquire_path=acquire_path)  # type: ignore[arg-type]
    model.now_ms()  # connect now, not inside the scenario
    return model


def app_table(name: str) -> sa.Table:
    """The application's own table: one row with a counter and an owner."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("value", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
    )


def app_engine(url: str) -> sa.Engine:
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


def lease_times(lease: joblocks.Lease) -> tuple[int, int]:
    """A lease's acquired_at and expires_at as epoch ms (the database's clock)."""
    return (
        round(lease.acquired_at.timestamp() * 1000),
        round(lease.expires_at.timestamp() * 1000),
    )


# -- contention fuzz --------------------------------------------------------------------------


def _enter() -> None:
    s = shared()
    with s.inside.get_lock():
        s.inside.value += 1
        if s.inside.value > s.max_inside.value:
            s.max_inside.value = s.inside.value


def _leave() -> None:
    s = shared()
    with s.inside.get_lock():
        s.inside.value -= 1


def contention(
    url: str, table_name: str, app: str, key: str, rounds: int, hold_ms: float, use_lock: bool
) -> dict[str, Any]:
    """``rounds`` read → random sleep → write increments of the app's counter.

    Under ``run_with_lock`` when ``use_lock`` (else the control run, without a lock).
    Every call of ``run_with_lock`` is timed up to the start of the work (a win) or
    its return (a refusal): one acquire under contention.
    """
    model = make_model(url, table_name)
    engine = app_engine(url)
    table = app_table(app)
    read = sa.select(table.c.value).where(table.c.id == 1)
    latencies: list[float] = []
    wins = refused = 0
    with engine.connect() as conn:

        def work() -> None:
            entered.append(time.perf_counter())
            _enter()
            try:
                value = conn.execute(read).scalar_one()
                time.sleep(random.uniform(0, hold_ms / 1000))
                conn.execute(table.update().where(table.c.id == 1).values(value=value + 1))
            finally:
                _leave()

        start_together()
        while wins < rounds:
            entered: list[float] = []
            started = time.perf_counter()
            if use_lock:
                ran = joblocks.run_with_lock(key, 30_000, work, model=model)
            else:
                work()
                ran = True
            ended = entered[0] if entered else time.perf_counter()
            latencies.append((ended - started) * 1000)
            if ran:
                wins += 1
            else:
                refused += 1
                time.sleep(random.uniform(0, 0.002))
    engine.dispose()
    model.dispose()
    return {"wins": wins, "refused": refused, "latencies_ms": latencies}


# -- history check ------------------------------------------------------------------------------


def history(
    url: str, table_name: str, key: str, seconds: float, ttl_ms: int, overrun_p: float
) -> dict[str, Any]:
    """Take ``key`` as often as possible for ``seconds``; log every critical section.

    A section is bracketed by two readings of the database's clock, and logged with its
    lease's token and validity window (acquired_at, expires_at; the database's clock).
    With probability ``overrun_p`` the work outlives its ttl (the lease expires under
    it), so overlaps after expiry do happen and the check has something to tell apart.
    """
    model = make_model(url, table_name)
    holder = joblocks.worker_id()
    log: list[tuple[int, int, int, int, int, str, bool]] = []
    start_together()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lease = model.try_lease(key, ttl_ms)
        if lease is None:
            time.sleep(random.uniform(0, 0.001))
            continue
        begin = model.now_ms()
        if random.random() < overrun_p:
            time.sleep(ttl_ms * 1.5 / 1000)
        else:
            time.sleep(random.uniform(0, 0.003))
        end = model.now_ms()
        released = lease.release()
        acquired, expires = lease_times(lease)
        log.append((begin, end, lease.token, acquired, expires, holder, released))
    model.dispose()
    return {"holder": holder, "log": log}


# -- a waiting successor ------------------------------------------------------------------------


def poll_acquire(
    url: str, table_name: str, key: str, ttl_ms: int, interval_s: float, give_up_s: float
) -> dict[str, Any]:
    """Try ``key`` every ``interval_s`` until it is had, another poller had it, or
    ``give_up_s`` passed. Whoever wins sets the pool's stop flag."""
    model = make_model(url, table_name)
    holder = joblocks.worker_id()
    attempts = 0
    token = None
    got_at = None
    deadline = time.monotonic() + give_up_s
    while not stopped() and time.monotonic() < deadline:
        attempts += 1
        token = model.acquire_token(key, ttl_ms, holder)
        if token is not None:
            got_at = time.monotonic()
            shared().stop.value = 1
            break
        time.sleep(interval_s)
    row = model.peek(key) if token is not None else None
    model.dispose()
    return {
        "holder": holder,
        "attempts": attempts,
        "token": token,
        "got_at": got_at,
        "acquired_ms": None if row is None else round(row.acquired_at.timestamp() * 1000),
    }


# -- holders that get killed or paused (plain spawned processes) --------------------------------


def hold_and_block(url: str, table_name: str, key: str, ttl_ms: int, conn: Any) -> None:
    """Run a job under ``run_with_lock`` that reports its lease and then never ends."""
    model = make_model(url, table_name)
    tokens: list[int] = []
    joblocks.add_listener(
        lambda event: (
            tokens.append(event.token)
            if event.kind == "acquired" and event.token is not None
            else None
        )
    )

    def work() -> None:
        row = model.peek(key)
        assert row is not None
        conn.send((os.getpid(), joblocks.worker_id(), tokens[-1], row.expires_at.timestamp()))
        threading.Event().wait()

    joblocks.run_with_lock(key, ttl_ms, work, model=model)


def paused_holder(
    url: str, table_name: str, app: str, key: str, ttl_ms: int, renew_ms: int, conn: Any
) -> None:
    """Hold ``key`` with keep-alive; after the parent's "go" (it was SIGSTOPped and
    SIGCONTinued meanwhile) wait for the keep-alive to report the loss, then try a
    fenced write and the release, and report what they did."""
    model = make_model(url, table_name)
    lost = threading.Event()
    lease = model.try_lease(
        key, ttl_ms, keepalive=True, renew_every=renew_ms, on_lost=lambda _: lost.set()
    )
    assert lease is not None
    conn.send((os.getpid(), lease.holder, lease.token))
    assert conn.recv() == "go"
    resumed = time.monotonic()
    reported = lost.wait(5)
    loss_ms = (time.monotonic() - resumed) * 1000
    table = app_table(app)
    engine = app_engine(url)
    with engine.begin() as db:
        fenced = db.execute(
            table.update()
            .where(table.c.id == 1, lease.is_held_clause())
            .values(value=table.c.value + 1000, owner="stale")
        ).rowcount
    engine.dispose()
    released = lease.release()
    conn.send(
        {
            "lost_reported": reported,
            "lost_reason": lease.lost_reason,
            "loss_reported_after_resume_ms": round(loss_ms, 1),
            "fenced_rows": fenced,
            "released": released,
        }
    )
    model.dispose()


# -- database restart ---------------------------------------------------------------------------


def restart_worker(url: str, table_name: str, key: str, pause_s: float) -> dict[str, Any]:
    """Hold ``key`` and keep working on the database until the stop flag is set.

    Cycles refresh(key) → peek(key) → acquire(own key) → release(own key), logging
    (start, end, operation, outcome, token of an acquire) of every call. ``lost``
    counts answers saying the held lease is gone; ``false`` counts refused acquires of
    a key no one else uses: both must stay 0 whatever happens to the server. The
    pool's ``inside`` counter counts the workers in their loop, then every
    ``LockBackendError`` (the test waits on both).
    """
    model = make_model(url, table_name)
    holder = joblocks.worker_id()
    own = f"{key}-own"
    assert model.acquire(key, 60_000, holder)
    log: list[tuple[float, float, str, str, int | None]] = []
    lost = false = 0
    ops = ("refresh", "peek", "acquire", "release")
    start_together()
    s = shared()
    with s.inside.get_lock():
        s.inside.value += 1  # started: the test kills the server once every worker is here
    i = 0
    while not stopped():
        op = ops[i % len(ops)]
        i += 1
        began = time.monotonic()
        token = None
        try:
            if op == "refresh":
                lost += not model.refresh(key, 60_000, holder)
            elif op == "peek":
                row = model.peek(key)
                lost += row is None or row.holder != holder
            elif op == "acquire":
                token = model.acquire_token(own, 60_000, holder)
                false += token is None
            else:
                model.release(own, holder)
            outcome = "ok"
        except joblocks.LockBackendError:
            outcome = "LockBackendError"
            with s.inside.get_lock():
                s.inside.value += 1  # counted by the test, which restarts the server
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        log.append((began, time.monotonic(), op, outcome, token))
        time.sleep(pause_s)
    model.release(key, holder)
    model.dispose()
    return {"holder": holder, "log": log, "lost": lost, "false": false}


# -- cron double fire ---------------------------------------------------------------------------


def scheduler(
    url: str,
    table_name: str,
    key: str,
    control_key: str,
    t0: float,
    period_s: float,
    offsets_s: list[float],
    min_hold_ms: int,
    job_s: float,
) -> dict[str, Any]:
    """A cron scheduler: fires slot ``i`` at ``t0 + i * period_s + offsets_s[i]``.

    Each firing runs the job without ``min_hold`` on ``control_key`` (which shows
    what ``min_hold`` prevents), then the same job under ``min_hold`` on ``key``.
    """
    model = make_model(url, table_name)
    runs: list[int] = []
    control: list[int] = []
    late: list[float] = []
    for slot, offset in enumerate(offsets_s):
        fire = t0 + slot * period_s + offset
        time.sleep(max(0.0, fire - time.monotonic()))
        late.append(time.monotonic() - fire)

        def job(out: list[int] = runs, slot: int = slot) -> None:
            out.append(slot)
            time.sleep(job_s)

        # The control runs first, so that it has surely ended when the other
        # scheduler fires: without min_hold nothing keeps that one from running it.
        joblocks.run_with_lock(
            control_key, 60_000, lambda slot=slot: job(control, slot), model=model
        )
        joblocks.run_with_lock(key, 60_000, job, model=model, min_hold=min_hold_ms)
    model.dispose()
    return {"runs": runs, "control": control, "late_ms": max(late) * 1000}


# -- soak -----------------------------------------------------------------------------------------


#: Threads of joblocks that the soak counts apart from the main and keep-alive threads.
APART = ("joblocks-idle-trim", "joblocks-watchdog")


def soak(
    urls: dict[str, str], table_name: str, keys: list[str], seconds: float, sample_s: float
) -> dict[str, Any]:
    """Mixed operations with keep-alive on every database for ``seconds``.

    Samples this process's RSS, threads and file descriptors and the connections its
    pools have checked out (the models keep idle connections for reuse: at most one
    per thread that used them at once), every ``sample_s``; a last sample after
    everything was released and the keep-alive thread had time to end; and, after each
    model's ``dispose()``, what its pool still has checked out (leaked) and how many
    file descriptors are open (as many as before the models were made).
    """
    fds_before = open_fds()
    models = {name: make_model(url, table_name) for name, url in urls.items()}
    holder = joblocks.worker_id()
    counts: Counter[str] = Counter()
    errors: list[str] = []
    samples: list[dict[str, Any]] = []
    rng = random.Random()

    def sample(at: float) -> None:
        samples.append(
            {
                "t": round(at, 2),
                "rss_mb": round(rss_mb(), 2),
                # Counted apart: the one-shot timer that closes connections left idle
                # after a burst (joblocks._db.connections), which ends by itself, and the
                # process's one watchdog (joblocks._db.deadline), which stays once started.
                "threads": sum(t.name not in APART for t in threading.enumerate()),
                "trim_threads": sum(t.name == "joblocks-idle-trim" for t in threading.enumerate()),
                "watchdog_threads": sum(
                    t.name == "joblocks-watchdog" for t in threading.enumerate()
                ),
                "fds": open_fds(),
                "checked_out": {name: m.engine.pool.checkedout() for name, m in models.items()},
            }
        )

    def work() -> None:
        time.sleep(rng.uniform(0, 0.25))

    start_together()
    started = time.monotonic()
    next_sample = started
    while (now := time.monotonic()) < started + seconds:
        if now >= next_sample:
            sample(now - started)
            next_sample += sample_s
        model = models[rng.choice(sorted(models))]
        key = rng.choice(keys)
        dice = rng.random()
        try:
            if dice < 0.3:
                ran = joblocks.run_with_lock(
                    key, 300, work, model=model, keepalive=True, renew_every=80
                )
                counts["run" if ran else "skipped"] += 1
            elif dice < 0.5:
                lease = model.try_lease(key, 400, keepalive=True, renew_every=100)
                if lease is None:
                    counts["skipped"] += 1
                    continue
                with lease:
                    work()
                    lease.refresh()
                    lease.ensure_held()
                counts["lease"] += 1
            elif dice < 0.7:
                if model.acquire(key, 200, holder):
                    model.refresh(key, 200, holder)
                    model.release(key, holder)
                    counts["acquire"] += 1
                else:
                    counts["skipped"] += 1
            elif dice < 0.9:
                model.peek(key)
                counts["peek"] += 1
            else:
                model.list("live")
                model.count("expired")
                counts["list"] += 1
        except joblocks.LeaseLost:
            counts["lost"] += 1
        except joblocks.LockError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    # Let the keep-alive thread see that nothing is left to renew.
    deadline = time.monotonic() + 5
    while (
        sum(t.name not in APART for t in threading.enumerate()) > 1 and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    sample(time.monotonic() - started)
    # Connections still checked out of a pool once its model closed its own: leaked.
    leaked = {}
    for name, model in models.items():
        pool = model.engine.pool
        model.dispose()
        leaked[name] = pool.checkedout()
    return {
        "holder": holder,
        "counts": dict(counts),
        "errors": errors,
        "samples": samples,
        "leaked": leaked,
        "fds_before": fds_before,
        "fds_after_dispose": open_fds(),
    }


# -- clock skew: a process under faketime -------------------------------------------------------


def _say(**message: Any) -> None:
    print(json.dumps(message), flush=True)


def skewed_main() -> None:
    """Entry point of a process run under ``faketime`` (its wall clock is skewed).

    Protocol on stdin/stdout, one JSON object a line:

    1. says ``ready`` with its clock offset from the database;
    2. on ``steal``: tries the parent's live lease (``key_a``) every 20 ms until it
       gets it or ``give_up_s`` passed; says when it got it (``time.monotonic()``,
       which faketime leaves alone here);
    3. on ``hold``: takes ``key_b`` itself and says when it asked for it; the parent
       then tries to take it over;
    4. on ``bye``: exits.
    """
    args = json.loads(sys.argv[1])
    model = make_model(args["url"], args["table"])
    holder = f"skewed-{os.getpid()}"
    offset_ms = time.time() * 1000 - model.now_ms()
    _say(ready=True, offset_ms=round(offset_ms))
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "steal":
            got_at = None
            attempts = 0
            deadline = time.monotonic() + command["give_up_s"]
            while time.monotonic() < deadline:
                attempts += 1
                if model.acquire(command["key"], 60_000, holder):
                    got_at = time.monotonic()
                    break
                # Not time.sleep: libfaketime's clock_nanosleep fails (EINVAL) when it
                # leaves the monotonic clock alone.
                select.select([], [], [], 0.02)
            _say(got_at=got_at, attempts=attempts)
        elif command["do"] == "hold":
            sent = time.monotonic()
            token = model.acquire_token(command["key"], command["ttl_ms"], holder)
            _say(sent=sent, token=token)
        else:
            break
    model.dispose()


# -- SQLite: another process holding the write lock ----------------------------------------------


def sqlite_writer(path: str, conn: Any) -> None:
    """Hold SQLite's write lock (``BEGIN IMMEDIATE``) until told to let go."""
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    conn.send("locked")
    conn.recv()
    db.execute("ROLLBACK")
    db.close()
    conn.send("released")


# -- fork: children of a process that already used its model ----------------------------------

#: The model a forked child inherits (set by the parent before it forks).
inherited: joblocks.JobLockModel | None = None
#: A barrier of the forked pool's processes (set by the parent before it forks): a
#: process waiting at it takes no other task, so every process of the pool gets some.
fork_barrier: Any = None


def connection_ident(model: joblocks.JobLockModel) -> int | None:
    """The server's id of a connection of this process's pool (None on SQLite)."""
    sql = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}
    family = "mysql" if model.engine.dialect.name in ("mysql", "mariadb") else "postgresql"
    if model.engine.dialect.name == "sqlite":
        return None
    with model.engine.connect() as conn:
        return int(conn.exec_driver_sql(sql[family]).scalar_one())


def sqlite_fds(model: joblocks.JobLockModel) -> int:
    """How many of this process's file descriptors are open on the SQLite file."""
    path = os.path.realpath(model.engine.url.database or "")
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}") == path
    return count


def forked_task(key: str, parent_fds: int) -> dict[str, Any]:
    """In a forked child: take ``key`` with the inherited model and say who we are.

    ``parent_fds``: how many descriptors the parent had open on the SQLite file when it
    forked (the child inherits them; any more are the child's own connection's).
    """
    model = inherited
    assert model is not None
    if fork_barrier is not None:
        fork_barrier.wait(BARRIER_TIMEOUT_S)
    won = model.acquire(key, 60_000, joblocks.worker_id())
    return {
        "pid": os.getpid(),
        "holder": joblocks.worker_id(),
        "won": won,
        "connection": connection_ident(model),
        "own_sqlite_fds": sqlite_fds(model) - parent_fds,
    }


if __name__ == "__main__":  # pragma: no cover - run under faketime by the clock-skew test
    skewed_main()
