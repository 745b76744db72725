"""A holder process for the ``liveness`` tests: ``python -m tests.support.liveness_holder
FACE URL TABLE KEY TTL_MS LIVENESS WAIT_MS [MAX_HOLDERS]``.

It takes ``KEY`` (waiting up to ``WAIT_MS``; with ``MAX_HOLDERS``, a place of it),
prints ``held TOKEN EPOCH_S`` (with ``MAX_HOLDERS``, then the place's row id; or
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


def _held(lease: joblocks.Lease | joblocks.aio.Lease, max_holders: int | None) -> str:
    place = "" if max_holders is None else f" {lease.key}"
    return f"held {lease.token} {time.time():.6f}{place}"


def sync_main(
    url: str,
    table: str,
    key: str,
    ttl_ms: int,
    liveness: str,
    wait_ms: int,
    max_holders: int | None = None,
) -> None:
    model = joblocks.JobLockModel(url, table_name=table)
    model.now_ms()  # connected before the lease is asked for
    _say("ready")
    lease = model.try_lease(key, ttl_ms, liveness=liveness, wait=wait_ms, max_holders=max_holders)
    if lease is None:
        _say("taken")
        return
    _say(_held(lease, max_holders))
    sys.stdin.read()  # until killed, or told to stop
    lease.release()
    model.dispose()


async def aio_main(
    url: str,
    table: str,
    key: str,
    ttl_ms: int,
    liveness: str,
    wait_ms: int,
    max_holders: int | None = None,
) -> None:
    model = joblocks.aio.JobLockModel(url, table_name=table)
    await model.now_ms()
    _say("ready")
    lease = await model.try_lease(
        key, ttl_ms, liveness=liveness, wait=wait_ms, max_holders=max_holders
    )
    if lease is None:
        _say("taken")
        return
    _say(_held(lease, max_holders))
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
        max_holders: int | None = None,
    ) -> None:
        args = [face, url, table, key, str(ttl_ms), liveness, str(wait_ms)]
        if max_holders is not None:
            args.append(str(max_holders))
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
        self.place: str | None = None  # the place's row id, with max_holders

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
        self.place = said[3] if len(said) > 3 else None
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
    face, url, table, key, ttl, liveness, wait, *more = argv
    n = int(more[0]) if more else None
    args = (url, table, key, int(ttl), liveness, int(wait), n)
    if face == "aio":
        asyncio.run(aio_main(*args))
    else:
        sync_main(*args)


if __name__ == "__main__":
    main(sys.argv[1:])
