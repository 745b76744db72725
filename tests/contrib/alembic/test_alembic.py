"""The lock table in Alembic migrations, done exactly as docs/integrations/alembic.md says.

The code blocks are read from the page itself, so the page is what is tested.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

import joblocks
from joblocks._sql.schema import sqlite_counter_ddl

from ...support.databases import fresh_database

alembic = pytest.importorskip("alembic")
from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "alembic.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _block(marker: str) -> str:
    found = [block for block in _blocks() if marker in block]
    assert len(found) == 1, f"expected one python block with {marker!r} in {DOC.name}"
    return found[0]


ENV_BLOCK = _block("def render_item")
CONFIGURE_BLOCK = _block("context.configure(")
MODULE_BLOCK = _block("JOBLOCKS_SQLITE_FENCE = [")
UPGRADE_BLOCK = _block("# joblocks: the fencing counter, which autogenerate")
DOWNGRADE_BLOCK = _block("op.execute('DROP TABLE IF EXISTS")
HANDWRITTEN_BLOCK = _block("metadata.create_all(op.get_bind())")

ENV_PY = """\
from alembic import context
from sqlalchemy import Column, Integer, Table, create_engine, pool
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


Table("widgets", Base.metadata, Column("id", Integer, primary_key=True))

{env}

engine = create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
with engine.connect() as connection:
{configure}
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
"""

COLUMNS = (
    "sa.Column('id', sa.String(length=512).with_variant(mysql.VARBINARY(length=512), "
    "'mysql', 'mariadb'), nullable=False)",
    "sa.Column('holder', sa.String(length=255).with_variant(mysql.VARBINARY(length=255), "
    "'mysql', 'mariadb'), nullable=False)",
    "sa.Column('acquired_at', sa.BigInteger(), nullable=False)",
    "sa.Column('expires_at', sa.BigInteger(), nullable=False)",
    "sa.Column('fence', sa.BigInteger(), nullable=False)",
    "sa.PrimaryKeyConstraint('id')",
)


@pytest.fixture
def url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(backend, request, str(tmp_path)) as made:
        yield made


def _config(directory: Path, url: str) -> Config:
    """An Alembic environment in ``directory`` with the documented env.py."""
    cfg = Config(str(directory / "alembic.ini"))
    command.init(cfg, str(directory / "migrations"), template="generic")
    env = ENV_BLOCK.replace("from myapp.models import Base\n", "")
    assert env != ENV_BLOCK, "the page's env.py block imports the user's Base"
    source = ENV_PY.format(env=env, configure=textwrap.indent(CONFIGURE_BLOCK, "    "))
    (directory / "migrations" / "env.py").write_text(source, encoding="utf-8")
    cfg.set_main_option("script_location", str(directory / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _revision(directory: Path, rev_id: str) -> Path:
    (path,) = (directory / "migrations" / "versions").glob(f"{rev_id}_*.py")
    return path


def _function(source: str, name: str) -> str:
    match = re.search(rf"^def {name}\(\) -> None:\n(.*?)(?=^def |\Z)", source, re.S | re.M)
    assert match is not None, name
    return match.group(1)


def _add_documented_fence(source: str) -> str:
    """Step 3 of the page: the module block, and the tails of upgrade and downgrade."""
    source = source.replace("\n\ndef upgrade()", f"\n\n{MODULE_BLOCK}\n\ndef upgrade()", 1)
    upgrade, downgrade = _function(source, "upgrade"), _function(source, "downgrade")
    assert "op.create_table('job_locks'" in upgrade
    assert "op.drop_table('job_locks')" in downgrade
    source = source.replace(upgrade, upgrade.rstrip("\n") + "\n" + UPGRADE_BLOCK + "\n\n", 1)
    return source.replace(downgrade, downgrade.rstrip("\n") + "\n" + DOWNGRADE_BLOCK, 1)


def _objects(url: str) -> set[str]:
    """The lock table's objects present in the database."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            names = set(found.get_table_names())
            if conn.dialect.name != "sqlite":
                names |= set(found.get_sequence_names())
    finally:
        engine.dispose()
    return {name for name in names if name.startswith("job_locks")}


def _acquires(url: str) -> None:
    locks = joblocks.JobLockModel(url, create_table=False)
    try:
        first = locks.acquire_token("nightly", 60_000, joblocks.WORKER_ID)
        assert first is not None
        assert locks.release("nightly", joblocks.WORKER_ID)
        second = locks.acquire_token("nightly", 60_000, "other")
        assert second is not None
        assert second > first
    finally:
        locks.dispose()


def test_autogenerate_writes_the_table_and_upgrade_makes_it_work(url: str, tmp_path: Path) -> None:
    cfg = _config(tmp_path, url)
    command.revision(cfg, message="job locks", autogenerate=True, rev_id="0001")
    path = _revision(tmp_path, "0001")
    source = path.read_text(encoding="utf-8")
    upgrade = _function(source, "upgrade")
    assert "op.create_table('job_locks'," in upgrade
    for column in COLUMNS:
        assert column in upgrade
    assert "op.create_table('widgets'" in upgrade  # the project's own tables still come
    assert "from sqlalchemy.dialects import mysql" in source
    # Self-contained: nothing of joblocks's code is named.
    assert "ExactText" not in source
    assert "joblocks." not in source
    assert "info=" not in source

    path.write_text(_add_documented_fence(source), encoding="utf-8")
    command.upgrade(cfg, "head")
    sequence_or_counter = "job_locks_fence" if url.startswith("sqlite") else "job_locks_fence_seq"
    assert _objects(url) == {"job_locks", sequence_or_counter}
    _acquires(url)

    # Nothing left to do: the hooks keep autogenerate quiet about the lock table.
    command.revision(cfg, message="nothing", autogenerate=True, rev_id="0002")
    again = _revision(tmp_path, "0002").read_text(encoding="utf-8")
    for name in ("upgrade", "downgrade"):
        assert "op." not in _function(again, name), again

    command.downgrade(cfg, "base")
    assert _objects(url) == set()


def test_create_table_once_adds_the_counter_instead(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    cfg = _config(tmp_path, url)
    command.revision(cfg, message="job locks", autogenerate=True, rev_id="0001")
    command.upgrade(cfg, "head")  # the autogenerated revision alone: no counter
    locks = joblocks.JobLockModel(url, create_table=False)
    try:
        with pytest.raises(joblocks.LockBackendError, match="job_locks_fence"):
            locks.acquire("nightly", 60_000, "w1")
    finally:
        locks.dispose()
    made = joblocks.JobLockModel(url)
    made.create_table()  # the documented alternative to step 3
    made.dispose()
    _acquires(url)


def test_handwritten_migration_with_create_all(url: str, tmp_path: Path) -> None:
    cfg = _config(tmp_path, url)
    command.revision(cfg, message="job locks", rev_id="0001")
    path = _revision(tmp_path, "0001")
    source = path.read_text(encoding="utf-8")
    head = source[: source.index("\ndef upgrade()")]
    body = HANDWRITTEN_BLOCK.split("\n\n\n", 1)[1]  # the two functions, after the imports
    path.write_text(f"{head}\nimport joblocks\n\n\n{body}", encoding="utf-8")
    command.upgrade(cfg, "head")
    _acquires(url)
    command.downgrade(cfg, "base")
    assert _objects(url) == set()


def test_documented_sqlite_counter_matches_the_library() -> None:
    namespace: dict[str, object] = {}
    exec(MODULE_BLOCK, namespace)  # noqa: S102 - the documentation's own code
    assert namespace["JOBLOCKS_SQLITE_FENCE"] == sqlite_counter_ddl("job_locks", "job_locks_fence")
