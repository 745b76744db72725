"""Reliability scenarios: real faults injected on this machine (docs/reliability.md)."""
