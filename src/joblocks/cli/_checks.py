"""The checks of ``joblocks doctor``, one function each, in the order it runs them.

Each adds its lines to the :class:`~joblocks.cli._doctor_report.Report` and returns whether the
checks that depend on it may run. What differs between databases comes from the
family's profile (``joblocks._sql.dialects``): the version floor, how the fencing counter
is kept, whether a pooler can be recognised, whether the default isolation matters.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text

from .._sql.dialects import galera, profile
from .._sql.schema import fence_counter_name, fence_sequence_name
from .._sql.statements import PG_TIMELINE_SQL
from .._util.errors import LockBackendError, translate
from ._common import operator
from ._doctor_report import Report
from ._hints import GRANT_HINT, POOLER_FIX, failure_hint

if TYPE_CHECKING:
    from .._sync.model import JobLockModel

#: Round trips to measure (the median is reported).
SAMPLES = 5
#: A median round trip above this is worth a warning (ms).
SLOW_ROUND_TRIP_MS = 100.0
#: A clock difference above this is worth a warning (ms).
CLOCK_WARN_MS = 1_000.0
REQUIRED_COLUMNS = ("id", "holder", "acquired_at", "expires_at", "fence")
#: Rounds of the pooler test (two client connections, one after the other).
POOLER_ROUNDS = 5


def connect(model: JobLockModel, report: Report) -> bool:
    started = time.perf_counter()
    try:
        model.now_ms()
    except LockBackendError as exc:
        return report.add("connect", "fail", f"cannot connect ({exc.detail})", failure_hint(exc))
    connect_ms = (time.perf_counter() - started) * 1000
    server, problem, fix = profile(model.engine.dialect).check_server(model.engine.dialect)
    report.server = server
    ok = problem is None or report.add("server", "fail", problem, fix)
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


def clock(model: JobLockModel, report: Report) -> None:
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


def table(model: JobLockModel, report: Report) -> bool:
    locks = model.table
    shown = locks.fullname
    fence_kind = profile(model.engine.dialect).fence_kind
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
            if fence_kind == "counter":
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
            return _token_source(model, report, sequence)
    except LockBackendError as exc:
        return report.add(
            "table",
            "fail",
            f"cannot inspect the table ({exc.detail})",
            failure_hint(exc, "check permissions"),
        )


def probe(model: JobLockModel, report: Report) -> None:
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


def pooler(model: JobLockModel, report: Report) -> None:
    """PostgreSQL: is a connection pooler in between, and does it share server
    connections between clients? (See the module docstring.)"""
    if not profile(model.engine.dialect).detects_pooler:
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


def isolation(model: JobLockModel, report: Report) -> None:
    """PostgreSQL: say so when the default isolation is not read committed."""
    if not profile(model.engine.dialect).checks_isolation:
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


#: What a promotion does to PostgreSQL's tokens (``doctor``'s fencing line).
_PG_TIMELINE_NOTE = (
    "tokens carry the server's timeline (now {timeline}) above the sequence: a token "
    "handed out after a standby's promotion is larger than every one before it"
)


def _token_source(model: JobLockModel, report: Report, sequence: str) -> bool:
    """The fencing sequence as a token source: on PostgreSQL with the server's timeline;
    on a Galera node it must not cache (``NOCACHE``) nor be ``INCREMENT BY 0``."""
    family = profile(model.engine.dialect).family
    with model.engine.connect() as conn:
        if family == "postgresql":
            if conn.execute(text("SELECT pg_is_in_recovery()")).scalar():
                return report.add("fencing", "ok", f"sequence {sequence} (a standby)")
            timeline = conn.execute(text(f"SELECT {PG_TIMELINE_SQL}")).scalar()
            note = _PG_TIMELINE_NOTE.format(timeline=timeline)
            return report.add("fencing", "ok", f"sequence {sequence}; {note}")
        if family != "mysql" or not galera(conn):
            return report.add("fencing", "ok", f"sequence {sequence}")
        quoted = model.engine.dialect.identifier_preparer.quote(sequence)
        if model.table.schema is not None:
            quoted = (
                model.engine.dialect.identifier_preparer.quote(model.table.schema) + "." + quoted
            )
        shown = str(conn.execute(text(f"SHOW CREATE SEQUENCE {quoted}")).one()[1]).lower()
    if "increment by 0" in shown:
        return report.add(
            "fencing",
            "fail",
            f"sequence {sequence} is INCREMENT BY 0: on Galera its tokens do not follow "
            "the order of grants across nodes",
            f"recreate it with `CREATE OR REPLACE SEQUENCE {sequence} START WITH <max(fence)+1> "
            "NOCACHE` while no job runs",
        )
    if "nocache" not in shown:
        return report.add(
            "fencing",
            "fail",
            f"sequence {sequence} caches values: on Galera each node would hand out its own",
            f"recreate it with `CREATE OR REPLACE SEQUENCE {sequence} START WITH <max(fence)+1> "
            "NOCACHE` while no job runs",
        )
    return report.add(
        "fencing",
        "ok",
        f"sequence {sequence}, NOCACHE: every node draws from the replicated sequence, "
        "tokens follow the order of grants across nodes",
    )


#: Galera suspects a crashed node after ``evs.suspect_timeout`` (provider option).
_SUSPECT = "evs.suspect_timeout"


def replication(model: JobLockModel, report: Report) -> None:
    """A replicated server: a MariaDB Galera node (cluster size, node state, what a
    crashed node's commit stall costs short keep-alive ttls), or a PostgreSQL primary
    (its standbys' mode: what a failover can lose)."""
    family = profile(model.engine.dialect).family
    try:
        with translate("read the replication status", model.database):  # noqa: SIM117
            with model.engine.connect() as conn:
                if family == "mysql":
                    if not galera(conn):
                        return
                    rows = conn.execute(text("SHOW STATUS LIKE 'wsrep_%'")).all()
                    status = {str(name): str(value) for name, value in rows}
                    options = conn.execute(
                        text("SHOW VARIABLES LIKE 'wsrep_provider_options'")
                    ).all()
                    provider = str(options[0][1]) if options else ""
                elif family == "postgresql":
                    names = str(conn.execute(text("SHOW synchronous_standby_names")).scalar())
                    standbys = conn.execute(
                        text("SELECT count(*) FROM pg_stat_replication")
                    ).scalar()
                else:
                    return
    except LockBackendError as exc:
        report.add("cluster", "warn", f"cannot read the replication status ({exc.detail})")
        return
    if family == "postgresql":
        if names.strip():
            report.add(
                "failover",
                "ok",
                f"synchronous standby ({names!r}, {standbys} connected): a promoted standby "
                "has every acknowledged grant",
            )
        elif standbys:
            report.add(
                "failover",
                "warn",
                f"{standbys} asynchronous standby(s): a promotion loses the grants the "
                "standby had not received (their holders keep running; fencing tokens "
                "still grow)",
                "set synchronous_standby_names for no acknowledged lease lost",
            )
        return
    size = status.get("wsrep_cluster_size", "?")
    state = status.get("wsrep_local_state_comment", "?")
    component = status.get("wsrep_cluster_status", "?")
    suspect = _suspect_seconds(provider)
    detail = f"MariaDB Galera node, {state}, {component} component of {size} node(s)"
    if state != "Synced" or component != "Primary":
        report.add("cluster", "fail", detail, "this node does not take writes: check the cluster")
        return
    if size.isdigit() and int(size) < 3:
        report.add(
            "cluster",
            "warn",
            detail,
            "a cluster of fewer than 3 nodes loses quorum when one node fails",
        )
    else:
        report.add("cluster", "ok", detail)
    report.add(
        "stall",
        "ok",
        f"a crashed node stalls every commit for about {suspect:g} s ({_SUSPECT}) until the "
        "others declare it gone: keep-alive leases whose ttl is not well above that (ttl "
        f"under {3 * suspect:g} s, renewed every ttl/3) may be lost, and calls may fail "
        "with LockTimeoutError meanwhile; liveness='session' is refused (GET_LOCK is local "
        "to one node)",
    )


def _suspect_seconds(provider_options: str) -> float:
    """``evs.suspect_timeout`` of Galera's provider options, in seconds (5 by default)."""
    found = re.search(r"evs\.suspect_timeout\s*=\s*PT([0-9.]+)S", provider_options)
    return float(found.group(1)) if found else 5.0
