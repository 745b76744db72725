"""The run ledger's commands: ``history`` (the runs, or a timeline page) and ``status``.

Both read the ``job_runs`` table that ``record=True`` (``joblocks run --record``) fills;
neither creates it. ``status`` exits 1 when a key is overdue (its schedule had a
complete slot with no run), its last run failed, or its last run was abandoned (its
process died), so it can serve as a health check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import (
    DOCS_JSON_SECTION,
    EXIT_NO,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_command,
    checked,
    duration,
    key_type,
    open_model,
    resolve_url,
    sqlite_file,
)
from ._format import dump_json, format_duration, human_time, iso, out, printable, table

if TYPE_CHECKING:
    from .._core.plain import Run
    from .._sync.model import JobLockModel
    from ._overdue import KeyStatus


def _model_or_none(args: argparse.Namespace) -> JobLockModel | None:
    """The model, or None when the SQLite file does not exist yet (it is not created)."""
    path = sqlite_file(resolve_url(args)[0])
    if path is not None and not path.exists():
        return None
    return open_model(args, create_table=False, must_exist=True)


def _db_now(model: JobLockModel | None) -> int:
    import time

    return int(time.time() * 1000) if model is None else model.now_ms()


def run_json(run: Run) -> dict[str, Any]:
    """The documented JSON object of one run (docs/cli.md, ``history --json``)."""
    return {
        "key": run.key,
        "outcome": run.state,
        "started_at": iso(run.started_at),
        "ended_at": None if run.ended_at is None else iso(run.ended_at),
        "duration_ms": None if run.duration is None else int(run.duration.total_seconds() * 1000),
        "holder": run.holder,
        "host": run.host,
        "pid": run.pid,
        "token": run.token,
        "slot": None if run.slot is None else iso(run.slot),
        "schedule": run.schedule,
        "timezone": run.timezone,
        "error": run.error,
    }


HISTORY_COLUMNS = ("STARTED", "KEY", "OUTCOME", "DURATION", "HOST", "PID", "TOKEN", "ERROR")


def _history_row(run: Run) -> list[str]:
    took = "-" if run.duration is None else format_duration(run.duration.total_seconds() * 1000)
    error = printable(run.error or "")
    return [
        human_time(run.started_at),
        printable(run.key),
        run.state,
        took,
        printable(run.host),
        str(run.pid),
        "-" if run.token is None else str(run.token),
        error if len(error) <= 60 else error[:59] + "…",
    ]


def cmd_history(args: argparse.Namespace) -> int:
    """``joblocks history``: recorded runs newest first, as a table, JSON or a page."""
    from .._core.plain import PRUNE_BATCH, select_runs

    model = _model_or_none(args)
    try:
        if args.prune is not None:
            deleted = 0 if model is None else model.prune_runs(args.prune, batch_size=PRUNE_BATCH)
            rows = "row" if deleted == 1 else "rows"
            out(
                f"deleted {deleted} ledger {rows} of runs started more than "
                f"{format_duration(args.prune)} ago"
            )
            return EXIT_OK
        if model is None:
            found: list[Run] = []
            now = _db_now(None)
        else:
            found, now = model._drive(select_runs(model, args.key, args.since, args.limit))
    finally:
        if model is not None:
            model.dispose()
    if args.html is not None:
        from ._html import generated_title, render

        page = render(found, now, generated_title(now))
        if args.html == "-":
            sys.stdout.write(page)
            sys.stdout.flush()
        else:
            try:
                Path(args.html).write_text(page, encoding="utf-8")
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
                raise CliError(f"--html: cannot write {args.html}: {reason}", EXIT_USAGE) from exc
            out(f"wrote {len(found)} runs to {args.html}")
    elif args.json:
        out(dump_json([run_json(run) for run in found]))
    elif found:
        out(table(HISTORY_COLUMNS, [_history_row(run) for run in found]))
    else:
        out("no runs recorded (record=True or joblocks run --record writes them)")
    return EXIT_OK


STATUS_COLUMNS = ("KEY", "LAST RUN", "AGO", "OUTCOME", "HOLDER", "HOST", "SCHEDULE", "STATE")


def status_json(status: KeyStatus) -> dict[str, Any]:
    """The documented JSON object of one key (docs/cli.md, ``status --json``)."""
    from .._db.connections import from_ms

    run = status.run
    return {
        "key": run.key,
        "last_run": run_json(run),
        "ago_ms": status.ago_ms,
        "outcome": run.state,
        "holder": run.holder,
        "host": run.host,
        "schedule": run.schedule,
        "timezone": run.timezone,
        "overdue": status.overdue,
        "missed_slot": None
        if status.missed_slot_ms is None
        else iso(from_ms(status.missed_slot_ms)),
        "failed": status.failed,
        "state": status.state,
    }


def cmd_status(args: argparse.Namespace) -> int:
    """``joblocks status``: per key its last run; exit 1 when a key is overdue, or its
    last run failed or was abandoned."""
    from .._core.plain import latest_runs
    from ._overdue import key_status

    model = _model_or_none(args)
    try:
        if model is None:
            latest: list[Run] = []
            now = _db_now(None)
        else:
            latest, now = model._drive(latest_runs(model))
    finally:
        if model is not None:
            model.dispose()
    statuses = [key_status(run, now) for run in latest]
    if args.json:
        out(dump_json([status_json(status) for status in statuses]))
    elif statuses:
        rows = [
            [
                printable(s.run.key),
                human_time(s.run.started_at),
                format_duration(s.ago_ms) + " ago",
                s.run.state,
                printable(s.run.holder),
                printable(s.run.host),
                printable(s.run.schedule or "-"),
                s.state,
            ]
            for s in statuses
        ]
        out(table(STATUS_COLUMNS, rows))
    else:
        out("no runs recorded (record=True or joblocks run --record writes them)")
    return EXIT_OK if all(s.healthy for s in statuses) else EXIT_NO


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 100000, got {text!r}")
    return value


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``history`` and ``status`` to the subcommands ``sub``."""
    history = add_command(
        sub,
        common,
        "history",
        cmd_history,
        "show recorded runs, newest first (the run ledger of record=True / run --record)",
    )
    history.add_argument("key", nargs="?", type=checked(key_type), metavar="KEY")
    history.add_argument(
        "--since",
        type=duration(False),
        metavar="DURATION",
        help="only runs started within this, e.g. 1h or 7d (by the database's clock)",
    )
    history.add_argument(
        "--limit", type=_limit, default=1000, metavar="N", help="at most N runs (default 1000)"
    )
    shown = history.add_mutually_exclusive_group()
    shown.add_argument(
        "--json",
        action="store_true",
        help=f"print JSON (its keys: the docs site's {DOCS_JSON_SECTION})",
    )
    shown.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained timeline page to FILE (- for stdout): a lane per host, "
        "a bar per run",
    )
    shown.add_argument(
        "--prune",
        type=duration(True),
        metavar="AGE",
        help="delete ledger rows of runs started more than AGE ago (e.g. 30d), in batches",
    )

    status = add_command(
        sub,
        common,
        "status",
        cmd_status,
        "per key the last recorded run; exit 1 when a key is overdue, failed or abandoned",
    )
    status.add_argument(
        "--json",
        action="store_true",
        help=f"print JSON (its keys: the docs site's {DOCS_JSON_SECTION})",
    )
