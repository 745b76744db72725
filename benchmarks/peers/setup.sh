#!/usr/bin/env bash
# The peers of the benchmark suite: a separate virtualenv with PostgreSQL lock libraries
# (benchmarks/peers/requirements.txt), at $JOBLOCKS_PEERS_VENV or benchmarks/.venv-peers.
# Usage: bash benchmarks/peers/setup.sh      (then: python benchmarks/suite.py)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${JOBLOCKS_PEERS_VENV:-$here/../.venv-peers}"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt"
echo "peers venv ready: $venv/bin/python"
