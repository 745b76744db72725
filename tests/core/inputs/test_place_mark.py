"""U+241F separates a counted lease's key from its place number in the rows of its
places: a key holding it could collide with a place, so taking or writing such a key is
bad input (a ValueError naming the argument, on both faces, before any database work).
Reading, releasing and deleting a place by its row id stay possible."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest

import joblocks
import joblocks.aio

BAD = "export\u241f1"
# An unreachable server: any database work would raise a LockBackendError instead.
UNREACHABLE = "postgresql://u@127.0.0.1:1/db"


def sync_calls(model: joblocks.JobLockModel) -> list[Callable[[], Any]]:
    return [
        lambda: model.acquire(BAD, 1000, "w1"),
        lambda: model.acquire_token(BAD, 1000, "w1"),
        lambda: model.try_lease(BAD, 1000),
        lambda: model.insert(BAD, holder="w1", ttl=1000),
        lambda: model.update(BAD, holder="w1", ttl=1000),
        lambda: joblocks.run_with_lock(BAD, 1000, lambda: None, model=model),
        lambda: joblocks.lease(BAD, 1000, model=model).__enter__(),
        lambda: joblocks.single_instance(BAD, ttl=1000, model=model)(lambda: None)(),
    ]


def test_the_sync_face_refuses_the_place_mark_in_keys() -> None:
    model = joblocks.JobLockModel(UNREACHABLE)
    try:
        for call in sync_calls(model):
            with pytest.raises(ValueError, match=r"lock_key must not contain U\+241F"):
                call()
    finally:
        model.dispose()


def test_the_asyncio_face_refuses_the_place_mark_in_keys() -> None:
    async def main() -> int:
        model = joblocks.aio.JobLockModel(UNREACHABLE)
        calls = [
            lambda: model.acquire(BAD, 1000, "w1"),
            lambda: model.try_lease(BAD, 1000),
            lambda: model.insert(BAD, holder="w1", ttl=1000),
            lambda: model.update(BAD, holder="w1", ttl=1000),
            lambda: joblocks.aio.run_with_lock(BAD, 1000, _work, model=model),
            lambda: joblocks.aio.lease(BAD, 1000, model=model).__aenter__(),
        ]
        try:
            for call in calls:
                with pytest.raises(ValueError, match=r"lock_key must not contain U\+241F"):
                    await call()
        finally:
            await model.dispose()
        return len(calls)

    assert asyncio.run(main()) == 6


async def _work() -> None:
    return None


def test_a_place_can_still_be_read_and_released_by_its_row_id(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    try:
        with model.try_lease("export", 10_000, max_holders=2) as held:
            assert held is not None
            assert held.key == BAD
            assert model.peek(BAD) is not None
            assert model.release(BAD, held.holder)
        assert model.peek(BAD) is None
    finally:
        model.dispose()
