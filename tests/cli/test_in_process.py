"""The in-process command line of the tests (``tests/support/cli.py``) shows what the
real ``python -m joblocks`` process shows, and leaves the test's process as it was.

The comparison runs real processes once per case, on purpose: it is what lets every
other test of the command line call ``main`` in its own process.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from joblocks.cli import run as run_module

from ..support.cli import Result, joblocks_argv, run_cli

TIMEOUT = 60


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JOBLOCKS_URL"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


CASES: list[tuple[list[str], str | None]] = [
    (["--version"], None),
    (["run", "k", "--ttl", "5x", "--", "true"], None),  # argparse: SystemExit(2)
    # The command's own output (descriptors 1 and 2, inherited) and its exit code.
    (["run", "k", "--ttl", "10s", "--", "sh", "-c", "echo out; echo err >&2; exit 4"], None),
    (["run", "k", "--ttl", "10s", "--", "cat"], "fed to the command\n"),  # stdin too
    (["peek", "k", "--json"], None),  # exit 1, "null"
    (["--url", "postgresql://u:s3cret@127.0.0.1:1/db", "list"], None),  # a database error
]


@pytest.mark.parametrize(("words", "given"), CASES, ids=lambda case: str(case)[:40])
def test_in_process_shows_what_the_process_shows(
    tmp_path: Path, words: list[str], given: str | None
) -> None:
    env = _env(tmp_path)
    url = ["--url", f"sqlite:///{tmp_path / 'locks.db'}"]
    argv = words if "--url" in words else [*url, *words]
    real = subprocess.run(
        joblocks_argv(*argv),
        input=given or "",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    (tmp_path / "locks.db").unlink(missing_ok=True)  # both calls start from nothing
    inside = run_cli(*argv, env=env, cwd=tmp_path, input=given)
    assert inside == Result(real.returncode, real.stdout, real.stderr)


def _state() -> dict[str, Any]:
    log = logging.getLogger("joblocks")
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": umask,
        "signals": {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)},
        "streams": (sys.stdin, sys.stdout, sys.stderr),
        "descriptors": [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (0, 1, 2)],
        "log": (list(log.handlers), log.level, log.propagate),
    }


def test_a_call_leaves_the_process_as_it_was(tmp_path: Path) -> None:
    before = _state()
    env = {**_env(tmp_path), "JOBLOCKS_URL": f"sqlite:///{tmp_path / 'locks.db'}"}
    done = run_cli(
        "run", "k", "--ttl", "10s", "--", "sh", "-c", 'pwd; umask; echo "$JOBLOCKS_KEY"',
        env=env, cwd=tmp_path, umask=0o027,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == [str(tmp_path), "0027", "k"]  # what the call was given
    assert _state() == before


def test_a_signal_handler_left_behind_fails_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's check: a ``run`` that did not put its handlers back is reported
    (and the handlers are put back for the next test)."""
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(run_module._Run, "_restore", staticmethod(lambda previous: None))
    with pytest.raises(AssertionError, match="left signal handlers changed"):
        run_cli("--url", f"sqlite:///{tmp_path / 'locks.db'}", "run", "k", "--ttl", "10s",
                "--", "true", env=_env(tmp_path))  # fmt: skip
    assert signal.getsignal(signal.SIGTERM) == before
