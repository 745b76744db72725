"""Soak: mixed operations with keep-alive from several processes on every database.

Each worker process runs ``run_with_lock`` with keep-alive, leases (refresh,
``ensure_held``, release), plain acquire/refresh/release, peek, list and count, on a few
shared keys of SQLite, PostgreSQL and MariaDB at once, and samples its RSS, threads,
file descriptors and checked-out connections; this process samples the servers'
connection counts. Nothing may leak or grow.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ..support import servers as _servers
from ..support.pool import Pool
from . import _workers as workers
from ._support import Reporter

pytestmark = [pytest.mark.reliability, pytest.mark.server, pytest.mark.timeout(600)]

SECONDS = {False: 10.0, True: 180.0}
SAMPLE_S = {False: 1.0, True: 5.0}
KEYS = 4
RSS_GROWTH_MB = 8.0  # after the first quarter (imports, caches, pools warm up)

COUNT_SQL = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    "mariadb": "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
    "WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'",
}


class ConnectionSampler:
    """Counts the servers' client connections (besides its own) every ``every`` seconds."""

    def __init__(self, urls: dict[str, str], every: float) -> None:
        self.engines = {name: sa.create_engine(url) for name, url in urls.items()}
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connection-sampler")

    def count(self) -> dict[str, int]:
        counts = {}
        for name, engine in self.engines.items():
            with engine.connect() as conn:
                counts[name] = int(conn.exec_driver_sql(COUNT_SQL[name]).scalar_one())
        return counts

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every):
            self.samples.append({"t": round(time.monotonic() - started, 1), **self.count()})

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_soak(
    request: pytest.FixtureRequest,
    pool: Pool,
    tmp_path: Path,
    table_name: str,
    long_run: bool,
    report: Reporter,
) -> None:
    pg: _servers.Server = request.getfixturevalue("pg_server")
    maria: _servers.Server = request.getfixturevalue("mariadb_server")
    urls = {
        "sqlite": f"sqlite:///{tmp_path / 'locks.db'}",
        "postgresql": pg.url,
        "mariadb": maria.url,
    }
    for url in urls.values():
        workers.make_model(url, table_name).dispose()
    keys = [f"soak-{uuid.uuid4().hex[:6]}-{i}" for i in range(KEYS)]
    seconds = SECONDS[long_run]
    sampler = ConnectionSampler({"postgresql": pg.url, "mariadb": maria.url}, SAMPLE_S[long_run])
    baseline = sampler.count()
    pool.reset()
    calls = [(urls, table_name, keys, seconds, SAMPLE_S[long_run])] * pool.size
    try:
        with sampler:
            running = pool.submit(workers.soak, calls)
            results: list[dict[str, Any]] = pool.collect(running, timeout=seconds + 120)
        time.sleep(0.5)  # the servers notice the workers' closed connections
        after = sampler.count()
    finally:
        for engine in sampler.engines.values():
            engine.dispose()

    growth = []
    for r in results:
        samples = r["samples"]
        warm = samples[max(1, len(samples) // 4)]
        growth.append(samples[-1]["rss_mb"] - warm["rss_mb"])
    per_server_max = {
        name: max([s[name] for s in sampler.samples] or [baseline[name]]) - baseline[name]
        for name in baseline
    }
    counts: dict[str, int] = {}
    for r in results:
        for name, n in r["counts"].items():
            counts[name] = counts.get(name, 0) + n
    first = results[0]["samples"]
    report(
        "soak",
        "all three",
        workers=pool.size,
        seconds=seconds,
        operations=counts,
        errors=sum(len(r["errors"]) for r in results),
        rss_mb_worker0=[s["rss_mb"] for s in first],
        rss_growth_after_warmup_mb_max=round(max(growth), 2),
        threads_max=max(s["threads"] for r in results for s in r["samples"]),
        threads_end=max(r["samples"][-1]["threads"] for r in results),
        fds_worker0=[s["fds"] for s in first],
        fds_left_after_dispose=sum(r["fds_after_dispose"] - r["fds_before"] for r in results),
        checked_out_max=max(
            n for r in results for s in r["samples"] for n in s["checked_out"].values()
        ),
        leaked_connections=sum(n for r in results for n in r["leaked"].values()),
        server_connections=[
            {k: v - baseline.get(k, 0) if k != "t" else v for k, v in s.items()}
            for s in sampler.samples
        ],
        server_connections_max=per_server_max,
        server_connections_after={name: after[name] - baseline[name] for name in baseline},
    )
    assert all(not r["errors"] for r in results), [r["errors"][:3] for r in results]
    assert counts.get("run", 0) > 0
    assert counts.get("lease", 0) > 0
    for r in results:
        samples = r["samples"]
        end = samples[-1]
        assert sum(r["leaked"].values()) == 0, r["leaked"]
        # Idle connections kept for reuse: one per thread that used a model at once.
        assert all(n <= 2 for s in samples for n in s["checked_out"].values()), samples
        assert end["threads"] == 1, "the keep-alive thread outlived its leases"
        assert max(s["threads"] for s in samples) <= 2  # main + one keep-alive thread
        # + at most one idle-trim timer per model (one model per database here), two
        # for the moment a timer that fired arms the next one before its thread ends.
        assert max(s["trim_threads"] for s in samples) <= 2 * len(urls)
        # + the process's one watchdog (a keep-alive lease's deadline).
        assert max(s["watchdog_threads"] for s in samples) <= 1
        # Bounded while running (the idle connections kept for reuse: at most two per
        # model, up to three descriptors each on SQLite), and all closed by dispose().
        assert max(s["fds"] for s in samples) <= samples[0]["fds"] + 2 * (1 + 1 + 3)
        assert r["fds_after_dispose"] <= r["fds_before"], (r["fds_before"], r["fds_after_dispose"])
    assert max(growth) <= RSS_GROWTH_MB, growth
    for name in baseline:
        # Two pooled connections per worker at most (its thread and its keep-alive).
        assert per_server_max[name] <= 2 * pool.size, (name, sampler.samples)
        assert after[name] <= baseline[name], (name, after, baseline)
