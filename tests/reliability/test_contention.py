"""Contention fuzz and history check: many processes, one key, a shared counter.

Every worker is a process of its own (the shared spawned pool), with its own model and
connections. All start together at a barrier.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import pytest
import sqlalchemy as sa

from ..support.pool import Pool
from . import _workers as workers
from ._support import Reporter, percentile

pytestmark = pytest.mark.reliability

ROUNDS = {False: 25, True: 400}  # successful rounds per worker
HOLD_MS = 2.0  # the work sleeps 0..HOLD_MS between its read and its write
HISTORY_S = {False: 2.0, True: 20.0}
HISTORY_TTL_MS = 150
OVERRUN_P = 0.03


def _counter(db_url: str, app: str) -> int:
    engine = sa.create_engine(db_url)
    table = workers.app_table(app)
    with engine.connect() as conn:
        value = conn.execute(sa.select(table.c.value).where(table.c.id == 1)).scalar_one()
        conn.execute(table.update().values(value=0))
        conn.commit()
    engine.dispose()
    return int(value)


def test_contention_fuzz(
    pool: Pool,
    backend: str,
    db_url: str,
    table_name: str,
    app_table: str,
    long_run: bool,
    report: Reporter,
) -> None:
    rounds = ROUNDS[long_run]
    key = f"counter-{uuid.uuid4().hex[:8]}"
    workers.make_model(db_url, table_name).dispose()  # the lock table exists before the race

    # Control: the same workload without the lock loses updates and overlaps, so the
    # harness can see both.
    pool.reset()
    calls = [(db_url, table_name, app_table, key, rounds, HOLD_MS, False)] * pool.size
    control = pool.run(workers.contention, calls)
    control_lost = sum(r["wins"] for r in control) - _counter(db_url, app_table)
    control_inside = pool.shared.max_inside.value

    pool.reset()
    calls = [(db_url, table_name, app_table, key, rounds, HOLD_MS, True)] * pool.size
    results = pool.run(workers.contention, calls)
    wins = sum(r["wins"] for r in results)
    counter = _counter(db_url, app_table)
    latencies = [ms for r in results for ms in r["latencies_ms"]]
    report(
        "contention fuzz",
        backend,
        processes=pool.size,
        rounds_each=rounds,
        lost_updates=wins - counter,
        max_inside=pool.shared.max_inside.value,
        refused=sum(r["refused"] for r in results),
        acquire_p50_ms=round(percentile(latencies, 50), 2),
        acquire_p99_ms=round(percentile(latencies, 99), 2),
        control_without_lock_lost_updates=control_lost,
        control_without_lock_max_inside=control_inside,
    )
    assert wins == pool.size * rounds
    assert counter == wins, f"{wins - counter} lost updates"
    assert pool.shared.max_inside.value == 1
    assert control_lost > 0, "the harness did not see the lost updates of the control run"
    assert control_inside > 1


class Section(NamedTuple):
    begin: int  # the database's clock, read just after the work started
    end: int  # ... read just before it ended (and before the release)
    token: int
    acquired: int  # the lease's validity window, the database's clock
    expires: int
    holder: str
    released: bool  # what the lease's release() said


def check_history(sections: list[Section]) -> dict[str, int]:
    """Overlaps (all, and while both leases were valid), token order, stale releases.

    A grant's ``acquired`` is the database's "now" of the granting statement, which is
    the statement's start: a grant that waited for a row lock happened later than its
    ``acquired``. So a grant is known to come after another one only when its
    ``acquired`` is later than the other's ``begin`` (read after that grant).
    """
    ordered = sorted(sections)
    overlaps = overlaps_valid = 0
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if b.begin >= a.end:
                break
            overlaps += 1
            low = max(b.begin, a.acquired, b.acquired)
            high = min(a.end, b.end, a.expires, b.expires)
            overlaps_valid += low < high
    # Tokens grow in grant order: every section whose work began before b was granted
    # has a smaller token than b's.
    order_violations = len(sections) - len({s.token for s in sections})
    highest = -1
    pending = iter(ordered)
    earlier = next(pending, None)
    for b in sorted(sections, key=lambda s: s.acquired):
        while earlier is not None and earlier.begin < b.acquired:
            highest = max(highest, earlier.token)
            earlier = next(pending, None)
        order_violations += highest >= b.token
    # A release that said True (it deleted its own row) although a later grant had
    # already started its work before this one's ended.
    stale = sum(
        1
        for a in sections
        if a.released and any(b.token > a.token and b.begin < a.end for b in sections)
    )
    takeovers = sum(1 for a in sections if not a.released)
    return {
        "sections": len(sections),
        "overlaps_while_both_valid": overlaps_valid,
        "overlaps_after_an_expiry": overlaps - overlaps_valid,
        "token_order_violations": order_violations,
        "stale_releases_deleting": stale,
        "leases_taken_over_after_expiry": takeovers,
    }


def test_history_check(
    pool: Pool, backend: str, db_url: str, table_name: str, long_run: bool, report: Reporter
) -> None:
    key = f"history-{uuid.uuid4().hex[:8]}"
    workers.make_model(db_url, table_name).dispose()
    pool.reset()
    seconds = HISTORY_S[long_run]
    calls = [(db_url, table_name, key, seconds, HISTORY_TTL_MS, OVERRUN_P)] * pool.size
    results: list[dict[str, Any]] = pool.run(workers.history, calls)
    sections = [Section(*entry) for r in results for entry in r["log"]]
    figures = check_history(sections)
    report(
        "history check",
        backend,
        processes=pool.size,
        seconds=seconds,
        ttl_ms=HISTORY_TTL_MS,
        **figures,
    )
    assert figures["sections"] > 20
    assert sum(1 for r in results if r["log"]) >= 2, "no contention: one worker did all"
    assert figures["overlaps_while_both_valid"] == 0
    assert figures["token_order_violations"] == 0
    assert figures["stale_releases_deleting"] == 0


def test_history_checker_sees_what_it_must() -> None:
    """The checker itself: an overlap of two valid leases and a token inversion count."""

    def s(begin: int, end: int, token: int, acquired: int, expires: int) -> Section:
        return Section(begin, end, token, acquired, expires, f"h{token}", True)

    clean = [s(1, 5, 1, 0, 100), s(6, 9, 2, 6, 100)]
    assert check_history(clean)["overlaps_while_both_valid"] == 0
    both_valid = [s(1, 5, 1, 0, 100), s(3, 9, 2, 3, 100)]
    assert check_history(both_valid)["overlaps_while_both_valid"] == 1
    after_expiry = [s(1, 50, 1, 0, 10), s(12, 20, 2, 11, 100)]
    figures = check_history(after_expiry)
    assert (figures["overlaps_while_both_valid"], figures["overlaps_after_an_expiry"]) == (0, 1)
    assert figures["stale_releases_deleting"] == 1  # h1 said True after h2 took over
    inverted = [s(1, 5, 2, 0, 100), s(6, 9, 1, 6, 100)]
    assert check_history(inverted)["token_order_violations"] == 1
    waited = [s(1, 5, 1, 0, 100), s(6, 9, 2, 4, 100)]  # granted by a statement begun at 4
    assert check_history(waited)["token_order_violations"] == 0
    repeated = [*clean, s(10, 12, 2, 10, 100)]  # token 2 granted twice: repeated, not grown
    assert check_history(repeated)["token_order_violations"] == 2
