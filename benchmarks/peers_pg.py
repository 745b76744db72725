"""joblocks against the PostgreSQL lock libraries: lease peers and advisory locks.

    bash benchmarks/peers/setup.sh                 # once: the peers' own venv
    python benchmarks/peers_pg.py [--json out.json]
    python benchmarks/peers_pg.py --smoke          # tiny sizes (CI; skipped without the venv)
    python benchmarks/peers_pg.py --markdown out.json   # the tables as Markdown

One throwaway PostgreSQL server (``tests/support/servers.py``), every library in the same
run, each through the same harness (``benchmarks/peers/worker.py``: the peers with the
peers venv's python, joblocks with this python):

uncontended  acquire (non-blocking) + release pairs/s on one key, p50; a refused acquire
             (another process holds the key), p50; sync and asyncio where the library has
             an asyncio face; rounds interleaved (``--repeat``), median reported
contention   ``--workers`` processes on one key for ``--contention-seconds``; each holder
             reads a counter row and writes it + 1 (two autocommit statements) while it
             holds the lock. Overlapping holds (the check of ``benchmarks/_contention.py``,
             with the counter value read in place of a fencing token: ``order errors``
             are counter values read out of order), lost updates (increments − final
             counter), leases the library reported lost at release, errors
takeover     a holder is SIGKILLed right after its grant (lease ttl ``--ttl`` s, 2 by
             default); a waiter polling every ``--poll-ms`` ms measures the time from
             the kill to its own grant. Lease peers: about the ttl (their renewal has not
             run yet); advisory locks: until the server notices the dead session
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as C
from benchmarks._contention import check_spans

HERE = Path(__file__).resolve().parent
WORKER = HERE / "peers" / "worker.py"
DEFAULT_PEERS_VENV = HERE / ".venv-peers"

# library, faces, kind, what its ttl is; "joblocks" runs with this python.
LIBRARIES: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("joblocks", ("sync", "aio"), "lease", "ttl in ms (here 2 s / 60 s)"),
    ("dislock", ("sync", "aio"), "lease", "run_ttl_seconds, heartbeat every 0.3 × ttl (1–10 s)"),
    ("pglease", ("sync", "aio"), "lease", "ttl in whole seconds, heartbeat thread"),
    (
        "distributed-pg-lock",
        ("sync",),
        "lease",
        "lock_timeout_minutes: whole minutes, 1 at least (a 2 s ttl cannot be set)",
    ),
    ("postgresql-lock", ("sync", "aio"), "advisory", "none: session advisory lock"),
    ("django-pglock", ("sync",), "advisory", "none: session advisory lock (Django ORM)"),
)
NO_AIO = {
    "distributed-pg-lock": "no asyncio API",
    "django-pglock": "no asyncio API (Django's database layer is sync only)",
}
READY_TIMEOUT_S = 120.0


def peers_python(explicit: str | None) -> Path | None:
    cand = explicit or os.environ.get("JOBLOCKS_PEERS_PYTHON")
    if cand:
        return Path(cand)
    default = DEFAULT_PEERS_VENV / "bin" / "python"
    return default if default.exists() else None


class Runner:
    def __init__(self, dsn: str, peers_py: Path | None, opts: argparse.Namespace) -> None:
        self.dsn = dsn
        self.peers_py = peers_py
        self.opts = opts

    def argv(self, lib: str, face: str, *extra: str) -> list[str]:
        py = sys.executable if lib == "joblocks" else str(self.peers_py)
        return [py, str(WORKER), "--peer", lib, "--face", face, "--pg", self.dsn, *extra]

    def run_json(self, argv: list[str], timeout: float = 300) -> dict[str, Any]:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"worker exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def setup(self, lib: str) -> None:
        self.run_json(self.argv(lib, "sync", "--mode", "setup"))

    def pairs(self, lib: str, face: str) -> dict[str, Any]:
        o = self.opts
        return self.run_json(
            self.argv(
                lib,
                face,
                "--seconds",
                str(o.seconds),
                "--refused-seconds",
                str(max(o.seconds / 2, 0.1)),
                "--warmup",
                str(o.warmup),
            )
        )

    def contention(self, lib: str, face: str) -> dict[str, Any]:
        import psycopg

        o = self.opts
        table = f"peers_counter_{uuid.uuid4().hex[:8]}"
        key = f"contended-{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n bigint NOT NULL)")
            conn.execute(f"INSERT INTO {table} VALUES (1, 0)")  # noqa: S608
        argv = self.argv(lib, face, "--mode", "contend", "--key", key, "--counter-table", table)
        procs = [
            subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(o.workers)
        ]
        try:
            for proc in procs:
                assert proc.stdout is not None
                line = _readline(proc, READY_TIMEOUT_S)
                if line.strip() != "ready":
                    raise RuntimeError(f"contender not ready: {line!r} {_stderr(proc)}")
            start = time.monotonic() + o.warmup
            end = start + o.contention_seconds
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(f"{start} {end}\n")
                proc.stdin.flush()
            outcomes = []
            for proc in procs:
                out, err = proc.communicate(timeout=end - time.monotonic() + READY_TIMEOUT_S)
                if proc.returncode != 0:
                    raise RuntimeError(f"contender exited {proc.returncode}: {err.strip()[-600:]}")
                res = json.loads(out.strip().splitlines()[-1])
                res["spans"] = base64.b64decode(res["spans"])
                outcomes.append(res)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            final = conn.execute(f"SELECT n FROM {table} WHERE id = 1").fetchone()[0]  # noqa: S608
            conn.execute(f"DROP TABLE {table}")
        holds, overlaps, order_errors, examples = check_spans(outcomes)
        wins = [o_["wins"] for o_ in outcomes]
        kinds: dict[str, int] = {}
        for o_ in outcomes:
            for k, v in o_["error_kinds"].items():
                kinds[k] = kinds.get(k, 0) + v
        increments = sum(o_["increments"] for o_ in outcomes)
        # grants_per_s, not wins_per_s: suite.py fails on any error in a wins_per_s
        # record, and a peer's errors are a finding about that peer (joblocks' own
        # violations are checked by main() here and by suite.py's section).
        return {
            "workers": o.workers,
            "grants_per_s": sum(wins) / o.contention_seconds,
            "attempts_per_s": sum(o_["attempts"] for o_ in outcomes) / o.contention_seconds,
            "min_wins": min(wins),
            "max_wins": max(wins),
            "holds_checked": holds,
            "overlaps": overlaps,
            "order_errors": order_errors,
            "increments": increments,
            "counter": final,
            "lost_updates": increments - final,
            "lost": sum(o_["lost"] for o_ in outcomes),
            "errors": sum(o_["errors"] for o_ in outcomes),
            "error_kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:4]),
            "examples": examples,
        }

    def takeover(self, lib: str, ttl: float) -> dict[str, Any]:
        key = f"takeover-{uuid.uuid4().hex[:8]}"
        common = ["--key", key, "--ttl", str(ttl), "--poll-ms", str(self.opts.poll_ms)]
        waiter = subprocess.Popen(
            self.argv(lib, "sync", "--mode", "takeover", *common),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        holder = subprocess.Popen(
            self.argv(lib, "sync", "--mode", "hold", *common),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            if (line := _readline(waiter, READY_TIMEOUT_S)).strip() != "ready":
                raise RuntimeError(f"waiter: {line!r} {_stderr(waiter)}")
            line = _readline(holder, READY_TIMEOUT_S)
            if not line.startswith("held "):
                raise RuntimeError(f"holder: {line!r} {_stderr(holder)}")
            first_grant = int(line.split()[1])
            killed = time.monotonic_ns()
            holder.send_signal(signal.SIGKILL)
            assert waiter.stdin is not None
            waiter.stdin.write("go\n")
            waiter.stdin.flush()
            out, _ = waiter.communicate(timeout=ttl + READY_TIMEOUT_S + 60)
            res = json.loads(out.strip().splitlines()[-1])
            if "error" in res:
                raise RuntimeError(res["error"])
            return {
                "ms": (res["granted_ns"] - killed) / 1e6,
                "grant_to_grant_ms": (res["granted_ns"] - first_grant) / 1e6,
                "polls": res["polls"],
            }
        finally:
            for proc in (holder, waiter):
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError(f"no answer within {timeout} s from {proc.args!r}")
    return proc.stdout.readline()


def _stderr(proc: subprocess.Popen[str]) -> str:
    with contextlib.suppress(Exception):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        return (err or "").strip()[-600:]
    return ""


def variants() -> list[tuple[str, str, str]]:
    return [(lib, face, kind) for lib, faces, kind, _ in LIBRARIES for face in faces]


def run(url: str, peers_py: Path | None, opts: argparse.Namespace) -> dict[str, Any]:
    """Every measurement against the PostgreSQL server at ``url``; the results as a dict.

    ``peers_py`` None: joblocks only (the harness itself), the peers skipped."""
    p = C.server_params(url)
    dsn = f"host={p['host']} port={p['port']} user={p['user']} dbname={p['database']}"
    runner = Runner(dsn, peers_py, opts)
    out: dict[str, Any] = {"libraries": {}, "no_aio": NO_AIO, "settings": vars(opts).copy()}
    for lib, _faces, kind, ttl_note in LIBRARIES:
        out["libraries"][lib] = {"kind": kind, "ttl": ttl_note}
        if peers_py is None and lib != "joblocks":
            out["libraries"][lib]["error"] = "skipped: no peers venv"
            continue
        try:
            runner.setup(lib)
        except Exception as exc:
            out["libraries"][lib]["error"] = f"setup: {exc}"
    todo = [v for v in variants() if "error" not in out["libraries"][v[0]]]
    rounds: dict[str, list[dict[str, Any]]] = {f"{lib} {face}": [] for lib, face, _ in todo}
    for r in range(opts.repeat):
        for lib, face, _ in todo:
            label = f"{lib} {face}"
            print(f"  uncontended round {r + 1}/{opts.repeat}: {label}", flush=True)
            rounds[label].append(
                C.attempt(label, lambda lib=lib, face=face: runner.pairs(lib, face))
            )
    uncontended: dict[str, Any] = {}
    for label, rs in rounds.items():
        good = [x for x in rs if "error" not in x]
        if not good:
            uncontended[label] = {"error": rs[0].get("error", "not run") if rs else "not run"}
            continue
        uncontended[label] = {
            "pairs": C.combine([x["pairs"] for x in good]),
            "refused": C.combine([x["refused"] for x in good]),
        }
        out["libraries"][label.split()[0]]["version"] = good[0]["version"]
    out["uncontended"] = uncontended
    contention: dict[str, Any] = {}
    for lib, face, _ in todo:
        label = f"{lib} {face}"
        print(f"  contention ({opts.workers} processes): {label}", flush=True)
        contention[label] = C.attempt(
            label, lambda lib=lib, face=face: runner.contention(lib, face)
        )
    out["contention"] = contention
    takeover: dict[str, Any] = {}
    for lib, _faces, kind, _ in LIBRARIES:
        if "error" in out["libraries"][lib]:
            continue
        ttl = opts.ttl
        trials = opts.takeover_trials
        if lib == "distributed-pg-lock":
            ttl = 60.0  # its smallest ttl: one minute
            trials = 1 if opts.long_takeover else 0
        if not trials:
            takeover[lib] = {"skipped": "its smallest ttl is 1 minute (run with --long-takeover)"}
            continue
        print(f"  takeover after SIGKILL ({trials} trials, ttl {ttl:g} s): {lib}", flush=True)
        runs = [
            C.attempt(lib, lambda lib=lib, ttl=ttl: runner.takeover(lib, ttl))
            for _ in range(trials)
        ]
        good = [x for x in runs if "error" not in x]
        entry: dict[str, Any] = {"ttl_s": ttl if kind == "lease" else None, "trials": runs}
        if good:
            kill = [x["ms"] for x in good]
            entry |= {
                "median_ms": statistics.median(kill),
                "min_ms": min(kill),
                "max_ms": max(kill),
                "grant_to_grant_median_ms": statistics.median(x["grant_to_grant_ms"] for x in good),
                "polls_median": statistics.median(x["polls"] for x in good),
            }
        else:
            entry["error"] = runs[0].get("error") if runs else "not run"
        takeover[lib] = entry
    out["takeover"] = takeover
    return out


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.strip() for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render(res: dict[str, Any], table: Any = C.table) -> str:
    """The three tables, aligned text (``table=md_table``: Markdown)."""
    libs = res["libraries"]
    ref = res["uncontended"].get("joblocks sync", {}).get("pairs")
    ref_aio = res["uncontended"].get("joblocks aio", {}).get("pairs")
    rows = []
    for lib, faces, kind, ttl_note in LIBRARIES:
        e = libs[lib]
        if str(e.get("error", "")).startswith("skipped"):
            continue
        name = lib + (f" {e['version']}" if e.get("version") else "")
        for face in ("sync", "aio"):
            label = f"{lib} {face}"
            if face not in faces:
                if face == "aio":
                    rows.append([name, face, kind, "—", "—", "—", "—", NO_AIO.get(lib, "")])
                continue
            u = res["uncontended"].get(label, {"error": e.get("error", "not run")})
            base = ref if face == "sync" else ref_aio
            ratio = ""
            if "pairs" in u and base and u["pairs"]["per_s"]:
                ratio = f"{base['per_s'] / u['pairs']['per_s']:.2f}×"
            rows.append(
                [
                    name,
                    face,
                    kind,
                    C.num(u.get("pairs", u), "per_s"),
                    C.num(u.get("pairs", u), "p50_us", C.US),
                    C.num(u.get("refused", u), "p50_us", C.US),
                    ratio,
                    ttl_note if face == "sync" else "",
                ]
            )
    text = "\n  uncontended, one process, one key\n" + table(
        [
            "library",
            "face",
            "kind",
            "pairs/s",
            "pair p50 µs",
            "refused p50 µs",
            "joblocks ÷ it",
            "ttl",
        ],
        rows,
    )
    crow = []
    for label, c in res["contention"].items():
        if "error" in c:
            crow.append([label, f"error: {c['error'][:90]}", "", "", "", "", "", "", ""])
            continue
        crow.append(
            [
                label,
                f"{c['grants_per_s']:,.0f}",
                f"{c['attempts_per_s']:,.0f}",
                f"{c['min_wins']}–{c['max_wins']}",
                f"{c['holds_checked']:,}",
                str(c["overlaps"]),
                f"{c['lost_updates']} ({c['order_errors']})",
                str(c["lost"]),
                str(c["errors"]),
            ]
        )
    workers = res["settings"]["workers"]
    text += f"\n\n  contention: {workers} processes, one key\n" + table(
        [
            "library / face",
            "grants/s",
            "attempts/s",
            "wins per process",
            "holds checked",
            "overlaps",
            "lost updates (order err)",
            "lost leases",
            "errors",
        ],
        crow,
    )
    trow = []
    for lib, t in res["takeover"].items():
        if "median_ms" in t:
            trow.append(
                [
                    lib,
                    f"{t['ttl_s']:g} s" if t["ttl_s"] else "none (advisory)",
                    f"{t['median_ms']:,.0f}",
                    f"{t['min_ms']:,.0f}–{t['max_ms']:,.0f}",
                    f"{t.get('grant_to_grant_median_ms', float('nan')):,.0f}",
                    f"{t.get('polls_median', float('nan')):g}",
                    str(len(t["trials"])),
                ]
            )
        else:
            trow.append([lib, "", t.get("skipped") or f"error: {t.get('error')}", "", "", "", ""])
    text += "\n\n  takeover: holder SIGKILLed right after its grant, waiter polling\n" + table(
        [
            "library",
            "ttl",
            "kill → next grant, median ms",
            "min–max ms",
            "grant → next grant, median ms",
            "waiter's polls",
            "trials",
        ],
        trow,
    )
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    ap.add_argument(
        "--markdown", type=Path, help="print the tables of a --json file as Markdown, and exit"
    )
    ap.add_argument("--json", type=Path, help="write every figure to this JSON file")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per measurement")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median reported)")
    ap.add_argument("--contention-seconds", type=float, default=3.0)
    ap.add_argument("--workers", type=int, default=8, help="contending processes")
    ap.add_argument("--ttl", type=float, default=2.0, help="lease ttl for takeover, seconds")
    ap.add_argument("--takeover-trials", type=int, default=3)
    ap.add_argument(
        "--long-takeover",
        action="store_true",
        help="also the one-minute takeover of distributed-pg-lock (its smallest ttl)",
    )
    ap.add_argument("--poll-ms", type=float, default=5.0, help="waiter's poll interval, ms")
    ap.add_argument(
        "--peers-python", help="python of the peers venv (default benchmarks/.venv-peers)"
    )
    ap.add_argument("--no-peers", action="store_true", help="joblocks only (the harness itself)")
    ap.add_argument("--url", help="an existing PostgreSQL server's URL (default: a throwaway one)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.seconds, args.repeat, args.contention_seconds, args.workers = 0.1, 1, 0.25, 3
        args.takeover_trials, args.ttl = 1, 1.0
    args.warmup = min(0.3, args.seconds / 4)
    return args


def _run_on_own_server(py: Path | None, args: argparse.Namespace) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory(prefix="joblocks-peers-pg-") as folder:
        dbs = C.start_databases(["postgresql"], Path(folder))
        try:
            if "postgresql" not in dbs.urls:
                print(f"peers_pg: SKIPPED: no PostgreSQL ({dbs.skipped.get('postgresql')})")
                return None
            return run(dbs.urls["postgresql"], py, args)
        finally:
            dbs.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(render(json.loads(args.markdown.read_text()), md_table))
        return 0
    py = None if args.no_peers else peers_python(args.peers_python)
    if py is None:
        print(
            "peers_pg: peers SKIPPED (no peers venv; run `bash benchmarks/peers/setup.sh`"
            " first): joblocks only"
        )
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    print(
        f"PostgreSQL lock peers{' (smoke)' if args.smoke else ''}: {started}, {C.load()}",
        flush=True,
    )
    if args.url:
        res = run(args.url, py, args)
    else:
        res = _run_on_own_server(py, args)
        if res is None:
            return 0
    res["meta"] = {"started": started, "load_end": C.load(), "cpus": os.cpu_count()}
    print(render(res), flush=True)
    print(f"\n({C.load()})")
    if args.json:
        res["settings"]["json"] = args.json.name  # no path of this machine in results
        args.json.write_text(json.dumps(res, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    bad = [
        f"{label}: {key} = {c[key]}"
        for label, c in res["contention"].items()
        if label.startswith("joblocks")
        for key in ("overlaps", "lost_updates", "lost", "errors")
        if c.get(key)
    ]
    measured = [
        *((f"uncontended {k}", v) for k, v in res["uncontended"].items()),
        *((f"contention {k}", v) for k, v in res["contention"].items()),
        ("takeover joblocks", res["takeover"].get("joblocks", {"error": "not run"})),
    ]
    bad += [f"{k}: {v['error']}" for k, v in measured if "joblocks" in k and "error" in v]
    if bad:
        print("\nFAILED (joblocks):\n" + "\n".join(f"  {b}" for b in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
