"""Tests of ``joblocks.metrics``: lock events as prometheus_client and OpenTelemetry metrics."""
