"""The holder's own deadlines (``joblocks._db.deadline``): the loss margin, and the watchdog
that runs alarms without waiting on anything. The faults themselves (a stalled relay, a
silent standby) are in tests/reliability/test_stalled_connection.py and
test_sync_standby.py."""

from __future__ import annotations

import threading
import time

import pytest

import joblocks
from joblocks._db import deadline as _deadline
from joblocks._util.errors import NoReply, backend_error


@pytest.mark.parametrize(
    ("ttl_ms", "margin_s"),
    [
        (30, 0.015),  # never more than half the ttl
        (300, 0.02),  # the floor
        (6_000, 0.3),  # 5 %
        (60_000, 3.0),
        (1_800_000, 5.0),  # the cap
    ],
)
def test_the_loss_margin(ttl_ms: int, margin_s: float) -> None:
    assert _deadline.loss_margin_s(ttl_ms) == pytest.approx(margin_s)


def test_alarms_fire_in_order_and_a_disarmed_one_never() -> None:
    fired: list[str] = []
    done = threading.Event()
    at = time.monotonic()
    second = _deadline.watchdog.arm(at + 0.2, lambda: (fired.append("second"), done.set()))
    first = _deadline.watchdog.arm(at + 0.1, lambda: fired.append("first"))
    never = _deadline.watchdog.arm(at + 0.15, lambda: fired.append("never"))
    assert never.disarm() is False
    assert done.wait(30)
    assert fired == ["first", "second"]
    assert first.disarm() is True
    assert second.disarm() is True


def test_an_abandoned_call_is_a_timeout_of_unknown_outcome() -> None:
    error = backend_error("acquire", "postgresql://app@db/app", NoReply(2_000))
    assert isinstance(error, joblocks.LockTimeoutError)
    assert "no reply within 2000 ms" in str(error)
    assert "outcome is unknown" in str(error)
