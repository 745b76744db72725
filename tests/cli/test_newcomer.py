"""What a new user trips over (issue 12): the command line's durations, a fresh
machine's first ``list``, help texts, one word for a state, the asyncio extra.

The command line runs in the test's process (``tests/support/cli.py``); a Python
without a module (``_blocked``) and the quick start are real processes.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import joblocks
import joblocks.aio
import joblocks.contrib

from ..support.cli import Result, run_cli

TIMEOUT = 60


def fresh_env(tmp_path: Path) -> dict[str, str]:
    """A user with nothing configured: an empty home and state directory."""
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_STATE_HOME"] = str(tmp_path / "home" / ".local" / "state")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def joblocks_cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> Result:
    return run_cli(*args, env=env, cwd=cwd)


# -- durations on the command line -------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (
            ["run", "k", "--ttl", "10", "--", "echo", "hi"],
            ["'10' has no unit", "10s", "10m", "10ms"],
        ),
        (["run", "k", "--ttl", "1.5", "--", "true"], ["has no unit"]),
        (["run", "k", "--ttl", "10M", "--", "true"], ["lower-case", "m is minutes, ms milli"]),
        (["run", "k", "--ttl", "1H30m", "--", "true"], ["lower-case"]),
        (["run", "k", "--ttl", "-5s", "--", "true"], ["--ttl", "'-5s' is negative"]),
        (["run", "k", "--ttl", "1m", "--wait", "-1s", "--", "true"], ["--wait", "negative"]),
        (["run", "k", "--ttl", "1m", "--wait", "30", "--", "true"], ["--wait", "no unit"]),
        (
            ["run", "k", "--ttl", "1m", "--min-hold", "-2m", "--", "true"],
            ["--min-hold", "negative"],
        ),
        (["run", "k", "--ttl", "1m", "--min-hold", "5", "--", "true"], ["--min-hold", "no unit"]),
        (["prune", "--expired-for", "-1d"], ["--expired-for", "negative"]),
        (["prune", "--expired-for", "7"], ["--expired-for", "no unit"]),
        (["prune", "--expired-for", "7D"], ["--expired-for", "lower-case"]),
    ],
)
def test_cli_durations_need_a_lower_case_unit(
    tmp_path: Path, words: list[str], says: list[str]
) -> None:
    env = fresh_env(tmp_path)
    result = joblocks_cli(env, "--url", f"sqlite:///{tmp_path / 'l.db'}", *words)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, line
    for text in says:
        assert text in line, line
    assert result.stdout == ""  # the command did not run


def test_cli_durations_with_units_run_the_command(tmp_path: Path) -> None:
    env = fresh_env(tmp_path)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    result = joblocks_cli(
        env, "--url", url, "run", "k", "--ttl", "10s", "--", "sh", "-c", "echo ran"
    )
    assert (result.returncode, result.stdout) == (0, "ran\n"), result.stderr
    zero = joblocks_cli(env, "--url", url, "prune", "--expired-for", "0", "--dry-run")
    assert zero.returncode == 0, zero.stderr  # a bare 0 is unambiguous where 0 is allowed


def test_run_help_shows_the_units(tmp_path: Path) -> None:
    result = joblocks_cli(fresh_env(tmp_path), "run", "--help")
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    for unit in ("ms milliseconds", "s seconds", "m minutes", "h hours", "d days"):
        assert unit in flat
    assert "bare number" in flat
    assert "lower-case" in flat


# -- a fresh machine -------------------------------------------------------------------


def test_first_list_on_a_fresh_machine_is_empty(tmp_path: Path) -> None:
    env = fresh_env(tmp_path)
    listed = joblocks_cli(env, "list", "--json")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, []), listed.stderr
    text = joblocks_cli(env, "list")
    assert text.returncode == 0, text.stderr
    assert "no held locks" in text.stdout
    peeked = joblocks_cli(env, "peek", "k", "--json")
    assert (peeked.returncode, json.loads(peeked.stdout)) == (1, None)
    # Read-only commands do not create the file (or its directory).
    assert not (tmp_path / "home" / ".local" / "state" / "joblocks").exists()
    ran = joblocks_cli(env, "run", "k", "--ttl", "1m", "--", "true")
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "home" / ".local" / "state" / "joblocks" / "locks.db").exists()


def test_list_still_fails_on_a_real_failure(tmp_path: Path) -> None:
    env = fresh_env(tmp_path)
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database file" * 100)
    result = joblocks_cli(env, "--url", f"sqlite:///{broken}", "list", "--json")
    assert result.returncode == 3
    assert result.stdout == ""


# -- help and names ----------------------------------------------------------------------


def test_where_and_doctor_name_the_source_the_same_way(tmp_path: Path) -> None:
    env = fresh_env(tmp_path)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    cases: list[tuple[list[str], dict[str, str], str]] = [
        ([], {}, "the per-user SQLite file"),
        (["--url", url], {}, "given with --url"),
        ([], {"JOBLOCKS_URL": url}, "from the environment variable JOBLOCKS_URL"),
    ]
    for args, extra, words in cases:
        where = joblocks_cli({**env, **extra}, *args, "where")
        doctor = joblocks_cli({**env, **extra}, *args, "doctor")
        source = [line for line in where.stdout.splitlines() if line.startswith("source")]
        assert source, where.stdout
        assert words in source[0], where.stdout
        database = [line for line in doctor.stdout.splitlines() if line.startswith("database")]
        assert database, doctor.stdout + doctor.stderr
        assert words in database[0], doctor.stdout


def test_list_help_points_to_the_docs_site(tmp_path: Path) -> None:
    result = joblocks_cli(fresh_env(tmp_path), "list", "--help")
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "docs/cli.md" not in flat
    assert "cli/#json-output" in flat
    heading = re.search(r"^## JSON output$", Path("docs/cli.md").read_text(), re.M)
    assert heading is not None  # the anchor the help names exists


def test_mariadb_ddl_has_a_space_before_its_table_options(tmp_path: Path) -> None:
    result = joblocks_cli(fresh_env(tmp_path), "--url", "mysql://app@db/app", "init", "--sql")
    assert result.returncode == 0, result.stderr
    assert ") COMMENT=" in result.stdout
    assert ")COMMENT=" not in result.stdout


_DURATIONS = {
    "ttl",
    "wait",
    "min_hold",
    "max_hold",
    "renew_every",
    "retry_every",
    "interval",
    "clock_skew",
    "timeout",
}


def _public_callables() -> list[tuple[str, Callable[..., Any]]]:
    modules: list[Any] = [joblocks, joblocks.aio]
    for info in pkgutil.walk_packages(joblocks.contrib.__path__, "joblocks.contrib."):
        if "migrations" in info.name:
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError:  # an integration whose framework is not installed
            continue
    found: list[tuple[str, Callable[..., Any]]] = []
    seen: set[int] = set()
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            qual = f"{module.__name__}.{name}"
            if inspect.isclass(obj):
                found.append((qual, obj))
                for attr, value in vars(obj).items():
                    if not attr.startswith("_") and inspect.isfunction(value):
                        found.append((f"{qual}.{attr}", value))
            elif callable(obj):
                found.append((qual, obj))
    return found


def test_every_public_docstring_with_a_duration_states_its_unit() -> None:
    missing = []
    for qual, obj in _public_callables():
        try:
            params = set(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            continue
        if not params & _DURATIONS or qual.startswith("joblocks.metrics"):
            continue
        doc = inspect.getdoc(obj) or ""
        if not re.search(r"millisecond|\bms\b", doc):
            missing.append(qual)
    assert not missing, f"no unit stated for the durations of {missing}"
    assert "millisecond" in (inspect.getdoc(joblocks.run_with_lock) or "")


def test_held_is_the_state_and_live_its_alias(make_model: Callable[..., Any], key: str) -> None:
    model = make_model()
    assert model.acquire(key, 60_000, "w1")
    assert model.insert(f"{key}-old", holder="w2", ttl=1).key == f"{key}-old"
    deadline = time.monotonic() + 10
    while not model.peek(f"{key}-old").expired:  # 1 ms by the database's clock
        assert time.monotonic() < deadline
        time.sleep(0.01)
    held = [lock.key for lock in model.list("held")]
    assert held == [key]
    assert [lock.key for lock in model.list("live")] == held
    assert model.count("held") == model.count("live") == 1
    with pytest.raises(ValueError, match="'held' \\(or its alias 'live'\\)"):
        model.list("alive")


def test_the_cli_says_held(tmp_path: Path) -> None:
    env = fresh_env(tmp_path)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    model = joblocks.JobLockModel(url)
    try:
        assert model.acquire("k", 60_000, "w1")
        result = joblocks_cli(env, "--url", url, "list", "--json")
        assert [row["state"] for row in json.loads(result.stdout)] == ["held"]
        forced = joblocks_cli(env, "--url", url, "release", "k", "--force")
        assert forced.returncode == 0, forced.stderr
        assert "token 1, held)" in forced.stderr
    finally:
        model.dispose()


# -- the asyncio extra ---------------------------------------------------------------------


def _blocked(module: str, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python where ``module`` cannot be imported (as if not installed)."""
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        env=fresh_env(tmp_path),
        timeout=TIMEOUT,
    )


def test_import_of_joblocks_aio_without_greenlet_names_the_extra(tmp_path: Path) -> None:
    result = _blocked("greenlet", "import joblocks.aio", tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: joblocks.aio needs greenlet"), last
    assert 'pip install "joblocks[asyncio]"' in last
    # The sync face does not need it.
    assert _blocked("greenlet", "import joblocks; joblocks.get_model()", tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    [
        ("aiosqlite", "sqlite:///{tmp}/l.db", "joblocks[asyncio]"),
        ("aiomysql", "mysql://u@127.0.0.1:1/db", "joblocks[mysql]"),
        ("psycopg", "postgresql://u@127.0.0.1:1/db", "joblocks[postgresql]"),
    ],
)
def test_async_engine_without_its_driver_names_the_extra(
    tmp_path: Path, module: str, url: str, extra: str
) -> None:
    code = (
        "import joblocks.aio\n"
        "try:\n"
        f"    joblocks.aio.JobLockModel({url.format(tmp=tmp_path)!r})\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, joblocks.aio.LockBackendError))\n"
        "    print(exc)\n"
    )
    result = _blocked(module, code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LockDriverMissing True"), result.stdout
    assert f"joblocks.aio needs {module}" in result.stdout
    assert f'pip install "{extra}"' in result.stdout


# -- installing ------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    return [line.split("   #", 1)[0].strip() for line in block.strip().splitlines()]


def test_readme_quick_start_is_two_commands_in_a_virtualenv() -> None:
    first, second = _quick_start()
    assert first.startswith("python3 -m venv .venv && ")
    assert ".venv/bin/pip install ." in first
    assert first.endswith("examples/race.py")
    assert second == "bash scripts/test"
    readme = (ROOT / "README.md").read_text()
    assert "externally-managed-environment" in readme
    assert "pip install joblocks" in readme  # the published-package line, marked as future
    tutorial = (ROOT / "docs" / "tutorial.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install ." in tutorial
    assert "externally-managed-environment" in tutorial
    assert "not on PyPI yet" in tutorial
    assert "joblocks[asyncio]" in readme
    assert "for aiosqlite." not in readme


@pytest.mark.slow  # a fresh virtual environment and an install: the `slow` step
@pytest.mark.timeout(900)
def test_readme_quick_start_installs_and_runs_on_a_fresh_copy(tmp_path: Path) -> None:
    """The first quick-start command, verbatim, in a copy of the project without a venv."""
    copy = tmp_path / "joblocks"
    copy.mkdir()
    for name in ("src", "examples"):
        shutil.copytree(
            ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, copy / name)
    env = fresh_env(tmp_path)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    first, _ = _quick_start()
    # Never run an install that is not into the copy's own virtual environment.
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install "), first
    result = subprocess.run(
        ["bash", "-c", first],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "the job ran 1 time(s) for 2 replicas" in result.stdout
