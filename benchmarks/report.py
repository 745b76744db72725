"""Markdown tables from a suite JSON file (for docs/performance.md).

python benchmarks/report.py out.json > tables.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import suite


def md(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def n(s: dict[str, Any] | None, f: str, fmt: str = "{:,.0f}") -> str:
    if not s or "error" in s or s.get(f) is None:
        return "—" if not s or "error" not in s else "error"
    return fmt.format(s[f])


def across_runs(paths: list[str]) -> str:
    """One row per target, one column per run: how much a verdict depends on the run."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    order: list[tuple[str, str]] = []
    values: dict[tuple[str, str], list[str]] = {}
    bounds: dict[tuple[str, str], str] = {}
    for i, data in enumerate(runs):
        for t in suite.targets(data["results"]):
            key = (t["target"], t["database"])
            if key not in values:
                order.append(key)
                values[key] = ["—"] * len(runs)
            bounds[key] = t["bound"]
            mark = {True: "", False: " ✗", None: ""}[t["met"]]
            values[key][i] = "—" if t["value"] is None else f"{t['value']:.2f}{mark}"
    heads = []
    for d in runs:
        load = d["meta"]["load_start"].split(": ")[1].split(",")[0]
        heads.append(f"{d['meta']['started'][11:16]} (load {load})")
    pooled = _pooled(runs)
    rows = [[t, db, bounds[(t, db)], *values[(t, db)], pooled.get((t, db), "")] for t, db in order]
    return md(["target", "database", "bound", *heads, "median of all back-to-back rounds"], rows)


def _pooled(runs: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Uncontended targets: the median of every round's ratio, all runs together."""
    import statistics

    out: dict[tuple[str, str], str] = {}
    for name, base, label in (
        ("jl_one", "raw_one", "sync ÷ raw, one key"),
        ("jl_distinct", "raw_distinct", "sync ÷ raw, distinct keys"),
        ("aio_one", "raw_one", "asyncio ÷ raw sync, one key"),
        ("aio_distinct", "raw_distinct", "asyncio ÷ raw sync, distinct keys"),
    ):
        for db in ("sqlite", "postgresql", "mariadb"):
            ratios = []
            for data in runs:
                r = data["results"].get("uncontended", {}).get(db)
                if not r:
                    continue
                for a, b in zip(r[name].get("rounds", []), r[base].get("rounds", [])):
                    if "error" not in a and "error" not in b and b.get("per_s"):
                        ratios.append(a["per_s"] / b["per_s"])
            if ratios:
                out[(f"uncontended pairs/s, {label}", db)] = (
                    f"{statistics.median(ratios):.2f} (n={len(ratios)})"
                )
    return out


def main() -> int:
    if sys.argv[1] == "--targets":
        print(across_runs(sys.argv[2:]))
        return 0
    data = json.loads(Path(sys.argv[1]).read_text())
    res, meta = data["results"], data["meta"]
    parts = [
        f"Run of {meta['started']}, git {meta['git']}; load at start: {meta['load_start']}, "
        f"at end: {meta['load_end']}; {meta['wall_seconds']:.0f} s."
    ]

    rows = []
    for db, r in res.get("uncontended", {}).items():
        for name, label, _ in suite.UNCONTENDED:
            s = r[name]
            base = r["raw_distinct"] if "distinct" in name else r["raw_one"]
            ratio = suite._ratio(s, base)
            rows.append(
                [
                    db,
                    label,
                    n(s, "per_s"),
                    n(s, "p50_us"),
                    n(s, "p99_us"),
                    "" if name.startswith("raw") else (f"**{ratio:.2f}**" if ratio else "error"),
                    "" if name.startswith("raw") else suite._round_ratios(s, base),
                ]
            )
    parts.append(
        "### Uncontended\n\n"
        + md(
            ["database", "measurement", "pairs/s", "p50 µs", "p99 µs", "÷ raw sync", "per round"],
            rows,
        )
    )

    rows = []
    for db, r in res.get("refused", {}).items():
        st = r["statements"]
        for name, label, _ in suite.REFUSED:
            c = st.get(name) or {}
            kinds = ", ".join(f"{v:.2f} × {k}" for k, v in c.get("kinds", {}).items())
            rows.append(
                [
                    db,
                    label,
                    n(r[name], "per_s"),
                    n(r[name], "p50_us"),
                    n(r[name], "p99_us"),
                    f"{c['per_op']:.2f} ({kinds})" if "per_op" in c else "—",
                ]
            )
        c = st.get("jl_pair") or {}
        if "per_op" in c:
            kinds = ", ".join(f"{v:.2f} × {k}" for k, v in c.get("kinds", {}).items())
            rows.append(
                [
                    db,
                    "joblocks sync, acquire+release pair",
                    "",
                    "",
                    "",
                    f"{c['per_op']:.2f} ({kinds})",
                ]
            )
    parts.append(
        "### Refused acquire\n\n"
        + md(
            [
                "database",
                "measurement",
                "acquires/s",
                "p50 µs",
                "p99 µs",
                "statements per op (server's count)",
            ],
            rows,
        )
    )

    rows = []
    for db, r in res.get("contention", {}).items():
        best = suite.best_raw(r)
        for label, s in r.items():
            ratio = f"{s['wins_per_s'] / best[1]:.2f}" if best and "error" not in s else "—"
            rows.append(
                [
                    db,
                    label,
                    n(s, "wins_per_s"),
                    n(s, "attempts_per_s"),
                    f"{n(s, 'min_wins')} / {n(s, 'max_wins')}",
                    ratio,
                    n(s, "holds_checked"),
                    n(s, "overlaps"),
                    n(s, "fence_errors"),
                    n(s, "lost"),
                    n(s, "errors"),
                    n(s, "retries"),
                ]
            )
    parts.append(
        "### Contention\n\n"
        + md(
            [
                "database",
                "variant",
                "wins/s",
                "attempts/s",
                "min / max wins per process",
                "÷ best raw",
                "holds checked",
                "overlaps",
                "tokens out of order",
                "lost",
                "errors",
                "retries",
            ],
            rows,
        )
    )

    rows = []
    for db, r in res.get("keepalive", {}).items():
        b, a, st, lo = r["busy"], r["busy_aio"], r["steady"], r["loss"]
        rows.append(
            [
                db,
                n(b, "renewals_per_s"),
                n(b, "cpu_us_per_renewal"),
                n(a, "renewals_per_s"),
                n(a, "cpu_us_per_renewal"),
                n(st, "cpu_share", "{:.0%}"),
                str(sum(x.get("lost", 0) for x in (b, a, st))),
                n(lo, "p50_ms"),
                n(lo, "max_ms"),
            ]
        )
    parts.append(
        "### Keep-alive, 1,000 leases in one process\n\n"
        + md(
            [
                "database",
                "renewals/s (sync, saturated)",
                "CPU µs/renewal",
                "renewals/s (asyncio, 1,000/s due)",
                "CPU µs/renewal",
                "CPU share, 1,000 renewals/s due (sync)",
                "lost",
                "loss detected p50 ms",
                "max ms",
            ],
            rows,
        )
    )

    rows = []
    for db, r in res.get("scale", {}).items():
        if "error" in r:
            continue
        for size, x in r.items():
            if size == "p50_ratio":
                continue
            rows.append(
                [
                    db,
                    f"{int(size):,}",
                    n(x["distinct"], "per_s"),
                    n(x["distinct"], "p50_us"),
                    n(x["one"], "per_s"),
                    n(x["one"], "p50_us"),
                    n(x["refused"], "p50_us"),
                ]
            )
        ratio = r.get("p50_ratio", {})
        rows.append(
            [
                db,
                "**p50 ratio, max ÷ min rows**",
                "",
                f"**{ratio.get('distinct', 0):.2f}**",
                "",
                f"**{ratio.get('one', 0):.2f}**",
                f"**{ratio.get('refused', 0):.2f}**",
            ]
        )
    parts.append(
        "### Scale\n\n"
        + md(
            [
                "database",
                "rows",
                "distinct pairs/s",
                "p50 µs",
                "one-key pairs/s",
                "p50 µs",
                "refused p50 µs",
            ],
            rows,
        )
    )

    cli = res.get("cli", {})
    if "skipped" in cli:
        parts.append(f"### CLI\n\n{cli['skipped']}")
    elif cli:
        rows = [
            [
                f"`{k}`",
                n(v, "median_ms", "{:.1f}"),
                n(v, "min_ms", "{:.1f}"),
                n(v, "over_true_ms", "{:+.1f}"),
            ]
            for k, v in cli.items()
            if k != "importtime"
        ]
        parts.append("### CLI\n\n" + md(["command", "median ms", "min ms", "over `true` ms"], rows))

    peers = res.get("peers", {})
    if "skipped" in peers:
        parts.append(f"### Peers\n\n{peers['skipped']}")
    elif peers:
        ref = {
            p["database"]: p.get("pairs")
            for k, p in peers["peers"].items()
            if k.startswith("joblocks")
        }
        rows = []
        for name, e in peers["peers"].items():
            pairs = e.get("pairs", e)
            jl = ref.get(
                "postgresql"
                if e["database"] in ("postgresql", "redis")
                else "sqlite"
                if e["database"] == "file"
                else e["database"]
            )
            ratio = suite._ratio(jl, pairs) if jl and not name.startswith("joblocks") else None
            rows.append(
                [
                    name + (f" {e['version']}" if e.get("version") else ""),
                    e["database"],
                    "yes" if e["expiry"] else "no",
                    n(pairs, "per_s"),
                    n(pairs, "p50_us"),
                    n(e.get("refused", e), "p50_us"),
                    f"{ratio:.2f}×" if ratio else "",
                ]
            )
        parts.append(
            f"### Peers (Redis {peers.get('redis', '—')}, no persistence)\n\n"
            + md(
                [
                    "library",
                    "store",
                    "expiry",
                    "pairs/s",
                    "pair p50 µs",
                    "refused p50 µs",
                    "joblocks ÷ peer, pairs/s (joblocks on PostgreSQL; on SQLite for filelock)",
                ],
                rows,
            )
        )

    rows = [
        [
            t["target"],
            t["database"],
            "—" if t["value"] is None else f"{t['value']:.2f}",
            t["bound"],
            {True: "met", False: "**not met**", None: "n/a"}[t["met"]],
            t["detail"],
        ]
        for t in suite.targets(res)
    ]
    parts.append(
        "### Targets\n\n" + md(["target", "database", "value", "bound", "result", "figures"], rows)
    )
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
