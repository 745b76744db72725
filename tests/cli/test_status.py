"""``joblocks status``: per key the last run; overdue (exit 1) when a scheduled key had a
complete slot with no run — every replica skipped, or none fired. On every database.

The runs are real (``joblocks run --record``, in the test's process through
``tests/support/cli.py``); to stand for a run minutes ago under a schedule, its row's
start (and schedule) are then moved back with an UPDATE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqlalchemy import update

import joblocks
from joblocks._core.ledger import ledger_of
from joblocks.cli._overdue import key_status

from ..support.cli import Result, run_cli


def cli(url: str, table: str, tmp_path: Path, *args: str) -> Result:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return run_cli("--url", url, "--table", table, *args, env=env)


def backdate(url: str, table: str, key: str, minutes: float, schedule: str | None) -> None:
    """The last run of ``key`` started ``minutes`` ago under ``schedule``."""
    model = joblocks.JobLockModel(url, table_name=table)
    try:
        runs = ledger_of(model).table
        last = model.runs(key, limit=1)[0]
        now = model.now_ms()
        start = now - int(minutes * 60_000)
        with model.engine.connect() as conn:
            conn.execute(
                update(runs)
                .where(runs.c.id == last.id)
                .values(schedule=schedule, started_at=start, ended_at=start + 10, slot=None)
            )
    finally:
        model.dispose()


def test_status_overdue(db_url: str, table_name: str, tmp_path: Path) -> None:
    for key in ("every-minute", "yearly", "plain"):
        done = cli(
            db_url, table_name, tmp_path, "run", key, "--ttl", "1m", "--record", "--", "true"
        )
        assert done.returncode == 0, done.stderr
    backdate(db_url, table_name, "every-minute", 3, "*/1 * * * *")  # 2+ slots with no run
    backdate(db_url, table_name, "yearly", 0, "0 0 1 1 *")
    backdate(db_url, table_name, "plain", 60 * 24 * 30, None)  # old, but no schedule

    shown = cli(db_url, table_name, tmp_path, "status")
    assert shown.returncode == 1, shown.stdout + shown.stderr
    rows = {line.split()[0]: line for line in shown.stdout.splitlines()[1:]}
    assert rows["every-minute"].endswith("OVERDUE")
    assert "3m" in rows["every-minute"]  # how long ago
    assert rows["yearly"].endswith("ok")
    assert rows["plain"].endswith("ok")

    as_json = cli(db_url, table_name, tmp_path, "status", "--json")
    assert as_json.returncode == 1
    keys = {entry["key"]: entry for entry in json.loads(as_json.stdout)}
    assert keys["every-minute"]["overdue"] is True
    assert keys["every-minute"]["missed_slot"].endswith(":00.000Z")
    assert keys["every-minute"]["schedule"] == "*/1 * * * *"
    assert keys["every-minute"]["ago_ms"] >= 3 * 60_000
    assert keys["yearly"]["overdue"] is False
    assert keys["plain"]["overdue"] is False
    assert keys["plain"]["outcome"] == "ok"
    assert keys["plain"]["host"]

    # A run in the last complete slot clears it.
    cli(
        db_url, table_name, tmp_path, "run", "every-minute", "--ttl", "1m", "--record", "--", "true"
    )
    backdate(db_url, table_name, "every-minute", 0.5, "*/1 * * * *")
    healthy = cli(db_url, table_name, tmp_path, "status", "--json")
    assert healthy.returncode == 0, healthy.stdout
    assert not any(entry["overdue"] for entry in json.loads(healthy.stdout))


def test_overdue_rule() -> None:
    """The rule itself, with a fixed now: the last run before the last complete slot."""
    from datetime import datetime, timezone

    from joblocks._core.plain import Run

    minute = 60_000
    now = 1_767_225_600_000 + 30_500  # 30.5 s into a minute (2026-01-01 00:00:30.5Z)

    def run(started: int, outcome: str | None = "ok", schedule: str = "*/1 * * * *") -> Run:
        return Run(
            id=1,
            key="k",
            holder="h",
            host="x",
            pid=1,
            token=1,
            started_at=datetime.fromtimestamp(started / 1000, tz=timezone.utc),
            ended_at=None,
            duration=None,
            outcome=outcome,  # type: ignore[arg-type]
            error=None,
            slot=None,
            schedule=schedule,
            timezone=None,
        )

    minute_start = now - 30_500
    assert not key_status(run(minute_start - minute + 5), now).overdue  # ran last slot
    assert not key_status(run(minute_start + 1), now).overdue  # ran this slot
    late = key_status(run(minute_start - 2 * minute + 5), now)
    assert late.overdue
    assert late.missed_slot_ms == minute_start - minute
    assert not key_status(run(minute_start - 5 * minute, None), now).overdue  # still running
    assert key_status(run(minute_start + 1, "skipped"), now).overdue  # only skips, ever
    assert key_status(run(minute_start - 5 * minute, "error"), now).overdue
    bad = key_status(run(minute_start, schedule="not cron"), now)
    assert not bad.overdue
    assert bad.note is not None
    assert "schedule" in bad.note


def test_status_of_a_scheduled_run(db_url: str, table_name: str, tmp_path: Path) -> None:
    """``run --schedule --record`` writes the schedule; a run in its slot is not overdue,
    and the same row, moved back past a complete slot, is."""
    run = ("run", "tick", "--ttl", "1m", "--record", "--schedule", "*/1 * * * *", "--", "true")
    assert cli(db_url, table_name, tmp_path, *run).returncode == 0
    shown = json.loads(cli(db_url, table_name, tmp_path, "status", "--json").stdout)
    assert [(s["key"], s["schedule"], s["last_run"]["slot"] is not None) for s in shown] == [
        ("tick", "*/1 * * * *", True)
    ]
    # Not overdue right after its run (unless the minute turned twice meanwhile).
    assert shown[0]["overdue"] is False or shown[0]["ago_ms"] > 60_000
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    try:
        runs = ledger_of(model).table
        start = model.now_ms() - 3 * 60_000
        with model.engine.connect() as conn:
            conn.execute(update(runs).values(slot=start - start % 60_000, started_at=start))
    finally:
        model.dispose()
    late = cli(db_url, table_name, tmp_path, "status")
    assert late.returncode == 1
    assert "OVERDUE" in late.stdout
