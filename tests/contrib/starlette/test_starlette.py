"""Starlette / FastAPI: ``singleton_loop`` as the lifespan of real ASGI apps.

Two replicas — a Starlette app and a FastAPI app, each with a model of its own on the
same database — run their lifespans concurrently, driven through the ASGI lifespan
protocol as a server drives them. Only one replica's loop runs at a time; the other
takes over when the first shuts down, or when its lease is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Callable

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import joblocks
import joblocks.aio
from joblocks.contrib.starlette import SingletonLoop, singleton_loop

from ...support.contrib import LOCK_DBS, configured, lock_db_url

KEY = "rates-refresh"


@pytest.fixture(params=LOCK_DBS)
def lock_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return lock_db_url(request, str(request.param), tmp_path)


class Lifespan:
    """Drive an ASGI app's lifespan the way a server does: startup, then shutdown."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task: asyncio.Future[None] | None = None

    async def _exchange(self, message: str, expected: str) -> None:
        await self.inbox.put({"type": message})
        reply = await asyncio.wait_for(self.outbox.get(), 20)
        assert reply["type"] == expected, reply

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}}
        self.task = asyncio.ensure_future(self.app(scope, self.inbox.get, self.outbox.put))
        await self._exchange("lifespan.startup", "lifespan.startup.complete")

    async def shutdown(self) -> None:
        if self.task is None:
            return
        task, self.task = self.task, None
        await self._exchange("lifespan.shutdown", "lifespan.shutdown.complete")
        await asyncio.wait_for(task, 20)

    async def __aenter__(self) -> Lifespan:
        await self.startup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


async def call(app: Any, path: str) -> Any:
    """One GET request through the app's ASGI interface; the JSON body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
        "root_path": "",
    }
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return requests.pop() if requests else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return json.loads(
        b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    )


def starlette_app(loop: SingletonLoop) -> Starlette:
    async def status(request: Request) -> JSONResponse:
        return JSONResponse({"leading": loop.leading})

    return Starlette(routes=[Route("/leader", status)], lifespan=loop)


def fastapi_app(loop: SingletonLoop) -> FastAPI:
    app = FastAPI(lifespan=loop)

    @app.get("/leader")
    async def status() -> dict[str, bool]:
        return {"leading": loop.leading}

    return app


async def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def models(url: str, table: str, n: int) -> AsyncIterator[list[joblocks.aio.JobLockModel]]:
    made = [joblocks.aio.JobLockModel(url, table_name=table) for _ in range(n)]
    try:
        yield made
    finally:
        for model in made:
            await model.dispose()


# -- scenarios ---------------------------------------------------------------------------


def test_one_replica_runs_the_loop_and_the_other_takes_over(lock_db: str, table_name: str) -> None:
    runs: list[tuple[str, float, float]] = []

    def ticker(name: str) -> Callable[[], Any]:
        async def tick() -> None:
            started = time.monotonic()
            await asyncio.sleep(0.03)
            runs.append((name, started, time.monotonic()))

        return tick

    def count(name: str) -> int:
        return sum(1 for run in runs if run[0] == name)

    async def scenario() -> None:
        async with models(lock_db, table_name, 3) as (model_a, model_b, observer):
            options: dict[str, Any] = {"ttl": 3_000, "retry_every": 100}
            loop_a = singleton_loop(KEY, 100, ticker("a"), model=model_a, **options)
            loop_b = singleton_loop(KEY, 100, ticker("b"), model=model_b, **options)
            app_a, app_b = starlette_app(loop_a), fastapi_app(loop_b)
            replica_a, replica_b = Lifespan(app_a), Lifespan(app_b)
            try:
                await replica_a.startup()
                await wait_until(lambda: count("a") >= 2)
                assert await call(app_a, "/leader") == {"leading": True}

                await replica_b.startup()
                await asyncio.sleep(1.0)  # ten of b's tries, while a leads
                assert count("b") == 0
                assert await call(app_b, "/leader") == {"leading": False}
                assert count("a") >= 5  # a kept running (every ~130 ms)
                row = await observer.peek(KEY)
                assert row is not None
                assert row.holder == loop_a.holder

                # a shuts down (its server stops): b takes over at its next try.
                stopped = time.monotonic()
                await replica_a.shutdown()
                assert not loop_a.running
                await wait_until(lambda: count("b") >= 2, timeout=5)
                assert await call(app_b, "/leader") == {"leading": True}
                first_b = min(run[1] for run in runs if run[0] == "b")
                assert first_b - stopped < 2.0
                last_a = max(run[2] for run in runs if run[0] == "a")
                assert last_a <= first_b  # never both at once
                row = await observer.peek(KEY)
                assert row is not None
                assert row.holder == loop_b.holder
            finally:
                await replica_a.shutdown()
                await replica_b.shutdown()
            assert await observer.peek(KEY) is None  # released by the last leader

    asyncio.run(scenario())


def test_lost_lease_stops_func_and_steps_down(
    lock_db: str, table_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[str] = []

    async def long_job() -> None:
        events.append("start")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    async def scenario() -> None:
        async with models(lock_db, table_name, 2) as (model, observer):
            loop = singleton_loop(
                KEY, 100, long_job, model=model, ttl=1_000, renew_every=100, retry_every=200
            )
            async with Lifespan(starlette_app(loop)):
                await wait_until(lambda: loop.leading)
                await wait_until(lambda: events == ["start"])
                await observer.delete(KEY)  # an operator removes the lock
                await wait_until(lambda: "cancelled" in events, timeout=5)
                # It tries again like a follower, finds the lock free, leads again.
                await wait_until(lambda: events.count("start") == 2, timeout=5)
                assert loop.leading

    with caplog.at_level(logging.INFO, logger="joblocks"):
        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert any("lease lost" in m and "cancelling func" in m for m in messages), messages
    assert any("stopped leading" in m for m in messages)


def test_shutdown_cancels_a_running_func_and_releases(lock_db: str, table_name: str) -> None:
    events: list[str] = []

    async def stuck() -> None:
        events.append("start")
        try:
            await asyncio.sleep(60)
        finally:
            events.append("finally")

    async def scenario() -> Any:
        async with models(lock_db, table_name, 2) as (model, observer):
            loop = singleton_loop(KEY, 10_000, stuck, model=model)
            async with Lifespan(fastapi_app(loop)):
                await wait_until(lambda: events == ["start"])
                started = time.monotonic()
            assert time.monotonic() - started < 5
            return await observer.peek(KEY)

    assert asyncio.run(scenario()) is None
    assert events == ["start", "finally"]


def test_func_errors_are_logged_and_the_loop_goes_on(
    lock_db: str, table_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first run fails")

    async def scenario() -> None:
        async with models(lock_db, table_name, 1) as (model,):
            loop = singleton_loop(KEY, 50, flaky, model=model)
            async with loop:  # inside an app's own lifespan: async with
                await wait_until(lambda: len(calls) >= 3)

    with caplog.at_level(logging.ERROR, logger="joblocks"):
        asyncio.run(scenario())
    assert any("func raised" in r.getMessage() and r.exc_info for r in caplog.records)


def test_two_loops_in_one_process_exclude_each_other(lock_db: str, table_name: str) -> None:
    ran: dict[str, int] = {"x": 0, "y": 0}

    def counter(name: str) -> Callable[[], Any]:
        async def tick() -> None:
            ran[name] += 1

        return tick

    async def scenario() -> None:
        async with models(lock_db, table_name, 1) as (model,):
            x = singleton_loop(KEY, 50, counter("x"), model=model, retry_every=50)
            y = singleton_loop(KEY, 50, counter("y"), model=model, retry_every=50)
            async with x, y:
                await asyncio.sleep(0.6)
                assert x.leading != y.leading
                assert x.holder != y.holder

    asyncio.run(scenario())
    assert sorted(ran.values())[0] == 0
    assert sorted(ran.values())[1] >= 3


def test_default_model_is_the_configured_one(tmp_path: Path, table_name: str) -> None:
    ran: list[int] = []

    async def tick() -> None:
        ran.append(1)

    async def scenario() -> Any:
        loop = singleton_loop(KEY, 50, tick)
        try:
            async with loop:
                await wait_until(lambda: len(ran) >= 1)
                return await joblocks.aio.get_model().peek(KEY)
        finally:
            await joblocks.aio.get_model().dispose()

    with configured(f"sqlite:///{tmp_path / 'default.db'}", table_name=table_name):
        row = asyncio.run(scenario())
    assert row is not None


def test_arguments_are_checked(tmp_path: Path) -> None:
    async def tick() -> None: ...

    def blocking() -> None: ...

    async def agen() -> AsyncIterator[None]:
        yield

    with pytest.raises(TypeError, match="async function"):
        singleton_loop(KEY, 1_000, blocking)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async function"):
        singleton_loop(KEY, 1_000, agen)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="func must be callable"):
        singleton_loop(KEY, 1_000, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interval must be positive"):
        singleton_loop(KEY, 0, tick)
    with pytest.raises(ValueError, match="key must not be empty"):
        singleton_loop(" ", 1_000, tick)
    with pytest.raises(ValueError, match="shorter than ttl"):
        singleton_loop(KEY, 1_000, tick, ttl=1_000, renew_every=1_000)
    with pytest.raises(TypeError, match="must be a bool"):
        singleton_loop(KEY, 1_000, tick, cancel_on_loss="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"joblocks\.aio\.JobLockModel"):
        singleton_loop(KEY, 1_000, tick, model=object())  # type: ignore[arg-type]
    assert singleton_loop(KEY, 60_000, tick).retry_every_ms == 30_000  # at most the ttl

    async def twice() -> None:
        async with models(f"sqlite:///{tmp_path / 'twice.db'}", "t", 1) as (model,):
            loop = singleton_loop(KEY, 60_000, tick, model=model)
            async with loop:
                with pytest.raises(RuntimeError, match="already running"):
                    await loop.start()
            assert not loop.running
            async with loop:  # and it starts again after a stop
                assert loop.running

    asyncio.run(twice())
