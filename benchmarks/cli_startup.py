"""Where ``joblocks run k --ttl 1m -- true`` spends its start-up, on SQLite.

    python benchmarks/cli_startup.py --runs 40                          # this checkout
    python benchmarks/cli_startup.py --src <old>/src --src <new>/src     # two versions

Whole processes, interleaved round by round (every variant of every ``--src`` once per
round), medians; bytecode cached as pip leaves an installed package
(``PYTHONDONTWRITEBYTECODE`` is dropped and each variant runs once before timing).
Wall clock and CPU time (user + system of the process and its children, steadier than
the wall clock on a loaded machine).

Then, per ``--src``, the breakdown of one run (medians over ``--profile-runs``):

- ``python -X importtime``: the self time of every imported module, summed by owner:
  the interpreter's start-up (``site``, encodings), SQLAlchemy (``sqlalchemy.*`` but its
  dialects), the driver (``sqlite3`` and SQLAlchemy's ``dialects.sqlite``, loaded when
  the engine is made), joblocks' own modules, and the standard library modules that
  someone imports on the way (``other``);
- the phases of the run, from audit events (no patching): the interpreter's start up
  to the first line of the wrapper, the imports and parsing up to ``main``, ``main``
  up to the driver's ``sqlite3.connect`` (library imports, engine), from there to
  starting the command (the table check and the acquire), and the rest (the command
  ``true``, the release, closing the connection: SQLite checkpoints its WAL when the
  last connection closes) up to the process's end.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

RUN = ["-m", "joblocks", "run", "k", "--ttl", "1m", "--", "true"]

# Runs joblocks' CLI with the remaining arguments and prints, at exit, the
# time.monotonic() of each phase boundary as "MARK name t" lines on stderr (one clock
# for this process and its parent).
PHASES = r"""
import sys, time
marks = [("wrapper", time.monotonic())]
def hook(event, args):
    if event in ("sqlite3.connect", "subprocess.Popen") and not any(m[0] == event for m in marks):
        marks.append((event, time.monotonic()))
sys.addaudithook(hook)
import atexit
def dump():
    marks.append(("exit", time.monotonic()))
    sys.stderr.write("".join(f"MARK {n} {t!r}\n" for n, t in marks))
atexit.register(dump)
import joblocks.cli
marks.append(("main", time.monotonic()))
sys.argv = ["joblocks", *sys.argv[1:]]
sys.exit(joblocks.cli.main())
"""


def env_for(src: str | None, url: str) -> dict[str, str]:
    env = dict(os.environ, JOBLOCKS_URL=url)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = src
    return env


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process and its children) of one run."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    took, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
    return took, cpu


def owner(module: str) -> str:
    if module.startswith("joblocks"):
        return "joblocks"
    if module.startswith(("sqlalchemy.dialects.sqlite", "sqlite3", "_sqlite3")):
        return "driver (sqlite3 + SQLAlchemy's sqlite dialect)"
    if module.startswith(("sqlalchemy.connectors", "sqlalchemy.dialects._typing")):
        return "driver (sqlite3 + SQLAlchemy's sqlite dialect)"
    if module.startswith(("sqlalchemy", "greenlet", "typing_extensions")):
        return "sqlalchemy (+ typing_extensions, greenlet)"
    return "other (standard library, site)"


def importtime(src: str | None, url: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *RUN],
        env=env_for(src, url),
        capture_output=True,
        text=True,
        check=True,
    )
    sums: dict[str, float] = defaultdict(float)
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| (\s*)(\S+)", line)
        if m:
            sums[owner(m.group(3))] += int(m.group(1)) / 1000
    return sums


def phases(src: str | None, url: str) -> dict[str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", PHASES, *RUN[2:]],
        env=env_for(src, url),
        capture_output=True,
        text=True,
        check=True,
    )
    end = time.monotonic()
    found = re.findall(r"^MARK (\S+) (\S+)$", proc.stderr, flags=re.MULTILINE)
    marks = {name: float(t) for name, t in found}
    return {
        "interpreter start (to the wrapper's first line)": (marks["wrapper"] - t0) * 1000,
        "import joblocks.cli (parser only)": (marks["main"] - marks["wrapper"]) * 1000,
        "main → sqlite3.connect (imports: SQLAlchemy, joblocks, dialect; engine)": (
            marks["sqlite3.connect"] - marks["main"]
        )
        * 1000,
        "connect → command started (table check, acquire)": (
            marks["subprocess.Popen"] - marks["sqlite3.connect"]
        )
        * 1000,
        "command, release, close, exit": (marks["exit"] - marks["subprocess.Popen"]) * 1000,
        "process end (interpreter shutdown)": (end - marks["exit"]) * 1000,
        "total": (end - t0) * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", help="PYTHONPATH of a joblocks version")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--profile-runs", type=int, default=15)
    args = ap.parse_args()
    srcs: list[str | None] = list(args.src or [None])
    tmp = tempfile.mkdtemp(prefix="joblocks-cli-")
    url = f"sqlite:///{Path(tmp) / 'locks.db'}"
    py = sys.executable
    variants: list[tuple[str, list[str], dict[str, str]]] = []
    for i, src in enumerate(srcs):
        tag = f"[{i}] " if len(srcs) > 1 else ""
        env = env_for(src, url)
        if i == 0:
            variants += [
                ("python -c pass", [py, "-c", "pass"], env),
                ("python -c 'import sqlalchemy'", [py, "-c", "import sqlalchemy"], env),
            ]
        variants += [
            (f"{tag}python -c 'import joblocks'", [py, "-c", "import joblocks"], env),
            (f"{tag}python -m joblocks --version", [py, "-m", "joblocks", "--version"], env),
            (f"{tag}python -m joblocks run k --ttl 1m -- true", [py, *RUN], env),
        ]
    for _, argv, env in variants:  # compile the bytecode, warm the page cache
        wall(argv, env)
    times: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in variants}
    for _ in range(args.runs):
        for label, argv, env in variants:
            took, cpu = wall(argv, env)
            times[label].append(took * 1000)
            cpus[label].append(cpu * 1000)
    load = os.getloadavg()
    print(f"{args.runs} interleaved rounds, load average {load[0]:.1f} {load[1]:.1f}")
    for i, src in enumerate(srcs):
        print(f"  [{i}] PYTHONPATH={src or os.environ.get('PYTHONPATH', '')}")
    sqla = statistics.median(times["python -c 'import sqlalchemy'"])
    sqla_cpu = statistics.median(cpus["python -c 'import sqlalchemy'"])
    print(
        f"\n{'command':48} {'wall ms':>8} {'p25':>6} {'p75':>6} {'÷ sqla':>6}"
        f" {'CPU ms':>7} {'÷ sqla':>6}"
    )
    for label, t in times.items():
        q = statistics.quantiles(t, n=4)
        med, cpu = statistics.median(t), statistics.median(cpus[label])
        print(
            f"{label:48} {med:8.1f} {q[0]:6.1f} {q[2]:6.1f} {med / sqla:6.2f}"
            f" {cpu:7.1f} {cpu / sqla_cpu:6.2f}"
        )
    for i, src in enumerate(srcs):
        its = [importtime(src, url) for _ in range(args.profile_runs)]
        phs = [phases(src, url) for _ in range(args.profile_runs)]
        print(f"\n[{i}] python -X importtime, self time summed by owner (median ms):")
        for key in sorted({k for d in its for k in d}):
            print(f"  {statistics.median(d.get(key, 0.0) for d in its):7.1f}  {key}")
        print(f"  {statistics.median(sum(d.values()) for d in its):7.1f}  all imports")
        print(f"[{i}] phases of one run (audit events; median ms):")
        for key in phs[0]:
            print(f"  {statistics.median(d[key] for d in phs):7.1f}  {key}")


if __name__ == "__main__":
    main()
