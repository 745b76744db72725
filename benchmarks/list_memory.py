"""Memory of listing a large lock table, and the cost of pruning it.

    python benchmarks/list_memory.py [--sizes 1000,10000,100000,1000000] [--smoke]
        [--databases sqlite,postgresql] [--no-prune]

For each size N the table holds N rows, 1 % of them live and the rest expired (the
shape of a table nobody prunes: one key per day or per customer). Every figure is
measured in a fresh child process, so peaks do not carry over:

``list()``
    ``model.list("all")``: every row in one Python list (the reference surface; the
    baseline).
``iter_locks()``
    ``for lock in model.iter_locks("all")``: keyset pages of 1000 rows.
``CLI before``
    what ``joblocks list --all --json`` did before it streamed: ``list()`` and one
    ``json.dumps`` of the whole array.
``CLI list --json`` / ``CLI list``
    today's ``python -m joblocks list --all --json`` and the text table, stdout to
    /dev/null.

Peak RSS is the child's maximum resident set size (``/usr/bin/time -f %M``); the
tracemalloc peak is that of Python allocations during the listing, in a second run of
the API children (tracemalloc slows them down).

Prune (SQLite, unless ``--no-prune``): the same N-row table is pruned by one
``DELETE … WHERE expires_at <= now`` (what ``joblocks prune`` did) and by
``model.prune()``; a probe process tries ``BEGIN IMMEDIATE`` without waiting, back to
back, and reports the longest stretch the write lock was held; a third process
releases and re-acquires a lock in the same file throughout, with SQLite's default
5 s busy timeout, and counts the calls that failed. Prune rates are rows deleted per
second of wall time.

``--smoke`` runs sizes 1000 and 10000 on SQLite in a few seconds (for CI).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.servers import ServerUnavailable, start_postgres  # noqa: E402

import joblocks  # noqa: E402

HOUR = 3_600_000

_CHILD = r"""
import json, os, sys, time
import joblocks
from joblocks.cli._format import dump_json, lock_json
model = joblocks.JobLockModel({url!r}, table_name={table!r}, create_table=False)
model.count()  # connected: only the listing itself is traced
if {trace}:
    import tracemalloc
    tracemalloc.start()
started = time.perf_counter()
mode = {mode!r}
if mode == "list":
    n = len(model.list("all"))
elif mode == "iter":
    n = sum(1 for _ in model.iter_locks("all"))
else:  # the CLI before it streamed
    locks = model.list("all")
    text = dump_json([lock_json(lock) for lock in locks])
    with open(os.devnull, "w") as sink:
        sink.write(text + "\n")
    n = len(locks)
seconds = time.perf_counter() - started
peak = tracemalloc.get_traced_memory()[1] if {trace} else 0
model.dispose()
print(json.dumps({{"n": n, "seconds": seconds, "traced": peak}}))
"""


TIME = shutil.which("time", path="/usr/bin:/bin")


def run_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, float, int]:
    """Run ``argv``; its stdout, wall seconds and peak RSS in bytes.

    Under ``/usr/bin/time`` when there is one: Linux counts the resident size a child
    had before ``exec`` (a copy of its parent's) in its ``ru_maxrss``, so the child is
    started by ``time``, a small process, rather than by this one.
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rss"
        if TIME:
            argv = [TIME, "-f", "%M", "-o", str(report), *argv]
        started = time.perf_counter()
        with (Path(tmp) / "out").open("w+b") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env)
            _pid, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - started
            assert proc.stderr is not None
            err = proc.stderr.read().decode(errors="replace")
            proc.stderr.close()
            if proc.returncode != 0:
                raise RuntimeError(f"{argv[:6]} exited with {proc.returncode}: {err[-2000:]}")
            kib = int(report.read_text().split()[-1]) if TIME else usage.ru_maxrss
            out.seek(0)
            return out.read().decode(), seconds, kib * 1024


def fill(url: str, table: str, n: int) -> None:
    """``n`` rows, every hundredth live, bulk-inserted (raw sqlite3 / psycopg COPY)."""
    model = joblocks.JobLockModel(url, table_name=table)
    model.create_table()
    now = model.now_ms()
    model.dispose()
    live = max(1, n // 100)

    def rows() -> Any:
        for i in range(n):
            expires = now + HOUR if i % (n // live) == 0 else now - HOUR
            yield (
                f"job-{i:09d}",
                f"worker-{i % 97}@host-{i % 13}:4242",
                now - HOUR,
                expires,
                i + 1,
            )

    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.split("///", 1)[1])
        with conn:
            conn.executemany(
                f'INSERT INTO "{table}" (id, holder, acquired_at, expires_at, fence) '  # noqa: S608
                "VALUES (?, ?, ?, ?, ?)",
                rows(),
            )
        conn.close()
        return
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy(
            f"COPY {table} (id, holder, acquired_at, expires_at, fence) FROM STDIN"
        ) as cp:
            for row in rows():
                cp.write_row(row)
        cur.execute(f"SELECT setval('{table}_fence_seq', %s)", (n,))
        cur.execute(f"ANALYZE {table}")


def mib(n: int) -> str:
    return f"{n / 2**20:8.1f}"


def measure_listing(url: str, table: str, n: int) -> list[dict[str, Any]]:
    py = sys.executable
    results = []
    for label, mode in (("list()", "list"), ("iter_locks()", "iter"), ("CLI before", "cli_old")):
        code = _CHILD.format(url=url, table=table, mode=mode, trace=False)
        out, _wall, rss = run_child([py, "-c", code])
        plain = json.loads(out)
        assert plain["n"] == n, (label, plain)
        traced = 0
        if mode != "cli_old":
            code = _CHILD.format(url=url, table=table, mode=mode, trace=True)
            traced = json.loads(run_child([py, "-c", code])[0])["traced"]
        results.append({"what": label, "seconds": plain["seconds"], "rss": rss, "traced": traced})
    env = dict(os.environ, JOBLOCKS_URL=url)
    for label, extra in (("CLI list --json", ["--json"]), ("CLI list", [])):
        argv = [py, "-m", "joblocks", "--table", table, "list", "--all", *extra]
        out, wall, rss = run_child(argv, env)
        lines = out.count("\n")
        assert lines >= n, (label, lines)
        results.append({"what": label, "seconds": wall, "rss": rss, "traced": 0})
    return results


# -- prune ----------------------------------------------------------------------------------

_PROBE = r"""
import sqlite3, sys, time
path, stop = sys.argv[1], sys.argv[2]
conn = sqlite3.connect(path, timeout=0, isolation_level=None)
longest = 0.0
since = None
import os
while not os.path.exists(stop):
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        now = time.perf_counter()
        if since is not None:
            longest = max(longest, now - since)
            since = None
    except sqlite3.OperationalError:
        if since is None:
            since = time.perf_counter()
    time.sleep(0.0002)  # leave the CPU to the others (two cores are common)
print(longest)
"""

_CHURN = r"""
import os, sys, time, joblocks
url, stop = sys.argv[1], sys.argv[2]
model = joblocks.JobLockModel(url, table_name=sys.argv[3])
calls = failed = 0
while not os.path.exists(stop):
    for call in (lambda: model.acquire("churn", 60000, "w"), lambda: model.release("churn", "w")):
        calls += 1
        try:
            call()
        except joblocks.LockBackendError:
            failed += 1
        time.sleep(0.001)
print(calls, failed)
"""

_OLD_PRUNE = r"""
import sys, time, joblocks
from joblocks._clock import db_now_ms
from sqlalchemy import delete
model = joblocks.JobLockModel(sys.argv[1], table_name=sys.argv[2], create_table=False)
model.count()
started = time.perf_counter()
with model.engine.begin() as conn:
    n = conn.execute(delete(model.table).where(model.table.c.expires_at <= db_now_ms())).rowcount
print(n, time.perf_counter() - started)
"""

_NEW_PRUNE = r"""
import sys, time, joblocks
model = joblocks.JobLockModel(sys.argv[1], table_name=sys.argv[2], create_table=False)
model.count()
started = time.perf_counter()
n = model.prune()
print(n, time.perf_counter() - started)
"""


def measure_prune(template: Path, table: str, n: int, work: Path) -> list[dict[str, Any]]:
    py = sys.executable
    results = []
    for label, script in (("one DELETE (before)", _OLD_PRUNE), ("model.prune()", _NEW_PRUNE)):
        path = work / f"prune-{uuid.uuid4().hex[:6]}.db"
        shutil.copy(template, path)
        url = f"sqlite:///{path}"
        stop = work / f"stop-{uuid.uuid4().hex[:6]}"
        probe = subprocess.Popen([py, "-c", _PROBE, str(path), str(stop)], stdout=subprocess.PIPE)
        churn = subprocess.Popen(
            [py, "-c", _CHURN, url, str(stop), table],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)  # both running
        out, _wall, _rss = run_child([py, "-c", script, url, table])
        stop.touch()
        longest = float(probe.communicate(timeout=60)[0])
        calls, failed = (int(v) for v in churn.communicate(timeout=60)[0].split())
        deleted_text, seconds_text = out.split()
        deleted, seconds = int(deleted_text), float(seconds_text)
        results.append(
            {
                "what": label,
                "deleted": deleted,
                "rows_per_s": deleted / seconds,
                "longest_hold_ms": longest * 1000,
                "churn_calls": calls,
                "churn_failed": failed,
            }
        )
        path.unlink()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--databases", default="sqlite")
    parser.add_argument("--smoke", action="store_true", help="sizes 1000,10000 on SQLite")
    parser.add_argument("--no-prune", action="store_true")
    args = parser.parse_args()
    sizes = [1000, 10000] if args.smoke else [int(s) for s in args.sizes.split(",")]
    databases = ["sqlite"] if args.smoke else args.databases.split(",")
    work = Path(tempfile.mkdtemp(prefix="joblocks-list-memory-"))
    servers = []
    try:
        for database in databases:
            if database == "sqlite":
                url_of = lambda n: f"sqlite:///{work / f'list-{n}.db'}"  # noqa: E731
            elif database == "postgresql":
                try:
                    pg = start_postgres(work / "pg")
                except ServerUnavailable as exc:
                    print(f"postgresql skipped: {exc}")
                    continue
                servers.append(pg)
                url_of = lambda n, pg=pg: pg.url  # noqa: E731
            else:
                print(f"{database}: not measured by this script (sqlite, postgresql)")
                continue
            print(f"\n## {database}: listing every row (peak RSS and tracemalloc peak, MiB)\n")
            print(f"{'rows':>9}  {'what':<16} {'peak RSS':>9} {'traced':>9} {'seconds':>8}")
            for n in sizes:
                table = f"lm_{n}"
                url = url_of(n)
                fill(url, table, n)
                for r in measure_listing(url, table, n):
                    traced = mib(r["traced"]) if r["traced"] else "       -"
                    print(f"{n:>9}  {r['what']:<16} {mib(r['rss'])}  {traced} {r['seconds']:8.2f}")
                sys.stdout.flush()
                if database == "sqlite" and not args.no_prune:
                    template = work / f"list-{n}.db"
                    print(f"{'':>9}  prune of {n - max(1, n // 100)} expired rows:")
                    for r in measure_prune(template, table, n, work):
                        print(
                            f"{'':>9}    {r['what']:<20} {r['rows_per_s']:>10.0f} rows/s, "
                            f"longest write-lock hold {r['longest_hold_ms']:8.1f} ms, "
                            f"concurrent calls failed {r['churn_failed']} of {r['churn_calls']}"
                        )
                    sys.stdout.flush()
                if database == "sqlite":
                    (work / f"list-{n}.db").unlink()
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
