"""What ``joblocks run`` imports: the start-up path of the command cron starts.

A real ``python -m joblocks run`` on a SQLite file, in a wrapper that writes
``sorted(sys.modules)`` when the process exits; the modules the run does not use (the
other commands, the decorator, the run ledger's HTML, metrics, the asyncio face, ...)
must not be among them. And ``import joblocks`` (so ``joblocks --version`` and the
parsing of the command line) imports no SQLAlchemy, while every public name still
resolves.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from joblocks.cli import _plain_run, build_parser

TIMEOUT = 60

# Runs ``python -m joblocks ARGS`` and writes the names of the imported modules to the
# file given as the first argument, once the process exits (``main`` ends in SystemExit).
WRAPPER = (
    "import atexit, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def dump():\n"
    "    with open(out, 'w') as f:\n"
    "        f.write('\\n'.join(sorted(sys.modules)))\n"
    "atexit.register(dump)\n"
    "runpy.run_module('joblocks', run_name='__main__', alter_sys=True)\n"
)

#: Imported by some command or feature, never by a plain ``joblocks run``.
NOT_ON_RUN_PATH = (
    "joblocks.cli.setup",
    "joblocks.cli.doctor",
    "joblocks.cli._checks",
    "joblocks.cli.locks",
    "joblocks.cli.history",
    "joblocks.cli._hints",
    "joblocks._decorator",
    "joblocks._sync.run",
    "joblocks.cli._html",
    "joblocks.cli._overdue",
    "joblocks.aio",
    "joblocks._async.model",
    "joblocks._async.keepalive",
    "joblocks._async.driver",
    "joblocks._async.run",
    "joblocks.metrics",
    "joblocks.contrib",
    "joblocks.testing",
    "statistics",
    "shlex",
    "zoneinfo",
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("JOBLOCKS_URL", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def _modules(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    listing = tmp_path / "modules.txt"
    listing.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(listing), *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=TIMEOUT,
    )
    assert listing.exists(), proc.stderr
    return proc, set(listing.read_text().split())


def test_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    db = tmp_path / "locks.db"
    marker = tmp_path / "ran"
    proc, modules = _modules(
        tmp_path,
        "--url",
        f"sqlite:///{db}",
        "run",
        "nightly",
        "--ttl",
        "1m",
        "--",
        "touch",
        str(marker),
    )
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()  # the command ran, so the lock was taken
    # The run went through the library (not a short cut around it) ...
    assert {"joblocks._sync.model", "joblocks._sync.keepalive", "sqlalchemy", "sqlite3"} <= modules
    with sqlite3.connect(db) as conn:  # ... and released its row
        assert conn.execute("SELECT count(*) FROM job_locks").fetchone() == (0,)
    # ... without the modules it does not use.
    assert sorted(modules.intersection(NOT_ON_RUN_PATH)) == []


def test_other_commands_still_import_their_modules(tmp_path: Path) -> None:
    """The control: the same wrapper sees the modules of a command that uses them."""
    proc, modules = _modules(tmp_path, "--url", f"sqlite:///{tmp_path / 'x.db'}", "where")
    assert proc.returncode == 0, proc.stderr
    assert "joblocks.cli.setup" in modules


@pytest.mark.parametrize("args", [("--version",), ("run", "--help"), ("--help",)])
def test_parsing_imports_no_sqlalchemy(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc, modules = _modules(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert not {m for m in modules if m == "sqlalchemy" or m.startswith("sqlalchemy.")}
    assert "joblocks._sync.model" not in modules


def test_public_names_resolve_lazily() -> None:
    code = (
        "import sys, joblocks\n"
        "assert 'sqlalchemy' not in sys.modules\n"
        "eager = set(vars(joblocks))\n"
        "missing = [n for n in joblocks.__all__ if getattr(joblocks, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert isinstance(joblocks.WORKER_ID, str)\n"
        "assert joblocks.JobLockModel.__module__ == 'joblocks._sync.model'\n"
        "assert joblocks.configure is sys.modules['joblocks._sync.run'].configure\n"
        "assert set(joblocks.__all__) <= set(dir(joblocks))\n"
        "ns = {}\n"
        "exec('from joblocks import *', ns)\n"
        "assert set(joblocks.__all__) <= set(ns), set(joblocks.__all__) - set(ns)\n"
        "try:\n"
        "    joblocks.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
        "print(sorted(set(joblocks.__all__) & eager))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    # Only what costs nothing is bound at import; the rest on first use.
    assert proc.stdout.split() == ["['__version__',", "'get_model']"]


# -- the parser of ``run`` alone parses as the full one ---------------------------------


def _run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices["run"]
            return found
    raise AssertionError("no subcommands")


def test_run_only_parser_matches_the_full_one() -> None:
    full, alone = build_parser(), build_parser(run_only=True)
    assert full.format_usage() == alone.format_usage()
    assert _run_parser(full).format_help() == _run_parser(alone).format_help()
    assert _run_parser(full).prog == _run_parser(alone).prog == "joblocks run"
    for words in (
        ["run", "k", "--ttl", "1m", "--", "true"],
        ["--url", "sqlite:///x.db", "--debug", "run", "k", "--ttl", "5s", "--wait", "1s"],
        ["--table=t", "run", "k", "--ttl", "1m", "--record", "all", "-q", "--", "true"],
    ):
        assert vars(full.parse_known_args(words)[0]) == vars(alone.parse_known_args(words)[0])


@pytest.mark.parametrize(
    ("words", "plain"),
    [
        (["run", "k"], True),
        (["--url", "sqlite:///x.db", "run", "k"], True),
        (["--url=sqlite:///x.db", "--debug", "--schema", "s", "run"], True),
        (["--url", "run", "list"], False),  # "run" is the URL here
        (["--help", "run"], False),
        (["-h", "run"], False),
        (["--version", "run"], False),
        (["--deb", "run"], False),  # an abbreviation: left to the full parser
        (["list"], False),
        ([], False),
        (["--", "run"], False),
    ],
)
def test_plain_run(words: list[str], plain: bool) -> None:
    assert _plain_run(words) is plain
