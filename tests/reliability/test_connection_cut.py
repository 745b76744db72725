"""Connection cut: packets of the lock connection are dropped mid-call (iptables).

The model reaches the server through a TCP proxy on loopback (``TcpProxy``), and an
iptables rule drops the proxy port's packets: either what the client sends (the
statement never reaches the server) or what comes back (the statement runs and
commits; the client never hears of it). Only this model's connections are cut; the
server and the checking model, connected directly, keep working. Short timeouts come
through the URL's query, as an application would set them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import sqlalchemy as sa

import joblocks
import joblocks.aio
from joblocks._db import engines as _engines

from ..support import servers as _servers
from . import _workers as workers
from ._support import Reporter, TcpProxy, dropped, need_root_tool

pytestmark = [pytest.mark.reliability, pytest.mark.server]

IO_TIMEOUT_S = 1
CONNECT_TIMEOUT_S = 2  # libpq's smallest connect timeout
MARGIN_S = 3.0  # the kernel aborts at the first retransmission timer past the timeout
SHORT_TIMEOUTS = {
    "postgresql": {
        "connect_timeout": str(CONNECT_TIMEOUT_S),
        "tcp_user_timeout": str(IO_TIMEOUT_S * 1000),
    },
    "mariadb": {
        "connect_timeout": str(CONNECT_TIMEOUT_S),
        "read_timeout": str(IO_TIMEOUT_S),
        "write_timeout": str(IO_TIMEOUT_S),
    },
}
CASES = [
    ("acquire", "request"),
    ("acquire", "reply"),
    ("release", "request"),
    ("release", "reply"),
    ("connect", "request"),
]


@pytest.fixture
def server(request: pytest.FixtureRequest, server_backend: str) -> _servers.Server:
    fixture = "pg_server" if server_backend == "postgresql" else "mariadb_server"
    server: _servers.Server = request.getfixturevalue(fixture)
    return server


@pytest.fixture
def proxy(server: _servers.Server) -> Iterator[TcpProxy]:
    need_root_tool("iptables")
    proxy = TcpProxy(server.port)
    try:
        yield proxy
    finally:
        proxy.close()


def cut_call(proxy: TcpProxy, direction: str, call: Callable[[], Any]) -> tuple[str, float, Any]:
    """Run ``call`` with the proxy's ``direction`` dropped: (outcome, seconds, result)."""
    with dropped(proxy.port, direction):
        started = time.monotonic()
        try:
            result = call()
            outcome = "returned"
        except joblocks.LockBackendError as exc:
            result = exc
            outcome = "LockBackendError"
        except Exception as exc:
            result = exc
            outcome = type(exc).__name__
        return outcome, time.monotonic() - started, result


def test_connection_cut(
    server_backend: str,
    server: _servers.Server,
    proxy: TcpProxy,
    table_name: str,
    report: Reporter,
) -> None:
    url = (
        sa.make_url(server.url)
        .set(port=proxy.port)
        .update_query_dict(SHORT_TIMEOUTS[server_backend])
    )
    model = joblocks.JobLockModel(url, table_name=table_name)
    direct = workers.make_model(server.url, table_name)
    holder = "cut-holder"
    rows: list[dict[str, Any]] = []
    for op, direction in CASES:
        key = f"cut-{uuid.uuid4().hex[:8]}"
        if op == "release":
            assert model.acquire(key, 60_000, holder)
        if op == "connect":
            model.engine.dispose()  # no pooled connection: the call has to connect
        else:
            model.peek(key)  # the pooled connection was just used: no ping before the call
        call = (
            (lambda key=key: model.release(key, holder))
            if op == "release"
            else (lambda key=key: model.acquire(key, 60_000, holder))
        )
        outcome, seconds, result = cut_call(proxy, direction, call)
        committed = direct.peek(key)  # what the server did meanwhile
        retried = call()  # the same holder retries once the network is back
        final = direct.peek(key)
        if op == "release":
            idempotent = final is None and retried == (committed is not None)
        else:
            idempotent = (
                retried is True
                and final is not None
                and final.holder == holder
                and (committed is None or final.fence == committed.fence)
            )
            model.release(key, holder)
        rows.append(
            {
                "case": f"{op} ({direction} lost)",
                "outcome": outcome if outcome != "returned" else f"returned {result!r}",
                "seconds": round(seconds, 2),
                "timeout_s": CONNECT_TIMEOUT_S if op == "connect" else IO_TIMEOUT_S,
                "server_did_it": (committed is not None) == (op != "release"),
                "retry_idempotent": idempotent,
            }
        )
    report(
        "connection cut",
        server_backend,
        io_timeout_s=IO_TIMEOUT_S,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        cases=len(rows),
        errors_raised=sum(r["outcome"] == "LockBackendError" for r in rows),
        ambiguous_outcomes_surfaced_pct=round(
            100
            * sum(r["outcome"] == "LockBackendError" for r in rows if r["server_did_it"])
            / max(1, sum(r["server_did_it"] for r in rows)),
            1,
        ),
        time_to_error_s_max=max(r["seconds"] for r in rows),
        retries_idempotent=sum(r["retry_idempotent"] for r in rows),
        details=rows,
    )
    for r in rows:
        assert r["outcome"] == "LockBackendError", r
        assert r["seconds"] <= r["timeout_s"] + MARGIN_S, r
        assert r["retry_idempotent"], r
    # The reply-lost cases are the ambiguous ones: the server did the work.
    assert all(r["server_did_it"] for r in rows if "reply" in r["case"])
    model.dispose()
    direct.dispose()


async def _cut_aio_acquire(url: str, table_name: str, port: int) -> tuple[str, float]:
    model = joblocks.aio.JobLockModel(url, table_name=table_name)
    key = f"cut-aio-{uuid.uuid4().hex[:8]}"
    try:
        await model.peek(key)
        with dropped(port, "reply"):
            started = time.monotonic()
            try:
                await asyncio.wait_for(
                    model.acquire(key, 60_000, "cut-holder"), IO_TIMEOUT_S + MARGIN_S + 1
                )
                outcome = "returned"
            except joblocks.LockBackendError:
                outcome = "LockBackendError"
            except asyncio.TimeoutError:
                outcome = "no answer (cancelled by the test)"
            return outcome, time.monotonic() - started
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(model.dispose(), 10)


@pytest.mark.parametrize(
    "aio_backend",
    [
        "postgresql",
        "mariadb",
    ],
)
def test_connection_cut_asyncio(
    request: pytest.FixtureRequest,
    aio_backend: str,
    table_name: str,
    monkeypatch: pytest.MonkeyPatch,
    report: Reporter,
) -> None:
    """The asyncio face, with the library's own default timeouts (shortened here)."""
    need_root_tool("iptables")
    fixture = "pg_server" if aio_backend == "postgresql" else "mariadb_server"
    server: _servers.Server = request.getfixturevalue(fixture)
    monkeypatch.setattr(_engines, "TIMEOUT_MS", IO_TIMEOUT_S * 1000)  # PostgreSQL connects in 2 s
    proxy = TcpProxy(server.port)
    try:
        url = sa.make_url(server.url).set(port=proxy.port).render_as_string(hide_password=False)
        outcome, seconds = asyncio.run(_cut_aio_acquire(url, table_name, proxy.port))
    finally:
        proxy.close()
    report(
        "connection cut (asyncio face)",
        aio_backend,
        io_timeout_s=IO_TIMEOUT_S,
        case="acquire (reply lost)",
        outcome=outcome,
        seconds=round(seconds, 2),
    )
    assert outcome == "LockBackendError"
    assert seconds <= IO_TIMEOUT_S + MARGIN_S


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server_backend" in metafunc.fixturenames:
        metafunc.parametrize("server_backend", ["postgresql", "mariadb"])
