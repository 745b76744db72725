"""The waiting schedule is a pure function: capped exponential backoff with full jitter."""

from __future__ import annotations

import pytest

from joblocks._util.process import BASE_MS, CAP_MS, delay_ms


def test_ceiling_doubles_then_caps() -> None:
    just_under_one = 0.999999
    ceilings = [delay_ms(n, 1e9, just_under_one) for n in range(1, 12)]
    assert ceilings[0] == pytest.approx(BASE_MS, rel=1e-5)
    assert ceilings[1] == pytest.approx(2 * BASE_MS, rel=1e-5)
    assert all(b >= a for a, b in zip(ceilings, ceilings[1:]))
    assert max(ceilings) == pytest.approx(CAP_MS, rel=1e-5)


def test_full_jitter_scales_the_ceiling() -> None:
    assert delay_ms(3, 1e9, 0.0) == 0.0
    assert delay_ms(3, 1e9, 0.5) == pytest.approx(0.5 * 4 * BASE_MS)


def test_never_longer_than_what_is_left() -> None:
    assert delay_ms(10, 7.0, 0.9) == 7.0
    assert delay_ms(10, -5.0, 0.9) == 0.0


def test_huge_attempts_do_not_overflow() -> None:
    assert delay_ms(10_000, 1e9, 0.5) == pytest.approx(0.5 * CAP_MS)


@pytest.mark.parametrize(("attempt", "jitter"), [(0, 0.5), (1, 1.0), (1, -0.1)])
def test_bad_arguments(attempt: int, jitter: float) -> None:
    with pytest.raises(ValueError, match=r"attempt|jitter"):
        delay_ms(attempt, 100.0, jitter)
