"""The run ledger (``record=True``): a ``job_runs`` row per run, on every database × face.

Runs end ``ok``, ``error`` (the work raised) or ``lost`` (a keep-alive renewal was
refused); ``record="all"`` adds ``skipped`` rows for starts that found the key taken.
Times are the database's. A ledger write that fails (a foreign table in the ledger's
name, the table dropped under a running job) is logged and counted in a
``record_failed`` event; the job itself runs and returns as without a ledger.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, Callable

import pytest
from sqlalchemy import inspect

import joblocks
from joblocks._sql.schema import runs_table_name


@pytest.fixture
def events() -> Iterator[list[joblocks.Event]]:
    seen: list[joblocks.Event] = []
    joblocks.add_listener(seen.append)
    yield seen
    joblocks.remove_listener(seen.append)


def ms(moment: Any) -> int:
    return round(moment.timestamp() * 1000)


def plain_engine(db_url: str) -> Iterator[Any]:
    """A sync model's autocommit engine on the test's database, for set-up SQL."""
    model = joblocks.JobLockModel(db_url, create_table=False)
    try:
        yield model.engine
    finally:
        model.dispose()


def test_ok_error_and_lost_runs_are_recorded(
    make_model: Callable[..., Any], key: str, events: list[joblocks.Event]
) -> None:
    model = make_model(record=True)
    before = model.now_ms()
    assert model.run_with_lock(key, 10_000, lambda: None)

    def fail() -> None:
        raise RuntimeError("boom at postgresql://app:hunter2@db/app")

    with pytest.raises(RuntimeError):
        model.run_with_lock(key, 10_000, fail)

    lost = threading.Event()

    def lose_it() -> None:
        model.delete(key)  # the row goes: the next renewal is refused
        assert lost.wait(15), "the lease was not found lost"

    model.run_with_lock(
        key,
        3_000,
        lose_it,
        keepalive=True,
        renew_every=100,
        on_lost=lambda lease: lost.set(),
    )
    after = model.now_ms()
    runs = model.runs(key)
    assert [run.outcome for run in runs] == ["lost", "error", "ok"]
    lost_run, error_run, ok_run = runs
    assert error_run.error == "RuntimeError: boom at postgresql://app:***@db/app"
    assert ok_run.error is None
    assert lost_run.error
    assert "renewal refused" in lost_run.error
    for run in runs:
        assert run.key == key
        assert run.holder == joblocks.worker_id()
        assert run.pid > 0
        assert run.host
        assert run.token is not None
        assert run.ended_at is not None
        assert run.duration is not None
        # The database's clock: within the reads of its now around the runs.
        assert before <= ms(run.started_at) <= ms(run.ended_at) <= after
        assert ms(run.ended_at) - ms(run.started_at) == run.duration.total_seconds() * 1000
        assert run.slot is None
        assert run.schedule is None
    tokens = [run.token for run in reversed(runs)]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 3
    released = [e for e in events if e.kind == "released" and e.key == key]
    assert [e.outcome for e in released] == ["ok", "error", "lost"]
    assert not [e for e in events if e.kind == "record_failed"]


def test_lease_block_records_its_outcome(make_model: Callable[..., Any], key: str) -> None:
    model = make_model()
    with model.lease(key, 10_000, record=True):
        pass
    with pytest.raises(ValueError, match="bad row"), model.lease(key, 10_000, record=True):
        raise ValueError("bad row 7")
    held = model.try_lease(key, 10_000, record=True)
    assert held is not None
    assert model.runs(key)[0].outcome is None  # in progress
    held.release()
    assert [(r.outcome, r.error) for r in model.runs(key)] == [
        ("ok", None),
        ("error", "ValueError: bad row 7"),
        ("ok", None),
    ]


def test_skips_are_recorded_only_when_asked(make_model: Callable[..., Any], key: str) -> None:
    model = make_model(record="all")
    other = make_model()
    held = other.try_lease(key, 10_000, holder="elsewhere")
    assert held is not None
    assert not model.run_with_lock(key, 10_000, lambda: None)
    assert not model.run_with_lock(key, 10_000, lambda: None, record=True)  # no skip row
    assert model.try_lease(key, 10_000) is None
    held.release()
    runs = model.runs(key)
    assert [run.outcome for run in runs] == ["skipped", "skipped"]
    assert all(run.token is None and run.duration is not None for run in runs)


def test_off_by_default_no_table(make_model: Callable[..., Any], key: str, db_url: str) -> None:
    model = make_model()
    assert model.run_with_lock(key, 10_000, lambda: None)
    recorded = make_model(record=True)
    assert recorded.run_with_lock(key, 10_000, lambda: None, record=False)
    assert model.runs() == []  # reading creates nothing either
    for engine in plain_engine(db_url):
        with engine.connect() as conn:
            assert not inspect(conn).has_table(runs_table_name(model.table_name))


def test_a_failed_ledger_write_never_fails_the_job(
    make_model: Callable[..., Any],
    key: str,
    db_url: str,
    events: list[joblocks.Event],
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = make_model(record=True)
    # A foreign table in the ledger's name: every write to it fails.
    runs = runs_table_name(model.table_name)
    for engine in plain_engine(db_url):
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {runs} (other INTEGER)")
    ran: list[bool] = []
    assert model.run_with_lock(key, 10_000, lambda: ran.append(True))
    assert ran == [True]
    assert model.peek(key) is None  # released as usual
    failed = [e for e in events if e.kind == "record_failed"]
    assert len(failed) == 1
    assert failed[0].key == key
    assert isinstance(failed[0].error, joblocks.LockBackendError)
    assert "could not record" in caplog.text


def test_a_ledger_dropped_under_a_running_job(
    make_model: Callable[..., Any], key: str, db_url: str, events: list[joblocks.Event]
) -> None:
    model = make_model(record=True)
    runs = runs_table_name(model.table_name)

    def drop() -> None:
        for engine in plain_engine(db_url):
            with engine.connect() as conn:
                conn.exec_driver_sql(f"DROP TABLE {runs}")

    assert model.run_with_lock(key, 10_000, drop)
    assert model.peek(key) is None
    assert [e.kind for e in events if e.kind == "record_failed"] == ["record_failed"]
    assert model.run_with_lock(key, 10_000, lambda: None)  # and the next job runs too


def test_prune_runs_in_batches(make_model: Callable[..., Any], key: str) -> None:
    model = make_model(record=True)
    for _ in range(5):
        model.run_with_lock(key, 10_000, lambda: None)
    assert model.prune_runs(3_600_000) == 0  # none is an hour old
    time.sleep(0.01)  # the database's now moves past the last start
    assert model.prune_runs(0, batch_size=2) == 5
    assert model.runs() == []
    assert model.prune_runs(0) == 0


def test_runs_filters(make_model: Callable[..., Any], key: str) -> None:
    model = make_model(record=True)
    for name in (key, key + "-b", key):
        model.run_with_lock(name, 10_000, lambda: None)
    assert len(model.runs()) == 3
    assert len(model.runs(key)) == 2
    assert len(model.runs(limit=1)) == 1
    assert len(model.runs(since=3_600_000)) == 3


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("value", "error"),
    [("yes", ValueError), (1, TypeError), (0.5, TypeError), ("", ValueError)],
)
def test_record_is_checked_before_the_database(
    make_model: Callable[..., Any], key: str, value: Any, error: type[Exception]
) -> None:
    model = make_model()
    with pytest.raises(error, match="record"):
        model.run_with_lock(key, 10_000, lambda: None, record=value)
    with pytest.raises(error, match="record"):
        model.try_lease(key, 10_000, record=value)
    with pytest.raises(ValueError, match="limit"):
        model.runs(limit=0)
    with pytest.raises(ValueError, match="older_than"):
        model.prune_runs(-1)
    assert model.peek(key) is None


@pytest.mark.parametrize("backend", ["sqlite"])
def test_model_record_is_checked(make_model: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="record"):
        make_model(record="sometimes")
    with pytest.raises(TypeError, match="record"):
        make_model(record=1)


def test_decorator_records(make_model: Callable[..., Any], key: str, face: str) -> None:
    model = make_model()
    target = model.model
    if face == "sync":

        @joblocks.single_instance(key, 10_000, model=target, record=True)
        def job() -> int:
            return 7

        assert job() == 7
    else:
        import asyncio

        from tests.support.faces import run_on

        @joblocks.single_instance(key, 10_000, model=target, record=True)
        async def ajob() -> int:
            await asyncio.sleep(0)
            return 7

        assert run_on(model.loop, ajob()) == 7
    assert [run.outcome for run in model.runs(key)] == ["ok"]


def test_scheduled_runs_carry_their_slot(make_model: Callable[..., Any], key: str) -> None:
    from joblocks import Schedule

    model = make_model(record="all")
    # A yearly slot: both starts surely fall into the same one.
    options = {"schedule": "0 0 1 1 *", "timezone": "Europe/Berlin"}
    assert model.run_with_lock(key, 10_000, lambda: None, **options)
    assert not model.run_with_lock(key, 10_000, lambda: None, **options)  # slot already run
    start, _end = Schedule.parse("0 0 1 1 *", "Europe/Berlin").slot(model.now_ms())
    runs = model.runs(key)
    assert [run.outcome for run in runs] == ["skipped", "ok"]
    for run in runs:
        assert run.slot is not None
        assert ms(run.slot) == start
        assert run.schedule == "0 0 1 1 *"
        assert run.timezone == "Europe/Berlin"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_configure_record(db_url: str, key: str, table_name: str) -> None:
    with pytest.raises(ValueError, match="record"):
        joblocks.configure(db_url, record="maybe")
    joblocks.configure(db_url, record=True, table_name=table_name)
    try:
        assert joblocks.run_with_lock(key, 10_000, lambda: None)
        assert [run.outcome for run in joblocks.get_model().runs(key)] == ["ok"]
    finally:
        joblocks.configure()


@pytest.mark.parametrize("face", ["aio"])
def test_aio_lease_block_records(make_model: Callable[..., Any], key: str, face: str) -> None:
    import joblocks.aio
    from tests.support.faces import run_on

    model = make_model()

    async def body() -> list[Any]:
        async with joblocks.aio.lease(key, 10_000, model=model.model, record=True):
            pass
        with pytest.raises(KeyError):
            async with joblocks.aio.lease(key, 10_000, model=model.model, record=True):
                raise KeyError("missing")
        runs: list[Any] = await model.model.runs(key)
        return runs

    runs = run_on(model.loop, body())
    assert [(run.outcome, run.error) for run in runs] == [
        ("error", "KeyError: 'missing'"),
        ("ok", None),
    ]


def test_a_run_that_outlives_its_ttl_without_keepalive_is_lost(
    make_model: Callable[..., Any], key: str, events: list[joblocks.Event]
) -> None:
    """No keep-alive: the ttl runs out while the function runs, so the run is ``lost``
    (not ``ok``), the same as a refused renewal; its error says why."""
    model = make_model(record=True)

    def outlive() -> None:
        time.sleep(1.5)

    model.run_with_lock(key, 300, outlive, keepalive=False)
    (run,) = model.runs(key)
    assert run.outcome == "lost"
    assert run.error is not None
    assert "ttl" in run.error
    released = [e for e in events if e.kind == "released" and e.key == key]
    assert [e.outcome for e in released] == ["lost"]
