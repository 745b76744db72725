"""The keep-alive schedule of a lease: when the renewer renews it (no timing involved)."""

from __future__ import annotations

from pathlib import Path

import joblocks
from joblocks._core.renewal import RENEW_SLACK


def test_a_lease_is_renewed_early_only_within_the_slack_and_never_after_a_failure(
    tmp_path: Path,
) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    lease = model.try_lease("job", 3_000, keepalive=True, renew_every=1_000)
    assert lease is not None
    due = lease.next_renewal
    assert RENEW_SLACK == 0.1  # 100 ms of the 1 s interval
    assert lease._renewal_due(due - 0.2) == "wait"
    # Woken for another lease a little before this one is due: renewed with it.
    assert lease._renewal_due(due - 0.05) == "renew"
    assert lease._renewal_due(due) == "renew"

    # After a failed renewal the retry waits its full pause: no early retries.
    now = due
    lease._after_failed_renewal(now)
    retry = lease.next_renewal
    assert retry > now
    assert lease._renewal_due(retry - 0.001) == "wait"
    assert lease._renewal_due(retry) == "renew"

    # A renewal that lands restores the slack.
    assert lease.refresh()
    assert lease._renewal_due(lease.next_renewal - 0.05) == "renew"
    lease.release()
    assert lease._renewal_due(lease.next_renewal) == "drop"
    model.dispose()
