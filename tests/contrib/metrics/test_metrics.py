"""joblocks.metrics: lock events as prometheus_client and OpenTelemetry metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
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


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def _every_event(model: joblocks.JobLockModel, tmp_path: Path, key: str = "job") -> None:
    """acquired 5, conflict 1, renewed >= 1, lost 1, overrun 1, released 4, error 1."""
    held = model.try_lease(key, 60_000, holder="a")  # acquired
    assert held is not None
    assert model.try_lease(key, 60_000, holder="b") is None  # conflict
    assert held.release()  # released (hold observed)

    # A renewal, then the row is deleted under the lease: the next renewal is refused.
    kept = model.try_lease(key, 60_000, holder="a", keepalive=True, renew_every=30)  # acquired
    assert kept is not None
    seen: list[str] = []

    def listen(event: joblocks.Event) -> None:
        seen.append(event.kind)

    joblocks.add_listener(listen)
    try:
        _until(lambda: "renewed" in seen)
        model.delete(key)
        _until(lambda: kept.lost)  # lost
    finally:
        joblocks.remove_listener(listen)
    assert not kept.release()  # not ours any more: released (False), nothing deleted

    # Work that outlives its lease without keep-alive: released, then overrun.
    assert joblocks.run_with_lock(key, 30, lambda: time.sleep(0.1), model=model)  # acquired

    # A wait for a lock that another holder lets go of after about 150 ms.
    other = model.try_lease(key, 60_000, holder="b")  # acquired
    assert other is not None
    threading.Timer(0.15, other.release).start()  # released
    waited = model.try_lease(key, 60_000, holder="a", wait=5_000)  # acquired, waited_ms
    assert waited is not None
    model.delete(key)

    # A database error: no table.
    broken = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'empty.db'}", create_table=False)
    try:
        with pytest.raises(joblocks.LockBackendError):
            broken.try_lease(key, 60_000)  # error
    finally:
        broken.dispose()


def test_prometheus_counts_every_kind(model: joblocks.JobLockModel, tmp_path: Path) -> None:
    registry = prometheus_client.CollectorRegistry()
    handle = joblocks.metrics.install_prometheus(registry)
    try:
        for kind in joblocks.metrics.EVENT_KINDS:  # every series exists from the start
            assert registry.get_sample_value("joblocks_events_total", {"kind": kind}) == 0
        _every_event(model, tmp_path)

        def events(kind: str) -> float | None:
            return registry.get_sample_value("joblocks_events_total", {"kind": kind})

        assert events("acquired") == 5
        assert events("conflict") == 1
        renewed = events("renewed")
        assert renewed is not None
        assert renewed >= 1
        assert events("lost") == 1
        assert events("overrun") == 1
        assert events("released") == 4
        assert events("error") == 1

        assert registry.get_sample_value("joblocks_hold_seconds_count") == 4
        hold = registry.get_sample_value("joblocks_hold_seconds_sum")
        assert hold is not None
        assert hold >= 0.1 + 0.15
        assert registry.get_sample_value("joblocks_wait_seconds_count") == 1
        wait = registry.get_sample_value("joblocks_wait_seconds_sum")
        assert wait is not None
        assert 0.1 <= wait < 5
        assert registry.get_sample_value("joblocks_wait_seconds_bucket", {"le": "0.05"}) == 0
        assert registry.get_sample_value("joblocks_wait_seconds_bucket", {"le": "+Inf"}) == 1
        assert registry.get_sample_value("joblocks_hold_seconds_bucket", {"le": "86400.0"}) == 4
    finally:
        handle.uninstall()

    # Uninstalled: nothing is recorded and the metrics are gone from the registry.
    assert not handle.installed
    assert registry.get_sample_value("joblocks_events_total", {"kind": "acquired"}) is None
    before = handle.events.labels(kind="acquired")._value.get()
    with joblocks.lease("job", 60_000, model=model):
        pass
    assert handle.events.labels(kind="acquired")._value.get() == before
    handle.uninstall()  # idempotent


def test_prometheus_key_label_is_opt_in(model: joblocks.JobLockModel) -> None:
    registry = prometheus_client.CollectorRegistry()
    with joblocks.metrics.install_prometheus(registry, prefix="app_locks", by_key=True):
        for key in ("alpha", "beta", "alpha"):
            with joblocks.lease(key, 60_000, model=model):
                assert model.try_lease(key, 60_000, holder="other") is None

        def events(kind: str, key: str) -> float | None:
            return registry.get_sample_value("app_locks_events_total", {"kind": kind, "key": key})

        assert events("acquired", "alpha") == 2
        assert events("conflict", "alpha") == 2
        assert events("released", "beta") == 1
        assert events("lost", "beta") is None  # with keys, series appear when used
        assert registry.get_sample_value("app_locks_hold_seconds_count", {"key": "alpha"}) == 2
    assert registry.get_sample_value("app_locks_events_total", {"kind": "acquired"}) is None


def test_prometheus_default_registry_and_duplicates() -> None:
    handle = joblocks.metrics.install_prometheus(prefix="joblocks_dup_check")
    try:
        assert (
            prometheus_client.REGISTRY.get_sample_value(
                "joblocks_dup_check_events_total", {"kind": "conflict"}
            )
            == 0
        )
        with pytest.raises(ValueError, match="Duplicated"):
            joblocks.metrics.install_prometheus(prefix="joblocks_dup_check")
    finally:
        handle.uninstall()
    # The failed second install left nothing behind: installing again works.
    joblocks.metrics.install_prometheus(prefix="joblocks_dup_check").uninstall()
    with pytest.raises(ValueError, match="prefix"):
        joblocks.metrics.install_prometheus(prefix="")


def _otel_points(reader: Any) -> dict[str, list[Any]]:
    points: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            if scope.scope.name != "joblocks":
                continue  # some SDK versions report metrics of their own
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


def test_opentelemetry_counts_every_kind(model: joblocks.JobLockModel, tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        with joblocks.metrics.install_opentelemetry(provider) as handle:
            _every_event(model, tmp_path)
        points = _otel_points(reader)
        counts = {p.attributes["kind"]: p.value for p in points["joblocks.events"]}
        assert counts["acquired"] == 5
        assert counts["renewed"] >= 1
        assert {k: v for k, v in counts.items() if k not in ("acquired", "renewed")} == {
            "conflict": 1,
            "lost": 1,
            "overrun": 1,
            "released": 4,
            "error": 1,
        }
        (hold,) = points["joblocks.hold.duration"]
        assert hold.count == 4
        assert hold.sum >= 0.25
        assert tuple(hold.explicit_bounds) == joblocks.metrics.HOLD_BUCKETS
        (wait,) = points["joblocks.wait.duration"]
        assert wait.count == 1
        assert 0.1 <= wait.sum < 5
        assert tuple(wait.explicit_bounds) == joblocks.metrics.WAIT_BUCKETS

        # Uninstalled (by the with block): further events are not recorded.
        assert not handle.installed
        with joblocks.lease("job", 60_000, model=model):
            pass
        counts = {p.attributes["kind"]: p.value for p in _otel_points(reader)["joblocks.events"]}
        assert counts["acquired"] == 5
    finally:
        provider.shutdown()


def test_opentelemetry_key_attribute_is_opt_in(model: joblocks.JobLockModel) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        with joblocks.metrics.install_opentelemetry(provider, by_key=True):
            for key in ("alpha", "beta"):
                with joblocks.lease(key, 60_000, model=model):
                    pass
        points = _otel_points(reader)
        acquired = {
            p.attributes["key"]: p.value
            for p in points["joblocks.events"]
            if p.attributes["kind"] == "acquired"
        }
        assert acquired == {"alpha": 1, "beta": 1}
        assert {p.attributes["key"] for p in points["joblocks.hold.duration"]} == {
            "alpha",
            "beta",
        }
    finally:
        provider.shutdown()
