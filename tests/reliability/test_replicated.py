"""Replicated databases: a 3-node MariaDB Galera cluster and a PostgreSQL primary with a
streaming standby promoted after the primary is killed (``tests/support/servers.py``).

Galera: processes on all three nodes take one key (no two valid leases overlap, tokens
follow grant order), ``liveness="session"`` is refused, and a node that lost quorum
answers with a connection error. PostgreSQL: a failover, with a synchronous and with an
asynchronous standby, never hands out a token that is not larger than every token
handed out before it, and with a synchronous standby no acknowledged lease is lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

import joblocks
import joblocks.aio

from ..support.cli import run_cli
from ..support.matrix import unavailable
from ..support.pool import Pool
from ..support.servers import (
    GaleraCluster,
    PostgresPair,
    ServerUnavailable,
    start_postgres_pair,
)
from . import _replicated_workers as workers
from ._support import Reporter
from .test_contention import Section, check_history

# Starting the cluster (three nodes, two rsync state transfers) counts towards the
# time-out of the test that first asks for it.
pytestmark = [pytest.mark.reliability, pytest.mark.server, pytest.mark.timeout(900)]
#: The Galera tests share one cluster (a session fixture): in a parallel run (``-n N``,
#: ``--dist loadgroup``) they go to one worker, which starts it once.
ONE_CLUSTER = pytest.mark.xdist_group("galera")

HISTORY_S = {False: 6.0, True: 30.0}
HISTORY_TTL_MS = 500
OVERRUN_P = 0.02
#: Grants before a failover: acknowledged by a synchronous standby, or (asynchronous)
#: made while the standby receives nothing; more than the 32 values PostgreSQL logs
#: ahead of a sequence, so an inherited sequence would repeat tokens.
GRANTS = {False: 200, True: 2000}


def _table() -> str:
    return f"jl_{uuid.uuid4().hex[:10]}"


# -- Galera ----------------------------------------------------------------------------


@ONE_CLUSTER
def test_galera_contention_across_nodes(
    galera_cluster: GaleraCluster, pool: Pool, long_run: bool, report: Reporter
) -> None:
    table = _table()
    urls = galera_cluster.urls
    joblocks.JobLockModel(urls[0], table_name=table).dispose()
    first = joblocks.JobLockModel(urls[0], table_name=table)
    try:
        first.try_lease("probe", 1000)  # creates the table and its sequence
    finally:
        first.dispose()
    engine = sa.create_engine(urls[1])
    with engine.connect() as conn:
        shown = conn.exec_driver_sql(f"SHOW CREATE SEQUENCE `{table}_fence_seq`").one()[1]
    engine.dispose()
    assert "nocache" in shown.lower(), shown

    key = f"galera-{uuid.uuid4().hex[:8]}"
    pool.reset()
    seconds = HISTORY_S[long_run]
    calls = [
        (urls[i % len(urls)], table, key, seconds, HISTORY_TTL_MS, OVERRUN_P)
        for i in range(pool.size)
    ]
    results: list[dict[str, Any]] = pool.run(workers.history, calls)
    sections = [Section(*entry) for r in results for entry in r["log"]]
    errors = [e for r in results for e in r["errors"]]
    figures = check_history(sections)
    report(
        "galera: processes on 3 nodes, one key",
        "galera",
        processes=pool.size,
        nodes=len(urls),
        seconds=seconds,
        ttl_ms=HISTORY_TTL_MS,
        errors_reaching_callers=len(errors),
        **figures,
    )
    assert figures["sections"] > 20
    nodes_that_won = {calls[i][0] for i, r in enumerate(results) if r["log"]}
    assert len(nodes_that_won) >= 2, "no contention across nodes"
    assert figures["overlaps_while_both_valid"] == 0
    assert figures["token_order_violations"] == 0
    assert figures["stale_releases_deleting"] == 0
    assert errors == []


@ONE_CLUSTER
def test_galera_refuses_session_liveness(galera_cluster: GaleraCluster) -> None:
    table = _table()
    model = joblocks.JobLockModel(galera_cluster.urls[0], table_name=table)
    try:
        with pytest.raises(joblocks.LockBackendError, match="GET_LOCK holds only on the node"):
            model.try_lease("job", 60_000, liveness="session")
        # The refusal took nothing: a ttl lease of the key is granted.
        lease = model.try_lease("job", 60_000)
        assert lease is not None
        lease.release()
    finally:
        model.dispose()


@ONE_CLUSTER
def test_galera_refuses_session_liveness_asyncio(galera_cluster: GaleraCluster) -> None:
    async def attempt() -> None:
        model = joblocks.aio.JobLockModel(galera_cluster.urls[1], table_name=_table())
        try:
            with pytest.raises(joblocks.LockBackendError, match="GET_LOCK holds only on the node"):
                await model.try_lease("job", 60_000, liveness="session")
        finally:
            await model.dispose()

    asyncio.run(asyncio.wait_for(attempt(), 120))


@ONE_CLUSTER
def test_galera_doctor(galera_cluster: GaleraCluster, tmp_path: Path) -> None:
    """``joblocks doctor URL`` on a node: the cluster, the commit stall, the token source;
    a sequence made ``INCREMENT BY 0`` fails the fencing check."""
    url = galera_cluster.urls[2]
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("JOBLOCKS_URL", None)

    def doctor(table: str) -> tuple[int, dict[str, dict[str, Any]]]:
        done = run_cli("--table", table, "doctor", url, "--json", env=env)
        assert "Traceback" not in done.stderr, done.stderr
        report = json.loads(done.stdout)
        return done.returncode, {check["name"]: check for check in report["checks"]}

    good = _table()
    made = joblocks.JobLockModel(url, table_name=good)
    try:
        made.create_table()
    finally:
        made.dispose()
    code, checks = doctor(good)
    assert code == 0, checks
    assert "Galera" in checks["cluster"]["detail"]
    assert "of 3 node" in checks["cluster"]["detail"]
    assert "LockTimeoutError" in checks["stall"]["detail"]
    assert "NOCACHE" in checks["fencing"]["detail"]

    bad = _table()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SEQUENCE `{bad}_fence_seq` INCREMENT BY 0")
        conn.exec_driver_sql(
            f"CREATE TABLE `{bad}` (id VARBINARY(255) PRIMARY KEY, holder VARBINARY(255) "
            "NOT NULL, acquired_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, "
            "fence BIGINT NOT NULL)"
        )
    engine.dispose()
    code, checks = doctor(bad)
    assert code == 1
    assert checks["fencing"]["status"] == "fail"
    assert "INCREMENT BY 0" in checks["fencing"]["detail"]


@ONE_CLUSTER
def test_galera_quorum_loss_is_a_connection_error(
    galera_cluster: GaleraCluster, report: Reporter
) -> None:
    """One node crashes (the others' commits stall until they declare it gone), then a
    second: the last one, without quorum, refuses with a connection error (1047)."""
    table = _table()
    url = galera_cluster.urls[0]
    model = joblocks.JobLockModel(url, table_name=table)
    stalls: list[str] = []
    errors: list[BaseException] = []
    try:
        assert model.try_lease("before", 60_000) is not None
        # One node crashes: the others stall their commits until they declare it gone.
        galera_cluster.nodes[2].kill()
        started = time.monotonic()
        stall_outcome = "granted"
        try:
            model.try_lease("during-stall", 60_000)
        except joblocks.LockBackendError as exc:
            stall_outcome = type(exc).__name__
        stall_s = time.monotonic() - started
        # A second one: the last node is alone, without quorum.
        galera_cluster.nodes[1].kill()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                model.try_lease(f"k-{uuid.uuid4().hex[:6]}", 60_000)
            except joblocks.LockTimeoutError as exc:
                stalls.append(str(exc))  # the commit waited for the dead nodes
            except joblocks.LockBackendError as exc:
                errors.append(exc)
                if "1047" in str(exc):
                    break
            time.sleep(0.2)
        report(
            "galera: quorum lost (2 of 3 nodes killed)",
            "galera",
            one_node_killed_acquire_s=round(stall_s, 1),
            one_node_killed_acquire=stall_outcome,
            timeouts_first=len(stalls),
            errors=", ".join(sorted({f"{type(e).__name__} {e.detail[:40]}" for e in errors})),
        )
    finally:
        model.dispose()
        if not all(node.is_running() for node in galera_cluster.nodes):
            galera_cluster.bootstrap_survivor(0)
            for index in range(1, len(galera_cluster.nodes)):
                if not galera_cluster.nodes[index].is_running():
                    galera_cluster.rejoin(index)
    assert errors, "the node kept granting without quorum"
    assert any("1047" in str(exc) for exc in errors), errors
    wrong = [exc for exc in errors if not isinstance(exc, joblocks.LockConnectionError)]
    assert wrong == []


# -- PostgreSQL failover ------------------------------------------------------------------


@pytest.fixture(params=("sync", "async"))
def pg_pair(request: pytest.FixtureRequest) -> Iterator[PostgresPair]:
    base = Path(tempfile.mkdtemp(prefix="joblocks-pgpair-"))
    try:
        try:
            pair = start_postgres_pair(base, synchronous=request.param == "sync")
        except ServerUnavailable as exc:
            unavailable(f"postgres primary + standby unavailable: {exc}")
        try:
            yield pair
        finally:
            pair.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _standby_caught_up(pair: PostgresPair) -> None:
    with psycopg.connect(
        host="127.0.0.1", port=pair.primary.port, user="postgres", dbname="postgres"
    ) as conn:
        target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert target is not None
        deadline = time.monotonic() + 60
        while True:
            row = conn.execute(
                "SELECT replay_lsn >= %s FROM pg_stat_replication", (target[0],)
            ).fetchone()
            if row is not None and row[0]:
                return
            assert time.monotonic() < deadline, "the standby did not catch up"
            time.sleep(0.05)


def _wal_sender(pair: PostgresPair) -> int:
    with psycopg.connect(
        host="127.0.0.1", port=pair.primary.port, user="postgres", dbname="postgres"
    ) as conn:
        row = conn.execute("SELECT pid FROM pg_stat_replication").fetchone()
    assert row is not None, "the primary has no WAL sender"
    return int(row[0])


def test_failover_tokens_grow(pg_pair: PostgresPair, long_run: bool, report: Reporter) -> None:
    mode = "sync" if pg_pair.synchronous else "async"
    table = _table()
    grants = GRANTS[long_run]
    primary = joblocks.JobLockModel(pg_pair.primary.url, table_name=table)
    acknowledged: dict[str, int] = {}
    try:
        for i in range(grants // 2):
            lease = primary.try_lease(f"a{i}", 600_000)
            assert lease is not None
            acknowledged[lease.key] = lease.token
        _standby_caught_up(pg_pair)
        if not pg_pair.synchronous:
            # The standby falls behind: the primary's WAL sender stops sending (it
            # dies stopped, with the primary).
            os.kill(_wal_sender(pg_pair), signal.SIGSTOP)
        for i in range(grants // 2):
            lease = primary.try_lease(f"b{i}", 600_000)
            assert lease is not None
            acknowledged[lease.key] = lease.token
    finally:
        primary.dispose()
    pg_pair.primary.kill()
    # One URL for both servers: libpq tries each, and takes the one that takes writes.
    url = (
        "postgresql+psycopg://postgres@/postgres?host=127.0.0.1,127.0.0.1"
        f"&port={pg_pair.primary.port},{pg_pair.standby.port}"
        "&target_session_attrs=read-write"
    )
    promoted = joblocks.JobLockModel(url, table_name=table)
    try:
        # Between the crash and the promotion no server takes writes: an error, never
        # "taken".
        with pytest.raises(joblocks.LockConnectionError):
            promoted.try_lease("during-the-outage", 600_000)
        pg_pair.promote_standby()
        kept = {lock.key: lock.fence for lock in promoted.list() if lock.key in acknowledged}
        lost = [key for key in acknowledged if kept.get(key) != acknowledged[key]]
        after: list[int] = []
        for key in [*lost, *(f"c{i}" for i in range(grants // 2))]:
            lease = promoted.try_lease(key, 600_000)
            assert lease is not None, key
            after.append(lease.token)
    finally:
        promoted.dispose()
    before_max = max(acknowledged.values())
    not_larger = sum(1 for token in after if token <= before_max)
    report(
        f"postgresql failover ({mode} standby)",
        "postgresql",
        acknowledged_grants=len(acknowledged),
        acknowledged_leases_lost=len(lost),
        grants_after=len(after),
        tokens_after_not_larger=not_larger,
        outage_call="LockConnectionError",
        highest_before=before_max,
        lowest_after=min(after),
    )
    assert not_larger == 0
    if pg_pair.synchronous:
        assert lost == []
    else:
        assert len(lost) == grants // 2  # the standby had none of them: documented
