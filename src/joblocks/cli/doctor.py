"""``joblocks doctor``: is the set-up usable, and if not, what to do about it.

Checks, in order (a failed check skips those that depend on it): the URL, the
connection and the server's version, the round trip, on PostgreSQL a connection
pooler in between and a default isolation other than read committed, replication (a
PostgreSQL primary's standbys; a MariaDB Galera cluster and its commit stall), the clock
difference between this machine and the database, the table's columns, the fencing
counter, and a probe lock taken and released twice (tokens must grow). Only problems
count for the exit code; warnings (a slow round trip, a skewed clock, a
transaction-mode pooler) are reported and exit 0.

A pooler is recognised by what the server reports, not by its name: the backend
process the client was told about when it connected (``BackendKeyData``) is not the
one that runs its statements (``pg_backend_pid()``) when something in between holds
the server connections; and when two client connections see the same backend, one
after the other, server connections are shared between clients (transaction or
statement pooling, e.g. PgBouncer's ``pool_mode = transaction``).

Hints for failures come from :mod:`._hints`, by the kind of failure (the
:class:`~joblocks.LockBackendError` subclass): a read-only server, a timeout, missing
privileges, a missing database, the connection itself; never by its message text.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from .._sync.model import JobLockModel
from .._util.errors import LockBackendError
from .._util.validate import mask_url
from . import _checks
from ._common import (
    EXIT_NO,
    EXIT_OK,
    check_backend,
    describe_source,
    resolve_url,
    sqlite_file,
    table_options,
)
from ._doctor_report import Report
from ._format import dump_json, err, out
from ._hints import failure_hint


def doctor(args: argparse.Namespace) -> int:
    """Run the checks, print the report; 0 when healthy, 1 when a check failed."""
    report = Report()
    _examine(args, report)
    problems = report.problems
    if args.json:
        body: dict[str, Any] = {"ok": not problems, **asdict(report)}
        out(dump_json(body))
    else:
        out(_text(report))
    if problems:
        count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
        err(f"doctor found {count}: {problems[0].text()}")
        return EXIT_NO
    return EXIT_OK


def _text(report: Report) -> str:
    lines = []
    if report.database is not None:
        lines.append(f"database  {report.database} (source: {describe_source(report.source)})")
    if report.table is not None:
        lines.append(f"table     {report.table}")
    lines.append("")
    width = max((len(check.name) for check in report.checks), default=0)
    for check in report.checks:
        status = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}[check.status]
        lines.append(f"{status:<5} {check.name.ljust(width)}  {check.text()}")
    lines.append("")
    problems = len(report.problems)
    warnings = sum(check.status == "warn" for check in report.checks)
    if problems:
        lines.append(f"{problems} problem{'s' if problems > 1 else ''} found")
    elif warnings:
        lines.append(f"usable, with {warnings} warning{'s' if warnings > 1 else ''}")
    else:
        lines.append("all checks passed")
    return "\n".join(lines)


def _examine(args: argparse.Namespace, report: Report) -> None:
    try:
        url, source = resolve_url(args)
        check_backend(url)
    except Exception as exc:
        report.add(
            "url",
            "fail",
            f"the database URL is not usable ({getattr(exc, 'message', exc)})",
            "fix --url or JOBLOCKS_URL",
        )
        return
    name, schema = table_options(args)
    report.database, report.source = mask_url(url), source
    report.table = name if schema is None else f"{schema}.{name}"
    path = sqlite_file(url)
    if path is not None and not path.exists():
        report.add(
            "database",
            "fail",
            f"the SQLite file {path} does not exist",
            "run `joblocks init` (or check --url / JOBLOCKS_URL)",
        )
        return
    try:
        model = JobLockModel(url, table_name=name, schema=schema, create_table=False)
    except (LockBackendError, ValueError, TypeError) as exc:
        detail = exc.detail if isinstance(exc, LockBackendError) else str(exc)
        fix = failure_hint(exc, "check --url / JOBLOCKS_URL")
        report.add("connect", "fail", f"cannot use {report.database} ({detail})", fix)
        return
    try:
        if _checks.connect(model, report):
            _checks.pooler(model, report)
            _checks.isolation(model, report)
            _checks.replication(model, report)
            _checks.clock(model, report)
            if _checks.table(model, report):
                _checks.probe(model, report)
    finally:
        model.dispose()
