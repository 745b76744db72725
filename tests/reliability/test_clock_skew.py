"""Client clock skew: one client process runs under ``faketime``, minutes ahead or behind.

PostgreSQL and MariaDB: every "now" is the server's, so a skewed client can neither
take a live lease early nor make its own lease last longer.

SQLite has no server: "now" is read by the SQLite library inside whichever process runs
the statement, from that process's wall clock. Processes of one machine share that
clock (Linux has no per-process wall clock; time namespaces leave CLOCK_REALTIME alone),
so a per-process skew cannot happen there outside a tool like faketime — but when it
is injected, it moves expiry: the test pins down exactly how.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import joblocks

from . import _workers as workers
from ._support import Reporter, need_root_tool, tool

pytestmark = pytest.mark.reliability

SKEWS = {"ahead": "+10m", "behind": "-10m"}
SKEW_MS = 10 * 60 * 1000
TTL_MS = 800
GRACE_S = 1.0  # how long past the real expiry a taker keeps trying
ROOT = Path(__file__).resolve().parents[2]


class Skewed:
    """A client process under faketime, driven line by line (see ``skewed_main``)."""

    def __init__(self, skew: str, db_url: str, table_name: str) -> None:
        args = json.dumps({"url": db_url, "table": table_name})
        env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [
                tool("faketime"),
                "-f",
                skew,
                sys.executable,
                "-m",
                "tests.reliability._workers",
                args,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the skewed client exited with {self.proc.wait(10)}"
        message: dict[str, Any] = json.loads(line)
        return message

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"do": "bye"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def one_skew(
    skew: str, model: joblocks.JobLockModel, db_url: str, table_name: str
) -> dict[str, Any]:
    """Both directions of a steal with one skewed client; real times (monotonic) only."""
    client = Skewed(skew, db_url, table_name)
    try:
        ready = client.read()
        # 1. The skewed client tries to take a live lease of an honest client.
        key_a = f"skew-a-{uuid.uuid4().hex[:8]}"
        sent_a = time.monotonic()
        assert model.acquire(key_a, TTL_MS, "honest")
        took = client.ask(do="steal", key=key_a, give_up_s=TTL_MS / 1000 + GRACE_S)
        # 2. The skewed client holds; the honest client tries to take its lease.
        key_b = f"skew-b-{uuid.uuid4().hex[:8]}"
        held = client.ask(do="hold", key=key_b, ttl_ms=TTL_MS)
        assert held["token"] is not None
        taken_at = None
        while time.monotonic() < held["sent"] + TTL_MS / 1000 + GRACE_S:
            if model.acquire(key_b, 60_000, "honest"):
                taken_at = time.monotonic()
                break
            time.sleep(0.02)
    finally:
        client.close()
    # A lease granted after ``sent`` lives at least until sent + ttl in real time: a
    # take-over that answered before then took it early.
    real_a = sent_a + TTL_MS / 1000
    real_b = held["sent"] + TTL_MS / 1000
    return {
        "offset_ms": ready["offset_ms"],
        "skewed_took_live_lease_early": took["got_at"] is not None and took["got_at"] < real_a,
        "skewed_took_after_expiry_ms": None
        if took["got_at"] is None
        else round((took["got_at"] - real_a) * 1000),
        "honest_took_skewed_lease_early": taken_at is not None and taken_at < real_b,
        "honest_took_after_expiry_ms": None
        if taken_at is None
        else round((taken_at - real_b) * 1000),
    }


def test_client_clock_skew(backend: str, db_url: str, table_name: str, report: Reporter) -> None:
    need_root_tool("faketime")
    model = workers.make_model(db_url, table_name)
    with ThreadPoolExecutor(len(SKEWS)) as threads:
        futures = {
            name: threads.submit(one_skew, skew, model, db_url, table_name)
            for name, skew in SKEWS.items()
        }
        outcome = {name: future.result(timeout=90) for name, future in futures.items()}
    model.dispose()
    early = sum(
        o["skewed_took_live_lease_early"] + o["honest_took_skewed_lease_early"]
        for o in outcome.values()
    )
    report(
        "client clock skew",
        backend,
        skew="±10 min (faketime)",
        ttl_ms=TTL_MS,
        leases_stolen_early=early,
        **{f"{name}_{k}": v for name, o in outcome.items() for k, v in o.items()},
    )
    ahead, behind = outcome["ahead"], outcome["behind"]
    if backend != "sqlite":
        # The client's clock is off by ten minutes; the database's clock decides.
        assert abs(ahead["offset_ms"] - SKEW_MS) < 5_000
        assert abs(behind["offset_ms"] + SKEW_MS) < 5_000
        assert early == 0
        for o in outcome.values():  # and each lease was taken over once it expired
            assert 0 <= o["skewed_took_after_expiry_ms"] <= GRACE_S * 1000
            assert 0 <= o["honest_took_after_expiry_ms"] <= GRACE_S * 1000
        return
    # SQLite: "now" is the skewed process's own clock (no offset from "the database").
    assert abs(ahead["offset_ms"]) < 5_000
    assert abs(behind["offset_ms"]) < 5_000
    # Ten minutes ahead, it sees every live lease as expired, and its own last ten
    # minutes too long; ten minutes behind, the other way round.
    assert ahead["skewed_took_live_lease_early"]
    assert ahead["honest_took_after_expiry_ms"] is None
    assert behind["skewed_took_after_expiry_ms"] is None
    assert behind["honest_took_skewed_lease_early"]
    assert early == 2
