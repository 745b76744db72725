"""Tokens follow the order of grants, even for a grant that waited while another one
came and went: every database × face × acquire path.

The other grant is made by hand on a connection of its own, the way joblocks makes a
grant on that database (PostgreSQL: under the key's advisory lock; MariaDB: the token
drawn under the row lock; SQLite: under the write lock), and is released in the same
transaction, while our acquire has started and waits. Whatever our acquire drew before
it waited, the grant it gets must carry a larger token than the one that ended before.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from joblocks._sql.schema import fence_counter_name, fence_sequence_name

TTL = 30_000


def _other_grant(
    backend: str, db_url: str, table: sa.Table, key: str, started: threading.Event
) -> int:
    """Grant ``key`` to "other" and release it in one transaction; its token.

    The transaction takes what joblocks's grant would lock first, sets ``started``,
    waits for the acquire under test to start and block behind it, then draws.
    """
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    t = table.name
    try:
        with engine.connect() as conn:
            if backend == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif backend == "postgresql":
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(27244, hashtext(CAST(:key AS VARCHAR)))"),
                    {"key": key},
                )
            else:
                conn.execute(
                    sa.text(
                        f"INSERT INTO {t} (id, holder, acquired_at, expires_at, fence) "
                        "VALUES (:key, 'other', 0, 9000000000000, 0)"
                    ),
                    {"key": key},
                )
            started.set()
            time.sleep(0.5)  # the acquire under test has drawn what it draws early, and waits
            if backend == "sqlite":
                draw = f'(SELECT value FROM "{fence_counter_name(t)}") + 1'
                conn.execute(
                    sa.text(
                        f"INSERT INTO {t} (id, holder, acquired_at, expires_at, fence) "
                        f"VALUES (:key, 'other', 0, 9000000000000, {draw})"
                    ),
                    {"key": key},
                )
            elif backend == "postgresql":
                conn.execute(
                    sa.text(
                        f"INSERT INTO {t} (id, holder, acquired_at, expires_at, fence) "
                        f"VALUES (:key, 'other', 0, 9000000000000, "
                        f"nextval('{fence_sequence_name(t)}'))"
                    ),
                    {"key": key},
                )
            else:
                conn.execute(
                    sa.text(
                        f"UPDATE {t} SET fence = NEXTVAL({fence_sequence_name(t)}) WHERE id = :key"
                    ),
                    {"key": key},
                )
            fence = conn.execute(
                sa.text(f"SELECT fence FROM {t} WHERE id = :key"), {"key": key}
            ).scalar_one()
            conn.execute(sa.text(f"DELETE FROM {t} WHERE id = :key"), {"key": key})
            conn.commit()
            return int(fence)
    finally:
        engine.dispose()


@pytest.mark.acquire_paths
def test_a_grant_that_waited_gets_a_larger_token_than_the_grant_before_it(
    model: Any, key: str, backend: str, db_url: str
) -> None:
    before = model.acquire_token(key, TTL, "w1")
    assert before is not None
    assert model.release(key, "w1")

    started = threading.Event()
    other: list[int] = []
    thread = threading.Thread(
        target=lambda: other.append(_other_grant(backend, db_url, model.table, key, started))
    )
    thread.start()
    assert started.wait(10)
    token = model.acquire_token(key, TTL, "w2")  # waits until the other grant has ended
    thread.join(10)
    assert other, "the other grant did not finish"
    assert token is not None
    assert before < other[0] < token, (before, other[0], token)
    row = model.peek(key)
    assert (row.holder, row.fence) == ("w2", token)
