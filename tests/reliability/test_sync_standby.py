"""A synchronous standby that does not answer: every commit on the primary waits for it.

A PostgreSQL server of its own with ``synchronous_standby_names = 'nosuch'`` (a standby
that never connects): each commit is written locally, then waits for the standby's
confirmation, which never comes. An acquire must still end within the model's
``timeout`` with ``LockTimeoutError`` saying that its outcome is unknown: and here it is
really unknown to the caller, since the grant did commit locally (a peek on a
connection that does not wait for the standby sees the row). The same holder's retry
after the standby is dropped is idempotent. Both faces.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import joblocks

from ..support.matrix import server_or_skip
from ..support.servers import Server, start_postgres
from ._support import Reporter

pytestmark = [pytest.mark.reliability, pytest.mark.server]

GUARD_S = 60.0
TIMEOUT_MS = 1_000


@pytest.fixture(scope="session")
def pg_waiting_standby(request: pytest.FixtureRequest) -> Server:
    def start(base: Path) -> Server:
        return start_postgres(base, {"synchronous_standby_names": "nosuch"})

    return server_or_skip(request, "postgresql-sync-standby", start)


def _local(url: str) -> str:
    """The URL, with commits of its sessions not waiting for the standby."""
    return url + "?options=-csynchronous_commit%3Dlocal"


def test_an_acquire_waiting_for_a_silent_standby_ends_at_the_timeout(
    pg_waiting_standby: Server,
    face: str,
    make_face_model: Any,
    table_name: str,
    report: Reporter,
) -> None:
    local = joblocks.JobLockModel(_local(pg_waiting_standby.url), table_name=table_name)
    try:
        local.create_table()
        model = make_face_model(pg_waiting_standby.url, timeout=TIMEOUT_MS, create_table=False)
        key = f"standby-{uuid.uuid4().hex[:8]}"
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["result"] = model.acquire(key, 60_000, "holder-a")
            except BaseException as exc:
                outcome["error"] = exc

        started = time.monotonic()
        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(GUARD_S)
        took = time.monotonic() - started
        assert not worker.is_alive(), "the acquire did not end: timeout= did not bound it"
        error = outcome.get("error")
        assert isinstance(error, joblocks.LockTimeoutError), repr(outcome)
        assert "outcome is unknown" in str(error)
        # It did commit (locally). Its transaction stays invisible while its backend
        # waits for the standby: the statement cancelled server-side ends that wait,
        # and the unknown outcome shows itself as a grant.
        deadline = time.monotonic() + GUARD_S
        while (row := local.peek(key)) is None:
            assert time.monotonic() < deadline, "the abandoned statement was not cancelled"
            time.sleep(0.05)
        assert row.holder == "holder-a"
        # The same holder's retry on a connection that does not wait is idempotent.
        assert local.acquire(key, 60_000, "holder-a")
        assert local.peek(key).fence == row.fence
        report(
            "synchronous standby not answering, acquire",
            f"postgresql {face}",
            timeout_s=TIMEOUT_MS / 1000,
            error=type(error).__name__,
            seconds=round(took, 2),
            committed_locally=True,
        )
    finally:
        local.dispose()
