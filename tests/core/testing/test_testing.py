"""joblocks.testing and the pytest plugin, run as a user's test suite would use them."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import joblocks
from joblocks._sync import run as _run
from joblocks.testing import assert_locked, assert_not_locked, temporary_model

pytest_plugins = ["pytester"]

USER_TESTS = '''
import asyncio
import time

import pytest

import joblocks
import joblocks.aio
from joblocks.testing import assert_locked, assert_not_locked


def nightly():
    """The user's job: skipped while another worker holds its lock."""
    return joblocks.run_with_lock("nightly", 60_000, lambda: None)


def test_the_fixture_is_the_default_model(joblocks_model):
    assert joblocks.get_model() is joblocks_model
    assert joblocks_model.engine.url.get_backend_name() == "sqlite"


def test_job_skips_while_another_worker_holds_it(joblocks_model):
    with joblocks.lease("nightly", 60_000, holder="other-worker"):
        row = assert_locked("nightly", holder="other-worker")
        assert row.holder == "other-worker"
        assert nightly() is False
    assert_not_locked("nightly")
    assert nightly() is True
    assert_not_locked("nightly")


def test_every_test_gets_an_empty_database(joblocks_model):
    assert joblocks_model.count() == 0


def test_assertion_messages(joblocks_model):
    with pytest.raises(AssertionError, match="lock 'x' is not held: no row"):
        assert_locked("x")
    assert joblocks_model.acquire("x", 60_000, "w1")
    with pytest.raises(AssertionError, match="lock 'x' is held by 'w1', not by 'w2'"):
        assert_locked("x", holder="w2")
    with pytest.raises(AssertionError, match="lock 'x' is held by 'w1' for another"):
        assert_not_locked("x")
    assert joblocks_model.acquire("brief", 1, "w1")
    time.sleep(0.02)
    assert_not_locked("brief")  # an expired lease holds nothing
    with pytest.raises(AssertionError, match="the lease of 'w1' expired"):
        assert_locked("brief")


def test_an_explicit_model(joblocks_model, joblocks_url):
    other = joblocks.JobLockModel(joblocks_url)
    try:
        assert other.acquire("shared", 60_000, "w1")
        assert_locked("shared", model=joblocks_model, holder="w1")
        assert_locked("shared", model=other)
    finally:
        other.dispose()


def test_the_asyncio_face_uses_it_too(joblocks_model):
    async def work():
        assert_locked("async-job")

    async def main():
        ran = await joblocks.aio.run_with_lock("async-job", 60_000, work)
        await joblocks.aio.get_model().dispose()
        return ran

    assert asyncio.run(main()) is True
    assert_not_locked("async-job")


def test_a_failing_user_test(joblocks_model):
    assert_locked("never-taken")
'''


def _plugin_args() -> list[str]:
    """``-p joblocks.pytest_plugin`` unless an installed entry point loads it already."""
    found: Any = entry_points()
    group = (
        found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", ())
    )
    installed = any(ep.value.startswith("joblocks.pytest_plugin") for ep in group)
    return [] if installed else ["-p", "joblocks.pytest_plugin"]


def test_plugin_in_a_user_suite(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytest.importorskip("aiosqlite")
    pytester.makepyfile(test_user_jobs=USER_TESTS)
    with temporary_model(tmp_path) as outer:
        result = pytester.runpytest(*_plugin_args(), "-p", "no:cacheprovider")
        # The user's suite changed joblocks's configuration for each test, and put the
        # one from before back afterwards, without disposing of it.
        assert joblocks.get_model() is outer
        assert outer.acquire("still-usable", 60_000, "w1")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: lock 'never-taken' is not held: no row*"])


def test_temporary_model_restores_the_configuration(tmp_path: Path) -> None:
    registry = _run.sync_registry
    before = (registry._specs, registry._options, dict(registry._models))
    with temporary_model(tmp_path, table_name="my_locks") as model:
        assert joblocks.get_model() is model
        assert model.table.name == "my_locks"
        joblocks.configure(f"sqlite:///{tmp_path / 'inner.db'}")  # the test's own change
        inner = joblocks.get_model()
        assert inner is not model
    assert (registry._specs, registry._options, dict(registry._models)) == before
    # What the test configured itself is disposed with it; the model is closed too.
    assert inner.engine.pool.checkedout() == 0


def test_temporary_model_without_configure() -> None:
    with temporary_model(configure=False) as model:
        directory = Path(model.engine.url.database).parent  # a temporary directory
        assert directory.exists()
        assert joblocks.get_model() is not model
        assert model.acquire("job", 60_000, "w")
        assert_locked("job", model=model)
    assert not directory.exists()  # removed on exit


def test_assert_not_locked_on_a_free_key(tmp_path: Path) -> None:
    with temporary_model(tmp_path) as model:
        assert_not_locked("free")
        assert_not_locked("free", model=model)
