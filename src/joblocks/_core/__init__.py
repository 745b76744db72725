"""Core: options, operations, life cycle, schedule, places, liveness, ledger."""
