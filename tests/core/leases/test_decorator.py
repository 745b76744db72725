"""``@joblocks.single_instance``: sync and async functions, templated keys, validation.

The database tests run on every database (the suite's ``backend`` fixture); the
validation tests touch none.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
import joblocks.aio
from joblocks._decorator import single_instance

from ...support.contrib import configured

OTHER = "another-worker"


@pytest.fixture
def model(db_url: str, table_name: str) -> Iterator[joblocks.JobLockModel]:
    made = joblocks.JobLockModel(db_url, table_name=table_name)
    yield made
    made.dispose()


def _skipped_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        r.name == "joblocks"
        and r.levelno == logging.INFO
        and "skipped: held elsewhere" in r.getMessage()
        for r in caplog.records
    )


# -- sync functions ----------------------------------------------------------------------


def test_sync_returns_the_value_and_releases(model: joblocks.JobLockModel) -> None:
    seen: list[Any] = []

    @single_instance("double", 10_000, model=model)
    def double(x: int) -> int:
        row = model.peek("double")
        seen.append(row and row.holder)
        return 2 * x

    assert double(21) == 42
    assert seen == [joblocks.worker_id()]  # the lock was held while it ran
    assert model.peek("double") is None  # and released after


def test_sync_skipped_when_held_elsewhere(
    model: joblocks.JobLockModel, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    @single_instance("busy", 10_000, model=model)
    def work() -> str:
        calls.append(1)
        return "ran"

    assert model.acquire("busy", 60_000, OTHER)
    with caplog.at_level(logging.INFO, logger="joblocks"):
        assert work() is None
    assert calls == []
    assert _skipped_logged(caplog)
    assert model.peek("busy").holder == OTHER  # untouched
    model.release("busy", OTHER)
    assert work() == "ran"


def test_sync_exception_propagates_after_release(model: joblocks.JobLockModel) -> None:
    @single_instance("boom", 10_000, model=model)
    def boom() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        boom()
    assert model.peek("boom") is None


def test_overlapping_call_in_this_process_is_skipped(model: joblocks.JobLockModel) -> None:
    inner: list[Any] = []

    @single_instance("nested", 10_000, model=model)
    def job(depth: int) -> str:
        if depth == 0:
            inner.append(job(1))  # the same key, while the outer call holds it
        return f"depth {depth}"

    assert job(0) == "depth 0"
    assert inner == [None]


def test_min_hold_keeps_the_lock_after_a_short_run(model: joblocks.JobLockModel) -> None:
    @single_instance("cron:prune", 10_000, model=model, min_hold=30_000)
    def prune() -> str:
        return "pruned"

    assert prune() == "pruned"
    row = model.peek("cron:prune")
    assert row is not None
    assert not row.expired
    assert not model.acquire("cron:prune", 10_000, OTHER)


def test_templated_key_from_arguments_and_defaults(model: joblocks.JobLockModel) -> None:
    keys: list[list[str]] = []

    @single_instance("report:{tenant}:{period}", 10_000, model=model)
    def report(tenant: str, period: str = "daily") -> str:
        keys.append([row.key for row in model.list()])
        return tenant

    assert report("acme") == "acme"
    assert report(tenant="zeta", period="weekly") == "zeta"
    assert keys == [["report:acme:daily"], ["report:zeta:weekly"]]

    assert model.acquire("report:acme:daily", 60_000, OTHER)
    assert report("acme") is None  # held elsewhere for this tenant only
    assert report("zeta") == "zeta"


def test_templated_key_attributes_methods_and_kwargs(model: joblocks.JobLockModel) -> None:
    class Tenant:
        def __init__(self, name: str) -> None:
            self.name = name

        @single_instance("tenant:{self.name}:{job}", 10_000, model=model)
        def run(self, job: str) -> str:
            return next(row.key for row in model.list())

    assert Tenant("acme").run("sync") == "tenant:acme:sync"

    @single_instance("kw:{region}", 10_000, model=model)
    def by_kwargs(**options: Any) -> str:
        return next(row.key for row in model.list())

    assert by_kwargs(region="eu") == "kw:eu"
    with pytest.raises(ValueError, match="no argument 'region'"):
        by_kwargs(zone="x")


def test_templated_key_renders_to_an_invalid_key(model: joblocks.JobLockModel) -> None:
    @single_instance("{name}", 10_000, model=model)
    def named(name: str) -> None:
        raise AssertionError("not reached")

    with pytest.raises(ValueError, match="empty"):
        named("   ")
    with pytest.raises(TypeError):
        named()  # type: ignore[call-arg]  # the call itself does not match


def test_default_model_is_looked_up_at_call_time(tmp_path: Path, table_name: str) -> None:
    @single_instance("late-config", 10_000)
    def job() -> str:
        return next(row.key for row in joblocks.get_model().list())

    with configured(f"sqlite:///{tmp_path / 'late.db'}", table_name=table_name):
        assert job() == "late-config"


def test_threads_exclude_each_other(model: joblocks.JobLockModel) -> None:
    inside = threading.Event()
    go_on = threading.Event()
    results: list[Any] = []

    @single_instance("threads", 10_000, model=model)
    def slow() -> str:
        inside.set()
        assert go_on.wait(10)
        return "first"

    first = threading.Thread(target=lambda: results.append(slow()))
    first.start()
    assert inside.wait(10)
    results.append(slow())  # while the thread holds the lock
    go_on.set()
    first.join(10)
    assert results == [None, "first"]


# -- async functions ---------------------------------------------------------------------


@pytest.fixture
def aio_db(db_url: str, table_name: str) -> tuple[str, str]:
    """The URL and table for an asyncio model, made inside each test's event loop."""
    return db_url, table_name


def _aio_model(url: tuple[str, str]) -> joblocks.aio.JobLockModel:
    return joblocks.aio.JobLockModel(url[0], table_name=url[1])


def test_async_returns_the_value_or_none(
    aio_db: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        model = _aio_model(aio_db)
        try:

            @single_instance("aio:{name}", 10_000, model=model)
            async def greet(name: str) -> str:
                row = await model.peek(f"aio:{name}")
                assert row is not None
                assert row.holder == joblocks.worker_id()
                await asyncio.sleep(0)
                return f"hello {name}"

            assert inspect.iscoroutinefunction(greet)
            ran = await greet("ann")
            assert await model.acquire("aio:bob", 60_000, OTHER)
            skipped = await greet("bob")
            after = await model.peek("aio:ann")
            return ran, skipped, after
        finally:
            await model.dispose()

    with caplog.at_level(logging.INFO, logger="joblocks"):
        ran, skipped, after = asyncio.run(scenario())
    assert ran == "hello ann"
    assert skipped is None
    assert after is None
    assert _skipped_logged(caplog)


def test_async_cancel_on_loss(aio_db: tuple[str, str]) -> None:
    async def scenario() -> None:
        model = _aio_model(aio_db)
        try:

            @single_instance(
                "aio:lossy",
                3_000,
                model=model,
                keepalive=True,
                renew_every=100,
                cancel_on_loss=True,
            )
            async def lossy() -> None:
                await model.delete("aio:lossy")  # someone deletes our row
                await asyncio.sleep(30)

            with pytest.raises(joblocks.LeaseLost):
                await asyncio.wait_for(lossy(), 20)
        finally:
            await model.dispose()

    asyncio.run(scenario())


def test_async_exception_propagates(aio_db: tuple[str, str]) -> None:
    async def scenario() -> Any:
        model = _aio_model(aio_db)
        try:

            @single_instance("aio:boom", 10_000, model=model)
            async def boom() -> None:
                raise LookupError("async inside")

            with pytest.raises(LookupError, match="async inside"):
                await boom()
            return await model.peek("aio:boom")
        finally:
            await model.dispose()

    assert asyncio.run(scenario()) is None


# -- decoration-time checks (no database) --------------------------------------------------


def test_wraps_keeps_the_function_metadata() -> None:
    def documented(a: int, b: str = "x") -> int:
        """The docstring."""
        return a

    wrapped = single_instance("meta", 1_000)(documented)
    assert wrapped.__name__ == "documented"
    assert wrapped.__doc__ == "The docstring."
    assert wrapped.__wrapped__ is documented  # type: ignore[attr-defined]
    assert inspect.signature(wrapped) == inspect.signature(documented)
    assert not inspect.iscoroutinefunction(wrapped)


def test_exported_from_joblocks() -> None:
    exported = getattr(joblocks, "single_instance", None)
    if exported is None:
        pytest.skip("joblocks.single_instance is not re-exported yet (joblocks/__init__.py)")
    assert exported is single_instance


def _f(tenant: str, day: str = "mon") -> None: ...


@pytest.mark.parametrize(
    ("key", "error", "match"),
    [
        ("report:{nope}", ValueError, "'nope', which is not a parameter of _f"),
        ("report:{tenant}:{x}:{y}", ValueError, "'x', 'y', which are not parameters"),
        ("report:{}", ValueError, "positional placeholder"),
        ("report:{0}", ValueError, "positional placeholder"),
        ("report:{tenant", ValueError, "not a valid format string"),
        ("report:{tenant:{width}}", ValueError, "'width', which is not a parameter"),
        ("", ValueError, "lock_key must not be empty"),
        ("a\x00b", ValueError, "NUL"),
        ("k" * 513, ValueError, "513 bytes"),
    ],
)
def test_bad_keys_fail_at_decoration(key: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        single_instance(key, 1_000)(_f)


def test_valid_templates_are_accepted() -> None:
    single_instance("report:{tenant}:{day}", 1_000)(_f)
    single_instance("braces {{literal}} {tenant!r:>10}", 1_000)(_f)
    single_instance("report:{tenant.upper}", 1_000)(_f)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"ttl": 0}, ValueError, "ttl must be positive"),
        ({"ttl": "1s"}, TypeError, "ttl must be milliseconds"),
        ({"ttl": 1_000, "renew_every": 100}, ValueError, "need keepalive=True"),
        ({"ttl": 1_000, "keepalive": True, "renew_every": 2_000}, ValueError, "shorter than ttl"),
        ({"ttl": 1_000, "min_hold": -1}, ValueError, "min_hold must be >= 0"),
        ({"ttl": 1_000, "wait": float("nan")}, ValueError, "wait must be a finite"),
        ({"ttl": 1_000, "on_lost": 3}, TypeError, "on_lost must be callable"),
        ({"ttl": 1_000, "cancel_on_loss": True}, ValueError, "needs keepalive=True"),
        ({"ttl": 1_000, "cancel_on_loss": 1}, TypeError, "must be a bool"),
    ],
)
def test_bad_options_fail_before_decoration(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        single_instance("opts", **kwargs)


def test_what_cannot_be_decorated(tmp_path: Path) -> None:
    def gen() -> Iterator[int]:
        yield 1

    async def agen() -> AsyncIterator[int]:
        yield 1

    with pytest.raises(TypeError, match="generator function"):
        single_instance("g", 1_000)(gen)
    with pytest.raises(TypeError, match="generator function"):
        single_instance("g", 1_000)(agen)
    with pytest.raises(TypeError, match="decorates a callable"):
        single_instance("g", 1_000)(42)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="lock_key must be a str"):
        single_instance(None, 1_000)  # type: ignore[arg-type]

    def sync() -> None: ...

    async def coro() -> None: ...

    strict = single_instance("c", 1_000, keepalive=True, cancel_on_loss=True)
    strict(coro)
    with pytest.raises(ValueError, match="async functions only"):
        strict(sync)

    sync_model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'm.db'}")
    aio_model = joblocks.aio.JobLockModel(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        with pytest.raises(TypeError, match=r"model must be a joblocks\.aio\.JobLockModel"):
            single_instance("c", 1_000, model=sync_model)(coro)
        with pytest.raises(TypeError, match=r"model must be a joblocks\.JobLockModel"):
            single_instance("c", 1_000, model=aio_model)(sync)
    finally:
        sync_model.dispose()
        asyncio.run(aio_model.dispose())


def test_async_callable_objects_are_async() -> None:
    class Job:
        async def __call__(self, tenant: str) -> str:
            return tenant

    wrapped = single_instance("obj:{tenant}", 1_000)(Job())
    assert inspect.iscoroutinefunction(wrapped)
