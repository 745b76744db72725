#!/usr/bin/env bash
# Set up the peers of the benchmark suite:
#   * a separate virtualenv with the peer lock libraries (benchmarks/peers/requirements.txt),
#     at $JOBLOCKS_PEERS_VENV or benchmarks/.venv-peers (git-ignored);
#   * Debian's redis-server (the suite starts its own instance on loopback, without
#     persistence, and stops it at the end).
# Usage: bash benchmarks/peers/setup.sh      (then: python benchmarks/suite.py)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${JOBLOCKS_PEERS_VENV:-$here/../.venv-peers}"
python="${PYTHON:-python3}"

if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
        # Debian starts a system instance on 6379; the suite uses its own.
        (command -v systemctl >/dev/null && systemctl disable --now redis-server) >/dev/null 2>&1 || true
    else
        echo "redis-server is missing: install it (Debian: apt-get install redis-server)" >&2
        echo "the Redis peers will be skipped" >&2
    fi
fi

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for d in ("tooz", "redis", "python-redis-lock", "pottery", "sherlock", "filelock", "psycopg",
          "psycopg2-binary", "dislock", "pglease", "distributed-pg-lock", "postgresql-lock",
          "django-pglock", "Django"):
    print(f"  {d} {m.version(d)}")
PY
echo "peers venv ready: $venv/bin/python"
