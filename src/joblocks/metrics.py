"""Metrics of lock events for Prometheus (``prometheus_client``) or OpenTelemetry.

Both are fed by :func:`joblocks.add_listener` and record, for this process:

- a counter of events by ``kind``: ``acquired``, ``conflict``, ``renewed``, ``lost``,
  ``overrun``, ``released``, ``error``, ``skipped``;
- a histogram of the time spent waiting for a lock (acquires made with ``wait=``);
- a histogram of how long leases were held (observed at release);
- for cron monitoring, per key: the time of the last successful run (a gauge, Unix
  seconds by this process's clock, set when a lease is released after work that did
  not raise and did not lose the lease), and a histogram of run durations labelled by
  ``outcome`` (``ok``, ``error``, ``lost``). Both always carry the ``key`` label.

Series are labelled by ``kind`` only. ``by_key=True`` adds a ``key`` label (attribute)
to every series: one set of series per lock key, so use it only with a small, fixed
set of keys.

Prometheus (``pip install "joblocks[prometheus]"``)::

    import joblocks.metrics
    handle = joblocks.metrics.install_prometheus()      # prometheus_client.REGISTRY
    # joblocks_events_total{kind="acquired"}, joblocks_wait_seconds, joblocks_hold_seconds
    handle.uninstall()

OpenTelemetry (``pip install "joblocks[opentelemetry]"``)::

    handle = joblocks.metrics.install_opentelemetry()   # the global MeterProvider
    # joblocks.events {kind}, joblocks.wait.duration (s), joblocks.hold.duration (s)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, get_args

from ._util.process import Event, EventKind, add_listener, remove_listener
from ._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from prometheus_client import CollectorRegistry

__all__ = [
    "EVENT_KINDS",
    "HOLD_BUCKETS",
    "WAIT_BUCKETS",
    "MetricsHandle",
    "install_opentelemetry",
    "install_prometheus",
]

#: Every event kind, in the order of :data:`joblocks.EventKind`.
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)

#: Histogram bounds for the wait for a lock, in seconds.
WAIT_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)

#: Histogram bounds for how long a lease was held, in seconds (jobs run for hours).
HOLD_BUCKETS: tuple[float, ...] = (
    0.01,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    86400.0,
)


class MetricsHandle:
    """What an ``install_*`` call set up: the instruments, and :meth:`uninstall`.

    ``events``, ``wait`` and ``hold`` are the library's own metric objects (a
    ``prometheus_client`` Counter and Histograms, or OpenTelemetry instruments).
    Usable as a context manager that uninstalls on exit.
    """

    def __init__(
        self,
        listener: Callable[[Event], None],
        events: Any,
        wait: Any,
        hold: Any,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        self.events = events
        self.wait = wait
        self.hold = hold
        self._listener = listener
        self._cleanup = cleanup
        self._lock = threading.Lock()
        self._installed = True
        #: The last-success gauge and the run-duration histogram (set by ``install_*``).
        self.last_success: Any = None
        self.run_duration: Any = None

    @property
    def installed(self) -> bool:
        """True until :meth:`uninstall` is called."""
        return self._installed

    def uninstall(self) -> None:
        """Stop recording; for Prometheus also unregister the metrics. Idempotent."""
        with self._lock:
            if not self._installed:
                return
            self._installed = False
        remove_listener(self._listener)
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> MetricsHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()


def _listener(
    count: Callable[[EventKind, str], None],
    observe_wait: Callable[[float, str], None],
    observe_hold: Callable[[float, str], None],
    observe_run: Callable[[float, str, str], None] | None = None,
    succeeded: Callable[[float, str], None] | None = None,
) -> Callable[[Event], None]:
    def on_event(event: Event) -> None:
        count(event.kind, event.key)
        if event.kind == "acquired" and event.waited_ms is not None:
            observe_wait(event.waited_ms / 1000, event.key)
        elif event.kind == "released" and event.held_ms is not None:
            observe_hold(event.held_ms / 1000, event.key)
            outcome = event.outcome or "ok"
            if observe_run is not None:
                observe_run(event.held_ms / 1000, event.key, outcome)
            if succeeded is not None and outcome == "ok":
                succeeded(time.time(), event.key)

    return on_event


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
    return prefix


def install_prometheus(
    registry: CollectorRegistry | None = None,
    *,
    prefix: str = "joblocks",
    by_key: bool = False,
    wait_buckets: Sequence[float] = WAIT_BUCKETS,
    hold_buckets: Sequence[float] = HOLD_BUCKETS,
) -> MetricsHandle:
    """Record lock events as ``prometheus_client`` metrics in ``registry``.

    Registers (``prefix`` ``joblocks``):

    - ``joblocks_events_total{kind}``: a counter of events, every kind present from 0;
    - ``joblocks_wait_seconds``: a histogram of waits for a lock (acquires with ``wait=``);
    - ``joblocks_hold_seconds``: a histogram of how long leases were held (at release);
    - ``joblocks_last_success_timestamp_seconds{key}``: when the key's last successful
      run ended (Unix seconds; alert when ``time() - it`` exceeds the schedule);
    - ``joblocks_run_duration_seconds{key, outcome}``: a histogram of run durations.

    ``registry`` defaults to ``prometheus_client.REGISTRY``. ``by_key=True`` adds a
    ``key`` label to all three (one series per lock key: keep the keys few). Installing
    twice on one registry with one prefix raises ``ValueError`` (duplicated series).
    ``uninstall()`` stops recording and unregisters the metrics.
    """
    import prometheus_client

    prefix = _check_prefix(prefix)
    target = prometheus_client.REGISTRY if registry is None else registry
    key_label = ("key",) if by_key else ()
    made: list[Any] = []

    def unregister() -> None:
        for collector in made:
            with contextlib.suppress(KeyError):  # already unregistered by the caller
                target.unregister(collector)

    try:
        events = prometheus_client.Counter(
            f"{prefix}_events",
            "joblocks lock events, by kind",
            ("kind", *key_label),
            registry=target,
        )
        made.append(events)
        wait = prometheus_client.Histogram(
            f"{prefix}_wait_seconds",
            "Time spent waiting for a lock (acquires with wait=)",
            key_label,
            registry=target,
            buckets=tuple(wait_buckets),
        )
        made.append(wait)
        hold = prometheus_client.Histogram(
            f"{prefix}_hold_seconds",
            "How long leases were held, observed at release",
            key_label,
            registry=target,
            buckets=tuple(hold_buckets),
        )
        made.append(hold)
        last_success = prometheus_client.Gauge(
            f"{prefix}_last_success_timestamp_seconds",
            "When the last successful run of a key ended (Unix time, seconds)",
            ("key",),
            registry=target,
        )
        made.append(last_success)
        run_duration = prometheus_client.Histogram(
            f"{prefix}_run_duration_seconds",
            "How long runs took, by key and outcome (ok, error, lost)",
            ("key", "outcome"),
            registry=target,
            buckets=tuple(hold_buckets),
        )
        made.append(run_duration)
    except Exception:
        unregister()
        raise
    if not by_key:
        for kind in EVENT_KINDS:
            events.labels(kind=kind)  # every kind exported from 0

    def count(kind: EventKind, key: str) -> None:
        if by_key:
            events.labels(kind=kind, key=key).inc()
        else:
            events.labels(kind=kind).inc()

    def observe_wait(seconds: float, key: str) -> None:
        (wait.labels(key=key) if by_key else wait).observe(seconds)

    def observe_hold(seconds: float, key: str) -> None:
        (hold.labels(key=key) if by_key else hold).observe(seconds)

    def observe_run(seconds: float, key: str, outcome: str) -> None:
        run_duration.labels(key=key, outcome=outcome).observe(seconds)

    def succeeded(now: float, key: str) -> None:
        last_success.labels(key=key).set(now)

    listener = _listener(count, observe_wait, observe_hold, observe_run, succeeded)
    add_listener(listener)
    handle = MetricsHandle(listener, events, wait, hold, unregister)
    handle.last_success, handle.run_duration = last_success, run_duration
    return handle


def install_opentelemetry(
    meter_provider: MeterProvider | None = None,
    *,
    prefix: str = "joblocks",
    by_key: bool = False,
    wait_buckets: Sequence[float] = WAIT_BUCKETS,
    hold_buckets: Sequence[float] = HOLD_BUCKETS,
) -> MetricsHandle:
    """Record lock events as OpenTelemetry metrics from ``meter_provider``'s meter.

    Instruments (meter ``joblocks``; ``prefix`` ``joblocks``):

    - ``joblocks.events``: a counter of events, attribute ``kind``;
    - ``joblocks.wait.duration`` (s): a histogram of waits for a lock;
    - ``joblocks.hold.duration`` (s): a histogram of how long leases were held;
    - ``joblocks.last_success`` (s): a gauge, when the key's last successful run ended
      (Unix time), attribute ``key``;
    - ``joblocks.run.duration`` (s): a histogram of run durations, attributes ``key``
      and ``outcome``.

    ``meter_provider`` defaults to the global one (``opentelemetry.metrics``).
    ``by_key=True`` adds a ``key`` attribute (one series per lock key). The bucket
    bounds are passed as advice to the SDK. ``uninstall()`` stops recording
    (OpenTelemetry has no way to remove an instrument).
    """
    from opentelemetry import metrics as otel

    prefix = _check_prefix(prefix)
    provider = otel.get_meter_provider() if meter_provider is None else meter_provider
    meter = provider.get_meter("joblocks", __version__)
    events = meter.create_counter(
        f"{prefix}.events", unit="{event}", description="joblocks lock events, by kind"
    )
    wait = meter.create_histogram(
        f"{prefix}.wait.duration",
        unit="s",
        description="Time spent waiting for a lock (acquires with wait=)",
        explicit_bucket_boundaries_advisory=list(wait_buckets),
    )
    hold = meter.create_histogram(
        f"{prefix}.hold.duration",
        unit="s",
        description="How long leases were held, observed at release",
        explicit_bucket_boundaries_advisory=list(hold_buckets),
    )

    last_success = meter.create_gauge(
        f"{prefix}.last_success",
        unit="s",
        description="When the last successful run of a key ended (Unix time)",
    )
    run_duration = meter.create_histogram(
        f"{prefix}.run.duration",
        unit="s",
        description="How long runs took, by key and outcome (ok, error, lost)",
        explicit_bucket_boundaries_advisory=list(hold_buckets),
    )

    def attributes(key: str) -> dict[str, str]:
        return {"key": key} if by_key else {}

    def count(kind: EventKind, key: str) -> None:
        events.add(1, {"kind": kind, **attributes(key)})

    def observe_wait(seconds: float, key: str) -> None:
        wait.record(seconds, attributes(key))

    def observe_hold(seconds: float, key: str) -> None:
        hold.record(seconds, attributes(key))

    def observe_run(seconds: float, key: str, outcome: str) -> None:
        run_duration.record(seconds, {"key": key, "outcome": outcome})

    def succeeded(now: float, key: str) -> None:
        last_success.set(now, {"key": key})

    listener = _listener(count, observe_wait, observe_hold, observe_run, succeeded)
    add_listener(listener)
    handle = MetricsHandle(listener, events, wait, hold)
    handle.last_success, handle.run_duration = last_success, run_duration
    return handle
