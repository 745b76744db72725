"""The two faces as the tests drive them: the sync model, and the asyncio model driven
from the test's thread (its event loop runs in a thread of its own for the whole test).

The fixtures ``make_model``, ``make_face_model`` and ``model`` of ``tests/conftest.py``
build these; a test that needs a loop of its own can use :func:`run_on`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import joblocks
import joblocks.aio


def eventually(check: Callable[[], bool], timeout: float = 3.0) -> bool:
    """True once ``check()`` is; a keep-alive renewal may still be finishing its call."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class SyncFace:
    """The sync model as the tests drive it."""

    face = "sync"

    def __init__(self, model: joblocks.JobLockModel) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def run_with_lock(self, key: str, ttl: Any, work: Callable[[], Any], **options: Any) -> bool:
        return joblocks.run_with_lock(key, ttl, work, model=self.model, **options)

    def lease(self, key: str, ttl: Any, **options: Any) -> Any:
        return joblocks.lease(key, ttl, model=self.model, **options)

    def close(self) -> None:
        pool = self.model.engine.pool

        def settled() -> bool:
            cached = len(self.model._cache) if self.model._cache is not None else 0
            return bool(pool.checkedout() == cached)

        assert eventually(settled), "a pooled connection leaked"
        self.model.dispose()


class AioFace:
    """The asyncio model, driven from the test's thread.

    The event loop runs in a thread of its own for the whole test, as in an application,
    so keep-alive tasks run while the test sleeps; each coroutine is submitted to it.
    """

    face = "aio"

    def __init__(self, model: joblocks.aio.JobLockModel, loop: asyncio.AbstractEventLoop):
        self.model = model
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        return _sync_view(getattr(self.model, name), self.loop)

    def run_with_lock(self, key: str, ttl: Any, work: Callable[[], Any], **options: Any) -> bool:
        async def awork() -> None:
            # In a worker thread, so that work() may drive this face again (peek, nesting).
            await asyncio.get_running_loop().run_in_executor(None, work)

        coro = joblocks.aio.run_with_lock(key, ttl, awork, model=self.model, **options)
        return bool(run_on(self.loop, coro))

    def lease(self, key: str, ttl: Any, **options: Any) -> Any:
        held = run_on(self.loop, self.model.try_lease(key, ttl, **options))
        if held is None:
            raise joblocks.LockNotAcquired(key)
        return _sync_view(held, self.loop)

    def close(self) -> None:
        pool = self.model.engine.sync_engine.pool

        async def checked_out() -> int:
            # On the loop's thread: an asyncio pool makes its queue on first use, which
            # needs the running loop on Python 3.9 (a SQLite URL's model may never use it).
            return int(pool.checkedout())

        assert eventually(lambda: run_on(self.loop, checked_out()) == 0), (
            "a pooled connection leaked"
        )
        loop_sqlite = getattr(self.model, "_loop_sqlite", None)
        if loop_sqlite is not None:
            # The sqlite3 connections of ``_aio_sqlite``: checked out only while in use
            # or idle in its cache.
            assert eventually(
                lambda: loop_sqlite.engine.pool.checkedout() == len(loop_sqlite.cache)
            ), "a sqlite3 connection leaked"
        run_on(self.loop, self.model.dispose())


def run_on(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)


class _SyncView:
    """An asyncio object whose coroutine methods are called synchronously."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return _sync_view(getattr(self._target, name), self._loop)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        run_on(self._loop, self._target.__aexit__(*exc))


def _sync_view(attr: Any, loop: asyncio.AbstractEventLoop) -> Any:
    if isinstance(attr, joblocks.aio.Lease):
        return _SyncView(attr, loop)
    if not inspect.iscoroutinefunction(attr):
        return attr

    def call(*args: Any, **kwargs: Any) -> Any:
        result = run_on(loop, attr(*args, **kwargs))
        return _SyncView(result, loop) if isinstance(result, joblocks.aio.Lease) else result

    return call


def models(face: str, db_url: str, table_name: str) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []
    loop = asyncio.new_event_loop() if face == "aio" else None
    thread = None
    if loop is not None:
        thread = threading.Thread(target=loop.run_forever, name="test-loop", daemon=True)
        thread.start()

    def make(**options: Any) -> Any:
        options.setdefault("table_name", table_name)
        url = options.pop("url", db_url)
        if loop is None:
            wrapped: Any = SyncFace(joblocks.JobLockModel(url, **options))
        else:
            wrapped = AioFace(joblocks.aio.JobLockModel(url, **options), loop)
        made.append(wrapped)
        return wrapped

    yield make
    try:
        for wrapped in made:
            wrapped.close()
    finally:
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
