"""Fork: children of a process that already used its model (gunicorn ``--preload``,
Celery prefork, ``multiprocessing`` with the fork start method)."""

from __future__ import annotations

import json
import multiprocessing
import os
import uuid
import warnings
from typing import Any

import pytest

import joblocks

from . import _workers as workers
from ._support import Reporter

pytestmark = pytest.mark.reliability

CHILDREN = 3
POOL_PROCESSES = 2
POOL_TASKS = 4  # a multiple of POOL_PROCESSES (the tasks meet at a barrier in pairs)


def _fork_children(key: str, parent_fds: int) -> list[dict[str, Any]]:
    """os.fork() CHILDREN times, as a pre-forking server does; each child reports."""
    children = []
    for _ in range(CHILDREN):
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - in the child
            code = 1
            try:
                os.close(read)
                result = workers.forked_task(key, parent_fds)
                assert workers.inherited is not None
                workers.inherited.dispose()  # a worker that shuts down cleanly
                os.write(write, json.dumps(result).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    results = []
    for pid, read in children:
        with os.fdopen(read) as pipe:
            text = pipe.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        results.append(json.loads(text))
    return results


def _pool_children(key: str, parent_fds: int) -> list[dict[str, Any]]:
    fork = multiprocessing.get_context("fork")
    workers.fork_barrier = fork.Barrier(POOL_PROCESSES)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with fork.Pool(POOL_PROCESSES) as pool:
                results: list[dict[str, Any]] = pool.starmap(
                    workers.forked_task, [(key, parent_fds)] * POOL_TASKS, chunksize=1
                )
    finally:
        workers.fork_barrier = None
    return results


def test_fork(backend: str, db_url: str, table_name: str, report: Reporter) -> None:
    model = joblocks.JobLockModel(db_url, table_name=table_name)
    parent_holder = joblocks.worker_id()
    assert model.acquire(f"parent-{uuid.uuid4().hex[:8]}", 60_000, parent_holder)  # preload
    parent_connection = workers.connection_ident(model)
    workers.inherited = model
    figures: dict[str, Any] = {}
    try:
        for style, spawn in (("os.fork", _fork_children), ("multiprocessing fork", _pool_children)):
            key = f"fork-{uuid.uuid4().hex[:8]}"
            results = spawn(key, workers.sqlite_fds(model) if backend == "sqlite" else 0)
            by_pid = {r["pid"]: r["holder"] for r in results}
            holders = list(by_pid.values())
            shared_ids = len(holders) - len(set(holders)) + holders.count(parent_holder)
            # One process may run several pool tasks: a connection id per process.
            per_process = {r["pid"]: r["connection"] for r in results}
            shared_connections = (
                0
                if backend == "sqlite"
                else len(per_process)
                - len(set(per_process.values()))
                + list(per_process.values()).count(parent_connection)
            )
            row = model.peek(key)  # the parent's own connection still works
            figures[style] = {
                "children": len(by_pid),
                "shared_ids": shared_ids,
                "shared_connections": shared_connections,
                "winners": len({r["holder"] for r in results if r["won"]}),
                "children_opened_own_sqlite_file": all(r["own_sqlite_fds"] > 0 for r in results)
                if backend == "sqlite"
                else None,
                "parent_connection_kept": workers.connection_ident(model) == parent_connection,
            }
            assert row is not None
            assert row.holder in holders
            for pid in by_pid:  # one worker id per process, whatever it ran
                assert len({r["holder"] for r in results if r["pid"] == pid}) == 1
    finally:
        workers.inherited = None
    report(
        "fork",
        backend,
        shared_ids=sum(f["shared_ids"] for f in figures.values()),
        shared_connections=sum(f["shared_connections"] for f in figures.values()),
        **{style.replace(" ", "_").replace(".", "_"): f for style, f in figures.items()},
    )
    for style, f in figures.items():
        assert f["children"] >= 2, style
        assert f["shared_ids"] == 0, style
        assert f["shared_connections"] == 0, style
        assert f["winners"] == 1, style  # the children exclude each other
        assert f["parent_connection_kept"], style
        if backend == "sqlite":
            assert f["children_opened_own_sqlite_file"], style
    model.dispose()
