"""A holder process for the ``liveness`` tests: ``python -m tests.support.liveness_holder
FACE URL TABLE KEY TTL_MS LIVENESS WAIT_MS``.

It takes ``KEY`` (waiting up to ``WAIT_MS``), prints ``held TOKEN EPOCH_S`` (or
``taken``) on one line, then keeps the lease until it is killed (or its stdin closes,
then it releases and exits). Nothing but strings crosses the process boundary.
"""

from __future__ import annotations

import asyncio
import sys
import time

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


def main(argv: list[str]) -> None:
    face, url, table, key, ttl, liveness, wait = argv
    args = (url, table, key, int(ttl), liveness, int(wait))
    if face == "aio":
        asyncio.run(aio_main(*args))
    else:
        sync_main(*args)


if __name__ == "__main__":
    main(sys.argv[1:])
