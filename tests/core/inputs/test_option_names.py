"""The lease options are one set of keyword arguments (``joblocks.RunOptions`` /
``joblocks.LeaseKwargs``) on every entry point of both faces: a misspelt or misplaced
option is a ``TypeError`` naming it and the function, raised before the database is
touched (the model here points at a port nobody listens on)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import joblocks
import joblocks.aio

NOWHERE = "postgresql://nobody@127.0.0.1:9/none"


def test_sync_entry_points_name_a_wrong_option() -> None:
    model = joblocks.JobLockModel(NOWHERE)
    try:
        calls: list[tuple[str, Any]] = [
            ("try_lease", lambda: model.try_lease("k", 1_000, keepaliv=True)),
            ("lease", lambda: joblocks.lease("k", 1_000, model=model, keepaliv=True)),
            (
                "run_with_lock",
                lambda: joblocks.run_with_lock("k", 1_000, lambda: None, model=model, hold=1),
            ),
            # run_with_lock always runs under this worker's id: no holder option.
            (
                "run_with_lock",
                lambda: joblocks.run_with_lock("k", 1_000, lambda: None, model=model, holder="h"),
            ),
            ("single_instance", lambda: joblocks.single_instance("k", 1_000, waiting=5)),
        ]
        for where, call in calls:
            with pytest.raises(TypeError, match=rf"^{where}\(\) got an unexpected keyword"):
                call()
    finally:
        model.dispose()


def test_asyncio_entry_points_name_a_wrong_option() -> None:
    async def main() -> None:
        model = joblocks.aio.JobLockModel(NOWHERE)
        try:
            with pytest.raises(TypeError, match=r"^try_lease\(\) got an unexpected keyword"):
                await model.try_lease("k", 1_000, renew=5)
            with pytest.raises(TypeError, match=r"^lease\(\) got an unexpected keyword"):
                async with joblocks.aio.lease("k", 1_000, model=model, keep=True):
                    pass

            async def work() -> None:
                return None

            with pytest.raises(TypeError, match=r"^run_with_lock\(\) got an unexpected"):
                await joblocks.aio.run_with_lock("k", 1_000, work, model=model, holder="h")
        finally:
            await model.dispose()

    asyncio.run(main())


def test_the_option_sets_are_the_documented_ones() -> None:
    run = set(joblocks.RunOptions.__optional_keys__)
    assert run == {
        "keepalive", "renew_every", "min_hold", "wait", "on_lost", "max_hold",
        "schedule", "timezone", "record", "liveness", "max_holders",
    }  # fmt: skip
    assert set(joblocks.LeaseKwargs.__optional_keys__) == run | {"holder"}


def test_schedule_and_session_liveness_are_refused_together() -> None:
    model = joblocks.JobLockModel(NOWHERE)
    try:
        with pytest.raises(ValueError, match=r"liveness='session' cannot be combined with"):
            model.try_lease("k", 1_000, schedule="*/5 * * * *", liveness="session")
    finally:
        model.dispose()
