"""One table under many spellings, a caller's SQLite engine, a deleted SQLite file, a
table that is not ours: the figures of issue 10's findings 2, 5, 7 and 8.

    python benchmarks/where_it_runs.py [--databases sqlite,postgresql,mariadb]

Runs against whichever joblocks is importable, so the figures before a change come
from the same script (``PYTHONPATH=old-checkout/src python benchmarks/...``). Prints:

1. overlaps: for each spelling of one table, whether two overlapping ``run_with_lock``
   calls of one process both ran (sync and asyncio);
2. a caller's SQLite engine on a fresh file (busy timeout 1 s) while another
   connection keeps a read transaction open: how many of 5 lock writes failed;
3. a SQLite file deleted under a keep-alive lease (renewed every 100 ms, ttl 3 s):
   after how long the lease was reported lost, and why;
4. a foreign ``job_locks`` table: whether first use and ``joblocks init`` refused it,
   and what was created beside it;
5. the operation a failed table creation is named after, per face.
"""

# SQL text is built from generated table names only.
# ruff: noqa: S608

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, inspect, text
from tests.support.servers import MARIADB_DATABASE

import joblocks
import joblocks.aio
from benchmarks._common import start_databases, table

TTL = 30_000


def overlapped(first_url: str, second_url: str, face: str, **second: Any) -> bool:
    """Whether a second run_with_lock ran inside the first (True = both ran)."""
    name = f"g_{uuid.uuid4().hex[:10]}"
    key = "job"
    if face == "sync":
        a = joblocks.JobLockModel(first_url, table_name=name)
        b = joblocks.JobLockModel(second_url, table_name=name, **second)
        ran: list[bool] = []
        joblocks.run_with_lock(
            key,
            TTL,
            lambda: ran.append(joblocks.run_with_lock(key, TTL, lambda: None, model=b)),
            model=a,
        )
        a.dispose()
        b.dispose()
        return ran == [True]

    async def main() -> bool:
        a = joblocks.aio.JobLockModel(first_url, table_name=name)
        b = joblocks.aio.JobLockModel(second_url, table_name=name, **second)
        ran: list[bool] = []

        async def nop() -> None:
            return None

        async def outer() -> None:
            ran.append(await joblocks.aio.run_with_lock(key, TTL, nop, model=b))

        await joblocks.aio.run_with_lock(key, TTL, outer, model=a)
        await a.dispose()
        await b.dispose()
        return ran == [True]

    return asyncio.run(main())


def spellings(urls: dict[str, str], servers: dict[str, Any], tmp: Path) -> list[tuple[str, ...]]:
    real = tmp / "real"
    real.mkdir()
    (tmp / "link").symlink_to(real, target_is_directory=True)
    (real / "locks.db").touch()
    (real / "alias.db").symlink_to(real / "locks.db")
    base = f"sqlite:///{real}/locks.db"
    cases: list[tuple[str, str, str, dict[str, Any]]] = [
        ("sqlite", "symlinked directory", f"sqlite:///{tmp}/link/locks.db", {}),
        ("sqlite", "file symlink", f"sqlite:///{real}/alias.db", {}),
        ("sqlite", "relative path", "sqlite:///real/locks.db", {}),
        ("sqlite", "path with ..", f"sqlite:///{real}/../link/../real/locks.db", {}),
    ]
    firsts = {"sqlite": base}
    if "postgresql" in servers:
        pg = servers["postgresql"]
        firsts["postgresql"] = pg.url
        cases += [
            ("postgresql", "localhost", pg.url.replace("127.0.0.1", "localhost"), {}),
            ("postgresql", "?application_name=x", f"{pg.url}?application_name=x", {}),
            ("postgresql", "schema='public'", pg.url, {"schema": "public"}),
        ]
    if "mariadb" in servers:
        my = servers["mariadb"]
        firsts["mariadb"] = my.url
        cases += [
            ("mariadb", "localhost", my.url.replace("127.0.0.1", "localhost"), {}),
            ("mariadb", "?charset=utf8mb4", f"{my.url}?charset=utf8mb4", {}),
            ("mariadb", f"schema={MARIADB_DATABASE!r}", my.url, {"schema": MARIADB_DATABASE}),
        ]
    rows = []
    os.chdir(tmp)
    for db, spelling, url, options in cases:
        if db not in urls:
            continue
        both = [overlapped(firsts[db], url, face, **options) for face in ("sync", "aio")]
        rows.append((db, spelling, *("both ran" if b else "refused" for b in both)))
    return rows


def reader_blocks(tmp: Path, face: str) -> str:
    path = tmp / f"fresh-{face}.db"
    name = "job_locks"
    failed = 0
    if face == "sync":
        engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 1})
        model = joblocks.JobLockModel(engine)
        model.acquire("first", TTL, "w")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute(f"SELECT count(*) FROM {name}").fetchall()
        for i in range(5):
            try:
                model.acquire(f"k{i}", TTL, "w")
            except joblocks.LockBackendError:
                failed += 1
        reader.close()
        engine.dispose()
        return f"{failed} of 5 failed"

    async def main() -> int:
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 1})
        model = joblocks.aio.JobLockModel(engine)
        await model.acquire("first", TTL, "w")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute(f"SELECT count(*) FROM {name}").fetchall()
        count = 0
        for i in range(5):
            try:
                await model.acquire(f"k{i}", TTL, "w")
            except joblocks.LockBackendError:
                count += 1
        reader.close()
        await engine.dispose()
        return count

    return f"{asyncio.run(main())} of 5 failed"


def deleted_file(tmp: Path, face: str) -> str:
    folder = tmp / f"del-{face}"
    folder.mkdir()
    url = f"sqlite:///{folder}/locks.db"
    lost = threading.Event()

    def gone() -> None:
        for suffix in ("", "-wal", "-shm"):
            (folder / f"locks.db{suffix}").unlink(missing_ok=True)

    def wait(held: Any) -> str:
        started = time.monotonic()
        if not lost.wait(timeout=3.5):
            return "not reported lost in 3.5 s"
        reason = str(held.lost_reason).replace(str(folder), "<dir>")
        return f"lost after {(time.monotonic() - started) * 1000:.0f} ms: {reason}"

    if face == "sync":
        model = joblocks.JobLockModel(url)
        held = model.try_lease(
            "k", 3000, keepalive=True, renew_every=100, on_lost=lambda _: lost.set()
        )
        gone()
        answer = wait(held)
        held.release()
        model.dispose()
        return answer

    async def main() -> str:
        model = joblocks.aio.JobLockModel(url)
        held = await model.try_lease(
            "k", 3000, keepalive=True, renew_every=100, on_lost=lambda _: lost.set()
        )
        gone()
        answer = await asyncio.get_running_loop().run_in_executor(None, wait, held)
        await held.release()
        await model.dispose()
        return answer

    return asyncio.run(main())


def foreign(db: str, url: str, tmp: Path) -> tuple[str, ...]:
    name = f"f_{uuid.uuid4().hex[:10]}"
    plain = create_engine(url, isolation_level="AUTOCOMMIT")
    q = "`" if db == "mariadb" else '"'
    with plain.connect() as conn:
        conn.execute(
            text(
                f"CREATE TABLE {name} (_id VARCHAR(100) PRIMARY KEY, holder VARCHAR(100), "
                f"{q}acquiredAt{q} BIGINT, {q}expiresAt{q} BIGINT)"
            )
        )
    model = joblocks.JobLockModel(url, table_name=name)
    try:
        model.acquire("k", TTL, "w")
        first = "used it"
    except joblocks.LockBackendError as exc:
        first = (
            "refused" if "not a joblocks lock table" in str(exc) else f"error: {exc.detail[:40]}"
        )
    model.dispose()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"))
    env.pop("JOBLOCKS_URL", None)
    init = subprocess.run(
        [sys.executable, "-m", "joblocks", "--url", url, "--table", name, "init"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    with plain.connect() as conn:
        if db == "sqlite":
            beside = [
                row[0]
                for row in conn.execute(
                    text("SELECT name FROM sqlite_master WHERE name LIKE :p OR tbl_name = :t"),
                    {"p": f"{name}_fence%", "t": name},
                )
                if row[0] != name and "autoindex" not in row[0]
            ]
        else:
            seq = f"{name}_fence_seq"
            beside = [seq] if inspect(conn).has_sequence(seq) else []
    plain.dispose()
    created = ", ".join(n.replace(name, "<t>") for n in beside) or "nothing"
    return (db, first, f"exit {init.returncode}", created)


def creation_names(db: str, url: str) -> tuple[str, ...]:
    names = []
    for face in ("sync", "aio"):
        name = f"c_{uuid.uuid4().hex[:10]}"
        plain = create_engine(url, isolation_level="AUTOCOMMIT")
        with plain.connect() as conn:
            if db == "sqlite":
                conn.execute(text(f'CREATE VIEW "{name}_fence" AS SELECT 1 AS id, 1 AS value'))
            else:
                conn.execute(text(f"CREATE TABLE {name}_fence_seq (x INTEGER)"))
        plain.dispose()
        if face == "sync":
            model = joblocks.JobLockModel(url, table_name=name)
            try:
                model.peek("k")
                names.append("no error")
            except joblocks.LockBackendError as exc:
                names.append(f"{exc.operation} failed")
            model.dispose()
        else:

            async def main(name: str = name) -> str:
                model = joblocks.aio.JobLockModel(url, table_name=name)
                try:
                    await model.peek("k")
                    return "no error"
                except joblocks.LockBackendError as exc:
                    return f"{exc.operation} failed"
                finally:
                    await model.dispose()

            names.append(asyncio.run(main()))
    return (db, *names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", default="sqlite,postgresql,mariadb")
    args = parser.parse_args()
    import logging

    logging.getLogger("joblocks").setLevel(logging.ERROR)
    print(f"joblocks from {Path(joblocks.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="joblocks-where-") as name:
        tmp = Path(name)
        dbs = start_databases(args.databases.split(","), tmp)
        try:
            rows = spellings(dbs.urls, dbs.servers, tmp)
            overlaps = sum(row.count("both ran") for row in rows)
            cases = 2 * len(rows)
            print(f"\n1. overlapping run_with_lock, one table: {overlaps} of {cases} ran twice")
            print(
                table(["database", "second spelling", "sync", "asyncio"], [list(r) for r in rows])
            )
            print("\n2. caller's SQLite engine, a reader's open transaction, 5 lock writes")
            print(table(["face", "writes"], [[f, reader_blocks(tmp, f)] for f in ("sync", "aio")]))
            print("\n3. SQLite file deleted under a keep-alive lease (renew 100 ms, ttl 3 s)")
            print(table(["face", "result"], [[f, deleted_file(tmp, f)] for f in ("sync", "aio")]))
            print("\n4. a foreign table of the lock table's name")
            found = [list(foreign(db, url, tmp)) for db, url in dbs.urls.items()]
            print(table(["database", "first use", "joblocks init", "created beside"], found))
            print("\n5. a failed table creation is named")
            named = [list(creation_names(db, url)) for db, url in dbs.urls.items()]
            print(table(["database", "sync", "asyncio"], named))
        finally:
            dbs.stop()


if __name__ == "__main__":
    main()
