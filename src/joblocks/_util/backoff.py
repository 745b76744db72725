"""The waiting schedule: capped exponential backoff with full jitter, as a pure function.

Both faces sleep the delays this module computes; only how they sleep differs.
"""

from __future__ import annotations

import random
import time

#: First retry waits up to this long (ms).
BASE_MS = 25.0
#: No single wait is longer than this (ms).
CAP_MS = 1_000.0


def delay_ms(
    attempt: int,
    remaining_ms: float,
    jitter: float,
    *,
    base_ms: float = BASE_MS,
    cap_ms: float = CAP_MS,
) -> float:
    """How long to sleep before retry ``attempt`` (1-based), in ms.

    Full jitter: ``jitter`` (uniform in [0, 1)) times ``min(cap, base * 2**(attempt-1))``,
    never longer than what is left of the wait (``remaining_ms``), never negative.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    ceiling = min(cap_ms, base_ms * 2.0 ** min(attempt - 1, 32))
    return max(0.0, min(remaining_ms, jitter * ceiling))


def next_pause(attempt: int, started: float, wait_ms: int | None) -> float | None:
    """Seconds to sleep before the next try, or None when the wait is over (or none)."""
    if wait_ms is None:
        return None
    remaining = wait_ms - (time.monotonic() - started) * 1000
    if remaining <= 0:
        return None
    pause = delay_ms(attempt, remaining, random.random())  # noqa: S311 - jitter, not crypto
    return max(min(1.0, remaining), pause) / 1000
