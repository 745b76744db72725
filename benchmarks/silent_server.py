"""How long a call takes to fail against a server that accepts and never answers.

    python benchmarks/silent_server.py [--timeouts default,1000,3000]

A socket on 127.0.0.1 accepts every connection and never sends a byte (a hung server,
a black-holing proxy). For each database driver (PostgreSQL: psycopg; MariaDB: PyMySQL
and aiomysql), each face and each ``timeout=`` setting, one ``peek`` is made and the
seconds until it raised are printed. No database server is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import joblocks
import joblocks.aio

URLS = {
    "postgresql": "postgresql://u@127.0.0.1:{port}/db",
    "mariadb": "mysql://u@127.0.0.1:{port}/db",
}


def silent_server() -> tuple[socket.socket, list[socket.socket]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return sock, accepted


def time_to_fail(url: str, face: str, options: dict[str, Any]) -> tuple[float, str]:
    started = time.monotonic()
    try:
        if face == "sync":
            model = joblocks.JobLockModel(url, **options)
            try:
                model.peek("k")
            finally:
                model.dispose()
        else:

            async def main() -> None:
                model = joblocks.aio.JobLockModel(url, **options)
                try:
                    await asyncio.wait_for(model.peek("k"), 120)
                finally:
                    await model.dispose()

            asyncio.run(main())
        outcome = "returned"
    except joblocks.LockBackendError:
        outcome = "LockBackendError"
    except Exception as exc:
        outcome = type(exc).__name__
    return time.monotonic() - started, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeouts", default="default,1000", help="ms, comma-separated")
    args = parser.parse_args()
    sock, accepted = silent_server()
    port = sock.getsockname()[1]
    print(f"{'database':<11} {'face':<5} {'timeout':>8}  {'seconds':>7}  outcome")
    try:
        for database, template in URLS.items():
            for face in ("sync", "aio"):
                for setting in args.timeouts.split(","):
                    options = {} if setting == "default" else {"timeout": int(setting)}
                    seconds, outcome = time_to_fail(template.format(port=port), face, options)
                    print(f"{database:<11} {face:<5} {setting:>8}  {seconds:7.2f}  {outcome}")
    finally:
        sock.close()
        for conn in accepted:
            conn.close()


if __name__ == "__main__":
    main()
