"""``joblocks status``: is a key overdue? (A complete slot of its schedule passed with no
run after its last one: the failure a lock alone hides, every replica skipped.)"""

from __future__ import annotations

from dataclasses import dataclass

from ._ledger import Run


@dataclass(frozen=True)
class KeyStatus:
    """What ``joblocks status`` says about one key (times in epoch ms, db clock)."""

    run: Run
    ago_ms: int
    overdue: bool
    missed_slot_ms: int | None  # the start of the complete slot that had no run
    note: str | None


def key_status(run: Run, now_ms: int) -> KeyStatus:
    """Overdue: the key's schedule had a complete slot after its last run with no run."""
    started = round(run.started_at.timestamp() * 1000)
    ago = now_ms - started
    if run.schedule is None:
        return KeyStatus(run, ago, False, None, None)
    try:
        from ._schedule import Schedule

        schedule = Schedule.parse(run.schedule, run.timezone)
        previous = schedule.previous_slot(now_ms)
    except Exception as exc:  # an expression this version cannot read
        return KeyStatus(run, ago, False, None, f"schedule not readable: {exc}")
    if previous is None:
        return KeyStatus(run, ago, False, None, None)
    slot_start = previous[0]
    covered = round(run.slot.timestamp() * 1000) if run.slot is not None else started
    in_progress = run.outcome is None
    skipped_only = run.outcome == "skipped"
    # The run covers its own slot; an unfinished run blocks the slots it outlives.
    overdue = not in_progress and (covered < slot_start or skipped_only)
    return KeyStatus(run, ago, overdue, slot_start if overdue else None, None)
