"""Through a connection pooler: Debian's PgBouncer in front of the throwaway PostgreSQL.

In ``pool_mode = transaction`` a client connection gets a server connection only for
one transaction and the next one goes to whichever client asks first (here 2 server
connections serve every client). Named server-side prepared statements (psycopg makes
one of a statement run 5 times) then live on a server connection that other clients
get next: a client could run another client's prepared ``DELETE``. Engines joblocks
makes prepare statements only on a direct connection (the backend the server names
is the one the connection was told about when it connected), so through a pooler
every call works and runs its own statement.
``pool_mode = session`` is tested the same way. The contract suite runs through both
modes as well (``DEPLOYMENTS`` in ``test_contract.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa

import joblocks
import joblocks.aio

from ...support import pooler_workers as workers
from ...support.servers import Server

pytestmark = pytest.mark.server

SECONDS = 3.0


@pytest.fixture(params=("pgbouncer-transaction", "pgbouncer-session"))
def pooler(request: pytest.FixtureRequest) -> Server:
    server: Server = request.getfixturevalue(str(request.param).replace("-", "_"))
    return server


def _summary(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        errors = sum(r["errors"].values())
        lines.append(
            f"{r['role']:<8} calls {r['calls']:>5} wrong {r['wrong']:>3} errors {errors:>4}"
            + (f" e.g. {next(iter(r['errors']))}" if errors else "")
            + (f" CRASHED {r['crash']}" if "crash" in r else "")
        )
    return "\n".join(lines)


@pytest.mark.races  # processes in contention for seconds: the races step
def test_processes_through_the_pooler_run_only_their_own_statements(
    pooler: Server, pg_server: Server, face: str, table_name: str
) -> None:
    """Seven processes through the pooler for 3 s: exclusion on a shared key, a live row
    that only the parent holds (peeked at, and taken by an intruder when free), churn
    and deletes on keys of their own, a keep-alive lease.

    Before the fix (psycopg's automatic prepared statements) in transaction mode: most
    calls failed (``prepared statement "_pg3_N" does not exist``, ``bind message
    supplies 3 parameters, but prepared statement ... requires 2``) and statements ran
    as other clients' prepared ones.
    """
    # The parent holds "held" directly on the server, not through the pooler.
    direct = joblocks.JobLockModel(pg_server.url, table_name=table_name)
    try:
        direct.create_table()
        held = f"held-{uuid.uuid4().hex[:8]}"
        token = direct.acquire_token(held, 600_000, "the-parent")
        assert token is not None
        base = uuid.uuid4().hex[:8]
        shared = f"shared-{base}"
        roles: list[tuple[str, str, dict[str, Any]]] = [
            ("hammer", shared, {}),
            ("hammer", shared, {}),
            ("churn", f"churn-{base}", {}),
            ("peeker", held, {"expect": ("the-parent", token)}),
            ("intruder", held, {}),
            ("keeper", f"keep-{base}", {}),
            ("deleter", f"gone-{base}", {}),
        ]
        results = workers.run_processes(face, pooler.url, table_name, SECONDS, roles)
        summary = _summary(results)
        print(f"\n[poolers] {face} through {pooler.url}:\n{summary}")
        assert not [r for r in results if "crash" in r], summary

        # The parent's row is untouched: nobody deleted it, nobody took it over.
        row = direct.peek(held)
        assert row is not None, "the parent's live row was deleted\n" + summary
        assert (row.holder, row.fence) == ("the-parent", token), summary
        assert sum(r["wrong"] for r in results) == 0, summary
        assert sum(sum(r["errors"].values()) for r in results) == 0, summary

        # Exclusion on the shared key: no two runs overlapped, tokens grew with time.
        runs = sorted(run for r in results if r["role"] == "hammer" for run in r["intervals"])
        assert len(runs) > 10, summary
        for (_, e0, f0, _), (s1, _, f1, _) in zip(runs, runs[1:]):
            assert s1 >= e0, f"runs overlapped by {(e0 - s1) / 1e6:.3f} ms"
            assert f1 > f0, f"token {f1} ran after token {f0}"
        for r in results:
            if r["role"] == "hammer":
                assert all(owner == r["holder"] for *_, owner in r["intervals"]), summary
        assert direct.peek(shared) is None
    finally:
        direct.dispose()


@pytest.mark.parametrize("route", ["direct", "pooler"])
def test_engines_joblocks_makes_prepare_statements_only_on_a_direct_connection(
    route: str, pooler: Server, pg_server: Server, face: str, table_name: str
) -> None:
    """psycopg's prepare_threshold: its default (5) on a direct connection, None through
    a pooler (either mode), on both faces."""
    import asyncio

    url, expected = (pg_server.url, 5) if route == "direct" else (pooler.url, None)
    if face == "sync":
        model = joblocks.JobLockModel(url, table_name=table_name)
        try:
            with model.engine.connect() as conn:
                assert conn.connection.driver_connection.prepare_threshold == expected
        finally:
            model.dispose()
        return

    async def main() -> None:
        model = joblocks.aio.JobLockModel(url, table_name=table_name)
        try:
            async with model.engine.connect() as conn:
                raw = await conn.get_raw_connection()
                assert raw.driver_connection.prepare_threshold == expected
        finally:
            await model.dispose()

    asyncio.run(main())


def test_a_users_engine_with_prepare_threshold_none_works_through_the_pooler(
    pgbouncer_transaction: Server, face: str, table_name: str
) -> None:
    """What docs/howto/poolers.md tells users to set on an engine of their own."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    args = {"connect_args": {"prepare_threshold": None}}
    url = pgbouncer_transaction.url
    key = f"own-{uuid.uuid4().hex[:8]}"

    def check(results: list[Any]) -> None:
        tokens = results[::2]
        assert all(token is not None for token in tokens)
        assert tokens == sorted(tokens)
        assert len(set(tokens)) == len(tokens)
        assert all(results[1::2])

    if face == "sync":
        engine = sa.create_engine(url, **args)
        model = joblocks.JobLockModel(engine, table_name=table_name)
        results = []
        for i in range(12):  # more than psycopg's default threshold of 5
            results += [model.acquire_token(key, 30_000, f"h{i}"), model.release(key, f"h{i}")]
        check(results)
        engine.dispose()
    else:

        async def main() -> None:
            engine = create_async_engine(url, **args)
            model = joblocks.aio.JobLockModel(engine, table_name=table_name)
            results = []
            for i in range(12):
                results += [
                    await model.acquire_token(key, 30_000, f"h{i}"),
                    await model.release(key, f"h{i}"),
                ]
            check(results)
            await engine.dispose()

        asyncio.run(main())
