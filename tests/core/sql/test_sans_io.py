"""The operations without a database (sans-I/O, as h11 is tested).

Every operation of ``_core.ops`` (and the statement-sending functions of
``_core.places``, ``_core.slots`` and ``_core.liveness``) is a generator that yields
``(prepared, values)`` and is sent back each statement's ``Result`` or has the
driver's error thrown in. Here each one is driven by hand, for each database family
and acquire path, on ``Statements`` compiled for a dialect of an engine that never
connects: which statement goes out (the very ``Prepared`` of the model's
``Statements``), with which parameters, and what the operation makes of the rows,
row counts and last ids sent back or of the error thrown in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import MetaData

from joblocks._core import liveness as _liveness
from joblocks._core import ops as _ops
from joblocks._core import places as _places
from joblocks._core import slots as _slots
from joblocks._core.schedule import Schedule
from joblocks._db.connections import JobLock
from joblocks._sql.dialects import profile
from joblocks._sql.schema import build_table
from joblocks._sql.statements import AcquirePath, Prepared, Result, Sent, Statements, build
from joblocks._util.drivers import ConnectionLost, DuplicateKey, StatementFailed, Transient

#: An engine per family, never connected: its dialect compiles the statements.
URLS = {
    "sqlite": "sqlite:///never-opened.db",
    "postgresql": "postgresql+psycopg://u@127.0.0.1:1/db",
    "mysql": "mysql+pymysql://u@127.0.0.1:1/db",
}
FAMILIES = tuple(URLS)
TTL = 30_000
NOW = 1_700_000_000_000


def _statements(family: str, path: AcquirePath | None = None) -> Statements:
    engine = sa.create_engine(URLS[family])
    try:
        return build(engine.dialect, build_table(MetaData(), "job_locks"), path)
    finally:
        engine.dispose()


def _cases() -> Iterator[tuple[str, AcquirePath]]:
    for family in FAMILIES:
        engine = sa.create_engine(URLS[family])
        paths = profile(engine.dialect).acquire_paths
        engine.dispose()
        for path in paths:
            yield family, path


CASES = list(_cases())


def rows(*found: tuple[Any, ...], rowcount: int = -1) -> Result:
    """What a SELECT (or a statement with RETURNING) sends back."""
    return Result(list(found), rowcount if rowcount >= 0 else len(found), None)


def changed(rowcount: int, lastrowid: int | None = None) -> Result:
    """What an UPDATE/INSERT/DELETE without RETURNING sends back."""
    return Result((), rowcount, lastrowid)


def duplicate() -> DuplicateKey:
    """What a driver throws in for a duplicate key (here SQLite's own exception)."""
    return DuplicateKey(sqlite3.IntegrityError("UNIQUE constraint failed: job_locks.id"))


def lock_row(key: str, holder: str = "h", fence: int = 7, left_ms: int = TTL) -> tuple[Any, ...]:
    """A ``job_locks`` row as the reads return it (id, holder, acquired, expires,
    fence, now; epoch ms)."""
    return (key, holder, NOW - 1_000, NOW + left_ms, fence, NOW)


class Driven:
    """One operation driven by hand: each statement it yields is recorded and answered
    with the next reply (a ``Result`` sent back, or an exception thrown in)."""

    def __init__(self, gen: Sent[Any], *replies: Result | BaseException) -> None:
        self.sent: list[tuple[Prepared, dict[str, Any]]] = []
        left = list(replies)
        try:
            stmt, values = gen.send(None)  # type: ignore[arg-type]
            while True:
                assert isinstance(stmt, Prepared)
                self.sent.append((stmt, dict(values)))
                assert left, f"a statement more than answered: {stmt.sql}"
                reply = left.pop(0)
                if isinstance(reply, BaseException):
                    stmt, values = gen.throw(reply)
                else:
                    stmt, values = gen.send(reply)
        except StopIteration as done:
            self.value = done.value
        assert not left, f"{len(left)} replies left over: the operation stopped early"

    @property
    def statements(self) -> list[Prepared]:
        return [stmt for stmt, _ in self.sent]


# -- acquire: the paths ------------------------------------------------------------------


@pytest.mark.parametrize(("family", "path"), CASES)
def test_acquire_of_a_free_key_sends_its_path_s_statements(family: str, path: str) -> None:
    st = _statements(family, path)  # type: ignore[arg-type]
    values = {"key": "k", "holder": "h", "ttl": TTL}
    if path == "upsert":
        ok = rows((7, NOW, NOW + TTL)) if family != "mysql" else changed(1, 7)
        done = Driven(_ops.acquire(st, "k", "h", TTL), ok)
        assert done.statements == [st.acquire[0].stmt]
        assert done.sent[0][1] == values
    elif family == "mysql":
        # portable: UPDATE finds no row, INSERT draws a token, the token drawn again.
        done = Driven(_ops.acquire(st, "k", "h", TTL), changed(0, 0), changed(1, 5), changed(1, 9))
        assert done.statements == [st.acquire[0].stmt, st.insert.stmt, st.insert.redraw]
        assert done.sent[2][1] == {"key": "k", "holder": "h", "fence": 5}
        assert done.value == _ops.Grant(9, None, None)
        return
    else:
        ok = rows((7, NOW, NOW + TTL))
        done = Driven(_ops.acquire(st, "k", "h", TTL), rows(), ok)
        second = st.insert if path == "portable" else st.acquire[1]
        assert done.statements == [st.acquire[0].stmt, second.stmt]
        assert second.duplicate_means_taken is (path == "portable")
        assert [v for _, v in done.sent] == [values, values]
    expected = _ops.Grant(7, NOW, NOW + TTL) if family != "mysql" else _ops.Grant(7, None, None)
    assert done.value == expected


@pytest.mark.parametrize(("family", "path"), CASES)
def test_acquire_of_a_held_key_gives_none(family: str, path: str) -> None:
    st = _statements(family, path)  # type: ignore[arg-type]
    if path == "upsert":
        refused = rows() if family != "mysql" else changed(1, 0)  # LAST_INSERT_ID(0)
        done = Driven(_ops.acquire(st, "k", "h", TTL), refused)
        assert done.statements == [st.acquire[0].stmt]
    elif path == "portable":
        # The reference's two statements: the INSERT's duplicate key means "taken".
        nothing = rows() if family != "mysql" else changed(0, 0)
        done = Driven(_ops.acquire(st, "k", "h", TTL), nothing, duplicate())
        assert done.statements == [st.acquire[0].stmt, st.insert.stmt]
    else:
        done = Driven(_ops.acquire(st, "k", "h", TTL), rows(), rows())
        assert done.statements == [st.acquire[0].stmt, st.acquire[1].stmt]
    assert done.value is None
    token = Driven(_ops.acquire_token(st, "k", "h", TTL), *_refusal(st, family, path))
    assert token.value is None


def _refusal(st: Statements, family: str, path: str) -> list[Result | BaseException]:
    if path == "upsert":
        return [rows() if family != "mysql" else changed(1, 0)]
    if path == "portable":
        return [rows() if family != "mysql" else changed(0, 0), duplicate()]
    return [rows(), rows()]


@pytest.mark.parametrize(("family", "path"), CASES)
def test_a_duplicate_key_where_it_does_not_mean_taken_propagates(family: str, path: str) -> None:
    """Only the portable path's plain INSERT turns a duplicate key into "taken": the same
    error from the upsert or the first UPDATE is a database failure."""
    st = _statements(family, path)  # type: ignore[arg-type]
    with pytest.raises(DuplicateKey):
        Driven(_ops.acquire(st, "k", "h", TTL), duplicate())
    if path == "update_insert":
        with pytest.raises(DuplicateKey):
            Driven(_ops.acquire(st, "k", "h", TTL), rows(), duplicate())


@pytest.mark.parametrize(("family", "path"), [c for c in CASES if c[1] != "upsert"])
def test_another_error_at_the_insert_propagates(family: str, path: str) -> None:
    st = _statements(family, path)  # type: ignore[arg-type]
    lost = ConnectionLost(Exception("server has gone away"), lost=True)
    nothing = rows() if family != "mysql" else changed(0, 0)
    with pytest.raises(StatementFailed) as raised:
        Driven(_ops.acquire(st, "k", "h", TTL), nothing, lost)
    assert raised.value is lost


@pytest.mark.parametrize(("family", "path"), [c for c in CASES if c[1] != "upsert"])
def test_an_update_that_takes_the_row_sends_no_insert(family: str, path: str) -> None:
    st = _statements(family, path)  # type: ignore[arg-type]
    taken = rows((8, NOW, NOW + TTL)) if family != "mysql" else changed(1, 8)
    done = Driven(_ops.acquire(st, "k", "h", TTL), taken)
    assert done.statements == [st.acquire[0].stmt]
    assert done.value.fence == 8
    assert Driven(_ops.acquire_token(st, "k", "h", TTL), taken).value == 8


def test_mariadb_redraw_keeps_the_token_when_the_row_changed_meanwhile() -> None:
    """The INSERT's token is drawn again under the row lock; when that UPDATE matches
    nothing (the grant already lost), the grant keeps the token the INSERT drew."""
    st = _statements("mysql", "portable")
    done = Driven(_ops.acquire(st, "k", "h", TTL), changed(0, 0), changed(1, 5), changed(0, 0))
    assert done.statements == [st.acquire[0].stmt, st.insert.stmt, st.insert.redraw]
    assert done.value == _ops.Grant(5, None, None)
    # An INSERT that reports no token is no grant (and draws nothing again).
    refused = Driven(_ops.acquire(st, "k", "h", TTL), changed(0, 0), changed(1, 0))
    assert refused.statements == [st.acquire[0].stmt, st.insert.stmt]
    assert refused.value is None
    # The upsert path's statement needs no redraw (its token is drawn under the lock).
    upsert = _statements("mysql", "upsert")
    assert upsert.acquire[0].redraw is None
    assert Driven(_ops.acquire(upsert, "k", "h", TTL), changed(2, 6)).value.fence == 6


# -- the other operations --------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_release_and_delete(family: str) -> None:
    st = _statements(family)
    done = Driven(_ops.release(st, "k", "h"), changed(1))
    assert done.sent == [(st.release, {"key": "k", "holder": "h"})]
    assert done.value is True
    assert Driven(_ops.release(st, "k", "h"), changed(0)).value is False
    gone = Driven(_ops.delete(st, "k"), changed(0))
    assert gone.sent == [(st.delete, {"key": "k"})]
    assert gone.value is False


@pytest.mark.parametrize("family", FAMILIES)
def test_refresh_and_refresh_lease(family: str) -> None:
    st = _statements(family)
    moved = rows((NOW + TTL,)) if family != "mysql" else changed(1, NOW + TTL)
    done = Driven(_ops.refresh(st, "k", "h", TTL), moved)
    assert done.sent == [(st.refresh.stmt, {"key": "k", "holder": "h", "ttl": TTL})]
    assert done.value == NOW + TTL
    missed = rows() if family != "mysql" else changed(0, 0)
    assert Driven(_ops.refresh(st, "k", "h", TTL), missed).value is None
    lease = Driven(_ops.refresh_lease(st, "k", "h", 7, TTL), moved)
    values = {"key": "k", "holder": "h", "fence": 7, "ttl": TTL}
    assert lease.sent == [(st.refresh_lease.stmt, values)]
    assert lease.value == NOW + TTL
    assert Driven(_ops.refresh_lease(st, "k", "h", 7, TTL), missed).value is None


@pytest.mark.parametrize("family", FAMILIES)
def test_release_lease_with_and_without_a_hold(family: str) -> None:
    st = _statements(family)
    plain = Driven(_ops.release_lease(st, "k", "h", 7, 0), changed(1))
    assert plain.statements == [st.release_lease]
    assert plain.sent[0][1] == {
        "key": "k",
        "holder": "h",
        "fence": 7,
        "min_hold": 0,
        "hold_until": 0,
    }
    assert plain.value is True
    # Under a min_hold: the row is kept when the hold is ahead, deleted otherwise.
    kept = Driven(_ops.release_lease(st, "k", "h", 7, 5_000), changed(1))
    assert kept.statements == [st.hold_until]
    assert kept.value is True
    over = Driven(_ops.release_lease(st, "k", "h", 7, 5_000), changed(0), changed(0))
    assert over.statements == [st.hold_until, st.release_lease]
    assert over.value is False
    until = Driven(_ops.release_lease(st, "k", "h", 7, 0, NOW), changed(0), changed(1))
    assert until.sent[1][1]["hold_until"] == NOW
    assert until.value is True


@pytest.mark.parametrize("family", FAMILIES)
def test_reads(family: str) -> None:
    st = _statements(family)
    held = Driven(_ops.is_held(st, "k", "h", 7), rows((1,)))
    assert held.sent == [(st.is_held, {"key": "k", "holder": "h", "fence": 7})]
    assert held.value is True
    assert Driven(_ops.is_held(st, "k", "h", 7), rows()).value is False
    row = lock_row("k")
    peeked = Driven(_ops.peek(st, "k"), rows(row))
    assert peeked.sent == [(st.peek, {"key": "k"})]
    assert peeked.value == JobLock.from_row(row)
    assert Driven(_ops.peek(st, "k"), rows()).value is None
    by_state = {"all": st.list_all, "held": st.list_live, "expired": st.list_expired}
    for state, stmt in by_state.items():
        listed = Driven(_ops.list_locks(st, state), rows(row, lock_row("l")))  # type: ignore[arg-type]
        assert listed.sent == [(stmt, {})]
        assert [lock.key for lock in listed.value] == ["k", "l"]
    page = Driven(_ops.list_page(st, "expired", "a", 2), rows(row))
    assert page.sent == [(st.page_expired, {"after": "a", "n": 2})]
    assert [lock.key for lock in page.value] == ["k"]
    counts = {"all": st.count_all, "live": st.count_live, "expired": st.count_expired}
    for state, stmt in counts.items():
        counted = Driven(_ops.count(st, state), rows((3,)))  # type: ignore[arg-type]
        assert counted.sent == [(stmt, {})]
        assert counted.value == 3
    clock = Driven(_ops.now_ms(st), rows((NOW,)))
    assert clock.sent == [(st.now, {})]
    assert clock.value == NOW


@pytest.mark.parametrize("family", FAMILIES)
def test_prune_batches(family: str) -> None:
    st = _statements(family)
    # A batch with rows after it: its last key bounds the DELETE.
    batch = Driven(_ops.prune_batch(st, 1_000, 50, "a"), rows(("m",)), changed(50))
    assert batch.statements == [st.prune_bound, st.prune_range]
    assert batch.sent[0][1] == {"age": 1_000, "after": "a", "skip": 49}
    assert batch.sent[1][1] == {"age": 1_000, "after": "a", "skip": 49, "upto": "m"}
    assert batch.value == (50, "m")
    # The last batch: the rest.
    rest = Driven(_ops.prune_batch(st, 1_000, 50, "m"), rows(), changed(3))
    assert rest.statements == [st.prune_bound, st.prune_rest]
    assert rest.value == (3, None)
    dry = Driven(_ops.count_prunable(st, 1_000), rows((4,)))
    assert dry.sent == [(st.prune_count, {"age": 1_000})]
    assert dry.value == 4


@pytest.mark.parametrize(("family", "path"), CASES)
def test_insert_and_update(family: str, path: str) -> None:
    st = _statements(family, path)  # type: ignore[arg-type]
    row = lock_row("k")
    made = rows((7, NOW, NOW + TTL)) if family != "mysql" else changed(1, 5)
    replies: list[Result | BaseException] = [made]
    if family == "mysql":
        replies.append(changed(1, 7))  # the redraw
    done = Driven(_ops.insert(st, "k", "h", TTL), *replies, rows(row))
    assert done.statements[0] is st.insert.stmt
    assert done.statements[-1] is st.peek
    assert done.value == JobLock.from_row(row)
    # A duplicate key: the row exists, None (and no read).
    exists = Driven(_ops.insert(st, "k", "h", TTL), duplicate())
    assert exists.statements == [st.insert.stmt]
    assert exists.value is None
    both = Driven(_ops.update(st, "k", "h2", TTL), changed(1), changed(1))
    assert both.sent == [
        (st.update_holder, {"key": "k", "holder": "h2"}),
        (st.update_ttl, {"key": "k", "ttl": TTL}),
    ]
    assert both.value is True
    assert Driven(_ops.update(st, "k", None, TTL), changed(0)).statements == [st.update_ttl]
    assert Driven(_ops.update(st, "k", "h2", None), changed(0)).value is False


# -- counted leases, schedules, the liveness registry ----------------------------------


def _place_values(key: str, n: int) -> dict[str, Any]:
    return {"key": key, **{f"p{i}": _places.place_id(key, i) for i in range(1, n + 1)}}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_place_of_a_fresh_key(family: str) -> None:
    """No group row: it is claimed (UPDATE, then INSERT), read again, place 1 granted
    and the group row extended to cover it, all from one generator (one connection)."""
    st = _statements(family)
    table = build_table(MetaData(), "job_locks")
    ps = _places._prepared(st.dialect, table, 2)
    marker = _places.group_holder(2)
    group = ("k", marker, NOW, NOW + TTL, 1, NOW)
    replies: list[Result | BaseException] = [rows(), changed(0), changed(1), rows(group)]
    if family == "mysql":
        replies += [changed(1, 7), rows(lock_row(_places.place_id("k", 1)))]
    else:
        replies.append(rows((7, NOW - 1_000, NOW + TTL)))
    replies.append(changed(1))
    done = Driven(_places.acquire(st, table, "k", "h", TTL, 2), *replies)
    expected = [ps.read, ps.claim, ps.claim_insert, ps.read, st.acquire[0].stmt]
    if family == "mysql":
        expected.append(st.peek)
    expected.append(ps.extend)
    assert done.statements == expected
    assert done.sent[0][1] == _place_values("k", 2)
    assert done.sent[1][1] == {"key": "k", "marker": marker, "ttl": TTL}
    assert done.sent[4][1]["key"] == _places.place_id("k", 1)
    assert done.sent[-1][1] == {"key": "k", "marker": marker, "until": NOW + TTL}
    grant, row_id = done.value
    assert (grant.fence, row_id) == (7, _places.place_id("k", 1))


@pytest.mark.parametrize("family", FAMILIES)
def test_places_all_taken_costs_one_read(family: str) -> None:
    st = _statements(family)
    table = build_table(MetaData(), "job_locks")
    marker = _places.group_holder(2)
    taken = [
        ("k", marker, NOW, NOW + TTL, 1, NOW),
        (*lock_row(_places.place_id("k", 1), "a")[:4], 3, NOW),
        (*lock_row(_places.place_id("k", 2), "b")[:4], 4, NOW),
    ]
    done = Driven(_places.acquire(st, table, "k", "h", TTL, 2), rows(*taken))
    assert len(done.statements) == 1
    assert done.value is None
    listed = Driven(_places.holders(st, table, "k"), rows(taken[0]), rows(*taken))
    assert [row.holder for row in listed.value] == ["a", "b"]


def test_place_statements_need_no_connection() -> None:
    """The statements of a counted lease come from the dialect ``Statements`` were
    compiled for: one cached set per dialect, table and N."""
    st = _statements("postgresql")
    table = build_table(MetaData(), "job_locks")
    left = Driven(_places.leave(st, table, "k", 3), changed(1))
    assert left.sent == [
        (
            _places._prepared(st.dialect, table, 3).leave,
            {"marker": _places.group_holder(3), **_place_values("k", 3)},
        )
    ]
    assert left.statements[0] is _places._statements(st, table, 3).leave


@pytest.mark.parametrize("family", FAMILIES)
def test_a_scheduled_start(family: str) -> None:
    st = _statements(family)
    schedule = Schedule.parse("0 * * * *", "UTC")  # hourly
    granted = rows((7, NOW, NOW + TTL)) if family != "mysql" else changed(1, 7)
    replies: list[Result | BaseException] = [rows(), rows((NOW,)), granted]
    if family == "mysql":
        replies.append(rows(lock_row("k")))
    done = Driven(_slots.acquire(st, "k", "h", TTL, schedule), *replies)
    assert done.statements[:3] == [st.peek, st.now, st.acquire_in_slot[0].stmt]
    slot = schedule.slot(NOW)
    assert done.sent[2][1] == {"key": "k", "holder": "h", "ttl": TTL, "slot_start": slot[0]}
    assert done.value.grant.fence == 7
    # The slot was run already: one read, no write.
    ran = (*lock_row("k")[:2], NOW, NOW + TTL, 6, NOW)
    skipped = Driven(_slots.acquire(st, "k", "h", TTL, schedule), rows(ran))
    assert skipped.statements == [st.peek]
    assert skipped.value.grant is None
    assert skipped.value.skip is not None


def test_liveness_registry_steps() -> None:
    class Model:
        table = build_table(MetaData(), "job_locks")
        engine = sa.create_engine(URLS["postgresql"])
        statements = _statements("postgresql")

    model: Any = Model()
    reg = _liveness._Registry(model)
    st = model.statements
    done = Driven(
        _liveness._key_id(st, reg, "k"),
        changed(0),
        rows((5,)),
        rows(),
        changed(1),
        rows((42,)),
    )
    assert done.statements == [reg.create, reg.scope, reg.find, reg.add, reg.find]
    assert done.value == 42
    assert reg.lock_ref(42) == (5 << 32) | 42
    # The table made by another process meanwhile: its error is not the caller's.
    again = _liveness._Registry(model)
    failed = StatementFailed(Exception("exists"))
    found = Driven(_liveness._key_id(st, again, "k"), failed, rows((5,)), rows((42,)))
    assert found.value == 42
    assert Driven(_liveness._mark(st, reg, 42, 7), changed(1)).sent == [
        (reg.mark, {"id": 42, "fence": 7})
    ]
    assert Driven(_liveness._marked(st, reg, 42), rows((7,))).value == 7
    assert Driven(_liveness._marked(st, reg, 42), rows((None,))).value is None
    Model.engine.dispose()


def test_a_drivers_failure_is_normalized_by_its_kind() -> None:
    """What a driver throws into an operation: a duplicate key, a deadlock or
    serialization failure (safe to send again), or any other failure as it is; a
    failure that took the connection with it is never "transient"."""
    psycopg = pytest.importorskip("psycopg")
    pymysql = pytest.importorskip("pymysql")
    pg, my, lite = profile("postgresql"), profile("mysql"), profile("sqlite")
    unique = psycopg.errors.UniqueViolation("duplicate key value violates unique constraint")
    assert type(pg.failed(unique)) is DuplicateKey
    assert type(my.failed(pymysql.err.IntegrityError(1062, "Duplicate entry"))) is DuplicateKey
    assert type(lite.failed(sqlite3.IntegrityError("UNIQUE constraint failed"))) is DuplicateKey
    serialization = psycopg.errors.SerializationFailure("could not serialize access")
    assert type(pg.failed(serialization)) is Transient
    assert type(pg.failed(psycopg.errors.DeadlockDetected("deadlock detected"))) is Transient
    deadlock = pymysql.err.OperationalError(1213, "Deadlock found")
    assert type(my.failed(deadlock)) is Transient
    assert type(my.failed(pymysql.err.OperationalError(1205, "Lock wait timeout"))) is (
        StatementFailed
    )
    gone = my.failed(deadlock, lost=True)
    assert type(gone) is ConnectionLost
    assert gone.lost
    assert gone.orig is deadlock
    other = lite.failed(sqlite3.OperationalError("disk I/O error"))
    assert type(other) is StatementFailed
    assert not other.lost
