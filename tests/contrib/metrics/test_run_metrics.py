"""Cron-monitoring metrics: the last successful run per key, and run durations by outcome.

Fed by the ``released`` event's ``outcome`` (ok / error / lost), so they need no ledger;
a run that raised or lost its lease never moves the last-success time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import joblocks
import joblocks.metrics

prometheus_client = pytest.importorskip("prometheus_client")


@pytest.fixture
def model(tmp_path: Path) -> Iterator[joblocks.JobLockModel]:
    locks = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    yield locks
    locks.dispose()


def _runs(model: joblocks.JobLockModel) -> tuple[float, float]:
    """An ok run of "nightly", then one that raises and one that loses its lease; an
    ok run of "hourly". The wall-clock window of the ok runs' ends."""
    before = time.time()
    joblocks.run_with_lock("nightly", 60_000, lambda: time.sleep(0.02), model=model)
    after = time.time()
    with pytest.raises(RuntimeError):
        joblocks.run_with_lock("nightly", 60_000, _fail, model=model)
    held = model.try_lease("nightly", 60_000)
    assert held is not None
    model.delete("nightly")
    with pytest.raises(joblocks.LeaseLost):
        held.ensure_held()
    held.release()
    with joblocks.lease("hourly", 60_000, model=model):
        pass
    return before, after


def _fail() -> None:
    raise RuntimeError("boom")


def test_prometheus_last_success_and_run_duration(model: joblocks.JobLockModel) -> None:
    registry = prometheus_client.CollectorRegistry()
    with joblocks.metrics.install_prometheus(registry) as handle:
        assert handle.last_success is not None
        assert handle.run_duration is not None
        before, after = _runs(model)
        time.sleep(0.01)
        last = registry.get_sample_value(
            "joblocks_last_success_timestamp_seconds", {"key": "nightly"}
        )
        assert last is not None
        assert before <= last <= after  # the error and the lost run did not move it
        assert registry.get_sample_value(
            "joblocks_last_success_timestamp_seconds", {"key": "hourly"}
        )

        def count(key: str, outcome: str) -> Any:
            return registry.get_sample_value(
                "joblocks_run_duration_seconds_count", {"key": key, "outcome": outcome}
            )

        assert (count("nightly", "ok"), count("nightly", "error"), count("nightly", "lost")) == (
            1,
            1,
            1,
        )
        assert count("hourly", "ok") == 1
        ok_sum = registry.get_sample_value(
            "joblocks_run_duration_seconds_sum", {"key": "nightly", "outcome": "ok"}
        )
        assert ok_sum >= 0.02
    # Uninstalled: the series are gone from the registry.
    assert (
        registry.get_sample_value("joblocks_last_success_timestamp_seconds", {"key": "nightly"})
        is None
    )


def test_opentelemetry_last_success_and_run_duration(model: joblocks.JobLockModel) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        with joblocks.metrics.install_opentelemetry(provider):
            before, after = _runs(model)
        points: dict[str, list[Any]] = {}
        for resource in reader.get_metrics_data().resource_metrics:
            for scope in resource.scope_metrics:
                if scope.scope.name == "joblocks":
                    for metric in scope.metrics:
                        points.setdefault(metric.name, []).extend(metric.data.data_points)
        last = {p.attributes["key"]: p.value for p in points["joblocks.last_success"]}
        assert set(last) == {"nightly", "hourly"}
        assert before <= last["nightly"] <= after
        runs = {
            (p.attributes["key"], p.attributes["outcome"]): p.count
            for p in points["joblocks.run.duration"]
        }
        assert runs == {
            ("nightly", "ok"): 1,
            ("nightly", "error"): 1,
            ("nightly", "lost"): 1,
            ("hourly", "ok"): 1,
        }
    finally:
        provider.shutdown()
