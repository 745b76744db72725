"""The life cycle is I/O-free: it yields its events (``Emit``) and its waits
(``Backoff``) as steps, and only the face's driver delivers or sleeps them. Driven with
the events held back, a whole ``run_with_lock`` reaches no listener."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
from joblocks._core import lifecycle as _lifecycle
from joblocks._core.options import LEASE_OPTIONS, LeaseOptions
from joblocks._core.steps import Backoff, Emit, Shielded, Step, Steps


def _watched(steps: Steps[Any], seen: list[Step], deliver: bool) -> Steps[Any]:
    """``steps`` as the driver gets them (those of a ``Shielded`` step too), each kept
    in ``seen``; an ``Emit`` reaches the driver only when ``deliver``."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.send(result) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value
        seen.append(step)
        result = error = None
        if isinstance(step, Emit) and not deliver:
            continue
        if isinstance(step, Shielded):  # the steps inside are watched too
            step = Shielded(_watched(step.steps, seen, deliver), step.undo)
        try:
            result = yield step
        except BaseException as exc:  # thrown back in, as the driver does
            error = exc


@pytest.fixture
def listened() -> Iterator[list[joblocks.Event]]:
    events: list[joblocks.Event] = []
    joblocks.add_listener(events.append)
    yield events
    joblocks.remove_listener(events.append)


@pytest.fixture
def sqlite_model(tmp_path: Path) -> Iterator[joblocks.JobLockModel]:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    yield model
    model.dispose()


def _run(model: joblocks.JobLockModel, key: str, deliver: bool, **options: Any) -> list[Step]:
    seen: list[Step] = []
    opts = LeaseOptions.of(5_000, {"holder": "me", **options}, "lease", LEASE_OPTIONS)
    steps = _lifecycle.run_with_lock(model, key, opts, lambda: None, False)
    model._drive(_watched(steps, seen, deliver))
    return seen


def _emitted(seen: list[Step]) -> list[tuple[str, str]]:
    return [(s.event[0], s.event[1]) for s in seen if isinstance(s, Emit)]


def test_the_life_cycle_delivers_no_event_itself(
    sqlite_model: joblocks.JobLockModel, listened: list[joblocks.Event]
) -> None:
    seen = _run(sqlite_model, "nightly", deliver=False)
    assert _emitted(seen) == [("acquired", "nightly"), ("released", "nightly")]
    assert listened == []  # the steps held back: no listener was called


def test_the_driver_delivers_the_emitted_events_in_order(
    sqlite_model: joblocks.JobLockModel, listened: list[joblocks.Event]
) -> None:
    seen = _run(sqlite_model, "nightly", deliver=True)
    assert [(e.kind, e.key) for e in listened] == _emitted(seen)
    released = listened[-1]
    assert released.holder == "me"
    assert released.outcome == "ok"
    assert released.token == listened[0].token is not None


def test_a_wait_is_backoff_steps_then_a_conflict(
    sqlite_model: joblocks.JobLockModel, listened: list[joblocks.Event]
) -> None:
    held = sqlite_model.try_lease("nightly", 60_000, holder="other")
    assert held is not None
    try:
        started = time.monotonic()
        seen = _run(sqlite_model, "nightly", deliver=False, wait=300)
    finally:
        held.release()
    waits = [s for s in seen if isinstance(s, Backoff)]
    assert waits
    assert all(w.wait_ms == 300 and w.started >= started for w in waits)
    assert [w.attempt for w in waits] == list(range(1, len(waits) + 1))
    assert _emitted(seen) == [("conflict", "nightly")]
    assert [e.kind for e in listened] == ["acquired", "released"]  # the other holder's
