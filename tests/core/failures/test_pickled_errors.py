"""Every joblocks exception survives pickling: a worker process of ``concurrent.futures``
or ``multiprocessing`` sends its error back to the parent pickled, and an exception whose
``__init__`` takes arguments of its own breaks the whole pool when it cannot be rebuilt."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import pickle

import pytest

import joblocks
from joblocks._util import errors as _errors

SAMPLES: list[BaseException] = [
    joblocks.LockBackendError("acquire", "postgresql://u:***@h/db", "boom", "40001"),
    joblocks.LockConnectionError("connect", "mysql://h/db", "refused", 2003),
    joblocks.LockTimeoutError("acquire", "sqlite:///x.db", "busy", "SQLITE_BUSY"),
    joblocks.LockTableMissing("peek", "sqlite:///x.db", "no such table"),
    joblocks.LockTableMismatch("sqlite:///x.db", "job_locks", ["no column fence"]),
    joblocks.LockDriverMissing("connect", "postgresql://h/db", "no psycopg", module="psycopg"),
    joblocks.LockPermissionError("create table", "postgresql://h/db", "denied", "42501"),
    joblocks.LockReadOnlyError("acquire", "postgresql://h/db", "read only", "25006"),
    joblocks.LockExistsError("k"),
    joblocks.LockNotAcquired("k"),
    joblocks.LockHoldersMismatch("k", 3, "2"),
    joblocks.LeaseLost("k", "taken over"),
    _errors.NoReply(1500),
]


def _same(a: BaseException, b: BaseException) -> None:
    assert type(a) is type(b)
    assert str(a) == str(b)
    assert a.args == b.args
    assert vars(a) == vars(b)


def test_every_exception_class_has_a_sample() -> None:
    exported = [getattr(joblocks, name) for name in joblocks.__all__]
    classes = {c for c in exported if isinstance(c, type) and issubclass(c, joblocks.LockError)}
    assert classes - {joblocks.LockError, joblocks.LockTableError} <= {type(e) for e in SAMPLES}


@pytest.mark.parametrize("exc", SAMPLES, ids=lambda e: type(e).__name__)
def test_an_exception_pickles_with_its_message_and_attributes(exc: BaseException) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        _same(exc, pickle.loads(pickle.dumps(exc, protocol)))  # noqa: S301 (our own bytes)


def _raise_lost() -> None:
    raise joblocks.LockTimeoutError("acquire", "postgresql://h/db", "no reply", None)


def test_an_error_raised_in_a_worker_process_reaches_the_parent() -> None:
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        future = pool.submit(_raise_lost)
        with pytest.raises(joblocks.LockTimeoutError) as info:
            future.result(timeout=120)
    assert info.value.operation == "acquire"
    assert "no reply" in str(info.value)
