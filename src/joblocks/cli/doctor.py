"""``joblocks doctor``: is the set-up usable, and if not, what to do about it.

Checks, in order (a failed check skips those that depend on it): the URL, the
connection and the server's version, the round trip, on PostgreSQL a connection
pooler in between and a default isolation other than read committed, the clock
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
import contextlib
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ._common import (
    EXIT_NO,
    EXIT_OK,
    check_backend,
    describe_source,
    operator,
    resolve_url,
    sqlite_file,
    table_options,
)
from ._format import dump_json, err, out
from ._hints import GRANT_HINT, POOLER_FIX, failure_hint

if TYPE_CHECKING:
    from .._model import JobLockModel

#: Round trips to measure (the median is reported).
SAMPLES = 5
#: A median round trip above this is worth a warning (ms).
SLOW_ROUND_TRIP_MS = 100.0
#: A clock difference above this is worth a warning (ms).
CLOCK_WARN_MS = 1_000.0
REQUIRED_COLUMNS = ("id", "holder", "acquired_at", "expires_at", "fence")
#: Rounds of the pooler test (two client connections, one after the other).
POOLER_ROUNDS = 5


@dataclass
class Check:
    """One line of the report."""

    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str | None = None

    def text(self) -> str:
        return self.detail if self.fix is None else f"{self.detail}: {self.fix}"


@dataclass
class Report:
    """Everything ``doctor`` found."""

    database: str | None = None
    source: str | None = None
    table: str | None = None
    server: str | None = None
    round_trip_ms: float | None = None
    pooler: str | None = None
    """PostgreSQL: ``"transaction"`` when a pooler shares server connections between
    clients, ``"session"`` when one sits in between but does not, None without one."""
    clock_offset_ms: float | None = None
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str, fix: str | None = None) -> bool:
        self.checks.append(Check(name, status, detail, fix))
        return status != "fail"

    @property
    def problems(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]


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
    from .._engines import mask
    from .._errors import LockBackendError
    from .._model import JobLockModel

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
    report.database, report.source = mask(url), source
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
        if _connect(model, report):
            _pooler(model, report)
            _isolation(model, report)
            _clock(model, report)
            if _table(model, report):
                _probe(model, report)
    finally:
        model.dispose()


def _connect(model: JobLockModel, report: Report) -> bool:
    from .._errors import LockBackendError

    started = time.perf_counter()
    try:
        model.now_ms()
    except LockBackendError as exc:
        return report.add("connect", "fail", f"cannot connect ({exc.detail})", failure_hint(exc))
    connect_ms = (time.perf_counter() - started) * 1000
    dialect = model.engine.dialect
    version = ".".join(str(part) for part in (dialect.server_version_info or ()))
    ok = True
    if dialect.name == "sqlite":
        import sqlite3

        version = sqlite3.sqlite_version
        report.server = f"SQLite {version}"
        if sqlite3.sqlite_version_info < (3, 35):
            ok = report.add(
                "server",
                "fail",
                f"SQLite {version} is too old",
                "joblocks needs SQLite 3.35 or newer (RETURNING); upgrade Python's sqlite3",
            )
    elif dialect.name == "postgresql":
        report.server = f"PostgreSQL {version}"
    elif getattr(dialect, "is_mariadb", False):
        report.server = f"MariaDB {version}"
        if tuple(dialect.server_version_info or ()) < (10, 3):
            ok = report.add(
                "server", "fail", f"MariaDB {version} is too old", "joblocks needs MariaDB 10.3+"
            )
    else:
        report.server = f"MySQL {version}"
        ok = report.add(
            "server",
            "fail",
            f"MySQL {version} is not supported (it has no SEQUENCE for fencing tokens)",
            "use MariaDB 10.3 or newer, PostgreSQL or SQLite",
        )
    if ok:
        report.add("connect", "ok", f"{report.server}, connected in {connect_ms:.0f} ms")
    samples = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        model.now_ms()
        samples.append((time.perf_counter() - started) * 1000)
    median = statistics.median(samples)
    report.round_trip_ms = round(median, 3)
    shown = f"{median:.2f}" if median < 1 else f"{median:.1f}"
    detail = f"round trip {shown} ms (median of {SAMPLES})"
    if median > SLOW_ROUND_TRIP_MS:
        report.add("latency", "warn", detail, "each lock operation costs at least one round trip")
    else:
        report.add("latency", "ok", detail)
    return ok


def _clock(model: JobLockModel, report: Report) -> None:
    best: tuple[float, float] | None = None  # (half the round trip, offset)
    for _ in range(3):
        before = time.time() * 1000
        database = model.now_ms()
        after = time.time() * 1000
        candidate = ((after - before) / 2, database - (before + after) / 2)
        if best is None or candidate[0] < best[0]:
            best = candidate
    assert best is not None  # noqa: S101 - three samples were taken
    spread, offset = best
    report.clock_offset_ms = round(offset, 1)
    direction = "ahead of" if offset >= 0 else "behind"
    if abs(offset) < 1:
        detail = f"database and local clocks agree within 1 ms (+/- {spread:.1f} ms)"
    else:
        detail = (
            f"database clock {abs(offset):.0f} ms {direction} this machine's (+/- {spread:.1f} ms)"
        )
    if abs(offset) - spread > CLOCK_WARN_MS:
        report.add(
            "clock",
            "warn",
            detail,
            "locking is unaffected (joblocks only uses the database's clock), but times "
            "shown here differ from local ones; check NTP on this machine or the server",
        )
    else:
        report.add("clock", "ok", detail)


def _table(model: JobLockModel, report: Report) -> bool:
    from sqlalchemy import inspect, text

    from .._errors import LockBackendError, translate
    from .._schema import fence_counter_name, fence_sequence_name

    locks = model.table
    shown = locks.fullname
    dialect = model.engine.dialect.name
    try:
        with translate("inspect", model.database):
            inspector = inspect(model.engine)
            if not inspector.has_table(locks.name, schema=locks.schema):
                return report.add("table", "fail", f"table {shown} missing", "run `joblocks init`")
            columns = {
                col["name"] for col in inspector.get_columns(locks.name, schema=locks.schema)
            }
            missing = [name for name in REQUIRED_COLUMNS if name not in columns]
            if missing:
                return report.add(
                    "table",
                    "fail",
                    f"table {shown} lacks column(s) {', '.join(missing)}",
                    "it is not a joblocks lock table: use another --table, or migrate it",
                )
            report.add("table", "ok", f"{shown} has {', '.join(REQUIRED_COLUMNS)}")
            if dialect == "sqlite":
                counter = fence_counter_name(locks.name)
                wanted = {f"{locks.name}_fence_ins", f"{locks.name}_fence_upd"}
                with model.engine.connect() as conn:
                    found = set(
                        conn.execute(
                            text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                        ).scalars()
                    )
                has_counter = inspector.has_table(counter)
                if not has_counter or not wanted <= found:
                    lacking = ([counter] if not has_counter else []) + sorted(wanted - found)
                    return report.add(
                        "fencing",
                        "fail",
                        f"fencing counter incomplete (missing {', '.join(lacking)})",
                        "run `joblocks init`",
                    )
                return report.add("fencing", "ok", f"counter table {counter} and its triggers")
            sequence = fence_sequence_name(locks.name)
            if not inspector.has_sequence(sequence, schema=locks.schema):
                return report.add(
                    "fencing", "fail", f"sequence {sequence} missing", "run `joblocks init`"
                )
            return report.add("fencing", "ok", f"sequence {sequence}")
    except LockBackendError as exc:
        return report.add(
            "table",
            "fail",
            f"cannot inspect the table ({exc.detail})",
            failure_hint(exc, "check permissions"),
        )


def _probe(model: JobLockModel, report: Report) -> None:
    from .._errors import LockBackendError

    key = f"joblocks-doctor:{uuid.uuid4().hex}"
    holder = f"joblocks-doctor:{operator()}"[:200]
    tokens: list[int] = []
    try:
        for _ in range(2):
            token = model.acquire_token(key, 10_000, holder)
            if token is None:
                report.add("probe", "fail", f"a fresh probe lock {key} was refused", "report it")
                return
            tokens.append(token)
            if not model.release(key, holder):
                report.add("probe", "fail", "the probe lock could not be released", "report it")
                return
    except LockBackendError as exc:
        report.add(
            "probe",
            "fail",
            f"cannot take and release a lock ({exc.detail})",
            failure_hint(exc, GRANT_HINT),
        )
        return
    finally:
        with contextlib.suppress(LockBackendError):
            model.delete(key)
    if tokens[1] <= tokens[0]:
        report.add(
            "probe",
            "fail",
            f"fencing tokens did not grow ({tokens[0]} then {tokens[1]})",
            "run `joblocks init` to repair the fencing counter",
        )
        return
    report.add(
        "probe", "ok", f"took and released a probe lock twice (tokens {tokens[0]} < {tokens[1]})"
    )


def _pooler(model: JobLockModel, report: Report) -> None:
    """PostgreSQL: is a connection pooler in between, and does it share server
    connections between clients? (See the module docstring.)"""
    from .._errors import LockBackendError, translate

    if model.engine.dialect.name != "postgresql":
        return
    try:
        with translate("look for a pooler", model.database):
            between, shared = _pooler_seen(model.engine)
    except LockBackendError as exc:
        report.add("pooler", "warn", f"cannot tell whether a pooler is in between ({exc.detail})")
        return
    if shared:
        report.pooler = "transaction"
        report.add(
            "pooler",
            "warn",
            "a connection pooler shares server connections between clients (transaction "
            "or statement mode, e.g. PgBouncer's pool_mode = transaction)",
            POOLER_FIX,
        )
    elif between:
        report.pooler = "session"
        report.add(
            "pooler",
            "ok",
            "a connection pooler is in between, in session mode (each client keeps its "
            "server connection): nothing to set",
        )


def _pooler_seen(engine: Any) -> tuple[bool, bool]:
    """(something sits between client and server, server connections are shared)."""

    def backend(conn: Any) -> int:
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar())

    with engine.connect() as first, engine.connect() as second:
        told = getattr(first.connection.driver_connection.info, "backend_pid", None)
        seen = backend(first)
        for _ in range(POOLER_ROUNDS):
            # Autocommit: each statement is a transaction of its own, after which a
            # transaction-mode pooler may give its server connection to the other
            # client connection (PgBouncer gives the one released last).
            if backend(second) == seen or backend(first) != seen:
                return True, True
            seen = backend(first)
    return told is not None and told != seen, False


def _isolation(model: JobLockModel, report: Report) -> None:
    """PostgreSQL: say so when the default isolation is not read committed."""
    from .._errors import LockBackendError, translate

    if model.engine.dialect.name != "postgresql":
        return
    try:
        with (
            translate("read the default isolation", model.database),
            model.engine.connect() as conn,
        ):
            level = str(conn.exec_driver_sql("SHOW default_transaction_isolation").scalar())
    except LockBackendError as exc:
        report.add("isolation", "warn", f"cannot read the default isolation ({exc.detail})")
        return
    if level.lower() not in ("read committed", "read uncommitted"):
        report.add(
            "isolation",
            "ok",
            f"default_transaction_isolation is {level}: joblocks runs each of its "
            "statements in a read committed transaction of its own (two more round trips)",
        )
