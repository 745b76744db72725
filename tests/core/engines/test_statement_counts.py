"""A refused acquire is one statement, as the raw driver's upsert is: counted outside
joblocks, by sqlite3's trace callback on the model's connections or by MariaDB's own
``Questions`` counter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text

import joblocks
import joblocks.aio

TTL = 60_000
REFUSALS = 40


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_refused_acquire_is_one_statement_on_sqlite(db_url: str, table_name: str) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    seen: list[str] = []
    counting = [False]

    def note(sql: str) -> None:
        if counting[0] and not sql.lstrip().startswith("--"):  # trigger bodies: "--" lines
            seen.append(sql)

    event.listen(model.engine, "connect", lambda dbapi, _rec: dbapi.set_trace_callback(note))
    try:
        assert model.acquire("k", TTL, "owner")
        assert not model.acquire("k", TTL, "other")  # warm: statements prepared
        counting[0] = True
        for _ in range(REFUSALS):
            assert not model.acquire("k", TTL, "other")
        counting[0] = False
    finally:
        model.dispose()
    assert len(seen) == REFUSALS, seen[:5]


def _questions(url: str) -> Callable[[], int]:
    engine = create_engine(url, pool_size=1)

    def read() -> int:
        with engine.connect() as conn:
            row = conn.execute(text("SHOW GLOBAL STATUS LIKE 'Questions'")).one()
        return int(row[1])

    return read


@pytest.mark.server
@pytest.mark.parametrize("backend", ["mariadb"])
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_a_refused_acquire_is_one_statement_on_mariadb(
    db_url: str, table_name: str, face: str
) -> None:
    questions = _questions(db_url)
    own = -(questions() - questions())  # the observer's own statements per reading

    def refusals(run: Callable[[], Any]) -> int:
        before = questions()
        run()
        return questions() - before - own

    if face == "sync":
        model = joblocks.JobLockModel(db_url, table_name=table_name)
        try:
            assert model.acquire("k", TTL, "owner")
            assert not model.acquire("k", TTL, "other")

            def run() -> None:
                for _ in range(REFUSALS):
                    assert not model.acquire("k", TTL, "other")

            sent = refusals(run)
        finally:
            model.dispose()
    else:

        async def main() -> int:
            model = joblocks.aio.JobLockModel(db_url, table_name=table_name)
            try:
                assert await model.acquire("k", TTL, "owner")
                assert not await model.acquire("k", TTL, "other")
                before = await asyncio.to_thread(questions)
                for _ in range(REFUSALS):
                    assert not await model.acquire("k", TTL, "other")
                return await asyncio.to_thread(questions) - before - own
            finally:
                await model.dispose()

        sent = asyncio.run(main())
    # Exactly one per refusal; the server is shared with this process only, but a
    # keep-alive renewer of an earlier test may still send a statement or two.
    assert REFUSALS <= sent <= REFUSALS + 2, sent
