"""Celery: ``SingleInstanceTask`` with two real worker processes.

Two ``celery worker`` processes (one ``solo``, one ``prefork``) consume from a
filesystem broker; the test sends the same task several times at once, as beat on two
replicas would, and reads every copy's result from a file result backend: exactly one
copy runs. Each run also appends a line to a file, so "ran once" is checked on the
side effect too.

This module is also the Celery app the workers load (``-A tests.contrib.celery.test_celery``):
it reads its broker folders and lock database from the environment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from kombu.transport import filesystem
from kombu.utils.json import dumps

import joblocks
from joblocks.contrib.celery import BEAT, SingleInstanceTask, beat_min_hold

from ...support.contrib import LOCK_DBS, PYTHON, ROOT, child_env, lock_db_url

BEAT_PERIOD_S = 60.0
ENV_PREFIX = "JOBLOCKS_CELERY_TEST_"


class _AtomicChannel(filesystem.Channel):  # type: ignore[misc]
    """kombu's filesystem channel, writing each message under a temporary name first.

    kombu creates the message file and only then writes it: a worker polling the
    folder can take the empty file in between, and dies decoding it (seen in CI).
    Renamed into place once written, a message appears whole or not at all (workers
    only take names ending in ``.<queue>.msg``).
    """

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        with open(final + ".part", "wb") as f:
            f.write(dumps(payload).encode())
        os.replace(final + ".part", final)


class AtomicFilesystemTransport(filesystem.Transport):  # type: ignore[misc]
    """The filesystem transport with :class:`_AtomicChannel`."""

    Channel = _AtomicChannel


def app_config(folder: Path) -> dict[str, Any]:
    """Celery settings for a filesystem broker and result backend under ``folder``."""
    messages = folder / "messages"
    for sub in ("messages", "processed", "control", "results"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return {
        "broker_url": "filesystem://",
        "broker_transport": f"{__name__}:AtomicFilesystemTransport",
        "broker_transport_options": {
            "data_folder_in": str(messages),
            "data_folder_out": str(messages),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.05,
        },
        "result_backend": f"file://{folder / 'results'}",
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        # One message in flight per worker until it is done: two copies sent at once
        # go to the two workers.
        "worker_prefetch_multiplier": 1,
        "task_acks_late": True,
        "worker_enable_remote_control": False,
        "broker_connection_retry_on_startup": True,
        "beat_schedule": {
            "nightly-report": {"task": "jl.beat_report", "schedule": BEAT_PERIOD_S},
        },
    }


# -- the app the workers run -------------------------------------------------------------

app = Celery("joblocks_test")
_folder = os.environ.get(ENV_PREFIX + "FOLDER")
if _folder:
    app.conf.update(app_config(Path(_folder)))
    joblocks.configure(os.environ[ENV_PREFIX + "URL"], table_name=os.environ[ENV_PREFIX + "TABLE"])


def _record(task: str, **details: Any) -> str:
    line = json.dumps({"task": task, "pid": os.getpid(), **details}) + "\n"
    out = os.environ[ENV_PREFIX + "OUT"]
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return f"ran in {os.getpid()}"


@app.task(base=SingleInstanceTask, name="jl.beat_report", lock_ttl=30_000)
def beat_report() -> str:
    """A periodic task (in beat_schedule): the hold is derived from its period."""
    time.sleep(0.05)
    return _record("beat_report")


@app.task(base=SingleInstanceTask, name="jl.slow", lock_min_hold=None)
def slow(seconds: float) -> str:
    """No hold: only copies that overlap its run are refused."""
    time.sleep(seconds)
    return _record("slow")


@app.task(
    base=SingleInstanceTask,
    name="jl.tenant_report",
    lock_key="tenant-report:{tenant}",
    lock_min_hold=20_000,
)
def tenant_report(tenant: str, pause: float = 0.05) -> str:
    """One lock per tenant, kept 20 s."""
    time.sleep(pause)
    return _record("tenant_report", tenant=tenant)


@app.task(bind=True, base=SingleInstanceTask, name="jl.bound", lock_key="bound:{kind}")
def bound(self: Any, kind: str) -> str:
    """A bound task: the key template sees the arguments after ``self``."""
    return f"{self.name}:{kind}"


# -- the workers --------------------------------------------------------------------------


@dataclass
class Cluster:
    """Two workers on one broker, and a sender app of the test's own."""

    sender: Celery
    out: Path
    url: str
    table: str

    def send(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.sender.send_task(name, args=args, kwargs=kwargs)

    def runs(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines()]


def _start_worker(name: str, pool: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    log = (folder / f"{name}.log").open("w")
    argv = [PYTHON, "-m", "celery", "-A", "tests.contrib.celery.test_celery", "worker"]
    argv += [f"--hostname={name}@%h", f"--pool={pool}", "--concurrency=1", "--loglevel=INFO"]
    argv += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the prefork children go with it
    )
    log.close()
    return proc


def _wait_ready(procs: list[subprocess.Popen[str]], logs: list[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(zip(procs, logs))
    while pending and time.monotonic() < deadline:
        for proc, log in list(pending):
            text = log.read_text(errors="replace")
            if proc.poll() is not None:
                raise AssertionError(f"worker exited with {proc.returncode}:\n{text}")
            if " ready." in text:
                pending.remove((proc, log))
        time.sleep(0.1)
    if pending:
        raise AssertionError(f"workers not ready in {timeout} s:\n{pending[0][1].read_text()}")


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    """Warm shutdown of every worker at once (each takes a few seconds); kill stragglers."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()  # the worker stops its pool itself
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own process group: pool children too
            proc.wait()


@pytest.fixture(scope="module", params=LOCK_DBS)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("celery")
    url = lock_db_url(request, str(request.param), folder)
    table = f"t_{uuid.uuid4().hex[:12]}"
    out = folder / "runs.jsonl"
    env = child_env(
        **{
            ENV_PREFIX + "FOLDER": str(folder),
            ENV_PREFIX + "URL": url,
            ENV_PREFIX + "TABLE": table,
            ENV_PREFIX + "OUT": str(out),
        }
    )
    joblocks.JobLockModel(url, table_name=table).dispose()  # the table, before the race
    procs = [
        _start_worker("solo", "solo", folder, env),
        _start_worker("prefork", "prefork", folder, env),
    ]
    sender = Celery("joblocks_test_sender")
    sender.conf.update(app_config(folder))
    try:
        _wait_ready(procs, [folder / "solo.log", folder / "prefork.log"], timeout=60)
        yield Cluster(sender, out, url, table)
    finally:
        _stop(procs)
        sender.close()


def _results(results: list[Any], timeout: float = 30) -> list[Any]:
    return [result.get(timeout=timeout) for result in results]


# -- scenarios ----------------------------------------------------------------------------


@pytest.mark.races
def test_beat_duplicates_run_once(cluster: Cluster) -> None:
    # Beat on two replicas: two copies at once, and a third, later (a slower beat).
    copies = [cluster.send("jl.beat_report"), cluster.send("jl.beat_report")]
    time.sleep(1.0)
    copies.append(cluster.send("jl.beat_report"))
    values = _results(copies)
    assert sum(value is not None for value in values) == 1, values
    assert [r["task"] for r in cluster.runs()].count("beat_report") == 1
    # The lock is kept for half the beat period after the short run.
    row = joblocks.JobLockModel(cluster.url, table_name=cluster.table)
    try:
        lock = row.peek("celery:jl.beat_report")
        assert lock is not None
        assert not lock.expired
        held_s = (lock.expires_at - lock.acquired_at).total_seconds()
        assert BEAT_PERIOD_S / 2 - 1 <= held_s <= BEAT_PERIOD_S / 2 + 1
    finally:
        row.dispose()


@pytest.mark.races
def test_overlapping_copies_are_refused(cluster: Cluster) -> None:
    before = [r["task"] for r in cluster.runs()].count("slow")
    values = _results([cluster.send("jl.slow", 1.5), cluster.send("jl.slow", 1.5)])
    assert sum(value is not None for value in values) == 1, values
    # Without a hold the next copy, after the run, runs again.
    assert _results([cluster.send("jl.slow", 0.01)])[0] is not None
    assert [r["task"] for r in cluster.runs()].count("slow") == before + 2


@pytest.mark.races
def test_one_lock_per_argument(cluster: Cluster) -> None:
    sent = [
        cluster.send("jl.tenant_report", "acme", 0.5),
        cluster.send("jl.tenant_report", tenant="acme", pause=0.5),
        cluster.send("jl.tenant_report", "zeta"),
        cluster.send("jl.tenant_report", "acme"),
    ]
    values = _results(sent)
    assert sum(value is not None for value in values[:2] + values[3:]) == 1, values
    assert values[2] is not None
    tenants = sorted(r["tenant"] for r in cluster.runs() if r["task"] == "tenant_report")
    assert tenants == ["acme", "zeta"]


def test_bound_task_key(cluster: Cluster) -> None:
    assert _results([cluster.send("jl.bound", "x")]) == ["jl.bound:x"]


# -- in-process checks (no workers) ----------------------------------------------------------


def test_called_directly_takes_the_lock(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    local = Celery("joblocks_local")
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'l.db'}")
    try:

        @local.task(base=SingleInstanceTask, name="local.job", lock_model=model, lock_min_hold=None)
        def job(n: int) -> int:
            row = model.peek("celery:local.job")
            assert row is not None
            return n + 1

        assert job(1) == 2
        assert job.apply(args=(2,)).get() == 3
        assert model.acquire("celery:local.job", 60_000, "elsewhere")
        with caplog.at_level(logging.INFO, logger="joblocks"):
            assert job(3) is None
        assert any("skipped: held elsewhere" in r.getMessage() for r in caplog.records)
    finally:
        model.dispose()


def test_beat_min_hold_from_the_schedule() -> None:
    from datetime import timedelta

    from celery.schedules import crontab, schedule

    local = Celery("joblocks_beat")
    local.conf.beat_schedule = {
        "a": {"task": "t.every", "schedule": 30.0},
        "b": {"task": "t.every", "schedule": timedelta(seconds=10)},  # the nearest wins
        "c": {"task": "t.cron", "schedule": crontab(minute="*")},
        "d": {"task": "t.sched", "schedule": schedule(timedelta(minutes=4))},
    }
    assert beat_min_hold(local, "t.every") == 5_000
    assert 0 < beat_min_hold(local, "t.cron") <= 30_000
    assert beat_min_hold(local, "t.sched") == 120_000
    assert beat_min_hold(local, "t.absent") == 0


def test_options_are_checked_when_the_task_is_made() -> None:
    local = Celery("joblocks_checks")

    def make(**options: Any) -> Any:
        def body(tenant: str) -> None: ...

        task = local.task(base=SingleInstanceTask, name=f"c.{uuid.uuid4().hex}", **options)(body)
        return task.run  # evaluates the lazy task (and its class)

    make(lock_key="k:{tenant}")
    with pytest.raises(ValueError, match="'nope', which is not a parameter"):
        make(lock_key="k:{nope}")
    with pytest.raises(ValueError, match="lock_ttl must be positive"):
        make(lock_ttl=0)
    with pytest.raises(ValueError, match="lock_min_hold must be"):
        make(lock_min_hold="sometimes")
    with pytest.raises(ValueError, match="need keepalive=True"):
        make(lock_keepalive=False, lock_renew_every=100)
    with pytest.raises(TypeError, match="lock_model must be"):
        make(lock_model=3)
    assert SingleInstanceTask.lock_min_hold == BEAT
