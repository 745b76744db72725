"""What a take gives back: acquired (its lease), taken, or skipped with its reason, as
a value of that take (the CLI, the decorator and the integrations read it), for every
database × face."""

from __future__ import annotations

import threading
from typing import Any

from joblocks import Schedule
from joblocks._core.state import Acquired, Skipped, Taken

YEARLY = "0 0 1 1 *"


def test_a_take_says_acquired_taken_or_skipped(model: Any, key: str) -> None:
    got = model._try_lease(key, 30_000, holder="a", schedule=YEARLY)
    assert isinstance(got, Acquired)
    start, end = got.lease.slot
    assert got.lease.slot == Schedule.parse(YEARLY).slot(start)
    skipped = model._try_lease(key, 30_000, holder="b", schedule=YEARLY)
    assert isinstance(skipped, Skipped)
    assert skipped.lease is None
    assert skipped.slot == (start, end)
    assert skipped.reason.startswith(f"{key!r}: the slot ")
    assert "was already run" in skipped.reason
    # A key held elsewhere, without schedule=: taken, not skipped.
    plain = f"{key}-plain"
    assert isinstance(model._try_lease(plain, 30_000, holder="a"), Acquired)
    taken = model._try_lease(plain, 30_000, holder="b", schedule=None)
    assert isinstance(taken, Taken)
    assert taken.lease is None


def test_a_skip_is_the_outcome_of_its_own_take_only(model: Any, key: str) -> None:
    """A skip seen in one thread says nothing about a take in another, nor about the
    next take of the same thread (each outcome is its take's own value)."""
    assert isinstance(model._try_lease(key, 30_000, holder="a", schedule=YEARLY), Acquired)
    seen: list[Any] = []

    def skip_then_take() -> None:
        seen.append(model._try_lease(key, 30_000, holder="b", schedule=YEARLY))
        seen.append(model._try_lease(f"{key}-other", 30_000, holder="b", schedule=YEARLY))

    worker = threading.Thread(target=skip_then_take)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert [type(outcome) for outcome in seen] == [Skipped, Acquired]
    assert isinstance(model._try_lease(f"{key}-third", 30_000, holder="c"), Acquired)
