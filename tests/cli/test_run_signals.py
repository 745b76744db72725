"""Signals to ``joblocks run``: the command never outlives its lock.

Real ``python -m joblocks run`` processes, real signals. The command is a small Python
script that records its pid, catches every signal it may be sent (writing its number
to a file) and ends when the test lets it. For every signal whose default action would
end joblocks: the signal reaches the command, and joblocks keeps the lock (and keeps
running) until the command has ended, then releases it. A SIGKILL of joblocks, which
nothing can catch, takes the command with it (the parent-death signal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .test_cli import TIMEOUT, Cli, base_env, catches, default_signals, finish, wait_for

# Caught and passed on (Linux names; those missing elsewhere are left out).
NAMES = (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM",
    "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGIO", "SIGPWR", "SIGSTKFLT", "SIGRTMIN",
    "SIGRTMAX",
)  # fmt: skip
FORWARDED = [name for name in NAMES if hasattr(signal, name)]

# $1 ready file (gets the pid), $2 go file, $3 the signals received, $4 exit code.
CHILD = """
import os, signal, sys, time
ready, go, got, code = sys.argv[1:5]
def on(signum, frame):
    with open(got, "a") as f:
        f.write(f"{signum}\\n")
for name in sys.argv[5:]:
    signal.signal(getattr(signal, name), on)
with open(ready + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
while not os.path.exists(go):
    time.sleep(0.02)
sys.exit(int(code))
"""


class Run:
    """``joblocks run KEY -- python CHILD`` and the files of its command."""

    def __init__(
        self,
        cli: Cli,
        name: str,
        *options: str,
        code: int = 7,
        preexec: Callable[[], None] = default_signals,
    ) -> None:
        self.cli = cli
        tmp = cli.tmp
        self.ready, self.go, self.got = (tmp / f"{name}.{s}" for s in ("ready", "go", "got"))
        cli.gos.append(self.go)
        argv = cli.argv(
            "run", name, "--ttl", "30s", *options, "--", sys.executable, "-c", CHILD,
            str(self.ready), str(self.go), str(self.got), str(code), *FORWARDED,
        )  # fmt: skip
        # stdin not a terminal: joblocks is not in a terminal's foreground here.
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
            preexec_fn=preexec,
        )
        cli.procs.append(self.proc)
        self.pid: int | None = None

    def started(self) -> int:
        wait_for(self.ready, self.proc)
        self.pid = int(self.ready.read_text())
        return self.pid

    def received(self, timeout: float = 15) -> list[int]:
        deadline = time.monotonic() + timeout
        while not self.got.exists() or not self.got.read_text().strip():
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                pytest.fail(f"joblocks ended ({self.proc.returncode}) before the command: {err}")
            if time.monotonic() > deadline:
                pytest.fail(f"the command got no signal within {timeout} s")
            time.sleep(0.02)
        return [int(line) for line in self.got.read_text().split()]


def gone(pid: int) -> bool:
    """The process is gone (or a zombie: it runs no more)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return any(line.startswith("State:") and "Z" in line.split()[1] for line in status.splitlines())


def eventually_gone(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def lite(tmp_path: Path, table_name: str) -> Iterator[Cli]:
    made = Cli(f"sqlite:///{tmp_path / 'locks.db'}", table_name, tmp_path)
    pids: list[int] = []
    made.pids = pids  # type: ignore[attr-defined]
    yield made
    made.close()
    for pid in pids:  # a command a failed test left running
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux signals")


@pytest.mark.parametrize("name", FORWARDED)
def test_a_signal_reaches_the_command_and_the_lock_outlives_it(lite: Cli, name: str) -> None:
    run = Run(lite, "job")
    pid = run.started()
    lite.pids.append(pid)  # type: ignore[attr-defined]
    signum = int(getattr(signal, name))
    run.proc.send_signal(signum)  # to joblocks only
    assert run.received() == [signum]
    # The command runs on (it caught the signal): joblocks too, and the lock is held.
    assert run.proc.poll() is None
    row = lite.model().peek("job")
    assert row is not None
    assert not row.expired
    run.go.touch()
    code, _, err = finish(run.proc)
    assert code == 7, err  # the command's own exit code
    assert gone(pid)
    assert lite.model().peek("job") is None  # released once the command had ended


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGQUIT", "SIGALRM", "SIGTERM"])
def test_a_signal_while_waiting_for_the_lock_starts_nothing(lite: Cli, name: str) -> None:
    first = Run(lite, "job")
    lite.pids.append(first.started())  # type: ignore[attr-defined]
    ran = lite.tmp / "second-ran"
    second = lite.start("run", "job", "--ttl", "30s", "--wait", "1m", "--", "touch", str(ran))
    signum = int(getattr(signal, name))
    catches(second, signum)
    second.send_signal(signum)
    code, _, err = finish(second)
    assert code == 128 + signum, err
    assert "before the command started" in err
    assert not ran.exists()
    first.go.touch()
    assert finish(first.proc)[0] == 7


def test_sigkill_of_joblocks_takes_the_command_with_it(lite: Cli) -> None:
    run = Run(lite, "job")
    pid = run.started()
    lite.pids.append(pid)  # type: ignore[attr-defined]
    run.proc.kill()
    run.proc.wait(timeout=TIMEOUT)  # not its pipes: a command left running keeps them
    assert eventually_gone(pid), f"the command (pid {pid}) outlived joblocks's SIGKILL"


def test_sigkill_of_joblocks_stops_a_command_that_ignores_sigterm(tmp_path: Path) -> None:
    # A shell command that ignores SIGTERM and execs into sleep: the parent-death
    # signal is SIGKILL, which it cannot ignore.
    ready = tmp_path / "ready"
    script = f"trap '' TERM; echo $$ > {ready}.tmp; mv {ready}.tmp {ready}; exec sleep 600"
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "joblocks", "--url", url, "run", "job", "--ttl", "30s", "--",
         "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=base_env(tmp_path),
        preexec_fn=default_signals,
    )  # fmt: skip
    try:
        wait_for(ready)
        pid = int(ready.read_text())
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        assert eventually_gone(pid), f"the command (pid {pid}) outlived joblocks's SIGKILL"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if ready.exists() and not gone(int(ready.read_text())):
            os.kill(int(ready.read_text()), signal.SIGKILL)


def test_a_signal_ignored_when_joblocks_starts_stays_ignored(lite: Cli) -> None:
    """``nohup joblocks run ...``: SIGHUP, ignored when joblocks starts, is left ignored
    (not caught, not passed on); the signals with their default action are caught."""

    def ignore_sighup() -> None:
        default_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    run = Run(lite, "nohup", preexec=ignore_sighup)
    run.started()
    catches(run.proc, signal.SIGTERM)
    status = Path(f"/proc/{run.proc.pid}/status").read_text()
    masks = {
        line.split(":")[0]: int(line.split()[1], 16)
        for line in status.splitlines()
        if line.startswith(("SigCgt:", "SigIgn:"))
    }
    bit = 1 << (signal.SIGHUP - 1)
    assert masks["SigIgn"] & bit, "SIGHUP is no longer ignored"
    assert not masks["SigCgt"] & bit, "SIGHUP is caught although it was ignored"
    run.proc.send_signal(signal.SIGHUP)
    run.go.touch()
    code, _, err = finish(run.proc)
    assert code == 7, err  # the command's own status: nothing interrupted it
    assert not run.got.exists() or not run.got.read_text().strip()
