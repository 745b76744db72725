"""``joblocks status``: is a key healthy? Not when it is overdue (a complete slot of its
schedule passed with no run after its last one: the failure a lock alone hides, every
replica skipped), when its last run failed (``error``, ``lost``), or when its last run
was abandoned (its process died: no end, and its lease is gone)."""

from __future__ import annotations

from dataclasses import dataclass

from .._core.plain import Run


@dataclass(frozen=True)
class KeyStatus:
    """What ``joblocks status`` says about one key (times in epoch ms, db clock)."""

    run: Run
    ago_ms: int
    overdue: bool
    missed_slot_ms: int | None  # the start of the complete slot that had no run
    note: str | None

    @property
    def failed(self) -> bool:
        """The last run failed: it raised or exited non-zero, lost its lease, or was
        abandoned (its process died before it ended)."""
        return self.run.outcome in ("error", "lost") or self.run.abandoned

    @property
    def state(self) -> str:
        """``OVERDUE``, ``FAILED``, ``ABANDONED`` (unhealthy), else ``running`` or ``ok``
        (or the note on a schedule this version cannot read)."""
        if self.overdue:
            return "OVERDUE"
        if self.run.abandoned:
            return "ABANDONED"
        if self.failed:
            return "FAILED"
        if self.run.outcome is None:
            return "running"
        return self.note or "ok"

    @property
    def healthy(self) -> bool:
        """Neither overdue nor failed: what ``status`` exits 0 for."""
        return not (self.overdue or self.failed)


def key_status(run: Run, now_ms: int) -> KeyStatus:
    """Overdue: the key's schedule had a complete slot after its last run with no run."""
    started = round(run.started_at.timestamp() * 1000)
    ago = now_ms - started
    if run.schedule is None:
        return KeyStatus(run, ago, False, None, None)
    try:
        from .._core.schedule import Schedule

        schedule = Schedule.parse(run.schedule, run.timezone)
        previous = schedule.previous_slot(now_ms)
    except Exception as exc:  # an expression this version cannot read
        return KeyStatus(run, ago, False, None, f"schedule not readable: {exc}")
    if previous is None:
        return KeyStatus(run, ago, False, None, None)
    slot_start = previous[0]
    covered = round(run.slot.timestamp() * 1000) if run.slot is not None else started
    in_progress = run.outcome is None and not run.abandoned
    skipped_only = run.outcome == "skipped"
    # The run covers its own slot; an unfinished run blocks the slots it outlives.
    overdue = not in_progress and (covered < slot_start or skipped_only)
    return KeyStatus(run, ago, overdue, slot_start if overdue else None, None)
