"""A holder process for the ``liveness`` tests: ``python -m tests.support.liveness_holder
FACE URL TABLE KEY TTL_MS LIVENESS WAIT_MS``.

It takes ``KEY`` (waiting up to ``WAIT_MS``), prints ``held TOKEN EPOCH_S`` (or
``taken``) on one line, then keeps the lease until it is killed (or its stdin closes,
then it releases and exits). Nothing but strings crosses the process boundary.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import joblocks
import joblocks.aio


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def sync_main(url: str, table: str, key: str, ttl_ms: int, liveness: str, wait_ms: int) -> None:
    model = joblocks.JobLockModel(url, table_name=table)
    model.now_ms()  # connected before the lease is asked for
    _say("ready")
    lease = model.try_lease(key, ttl_ms, liveness=liveness, wait=wait_ms)
    if lease is None:
        _say("taken")
        return
    _say(f"held {lease.token} {time.time():.6f}")
    sys.stdin.read()  # until killed, or told to stop
    lease.release()
    model.dispose()


async def aio_main(
    url: str, table: str, key: str, ttl_ms: int, liveness: str, wait_ms: int
) -> None:
    model = joblocks.aio.JobLockModel(url, table_name=table)
    await model.now_ms()
    _say("ready")
    lease = await model.try_lease(key, ttl_ms, liveness=liveness, wait=wait_ms)
    if lease is None:
        _say("taken")
        return
    _say(f"held {lease.token} {time.time():.6f}")
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await lease.release()
    await model.dispose()


ROOT = Path(__file__).resolve().parents[2]


class HolderProcess:
    """The parent's side: a holder process of ``face`` asking for ``key`` (waiting up to
    ``wait_ms``); :meth:`line` reads what it says, with a bounded wait."""

    def __init__(
        self,
        face: str,
        url: str,
        table: str,
        key: str,
        ttl_ms: int,
        liveness: str,
        wait_ms: int = 0,
    ) -> None:
        args = [face, url, table, key, str(ttl_ms), liveness, str(wait_ms)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.liveness_holder", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.token: int | None = None
        self.held_at: float | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def line(self, timeout: float = 60.0) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the holder process said nothing in time") from None

    def held(self, timeout: float = 60.0) -> HolderProcess:
        """Wait until it says it holds the key; keeps its token and when (epoch s)."""
        assert self.line(timeout) == "ready"
        said = self.line(timeout).split()
        assert said[0] == "held", said
        self.token, self.held_at = int(said[1]), float(said[2])
        return self

    def kill(self) -> float:
        """SIGKILL it; the epoch time just before the signal."""
        at = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        return at

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.reader.join(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def main(argv: list[str]) -> None:
    face, url, table, key, ttl, liveness, wait = argv
    args = (url, table, key, int(ttl), liveness, int(wait))
    if face == "aio":
        asyncio.run(aio_main(*args))
    else:
        sync_main(*args)


if __name__ == "__main__":
    main(sys.argv[1:])
