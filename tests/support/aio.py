"""asyncio helpers for tests: waits that end when the work they wait on fails."""

from __future__ import annotations

import asyncio
from typing import Any

#: Seconds a test waits for an event its own background task should set.
EVENT_TIMEOUT = 15.0


async def started(
    event: asyncio.Event, task: asyncio.Task[Any], timeout: float = EVENT_TIMEOUT
) -> None:
    """Wait until ``event`` is set, failing at once when ``task`` ends first.

    A task that fails before setting the event (the database went away, a bug) raises
    its exception here instead of leaving the test to hang until pytest's time-out; a
    task that neither sets the event nor ends fails the test after ``timeout`` seconds.
    """
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _pending = await asyncio.wait(
            {waiter, task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if not waiter.done():
            waiter.cancel()
    if waiter in done:
        return
    if task in done:
        task.result()  # raises the task's error
        raise AssertionError("the task ended without setting the event")
    raise AssertionError(f"the event was not set within {timeout} s")
