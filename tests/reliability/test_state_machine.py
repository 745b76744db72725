"""A stateful property test: random sequences of lease operations against a plain model.

Several holders acquire, refresh, release and peek two keys, take leases and release
them, and let time pass, against every database (and, with ``--long``, every acquire
path). A plain-Python model of the reference's rules predicts every answer:

- acquire succeeds iff there is no row, the row expired, or it is the same holder's
  (a re-entrant acquire of the holder's live row keeps its token; every other grant,
  the holder's own expired row included, gets a larger token);
- release deletes iff the row is the same holder's;
- refresh succeeds iff the row exists and is the same holder's, even if expired;
- peek returns the row; a lease's release deletes iff the row still has its holder
  and token.

Time is real (ttls of 30–100 ms, waits up to 120 ms). Each operation is bracketed by
two readings of the database's clock, so the model knows each expiry within an
interval; when the operation's "now" might fall on either side of an expiry, either
answer is accepted, and the model follows the one the database gave.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

import joblocks

from ._support import IN_CI, Reporter

try:
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        invariant,
        precondition,
        rule,
        run_state_machine_as_test,
    )
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    if IN_CI:
        raise
    pytest.skip("hypothesis is not installed", allow_module_level=True)

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]  # --long: minutes

HOLDERS = ("h0", "h1", "h2")
KEYS = ("a", "b")
TTLS_MS = (30, 100, 5_000)
WAITS_MS = (0, 50, 120)
PAUSES_MS = (0, 0, 50, 120)  # before a take: often past the ttl of the row there
RUNS = {False: 8, True: 25}
STEPS = {False: 30, True: 50}
PATHS = {
    "sqlite": ("upsert", "update_insert", "portable"),
    "postgresql": ("upsert", "update_insert", "portable"),
    "mariadb": ("upsert", "portable"),
}


OPERATIONS = ("granted", "refused", "refresh", "release", "peek", "lease release")


@dataclass
class Row:
    holder: str
    fence: int
    lo: int  # expires_at is within [lo, hi] (the database's clock, ms)
    hi: int


class LockMachine(RuleBasedStateMachine):
    """The database under random operations, next to the model of its rules."""

    db: joblocks.JobLockModel
    tally: Counter[str]

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"sm-{uuid.uuid4().hex[:8]}-"
        self.rows: dict[str, Row | None] = dict.fromkeys(KEYS)
        self.highest = 0  # the largest token granted so far
        self.leases: list[tuple[str, joblocks.Lease]] = []

    # -- helpers ------------------------------------------------------------------------

    def timed(self, call: Any) -> tuple[Any, int, int]:
        """(result, t0, t1): the operation's "now" is within [t0, t1]."""
        t0 = self.db.now_ms()
        result = call()
        t1 = self.db.now_ms()
        return result, t0, t1

    def granted(self, key: str, holder: str, token: int | None, t0: int, t1: int, ttl: int) -> None:
        """Check an acquire's answer against the model, then follow it."""
        row = self.rows[key]
        if row is None or row.holder == holder or row.hi <= t0:  # (hi <= t0: expired)
            must = True
        elif row.lo > t1:  # still live after it ran
            must = False
        else:
            must = None  # on the boundary: either answer
            self.tally["boundary"] += 1
        if must is not None:
            assert (token is not None) == must, (key, holder, row, t0, t1, token)
        if token is None:
            self.tally["refused"] += 1
            return
        if row is not None and row.holder == holder and row.lo > t1:  # live throughout
            assert token == row.fence, "a re-entrant acquire of a live row changed the token"
        elif row is not None and row.holder == holder and row.hi > t0:  # may have expired
            assert token == row.fence or token > self.highest, (token, row, self.highest)
            self.tally["boundary"] += 1
        else:
            assert token > self.highest, f"token {token} not above {self.highest}"
            self.tally["takeover" if row is not None else "fresh"] += 1
        self.highest = max(self.highest, token)
        self.rows[key] = Row(holder, token, t0 + ttl, t1 + ttl)
        self.tally["granted"] += 1

    # -- the reference's four operations --------------------------------------------

    @rule(
        key=st.sampled_from(KEYS),
        holder=st.sampled_from(HOLDERS),
        ttl=st.sampled_from(TTLS_MS),
        pause=st.sampled_from(PAUSES_MS),
    )
    def acquire(self, key: str, holder: str, ttl: int, pause: int) -> None:
        time.sleep(pause / 1000)
        token, t0, t1 = self.timed(lambda: self.db.acquire_token(self.prefix + key, ttl, holder))
        self.granted(key, holder, token, t0, t1, ttl)

    @rule(key=st.sampled_from(KEYS), holder=st.sampled_from(HOLDERS), ttl=st.sampled_from(TTLS_MS))
    def refresh(self, key: str, holder: str, ttl: int) -> None:
        ok, t0, t1 = self.timed(lambda: self.db.refresh(self.prefix + key, ttl, holder))
        row = self.rows[key]
        assert ok == (row is not None and row.holder == holder), (key, holder, row)
        if row is not None and ok:
            row.lo, row.hi = t0 + ttl, t1 + ttl
        self.tally["refresh"] += 1

    @rule(key=st.sampled_from(KEYS), holder=st.sampled_from(HOLDERS))
    def release(self, key: str, holder: str) -> None:
        deleted = self.db.release(self.prefix + key, holder)
        row = self.rows[key]
        assert deleted == (row is not None and row.holder == holder), (key, holder, row)
        if deleted:
            self.rows[key] = None
        self.tally["release"] += 1

    @rule(key=st.sampled_from(KEYS))
    def peek(self, key: str) -> None:
        found = self.db.peek(self.prefix + key)
        row = self.rows[key]
        if row is None:
            assert found is None, found
            return
        assert found is not None, (key, row)
        assert (found.holder, found.fence) == (row.holder, row.fence)
        expires = round(found.expires_at.timestamp() * 1000)
        assert row.lo <= expires <= row.hi, (expires, row)
        row.lo = row.hi = expires
        self.tally["peek"] += 1

    # -- leases: token-checked release --------------------------------------------------

    @rule(
        key=st.sampled_from(KEYS),
        holder=st.sampled_from(HOLDERS),
        ttl=st.sampled_from(TTLS_MS),
        pause=st.sampled_from(PAUSES_MS),
    )
    def take_lease(self, key: str, holder: str, ttl: int, pause: int) -> None:
        time.sleep(pause / 1000)
        lease, t0, t1 = self.timed(lambda: self.db.try_lease(self.prefix + key, ttl, holder=holder))
        self.granted(key, holder, None if lease is None else lease.token, t0, t1, ttl)
        if lease is not None:
            self.leases.append((key, lease))

    @precondition(lambda self: self.leases)
    @rule(pick=st.integers(min_value=0))
    def release_lease(self, pick: int) -> None:
        key, lease = self.leases.pop(pick % len(self.leases))
        deleted = lease.release()
        row = self.rows[key]
        expected = row is not None and (row.holder, row.fence) == (lease.holder, lease.token)
        assert deleted == expected, (key, lease, row)
        if deleted:
            self.rows[key] = None
        self.tally["lease release"] += 1

    # -- time ---------------------------------------------------------------------------

    @rule(ms=st.sampled_from(WAITS_MS))
    def wait(self, ms: int) -> None:
        time.sleep(ms / 1000)

    @invariant()
    def one_row_per_key_at_most(self) -> None:
        assert len(self.rows) == len(KEYS)

    def teardown(self) -> None:
        for _, lease in self.leases:
            lease.release()
        for key in KEYS:
            self.db.delete(self.prefix + key)
        self.tally["runs"] += 1


def test_state_machine(
    backend: str, db_url: str, table_name: str, long_run: bool, report: Reporter
) -> None:
    paths = PATHS[backend] if long_run else (None,)
    tally: Counter[str] = Counter()
    for path in paths:
        db = joblocks.JobLockModel(db_url, table_name=table_name, acquire_path=path)
        db.create_table()

        class Machine(LockMachine):
            pass

        Machine.db = db
        Machine.tally = tally
        try:
            run_state_machine_as_test(
                Machine,
                settings=settings(
                    max_examples=RUNS[long_run],
                    stateful_step_count=STEPS[long_run],
                    deadline=None,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        finally:
            db.dispose()
    report(
        "stateful model check",
        backend,
        acquire_paths="all" if long_run else "default",
        runs=tally["runs"],
        operations=sum(n for k, n in tally.items() if k in OPERATIONS),
        grants=tally["granted"],
        takeovers_of_expired_rows=tally["takeover"],
        refusals=tally["refused"],
        boundary_cases_accepted_either_way=tally["boundary"],
        failures=0,
    )
    assert tally["granted"]
    assert tally["refused"]
    assert tally["takeover"], "no lease ever expired and was taken over"
