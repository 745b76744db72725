"""A refused acquire is one statement, as the raw driver's upsert is: counted outside
joblocks, by sqlite3's trace callback on the model's connections or by MariaDB's own
``Questions`` counter."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import create_engine, event, make_url, text

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


@contextlib.contextmanager
def _counted_user(url: str) -> Iterator[tuple[str, Callable[[], int]]]:
    """A MariaDB user of its own for the block (the server's per-user statistics on):
    the URL that connects as it, and a reader of how many statements it has sent.
    Other tests on the same server at the same time are other users: not counted."""
    admin = create_engine(url, pool_size=1, isolation_level="AUTOCOMMIT")
    user = f"counted_{uuid.uuid4().hex[:12]}"
    secret = uuid.uuid4().hex
    database = make_url(url).database
    with admin.connect() as conn:
        conn.execute(text("SET GLOBAL userstat = 1"))  # never turned off: others may count
        conn.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{secret}'"))
        conn.execute(text(f"GRANT ALL ON `{database}`.* TO '{user}'@'%'"))

    def sent() -> int:
        with admin.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT SELECT_COMMANDS + UPDATE_COMMANDS + OTHER_COMMANDS "
                    "FROM information_schema.USER_STATISTICS WHERE USER = :user"
                ),
                {"user": user},
            ).scalar()
        return int(found or 0)

    counted = make_url(url).set(username=user, password=secret)
    try:
        yield counted.render_as_string(hide_password=False), sent
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP USER '{user}'@'%'"))
        admin.dispose()


@pytest.mark.server
@pytest.mark.parametrize("backend", ["mariadb"])
@pytest.mark.parametrize("face", ["sync", "aio"])
def test_a_refused_acquire_is_one_statement_on_mariadb(
    db_url: str, table_name: str, face: str
) -> None:
    with _counted_user(db_url) as (url, sent_so_far):
        if face == "sync":
            model = joblocks.JobLockModel(url, table_name=table_name)
            try:
                assert model.acquire("k", TTL, "owner")
                assert not model.acquire("k", TTL, "other")
                before = sent_so_far()
                for _ in range(REFUSALS):
                    assert not model.acquire("k", TTL, "other")
                sent = sent_so_far() - before
            finally:
                model.dispose()
        else:

            async def main() -> int:
                model = joblocks.aio.JobLockModel(url, table_name=table_name)
                try:
                    assert await model.acquire("k", TTL, "owner")
                    assert not await model.acquire("k", TTL, "other")
                    before = await asyncio.to_thread(sent_so_far)
                    for _ in range(REFUSALS):
                        assert not await model.acquire("k", TTL, "other")
                    return await asyncio.to_thread(sent_so_far) - before
                finally:
                    await model.dispose()

            sent = asyncio.run(main())
    # Exactly one per refusal.
    assert sent == REFUSALS, sent
