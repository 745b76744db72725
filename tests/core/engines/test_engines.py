"""Where locks live: configure/get_model, JOBLOCKS_URL, the default file, user engines, fork."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

import joblocks
import joblocks.aio
from joblocks._sync import run as _run

from ...support.matrix import own_server
from ...support.servers import Server


@pytest.fixture(autouse=True)
def fresh_configuration() -> Iterator[None]:
    """Each test starts as if configure() had never been called."""
    saved_env = os.environ.pop("JOBLOCKS_URL", None)
    _run.sync_registry._specs = None
    joblocks.aio._registry._specs = None
    yield
    joblocks.configure()  # disposes whatever the test configured
    _run.sync_registry._specs = None
    joblocks.aio._registry._specs = None
    joblocks.aio._registry._models = {}
    if saved_env is not None:
        os.environ["JOBLOCKS_URL"] = saved_env


def test_default_is_a_per_user_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    model = joblocks.get_model()
    expected = tmp_path / "state" / "joblocks" / "locks.db"
    assert model.engine.url.database == str(expected)
    assert model.acquire("job", 10_000, "w1")
    assert expected.exists()
    # Another process of the same user meets in the same file.
    code = "import joblocks; print(joblocks.get_model().acquire('job', 10_000, 'w2'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.strip() == "False"
    assert model.release("job", "w1")


def test_joblocks_url_is_used_when_not_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBLOCKS_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert joblocks.get_model().engine.url.database == str(tmp_path / "env.db")


def test_configure_default_and_named_instances(tmp_path: Path) -> None:
    joblocks.configure(
        f"sqlite:///{tmp_path / 'default.db'}",
        instances={"tenant-a": f"sqlite:///{tmp_path / 'a.db'}"},
    )
    default, tenant = joblocks.get_model(), joblocks.get_model("tenant-a")
    assert default is joblocks.get_model()  # one model per instance
    assert default.engine.url.database == str(tmp_path / "default.db")
    assert tenant.engine.url.database == str(tmp_path / "a.db")
    assert default.acquire("job", 10_000, "w1")
    assert tenant.acquire("job", 10_000, "w2")  # separate databases
    with pytest.raises(LookupError, match="tenant-b"):
        joblocks.get_model("tenant-b")


def test_reconfigure_disposes_engines_the_library_made(tmp_path: Path) -> None:
    joblocks.configure(f"sqlite:///{tmp_path / 'one.db'}")
    first = joblocks.get_model()
    first.acquire("job", 10_000, "w1")
    joblocks.configure(f"sqlite:///{tmp_path / 'two.db'}")
    second = joblocks.get_model()
    assert second is not first
    assert first.engine.pool.checkedin() == 0  # disposed
    assert second.engine.url.database == str(tmp_path / "two.db")


def test_configure_with_options(tmp_path: Path) -> None:
    joblocks.configure(f"sqlite:///{tmp_path / 'o.db'}", table_name="my_locks")
    model = joblocks.get_model()
    assert model.table_name == "my_locks"
    assert model.acquire("job", 10_000, "w1")
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'o.db'}")
    assert "my_locks" in sqlalchemy.inspect(engine).get_table_names()
    engine.dispose()


def test_run_with_lock_uses_the_configured_default(tmp_path: Path) -> None:
    joblocks.configure(f"sqlite:///{tmp_path / 'r.db'}")
    seen: list[Any] = []
    assert joblocks.run_with_lock(
        "job", 10_000, lambda: seen.append(joblocks.get_model().peek("job"))
    )
    assert seen[0].holder == joblocks.WORKER_ID


def test_asyncio_face_falls_back_to_the_sync_configuration(tmp_path: Path) -> None:
    joblocks.configure(f"sqlite:///{tmp_path / 'shared.db'}")

    async def main() -> None:
        model = joblocks.aio.get_model()
        assert model.engine.url.drivername == "sqlite+aiosqlite"
        assert model.engine.url.database == str(tmp_path / "shared.db")
        assert await model.acquire("job", 10_000, "w1")
        assert joblocks.get_model().peek("job").holder == "w1"  # the same file
        joblocks.aio.configure(f"sqlite:///{tmp_path / 'own.db'}")
        assert joblocks.aio.get_model().engine.url.database == str(tmp_path / "own.db")
        await joblocks.aio.get_model().dispose()
        await model.dispose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("given", "sync_driver", "async_driver"),
    [
        ("sqlite:///{tmp}/d.db", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///{tmp}/d.db", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+psycopg", "postgresql+psycopg"),
        ("mysql://u@h/db", "mysql+pymysql", "mysql+aiomysql"),
        ("mysql+pymysql://u@h/db", "mysql+pymysql", "mysql+aiomysql"),
        ("mariadb+aiomysql://u@h/db", "mariadb+pymysql", "mariadb+aiomysql"),
    ],
)
def test_both_faces_take_the_same_urls(
    tmp_path: Path, given: str, sync_driver: str, async_driver: str
) -> None:
    url = given.format(tmp=tmp_path)
    sync_model = joblocks.JobLockModel(url)
    async_model = joblocks.aio.JobLockModel(url)
    assert sync_model.engine.url.drivername == sync_driver
    assert async_model.engine.url.drivername == async_driver
    sync_model.dispose()
    asyncio.run(async_model.dispose())


def test_worker_id_is_a_uuid_shared_by_the_process() -> None:
    import uuid

    assert uuid.UUID(joblocks.WORKER_ID)
    assert joblocks.worker_id() == joblocks.WORKER_ID


def test_two_processes_have_different_worker_ids() -> None:
    code = "import joblocks; print(joblocks.WORKER_ID)"
    ids = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(ids) == 2


def test_more_threads_than_the_pool_allows_all_get_connections(
    db_url: str, table_name: str
) -> None:
    # The engine joblocks makes allows 15 connections (5 + 10 overflow) and the model
    # keeps idle ones for reuse. A thread that finds none idle waits in the pool: the
    # ones done must go back there, or it waits out the pool timeout and fails.
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    threads_n, pairs = 24, 25
    errors: list[BaseException] = []
    done: list[int] = []

    def work(i: int) -> None:
        try:
            for _ in range(pairs):
                assert model.acquire(f"k{i}", 10_000, "w")
                assert model.release(f"k{i}", "w")
            done.append(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    pool = model.engine.pool
    assert not errors, errors[:3]
    assert sorted(done) == list(range(threads_n))
    assert pool.checkedout() <= pool.size() + pool._max_overflow
    model.dispose()
    assert pool.checkedout() == 0


# -- engines passed in by the user --------------------------------------------------


def test_user_engine_connection_is_never_kept_checked_out(db_url: str, table_name: str) -> None:
    engine = sqlalchemy.create_engine(
        db_url.replace("postgresql+psycopg", "postgresql+psycopg").replace(
            "sqlite:///", "sqlite+pysqlite:///"
        )
    )
    model = joblocks.JobLockModel(engine, table_name=table_name)
    assert model.acquire("job", 10_000, "w1")
    assert engine.pool.checkedout() == 0
    assert model.peek("job") is not None
    assert model.release("job", "w1")
    assert model.count() == 0
    assert engine.pool.checkedout() == 0
    model.dispose()
    # A user's engine is not disposed by the library: it still works.
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    engine.dispose()


def test_lock_operations_never_join_the_callers_transaction(db_url: str, table_name: str) -> None:
    engine = sqlalchemy.create_engine(db_url)
    model = joblocks.JobLockModel(engine, table_name=table_name)
    model.create_table()
    other = f"{table_name}_app"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {other} (x INTEGER)")
    with engine.connect() as conn:
        trans = conn.begin()
        conn.exec_driver_sql(f"INSERT INTO {other} (x) VALUES (1)")
        if engine.dialect.name == "sqlite":
            trans.rollback()  # SQLite: one writer at a time; the caller's write would block us
            trans = conn.begin()
        assert model.acquire("job", 10_000, "w1")
        trans.rollback()
    # The lock was committed on its own; the caller's rollback did not undo it.
    assert model.peek("job") is not None
    with engine.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {other}").scalar() == 0
    model.dispose()
    engine.dispose()


# -- fork -----------------------------------------------------------------------


def test_forked_child_gets_a_new_worker_id_and_its_own_connections(
    db_url: str, table_name: str
) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    assert model.acquire("parent", 10_000, joblocks.WORKER_ID)  # a pooled/held connection
    parent_id = joblocks.WORKER_ID
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read)
            child_id = joblocks.WORKER_ID
            ok = model.acquire("child", 10_000, child_id)
            taken = model.acquire("parent", 10_000, child_id)
            os.write(write, json.dumps([child_id, ok, taken]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_id, ok, taken = json.loads(pipe.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child_id != parent_id
    assert ok is True
    assert taken is False  # the parent's lease is not the child's
    # The parent's connections still work after the child used its own.
    assert model.peek("child") is not None
    assert model.release("parent", parent_id)
    model.dispose()


# -- the database restarts --------------------------------------------------------


@pytest.mark.server
@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_leases_survive_a_database_restart_and_the_model_reconnects(
    which: str, table_name: str
) -> None:
    with own_server(which) as server:  # restarted: not the one other tests use
        _restart_keeps_leases(server, table_name)


def _restart_keeps_leases(server: Server, table_name: str) -> None:
    model = joblocks.JobLockModel(server.url, table_name=table_name)
    fence = model.acquire_token("job", 60_000, "w1")
    assert fence is not None
    server.kill()
    with pytest.raises(joblocks.LockBackendError):
        model.acquire("other", 60_000, "w1")
    server.start()
    # The committed lease survived; the very next call reconnects by itself.
    row = model.peek("job")
    assert row is not None
    assert (row.holder, row.fence) == ("w1", fence)
    assert model.acquire("job", 60_000, "w2") is False
    later = model.acquire_token("job-2", 60_000, "w2")
    assert later is not None
    assert later > fence  # tokens keep growing across the restart
    model.dispose()


def test_the_sync_face_does_not_need_greenlet() -> None:
    # SQLAlchemy's asyncio support needs greenlet, an optional extra of joblocks.
    code = (
        "import sys, joblocks, tempfile, os\n"
        "m = joblocks.JobLockModel('sqlite:///' + os.path.join(tempfile.mkdtemp(), 'l.db'))\n"
        "assert m.acquire('job', 1000, 'w1')\n"
        "print('sqlalchemy.ext.asyncio' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_many_processes_creating_the_table_at_once(db_url: str, table_name: str) -> None:
    # Every process is ready (imports done) before the common start time.
    code = (
        "import sys, time, joblocks\n"
        "m = joblocks.JobLockModel(sys.argv[1], table_name=sys.argv[2])\n"
        "time.sleep(max(0.0, float(sys.argv[4]) - time.time()))\n"
        "print(m.acquire('key-' + sys.argv[3], 10_000, 'w'))\n"
    )
    start_at = str(time.time() + 3.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db_url, table_name, str(i), start_at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 6, [err for _, err in outputs]
    assert [out.strip() for out, _ in outputs] == ["True"] * 6
