"""How many statements an operation sends, counted by the server (or by SQLite itself).

* PostgreSQL: ``log_statement = 'all'`` is switched on for the whole (throwaway) server
  with ``ALTER SYSTEM`` + ``pg_reload_conf()``; an observer connection writes a start
  and an end marker statement into the server log; the statements logged between the
  markers are counted and grouped by their first words. (``pg_stat_statements`` is not
  loaded by default, and ``pg_stat_database.xact_commit`` is flushed by a backend only
  every second or at exit, so it cannot bracket a short window.)
* MariaDB: ``SHOW GLOBAL STATUS`` deltas of ``Questions`` and of the ``Com_*`` counters
  around the window, less the observer's own ``SHOW`` statements.
* SQLite: no server; ``sqlite3.Connection.set_trace_callback`` on the connection counts
  the statements it runs (trigger bodies are reported as ``--`` lines and not counted).

``run(k, start, end)`` must open its connection and warm up first, then call
``start()``, do ``k`` operations, and call ``end()``.
"""

from __future__ import annotations

import collections
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks._common import server_params

Runner = Callable[[int, Callable[[], None], Callable[[], None]], None]

_PG_LINE = re.compile(r"LOG:\s+(?:statement|execute [^:]*):\s*(.*)$")


def _verb(sql: str) -> str:
    """The statement's kind, without table names: "INSERT INTO … ON CONFLICT"."""
    words = sql.split()
    head = " ".join(words[:1] + [w for w in words[1:2] if w.upper() in ("INTO", "FROM")])
    if words and words[0].upper() == "INSERT":
        if "ON CONFLICT" in sql.upper():
            head += " … ON CONFLICT"
        if "ON DUPLICATE KEY" in sql.upper():
            head += " … ON DUPLICATE KEY UPDATE"
    return head


def count_statements(
    db: str,
    url: str,
    server: Any,
    k: int,
    run: Runner,
    trace: Callable[[Callable[[str], None]], None] | None = None,
) -> dict[str, Any]:
    """Statements per operation for ``k`` operations done by ``run``."""
    if db == "postgresql":
        return _postgres(url, server, k, run)
    if db == "mariadb":
        return _mariadb(url, k, run)
    return _sqlite(k, run, trace)


def _postgres(url: str, server: Any, k: int, run: Runner) -> dict[str, Any]:
    import psycopg

    p = server_params(url)
    obs = psycopg.connect(
        host=p["host"], port=p["port"], user=p["user"], dbname=p["database"], autocommit=True
    )
    mark = uuid.uuid4().hex
    try:

        def start() -> None:
            obs.execute("ALTER SYSTEM SET log_statement = 'all'")
            obs.execute("SELECT pg_reload_conf()")
            time.sleep(0.5)  # every backend re-reads the configuration before its next command
            obs.execute(f"SELECT 'jlmark-{mark}-start'")

        def end() -> None:
            obs.execute(f"SELECT 'jlmark-{mark}-end'")

        run(k, start, end)
    finally:
        obs.execute("ALTER SYSTEM RESET log_statement")
        obs.execute("SELECT pg_reload_conf()")
        obs.close()
    lines = server.log_file.read_text(errors="replace").splitlines()
    begin = next(i for i, line in enumerate(lines) if f"jlmark-{mark}-start" in line)
    finish = next(i for i, line in enumerate(lines) if f"jlmark-{mark}-end" in line)
    kinds: collections.Counter[str] = collections.Counter()
    for line in lines[begin + 1 : finish]:
        m = _PG_LINE.search(line)
        if m:
            kinds[_verb(m.group(1))] += 1
    total = sum(kinds.values())
    return {
        "method": "PostgreSQL log_statement=all, statements logged between two markers",
        "ops": k,
        "statements": total,
        "per_op": total / k,
        "kinds": {kind: n / k for kind, n in kinds.most_common()},
    }


def _mariadb(url: str, k: int, run: Runner) -> dict[str, Any]:
    import pymysql

    p = server_params(url)
    obs = pymysql.connect(
        host=p["host"], port=p["port"], user=p["user"], database=p["database"], autocommit=True
    )
    cur = obs.cursor()

    def status() -> dict[str, int]:
        cur.execute(
            "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR Variable_name LIKE 'Com\\_%'"
        )
        return {name: int(value) for name, value in cur.fetchall() if str(value).isdigit()}

    # The observer's own cost of one status read, measured with nothing in between.
    a, b = status(), status()
    own = {name: b[name] - a[name] for name in b}
    before: dict[str, int] = {}
    after: dict[str, int] = {}

    def start() -> None:
        before.update(status())

    def end() -> None:
        after.update(status())

    try:
        run(k, start, end)
    finally:
        cur.close()
        obs.close()
    delta = {n: after[n] - before[n] - own.get(n, 0) for n in after}
    questions = delta.pop("Questions")
    kinds = {n: v / k for n, v in sorted(delta.items(), key=lambda kv: -kv[1]) if v}
    return {
        "method": "MariaDB SHOW GLOBAL STATUS deltas (Questions, Com_*), "
        "observer's own reads subtracted",
        "ops": k,
        "statements": questions,
        "per_op": questions / k,
        "kinds": kinds,
    }


def _sqlite(
    k: int, run: Runner, trace: Callable[[Callable[[str], None]], None] | None
) -> dict[str, Any]:
    if trace is None:
        raise ValueError("SQLite statement counting needs a trace hook")
    kinds: collections.Counter[str] = collections.Counter()
    on = [False]

    def seen(sql: str) -> None:
        if on[0] and not sql.lstrip().startswith("--"):
            kinds[_verb(sql)] += 1

    trace(seen)

    def start() -> None:
        on[0] = True

    def end() -> None:
        on[0] = False

    run(k, start, end)
    total = sum(kinds.values())
    return {
        "method": "sqlite3 trace callback on the connection (trigger lines not counted)",
        "ops": k,
        "statements": total,
        "per_op": total / k,
        "kinds": {kind: n / k for kind, n in kinds.most_common()},
    }
