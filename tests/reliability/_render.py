"""Turn a results file of the reliability suite into the Markdown table of the docs.

    JOBLOCKS_RELIABILITY_RESULTS=out.jsonl python -m pytest tests/reliability -m reliability
    python -m tests.reliability._render out.jsonl [more.jsonl ...]

One row per scenario, database and size (the last run wins), showing the scenario's
headline figures; every figure is in the JSON lines themselves.
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: The figures shown for each scenario, in order (all scalar figures when not listed).
HEADLINES = {
    "contention fuzz": [
        "processes",
        "rounds_each",
        "lost_updates",
        "max_inside",
        "acquire_p50_ms",
        "acquire_p99_ms",
        "control_without_lock_lost_updates",
    ],
    "history check": [
        "processes",
        "sections",
        "overlaps_while_both_valid",
        "token_order_violations",
        "stale_releases_deleting",
        "overlaps_after_an_expiry",
    ],
    "holder killed": ["ttl_ms", "reclaim_latency_ms", "taken_after_expiry_ms", "retry_interval_ms"],
    "holder paused past ttl": [
        "ttl_ms",
        "paused_ms",
        "second_started_after_first_expiry_ms",
        "keepalive_reported_loss",
        "stale_releases_deleting",
        "stale_fenced_writes_applied",
    ],
    "client clock skew": [
        "leases_stolen_early",
        "ahead_offset_ms",
        "behind_offset_ms",
        "ahead_skewed_took_after_expiry_ms",
        "behind_honest_took_after_expiry_ms",
    ],
    "database restart": [
        "calls_while_down",
        "errors_surfaced_pct",
        "calls_in_flight_at_kill",
        "in_flight_errors",
        "leases_lost",
        "tokens_repeated",
        "down_ms",
        "recover_after_up_ms_max",
    ],
    "connection cut": [
        "io_timeout_s",
        "cases",
        "errors_raised",
        "ambiguous_outcomes_surfaced_pct",
        "time_to_error_s_max",
        "retries_idempotent",
    ],
    "connection cut (asyncio face)": ["io_timeout_s", "outcome", "seconds"],
    "fork": ["shared_ids", "shared_connections"],
    "cron double fire": [
        "slots",
        "runs_per_slot_min",
        "runs_per_slot_max",
        "control_without_min_hold_double_runs",
    ],
    "bad input": ["cases_tried", "refused", "rows_left", "failures"],
    "soak": [
        "workers",
        "seconds",
        "errors",
        "rss_growth_after_warmup_mb_max",
        "threads_max",
        "threads_end",
        "leaked_connections",
        "server_connections_max",
        "server_connections_after",
    ],
}


def cell(figures: dict[str, Any], scenario: str) -> str:
    names = HEADLINES.get(scenario) or [
        name for name, value in figures.items() if not isinstance(value, (list, dict))
    ]
    parts = []
    for name in names:
        if name in figures:
            value = figures[name]
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items())
            parts.append(f"{name.replace('_', ' ')} **{value}**")
    return "; ".join(parts)


#: Scenarios that report one line per variant (kept apart by this figure).
VARIANTS = {"holder killed": "ttl_ms"}


def render(lines: list[dict[str, Any]]) -> str:
    latest: dict[tuple[str, str, str, Any], dict[str, Any]] = {}
    for line in lines:
        scenario = line["scenario"]
        variant = line["figures"].get(VARIANTS.get(scenario, ""))
        latest[(scenario, line["backend"], line["size"], variant)] = line
    out = ["| scenario | database | size | figures |", "|---|---|---|---|"]
    for (scenario, backend, size, _), line in latest.items():
        out.append(f"| {scenario} | {backend} | {size} | {cell(line['figures'], scenario)} |")
    return "\n".join(out)


def main(paths: list[str]) -> None:
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as results:
            lines += [json.loads(text) for text in results if text.strip()]
    print(render(lines))


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
